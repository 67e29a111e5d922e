"""Shared pytest fixtures for CoworkEnv.

Keep this file tidy: one small, documented fixture per resource; expensive ones are session-scoped and
build into pytest's temporary folders, never into the user's cache.
"""
import pytest


# ---- models (coworkenv.models) -------------------------------------------------------------------

@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory):
    "Folder of the tiny random Qwen3 tool-calling test model, built once per session in a temporary cache."
    pytest.importorskip("torch"); pytest.importorskip("transformers"); pytest.importorskip("trl")
    from coworkenv.models import build_tiny_model
    return build_tiny_model(tmp_path_factory.mktemp("coworkenv-cache") / "tiny-qwen3")


@pytest.fixture(scope="session")
def tiny_server(tiny_model_path):
    "A `transformers serve` of the tiny model on 127.0.0.1 for the session: `.base_url`, `.model`, `.client()`."
    pytest.importorskip("fastapi"); pytest.importorskip("uvicorn"); pytest.importorskip("openai")
    from coworkenv.models import serve_model
    with serve_model(tiny_model_path, timeout=180) as srv:
        yield srv
