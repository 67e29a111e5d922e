"Tests of coworkenv.sft: config and dataset validation before training, the tiny end-to-end path, resume, LoRA."
import json

import pytest

pytest.importorskip("trl"); pytest.importorskip("datasets")
from coworkenv.agents import OracleAgent
from coworkenv.curation import curate
from coworkenv.rollout import rollout
from coworkenv.sft import SFTConfigError, add_sft_parser, check_sft_dataset, load_sft_config, load_sft_dataset, train_sft
from coworkenv.synthesis import synthesize


@pytest.fixture(scope="module")
def curated(tmp_path_factory, tiny_model_path):
    "synthesize -> oracle rollouts -> curate (short rows, so CPU steps are fast)."
    d = tmp_path_factory.mktemp("sft")
    recs = rollout(synthesize(n=4, seed=0, progress=False), OracleAgent, k=1, store=d / "store", progress=False)
    curate(recs, out=d / "curated", max_result_chars=300, keep_unused=0.0, n_distractors=1)
    return d / "curated"


def cfg(tiny_model_path, curated, out, **kw):
    return dict(model=str(tiny_model_path), dataset=str(curated), output_dir=str(out), max_steps=2,
                per_device_train_batch_size=1, learning_rate=1e-3, max_length=1536, save_steps=1, warmup_steps=0,
                progress=False) | kw


def test_end_to_end_and_resume(tiny_model_path, curated, tmp_path):
    out = tmp_path / "run"
    r = train_sft(cfg(tiny_model_path, curated, out))
    assert r.metrics["steps"] == 2 and r.metrics["resumed_from"] is None and r.metrics["rows"] == 4 and 1 <= r.metrics["rows_trained"] <= 4
    assert (r.model_dir / "model.safetensors").is_file() and (out / "checkpoint-2").is_dir()
    import pandas as pd
    loss = pd.read_csv(r.loss_csv)
    assert list(loss.step) == [1, 2] and loss.loss.notna().all()
    from transformers import AutoModelForCausalLM
    AutoModelForCausalLM.from_pretrained(r.model_dir)
    assert train_sft(cfg(tiny_model_path, curated, out)).metrics == r.metrics  # finished: not retrained
    # an interrupted run (checkpoint-2 on disk, no final result) continues from its last checkpoint
    assert 0 < r.metrics["train_wall_s"] <= r.metrics["wall_s"] + 0.01  # one segment: its own training time
    (out / "sft_result.json").unlink()
    # the earlier segment's training time travels in the checkpoint's history: pretend it took 1000 s
    st = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    logged = [h for h in st["log_history"] if "train_wall_s" in h]
    assert logged and logged[-1]["step"] == 2
    logged[-1]["train_wall_s"] = 1000.0
    (out / "checkpoint-2" / "trainer_state.json").write_text(json.dumps(st))
    r2 = train_sft(cfg(tiny_model_path, curated, out, max_steps=3))
    assert r2.metrics["resumed_from"].endswith("checkpoint-2") and r2.metrics["steps"] == 3
    assert 1000 < r2.metrics["train_wall_s"] <= 1000 + r2.metrics["wall_s"] + 0.01  # both segments, not the last one alone
    toks = pd.read_csv(r2.loss_csv).num_tokens  # tokens seen count on across the resume (TRL's own counter restarts at 0)
    assert list(toks[:2]) == list(loss.num_tokens) and toks.is_monotonic_increasing and toks.iloc[2] > toks.iloc[1]
    assert r2.metrics["num_tokens"] == toks.iloc[2]
    # a run killed while saving checkpoint-3 (transformers writes trainer_state.json last): resumed from checkpoint-2
    (out / "sft_result.json").unlink()
    (out / "checkpoint-3" / "trainer_state.json").unlink()
    with pytest.warns(UserWarning, match="checkpoint-3: its save was interrupted"):
        r3 = train_sft(cfg(tiny_model_path, curated, out, max_steps=4))
    assert r3.metrics["resumed_from"].endswith("checkpoint-2") and r3.metrics["steps"] == 4
    assert (out / "checkpoint-4" / "trainer_state.json").is_file()


