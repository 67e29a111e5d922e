"Execute every notebook in nbs/ with nbdev's executor, honouring the configured skip flags (#| notest, #| slow)."
import os
from pathlib import Path
import pytest
import nbdev.test as nbtest  # import the module, not test_nb by name, or pytest collects it
from nbdev.config import get_config

ROOT = Path(__file__).resolve().parents[1]
NBS = sorted((ROOT / "nbs").glob("*.ipynb")) + sorted((ROOT / "experiments").glob("*.ipynb"))

@pytest.mark.parametrize("nb", NBS, ids=[f"{p.parent.name}/{p.stem}" for p in NBS])
def test_notebook(nb, monkeypatch):
    monkeypatch.chdir(nb.parent)
    monkeypatch.setenv("IN_TEST", "1")
    flags = list(get_config().tst_flags or ["notest"])
    ok, secs = nbtest.test_nb(str(nb), skip_flags=flags, force_flags=[], do_print=False)
    assert ok, f"notebook {nb.name} failed (see the traceback above)"

def test_notebooks_found():
    assert len(NBS) >= 5, NBS
