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


def test_k_is_each_agents_own_trials(quick_run):
    "A probe evaluated with fewer trials than the base is reported with its own k, not the split's largest."
    df = pd.read_csv(quick_run / "results.csv")
    df = df[df.agent.isin(["base", "pocketworker_s0"])]
    base = df[df.agent == "base"]
    table = sft_gains.gains_table(pd.concat([df, base.assign(trial=1), base.assign(trial=2)], ignore_index=True), [0], n_boot=50)
    assert set(zip(table.agent, table.k)) == {("base", 3), ("pocketworker_s0", 1)}


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
    meta = dict(meta, variants=["pocketworker_ep8_s1", "pocketworker_lora_s0"])  # variants are named beside the seeds
    sft_gains.write_readme(quick_run, table, meta, readme)
    assert "PocketWorker seeds evaluated so far: [0]; variants: pocketworker_ep8_s1, pocketworker_lora_s0)" in readme.read_text()
    assert f"SFT precision per seed: s0 {'bf16' if meta['sft'][0]['bf16'] else 'fp32'}." in text


def test_precision_note_flags_seeds_trained_in_different_precisions():
    note = sft_gains.precision_note
    assert note({}) == "" and note({"sft": {}}) == ""
    assert note({"sft": {"1": {"bf16": False}, "0": {"bf16": False}}}) == " SFT precision per seed: s0 fp32, s1 fp32."
    mixed = note({"sft": {10: {"bf16": False}, 2: {"bf16": True}}})  # numeric order, JSON's string keys or ints
    assert mixed.startswith(" SFT precision per seed: s2 bf16, s10 fp32 (") and "different CPUs" in mixed


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


def test_a_variant_recipe_runs_beside_the_default(quick_run):
    "`--variant lora` (LoRA config) trains and evaluates its own models on the chosen split, beside the default seed."
    args = ["--quick", "--seeds", "0", "-k", "1", "--out", str(quick_run)]
    assert sft_gains.main(args + ["--variant", "lora", "--sft", str(ROOT / "experiments/configs/sft_lora.yaml"),
                                  "--eval-splits", "test_families"]) == 0
    assert json.loads((quick_run / "sft_lora_s0" / "sft_result.json").read_text())["metrics"]["lora"] is True
    assert not json.loads((quick_run / "sft_s0" / "sft_result.json").read_text())["metrics"]["lora"]
    ev = pd.read_csv(quick_run / "eval" / "pocketworker_lora_s0.csv")
    assert set(ev.split) == {"test_families"} and set(ev.agent) == {"pocketworker_lora_s0"}
    g = pd.read_csv(quick_run / "gains.csv")
    assert list(g[g.split == "test_families"].agent) == ["base", "pocketworker_lora_s0", "pocketworker_s0"]
    assert list(g[g.split == "test_seeds"].agent) == ["base", "pocketworker_s0"]
    meta = json.loads((quick_run / "gains.json").read_text())
    assert meta["seeds_evaluated"] == [0] and meta["variants"] == ["pocketworker_lora_s0"] and "sft_lora_s0" in meta["sft_variants"]
    with pytest.raises(SystemExit):
        sft_gains.main(args + ["--variant", "LoRA!"])
    # the next session: a LoRA seed's merged model and checkpoints are gone (not in git), its adapter was kept;
    # an unfinished evaluation rebuilds the model from the adapter instead of training again
    import shutil
    run = quick_run / "sft_lora_s0"
    result = (run / "sft_result.json").read_text()
    assert (run / "adapter" / "adapter_model.safetensors").is_file()
    for p in [run / "final", *run.glob("checkpoint-*")]: shutil.rmtree(p)
    (quick_run / "eval" / "pocketworker_lora_s0.csv").unlink()
    assert sft_gains.main(args + ["--variant", "lora", "--sft", str(ROOT / "experiments/configs/sft_lora.yaml"),
                                  "--eval-splits", "test_families"]) == 0
    assert (run / "sft_result.json").read_text() == result and (run / "final" / "config.json").is_file()
    assert not list(run.glob("checkpoint-*")) and (quick_run / "eval" / "pocketworker_lora_s0.csv").is_file()