def test_time_budget_stops_saves_and_resumes(tiny_model_path, curated, tmp_path):
    "A budget reached after the first step stops there: that step is saved, final/ written, and a rerun without budget goes on."
    out = tmp_path / "budget"
    r = train_sft(cfg(tiny_model_path, curated, out, max_steps=4, save_steps=100, max_minutes=1e-6))
    m = r.metrics
    assert (m["steps"], m["planned_steps"], m["stopped_by_time"]) == (1, 4, True)
    assert (r.model_dir / "model.safetensors").is_file() and (out / "checkpoint-1" / "trainer_state.json").is_file()
    assert json.loads((out / "sft_result.json").read_text())["metrics"]["stopped_by_time"] is True
    assert train_sft(cfg(tiny_model_path, curated, out, max_steps=4, save_steps=100, max_minutes=1e-6)).metrics == m  # finished
    (out / "sft_result.json").unlink()
    r2 = train_sft(cfg(tiny_model_path, curated, out, max_steps=4, save_steps=100))
    assert r2.metrics["resumed_from"].endswith("checkpoint-1")
    assert (r2.metrics["steps"], r2.metrics["stopped_by_time"]) == (4, False)
    # a budget the run never reaches changes nothing
    r3 = train_sft(cfg(tiny_model_path, curated, tmp_path / "ample", max_minutes=60))
    assert (r3.metrics["steps"], r3.metrics["planned_steps"], r3.metrics["stopped_by_time"]) == (2, 2, False)


def test_time_budget_predicts_the_next_step(monkeypatch):
    "It ends at the first step after which spent + mean step time would pass the budget; counted from where the run (re)started."
    from types import SimpleNamespace
    from transformers import TrainerControl
    import coworkenv.sft as S
    clock = [100.0]
    monkeypatch.setattr(S.time, "time", lambda: clock[0])
    cb = S.time_budget_callback(1)  # 60 s
    cb.on_train_begin(None, SimpleNamespace(global_step=0, max_steps=0), TrainerControl())  # before a checkpoint's state is loaded
    state = SimpleNamespace(global_step=6, max_steps=20)  # resumed at step 6
    for step, t, stop in [(7, 125, False), (8, 135, False), (9, 145, False), (10, 150, True)]:
        # step 7 at 25 s (+25 = 50), 8 at 35 s (+17.5), 9 at 45 s (+15 = 60, not over), 10 at 50 s (+12.5 = 62.5: over)
        cb.on_step_begin(None, state, TrainerControl())
        clock[0], state.global_step = t, step
        c = cb.on_step_end(None, state, TrainerControl())
        assert (c.should_training_stop, c.should_save, cb.stopped) == (stop, stop, stop), step
    cb = S.time_budget_callback(1); state = SimpleNamespace(global_step=0, max_steps=1)
    cb.on_train_begin(None, state, TrainerControl()); cb.on_step_begin(None, state, TrainerControl())
    clock[0] += 1000; state.global_step = 1
    assert not cb.on_step_end(None, state, TrainerControl()).should_training_stop and not cb.stopped  # the last step: not "stopped"


def test_last_checkpoint_skips_an_interrupted_save(tmp_path):
    "The newest checkpoint by step number (10 after 9) whose trainer_state.json is whole; cut-off ones are removed."
    from coworkenv.sft import _last_checkpoint
    assert _last_checkpoint(tmp_path / "missing") is None and _last_checkpoint(tmp_path) is None
    for n in (2, 9, 10, 12):
        (tmp_path / f"checkpoint-{n}").mkdir()
        (tmp_path / f"checkpoint-{n}" / "model.safetensors").write_bytes(b"x")
    for n in (2, 9, 10): (tmp_path / f"checkpoint-{n}" / "trainer_state.json").write_text('{"global_step": %d}' % n)
    (tmp_path / "checkpoint-12" / "trainer_state.json").write_text('{"global_st')  # cut off mid-write
    (tmp_path / "checkpoint-99.tmp").mkdir()  # not a checkpoint
    with pytest.warns(UserWarning, match="checkpoint-12"):
        assert _last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")
    assert not (tmp_path / "checkpoint-12").exists() and (tmp_path / "checkpoint-9").is_dir()
    assert _last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")  # nothing else removed
    (tmp_path / "checkpoint-10" / "trainer_state.json").unlink()
    (tmp_path / "checkpoint-9" / "trainer_state.json").unlink()
    with pytest.warns(UserWarning):
        assert _last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")


