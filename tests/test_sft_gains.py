"The SFT-gains experiment script: the whole path with the tiny model, resume, report and README generation."
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import sft_gains  # noqa: E402


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sft_gains") / "run"
    assert sft_gains.main(["--quick", "--seeds", "0", "-k", "1", "--out", str(out)]) == 0
    return out


def test_quick_run_writes_the_table(quick_run):
    df = pd.read_csv(quick_run / "results.csv")
    assert set(df.agent) == {"base", "pocketworker_s0"}
    assert set(df.split) == {"test_families", "test_seeds"}
    # held-out families never reach training: not in the training specs, not in the curated rows
    train_ids = {p.stem for p in (quick_run / "specs" / "train").glob("*.json")}
    test_fams = set(df[df.split == "test_families"].workflow)
    assert not any(i.split("-")[0] in test_fams for i in train_ids)
    curated = (quick_run / "curated_s0" / "train.jsonl").read_text()
    assert not any(f"{spec}" in curated for spec in df.spec_id.unique())
    g = pd.read_csv(quick_run / "gains.csv")
    assert list(g[g.split == "test_families"].agent) == ["base", "pocketworker_s0"]
    assert {"mean", "general", "multi-turn", "pass^k", "Δ mean"} <= set(g.columns)
    assert (quick_run / "fig_gains.html").is_file() and (quick_run / "sft_s0" / "loss.csv").is_file()


def test_rerun_resumes_without_redoing_work(quick_run):
    evals = sorted((quick_run / "eval").glob("*.csv"))
    before = {p: p.stat().st_mtime_ns for p in evals}
    assert sft_gains.main(["--quick", "--seeds", "0", "-k", "1", "--out", str(quick_run)]) == 0
    assert {p: p.stat().st_mtime_ns for p in evals} == before  # nothing re-evaluated


def test_report_needs_saved_evaluations(tmp_path):
    with pytest.raises(FileNotFoundError, match="no evaluations saved"):
        sft_gains.report(tmp_path, [0])


def test_readme_block_is_generated(quick_run, tmp_path):
    table, meta = sft_gains.report(quick_run, [0])
    readme = tmp_path / "README.md"
    readme.write_text("intro\n")
    with pytest.raises(ValueError, match="no <!-- sft_gains:begin -->"):
        sft_gains.write_readme(quick_run, table, meta, readme)
    readme.write_text(f"intro\n{sft_gains.README_BEGIN}\nold table\n{sft_gains.README_END}\noutro\n")
    sft_gains.write_readme(quick_run, table, meta, readme)
    text = readme.read_text()
    assert "old table" not in text and "pocketworker_s0" in text and text.endswith("outro\n")
    assert f"{meta['episodes']} episodes" in text


def test_inspect_saves_whole_trajectories(quick_run):
    assert sft_gains.main(["--quick", "--seeds", "0", "-k", "1", "--inspect", "1", "--out", str(quick_run)]) == 0
    trajs = {p.stem: p.read_text().splitlines() for p in (quick_run / "trajectories").glob("*.jsonl")}
    assert sorted(trajs) == ["base", "pocketworker_s0"] and all(len(v) == 1 for v in trajs.values())
    t = json.loads(trajs["pocketworker_s0"][0])
    assert t["spec_id"].split("-")[0] in {"offboarding", "vendor_payment"} and t["messages"] and t["end_reason"]
    ins = pd.read_csv(quick_run / "inspect.csv", keep_default_na=False)
    assert sorted(ins.agent) == ["base", "pocketworker_s0"] and (ins.tool_calls >= ins.failed).all()
    f = quick_run / "trajectories" / "base.jsonl"  # a torn last line is dropped and the task rerun; nothing duplicated
    f.write_text(f.read_text() + '{"spec_id": "torn')
    assert sft_gains.main(["--quick", "--seeds", "0", "-k", "1", "--inspect", "1", "--out", str(quick_run)]) == 0
    assert len(f.read_text().splitlines()) == 1 and json.loads(f.read_text())["spec_id"] == t["spec_id"]