def test_sft_memory_benchmark_measures_each_setting(quick_run, tmp_path):
    "benchmarks/sft_memory.py on the quick run's curated rows: one fresh process per setting, figures saved."
    import subprocess
    out = tmp_path / "mem.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "sft_memory.py"), "--data", str(quick_run / "curated_s0"),
           "--config", str(ROOT / "experiments/configs/sft_tiny.yaml"), "--rows", "2", "--steps", "2",
           "--setting", "gradient_checkpointing=true,seed=1", "--json", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    d = json.loads(out.read_text())
    rows = pd.read_csv(quick_run / "curated_s0" / "rows.csv")
    assert d["lengths"] == sorted(rows.tokens, reverse=True)[:4] and d["steps"] == 2  # rows x steps longest rows
    assert [r["setting"] for r in d["runs"]] == [{}, {"gradient_checkpointing": True, "seed": 1}]
    assert all(r["peak_rss_gb"] > 0.1 and r["tokens"] > 0 and "rss_last_step_gb" in r for r in d["runs"]) and "peak" in p.stdout
    bad = subprocess.run(cmd[:-4] + ["--setting", "no-equals-sign"], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "KEY=VALUE" in bad.stderr + bad.stdout


def test_stop_after_curate_writes_only_the_datasets(quick_run):
    assert sft_gains.main(["--quick", "--seeds", "1", "-k", "1", "--stop-after", "curate", "--out", str(quick_run)]) == 0
    assert (quick_run / "curated_s1" / "train.jsonl").is_file() and (quick_run / "curated_s1" / "rows.csv").is_file()
    assert not (quick_run / "sft_s1").exists() and not (quick_run / "eval" / "pocketworker_s1.csv").exists()


def test_a_seed_is_evaluated_across_sessions(quick_run, tmp_path):
    """A seed evaluated on one split is completed with the other later (the saved rows kept); a full fine-tune trained
    again in a new session goes on only when its weights are identical, else its saved episodes are set aside."""
    import shutil
    out = tmp_path / "run"
    shutil.copytree(quick_run, out)
    args = ["--quick", "--seeds", "0", "-k", "1", "--out", str(out), "--variant", "staged"]
    ev, run = out / "eval" / "pocketworker_staged_s0.csv", out / "sft_staged_s0"
    assert sft_gains.main(args + ["--eval-splits", "test_families"]) == 0
    first = pd.read_csv(ev)
    assert set(first.split) == {"test_families"} and (run / "weights.sha256").is_file()
    fp = (run / "weights.sha256").read_text()
    # the next session: the model is gone; it is trained again, identical, and only the missing split is evaluated
    for p in [run / "final", *run.glob("checkpoint-*")]: shutil.rmtree(p)
    assert sft_gains.main(args) == 0
    both = pd.read_csv(ev)
    assert set(both.split) == {"test_families", "test_seeds"} and (run / "weights.sha256").read_text() == fp
    pd.testing.assert_frame_equal(both[both.split == "test_families"].reset_index(drop=True), first)
    assert sft_gains.main(args) == 0 and len(pd.read_csv(ev)) == len(both)  # nothing left to do: nothing rerun
    # a session that stopped after one split, and a retrained model that differs from the evaluated one (another CPU's
    # numerics): the saved episodes are moved aside, not mixed with the new model's
    first.to_csv(ev, index=False)
    (run / "weights.sha256").write_text("0" * 64 + "\n")
    for p in [run / "final", *run.glob("checkpoint-*")]: shutil.rmtree(p)
    assert sft_gains.main(args) == 0
    stale = list((out / "eval" / "stale").glob("pocketworker_staged_s0-000000000000.csv"))
    assert len(stale) == 1 and len(pd.read_csv(stale[0])) == len(first)
    assert (run / "weights.sha256").read_text() == fp and len(pd.read_csv(ev)) == len(both)
    assert "pocketworker_staged_s0" in set(pd.read_csv(out / "results.csv").agent)
    assert sft_gains.weights_fingerprint(run / "final") == fp.strip()


def test_a_run_of_one_seed_reports_every_saved_seed(quick_run, tmp_path):
    "`--seeds 1` after seed 0 was saved: the table averages both seeds and gains.json keeps seed 0's SFT metrics."
    import shutil
    out = tmp_path / "run"
    shutil.copytree(quick_run, out)
    assert sft_gains.main(["--quick", "--seeds", "1", "-k", "1", "--out", str(out), "--eval-splits", "test_families"]) == 0
    meta = json.loads((out / "gains.json").read_text())
    assert sorted(meta["sft"]) == ["0", "1"] and meta["seeds_evaluated"] == [0, 1]
    g = pd.read_csv(out / "gains.csv")
    fam = list(g[g.split == "test_families"].agent)
    assert fam[0] == "base" and {"pocketworker_s0", "pocketworker_s1", "pocketworker (mean of 2 seeds)"} <= set(fam)
    assert "pocketworker (mean of 2 seeds)" not in set(g[g.split == "test_seeds"].agent)  # seed 1 has no test_seeds episodes
    assert sft_gains.saved_seeds(out, pd.read_csv(out / "results.csv")) == [0, 1]
    table, meta1 = sft_gains.report(out, [1])  # an explicit list still narrows the report
    assert sorted(meta1["sft"]) == [1] and not table.agent.str.contains("mean of").any()


def test_next_action_accuracy_stage(quick_run):
    "--next-action N: the oracle's trajectories on N specs per split, replayed turn by turn for base and each seed."
    args = ["--quick", "--seeds", "0", "-k", "1", "--out", str(quick_run), "--next-action", "2"]
    assert sft_gains.main(args) == 0
    files = sorted(p.name for p in (quick_run / "next_action").glob("*.csv"))
    assert files == ["base.csv", "pocketworker_s0.csv"]
    df = pd.read_csv(quick_run / "next_action" / "pocketworker_s0.csv", keep_default_na=False)
    assert set(df.split) == {"train", "test_families", "test_seeds"} and df.groupby("split").spec_id.nunique().eq(2).all()
    fams = df[df.split == "test_families"].workflow.unique()
    assert sorted(fams) == ["offboarding", "vendor_payment"]  # spread over the held-out families, not 2 of one
    assert (df.turn <= df.turns).all() and set(df.kind) <= {"call", "answer"} and df.expected.str.len().gt(0).all()
    summ = pd.read_csv(quick_run / "next_action.csv")
    assert {"agent", "split", "exact", "name", "horizon"} <= set(summ.columns) and len(summ) == 6
    before = {p: p.stat().st_mtime_ns for p in (quick_run / "next_action").glob("*.csv")}
    assert sft_gains.main(args) == 0  # saved for the same references: not measured again
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_overfit_probe_trains_a_few_rows_and_measures_them(quick_run, tmp_path):
    "experiments/sft_overfit_probe.py: N rows (one per family), E epochs, next-action accuracy as trained, before and after."
    sys.path.insert(0, str(ROOT / "experiments"))
    import sft_overfit_probe as probe
    out = tmp_path / "probe"
    assert probe.main(["--quick", "--curated", str(quick_run / "curated_s0"), "--before", str(quick_run / "sft_s0" / "final"),
                       "--rows", "2", "--epochs", "2", "--max-new-tokens", "8", "--out", str(out)]) == 0
    res = json.loads((out / "probe.json").read_text())
    fams = [s.split("-")[0] for s in res["rows"]]
    assert len(fams) == 2 and len(set(fams)) == 2 and res["sft"]["steps"] == 4  # one row per step, 2 rows x 2 epochs
    for k in ("before", "after"):
        assert res[k]["turns"] == res["turns"] > 0 and 0 <= res[k]["exact"] <= 100
        assert len(pd.read_csv(out / f"next_action_{k}.csv")) == res["turns"]
    assert not (out / "sft").exists() and not (out / "data").exists()  # models and the data copy are not kept
    t = probe.row_trajectory(json.loads((quick_run / "curated_s0" / "train.jsonl").read_text().splitlines()[0]), "x")
    assert t.messages[0].role == "system" and t.tools and any(m.tool_calls for m in t.messages)