def test_lora_is_merged(tiny_model_path, curated, tmp_path):
    r = train_sft(cfg(tiny_model_path, curated, tmp_path / "lora", max_steps=1, lora={"r": 4, "alpha": 8}))
    assert r.metrics["lora"] is True
    names = json.loads((r.model_dir / "config.json").read_text())
    assert not (r.model_dir / "adapter_config.json").exists() and names["model_type"] == "qwen3"
    from safetensors import safe_open
    with safe_open(str(r.model_dir / "model.safetensors"), "pt") as f:
        assert not [k for k in f.keys() if "lora" in k]
        merged = {k: f.get_tensor(k) for k in f.keys()}
    # the run keeps its adapter (small): without final/, a rerun rebuilds the same merged model from it, not retrained
    adapter = r.output_dir / "adapter"
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    import shutil
    shutil.rmtree(r.model_dir)
    for ck in r.output_dir.glob("checkpoint-*"): shutil.rmtree(ck)  # nothing else to resume from
    r2 = train_sft(cfg(tiny_model_path, curated, tmp_path / "lora", max_steps=1, lora={"r": 4, "alpha": 8}))
    assert r2.metrics == r.metrics and (r2.model_dir / "config.json").is_file()
    with safe_open(str(r2.model_dir / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == set(merged) and all(f.get_tensor(k).equal(v) for k, v in merged.items())
    assert not [p for p in r.output_dir.iterdir() if p.name.startswith(".final")]  # no temporary folder left


def test_merge_adapter_is_atomic(tiny_model_path, tmp_path):
    "A merge that fails (here: no adapter) leaves neither a half folder nor an old one replaced."
    from coworkenv.sft import merge_adapter
    out = tmp_path / "final"; out.mkdir(); (out / "keep").write_text("old")
    with pytest.raises(Exception): merge_adapter(str(tiny_model_path), tmp_path / "no-adapter", out)
    assert (out / "keep").read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["final"]


def test_bad_config_fails_before_training(tmp_path, curated):
    y = tmp_path / "c.yaml"
    y.write_text("model: m\ndataset: d\noutput_dir: o\nlearning_rate: -1\n")
    with pytest.raises(SFTConfigError, match=r"c.yaml: invalid SFT config: learning_rate"): load_sft_config(y)
    y.write_text("model: [unclosed\n")
    with pytest.raises(SFTConfigError, match="not valid YAML"): load_sft_config(y)
    y.write_text("- a list\n")
    with pytest.raises(SFTConfigError, match="expected a mapping"): load_sft_config(y)
    with pytest.raises(SFTConfigError, match=r"lora.rank: Extra inputs"):
        load_sft_config(dict(model="m", dataset="d", output_dir="o", lora={"rank": 4}))
    # dataset problems are found before the (here missing) model is loaded
    with pytest.raises(SFTConfigError, match="dataset not found"):
        train_sft(dict(model="/no/such/model", dataset=str(tmp_path / "none"), output_dir=str(tmp_path / "o")))
    with pytest.raises(SFTConfigError, match="could not be loaded"):
        train_sft(dict(model=str(tmp_path / "no-model"), dataset=str(curated), output_dir=str(tmp_path / "o")))


def test_dataset_checks(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps({"prompt": "hi", "completion": "there"}) + "\n")
    with pytest.raises(SFTConfigError, match="missing column 'messages'"): check_sft_dataset(load_sft_dataset(p))
    p.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(SFTConfigError, match="no row has an assistant turn"): check_sft_dataset(load_sft_dataset(p))
    p.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}) + "\n"
                 + json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(SFTConfigError, match="1 row.s. have no assistant turn .first: row 1"): check_sft_dataset(load_sft_dataset(p))
    p.write_text("{broken\n")
    with pytest.raises(SFTConfigError, match=r"rows.jsonl:1: not JSON"): load_sft_dataset(p)


def test_truncation_that_leaves_nothing_is_an_error(tiny_model_path, curated, tmp_path):
    with pytest.raises(SFTConfigError, match="lost all its assistant tokens"):
        train_sft(cfg(tiny_model_path, curated, tmp_path / "t", max_length=128))


def test_cli(tiny_model_path, curated, tmp_path, capsys):
    import argparse, yaml
    y = tmp_path / "sft.yaml"
    y.write_text(yaml.safe_dump(cfg(tiny_model_path, curated, tmp_path / "cli", max_steps=1)))
    ap = argparse.ArgumentParser(); add_sft_parser(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(["sft", "--config", str(y)])
    assert a.fn(a) == 0 and "trained 1 steps" in capsys.readouterr().out
    y.write_text(yaml.safe_dump(cfg(tiny_model_path, curated, tmp_path / "cli_budget", max_steps=3)))
    a = ap.parse_args(["sft", "--config", str(y), "--max-minutes", "1e-6"])
    assert a.fn(a) == 0 and "stopped by the time budget after 1 of 3 steps" in capsys.readouterr().out
    y.write_text("model: m\n")
    a = ap.parse_args(["sft", "--config", str(y)])
    assert a.fn(a) == 2 and "dataset: Field required" in capsys.readouterr().err


def test_shipped_configs_validate():
    from pathlib import Path
    root = Path(__file__).resolve().parents[1] / "experiments" / "configs"
    for name in ("sft_default.yaml", "sft_tiny.yaml", "sft_lora.yaml"):
        c = load_sft_config(root / name)
        assert c.assistant_only_loss
