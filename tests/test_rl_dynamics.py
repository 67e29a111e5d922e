"The RL-dynamics experiment script: the whole quick path (4 configurations, tiny model, 2 GRPO steps each), resume, report, bad input, and the report functions on hand-made frames."
import json, sys, time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import rl_dynamics as rd  # noqa: E402

RUNS = ["score_trajectory_s0", "score_turn_s0", "pass_trajectory_s0", "pass_turn_s0"]  # sweep order
CONFIGS = ["score × trajectory", "score × turn", "pass × trajectory", "pass × turn"]
QUICK_ARGS = ["--quick", "--seeds", "0", "-k", "1"]  # one seed, k=1: CI time (two seeds double the GRPO part)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rl_dynamics") / "run"
    assert rd.main(QUICK_ARGS + ["--out", str(out)]) == 0
    return out


# ---- the quick path end to end -------------------------------------------------------------------

def test_every_run_trains_two_steps_and_is_evaluated(quick_run):
    for name in RUNS:
        run = quick_run / "runs" / name
        log = pd.read_csv(run / "log.csv")
        assert list(log.step) == [1, 2], name
        assert log[["reward", "cowork/score", "cowork/pass_rate", "frac_reward_zero_std"]].notna().all().all(), name
        res = json.loads((run / "rl_result.json").read_text())["metrics"]
        assert res["steps"] == 2 and res["reward"] == name.split("_")[0] and res["credit"] == name.split("_")[1]
        assert (run / "final" / "config.json").is_file() and not list(run.glob("checkpoint-*"))  # checkpoints dropped
        if res["reward"] == "pass": assert set(log.reward) <= {0.0, 0.5, 1.0}  # pass reward is 0/1 per episode
    evals = {p.stem for p in (quick_run / "eval").glob("*.csv")}
    assert evals == {rd.START, *RUNS}
    specs = json.loads((quick_run / "experiment.json").read_text())["specs"]
    test_ids = {p.stem for s in ("test_families", "test_seeds") for p in (Path(specs) / s).glob("*.json")}
    for name in [rd.START, *RUNS]:
        df = pd.read_csv(quick_run / "eval" / f"{name}.csv")
        assert set(df.agent) == {name} and set(df.spec_id) == test_ids and (df.trial == 0).all()


def test_table_has_the_four_configurations_per_split(quick_run):
    df = pd.read_csv(quick_run / "results.csv")
    assert set(df.split) == {"test_families", "test_seeds"} and len(df) == 5 * df.spec_id.nunique()
    t = pd.read_csv(quick_run / "table.csv", keep_default_na=False)
    for split in ("test_families", "test_seeds"):
        g = t[t.split == split]
        assert list(g.config) == ["start (SFT alone)"] + CONFIGS
        assert (g.seeds.iloc[1:] == "0").all()
        assert set(g["vs SFT alone"].iloc[1:]) <= {"better", "worse", "no clear difference"}
        assert g["Δ mean per seed [95% CI]"].iloc[1:].str.match(r"^s0 [+-]\d").all()
    runs = pd.read_csv(quick_run / "runs.csv")
    assert list(runs[runs.split == "test_families"].run) == [rd.START, *RUNS]
    dyn = pd.read_csv(quick_run / "dynamics.csv")
    assert len(dyn) == 8 and list(dyn.columns[:5]) == ["run", "config", "reward_kind", "credit", "seed"]


def test_summary_and_figures(quick_run):
    m = json.loads((quick_run / "summary.json").read_text())
    assert m["quick"] is True and m["start_evaluated"] is True and m["k"] == 1
    assert m["runs_evaluated"] == RUNS and m["training_steps_logged"] == 8
    assert m["episodes"] == len(pd.read_csv(quick_run / "results.csv")) and m["tasks"] >= 2
    assert sorted(m["rl"]) == sorted(RUNS) and all(r["steps"] == 2 and r["specs"] >= 1 for r in m["rl"].values())
    assert isinstance(m["beats_sft_on_test_families"], list) and m["answer"]
    assert [d["config"] for d in m["dynamics"]] == CONFIGS and len(m["table"]) == 10
    md = (quick_run / "summary.md").read_text()
    assert "QUICK RUN" in md and "Held-out families:" in md and "## Training dynamics" in md
    curves = (quick_run / "fig_curves.html").read_text()
    assert curves.count('class="plotly-graph-div"') == len(rd.CURVES)
    assert all(c.replace("×", "\\u00d7") in curves for c in CONFIGS)
    assert "plotly-graph-div" in (quick_run / "fig_heldout.html").read_text()
    figs = rd.curves_figures(quick_run)
    assert list(figs) == list(rd.CURVES) and all(len(f.data) == 4 for f in figs.values())  # one line per configuration
    h = rd.heldout_figure(pd.read_csv(quick_run / "results.csv"))
    assert list(h.data[0].x) == [rd.START, *RUNS]


def test_rerun_trains_nothing(quick_run, capsys):
    files = sorted(p for d in ("runs", "eval") for p in (quick_run / d).rglob("*") if p.is_file())
    before = {p: p.stat().st_mtime_ns for p in files}
    t0 = time.time()
    assert rd.main(QUICK_ARGS + ["--out", str(quick_run)]) == 0
    assert time.time() - t0 < 60
    assert {p: p.stat().st_mtime_ns for p in files} == before  # no log, model or evaluation rewritten
    assert sorted(p for d in ("runs", "eval") for p in (quick_run / d).rglob("*") if p.is_file()) == files
    assert "3/3 run" not in capsys.readouterr().out  # no run was started


def test_report_only_rebuilds_the_tables(quick_run):
    (quick_run / "table.csv").unlink()
    assert rd.main(["--report", "--out", str(quick_run)]) == 0
    assert len(pd.read_csv(quick_run / "table.csv")) == 10


# ---- bad input -----------------------------------------------------------------------------------

def test_missing_start_model_is_a_usage_error(tmp_path, capsys):
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as e:
        rd.main(["--quick", "--start", str(tmp_path / "no-model"), "--out", str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "start model" in err and "no-model" in err and "--start" in err
    assert not out.exists()  # failed before any work


def test_report_without_evaluations_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        rd.main(["--report", "--out", str(tmp_path / "empty")])
    assert e.value.code == 2 and "no evaluations saved" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="no evaluations saved"):
        rd.report(tmp_path)


# ---- the report functions on hand-made frames ----------------------------------------------------

TASKS = [("t1", True), ("t2", False), ("t3", True), ("t4", False)]  # (spec id, multi-turn)


def _rows(agent, scores, split="test_families"):
    "Evaluation rows (one trial per task) with these per-task scores."
    return [dict(spec_id=f"{split}-{t}", split=split, workflow=f"fam_{t}", domain="d", difficulty="easy", capabilities="c",
                 multi_turn=mt, agent=agent, trial=0, score=s, passed=s >= 0.75, success=s == 1.0)
            for (t, mt), s in zip(TASKS, scores)]


def _frame(*parts): return pd.DataFrame([r for p in parts for r in p])


START = [0.2, 0.2, 0.2, 0.2]
BETTER, WORSE, MIXED = [0.8, 0.8, 0.8, 0.8], [0.0, 0.0, 0.0, 0.0], [0.7, 0.0, 0.7, 0.0]


def test_verdict():
    d = lambda lo, hi: dict(delta=(lo + hi) / 2, lo=lo, hi=hi)
    assert rd.verdict([d(1, 5), d(0.5, 9)]) == "better"
    assert rd.verdict([d(-5, -1)]) == "worse"
    assert rd.verdict([d(1, 5), d(-1, 4)]) == "no clear difference"  # every seed must agree
    assert rd.verdict([d(1, 5), d(-5, -1)]) == "no clear difference"
    assert rd.verdict([d(0, 0)]) == "no clear difference"
    assert rd.verdict([]) == "—" and rd.verdict([d(1, 5), None]) == "—"  # nothing to compare with


def test_config_table_verdicts_and_spread():
    df = _frame(_rows("start", START), _rows("score_trajectory_s0", BETTER), _rows("score_trajectory_s1", BETTER),
                _rows("pass_turn_s0", WORSE), _rows("score_turn_s0", MIXED), _rows("score_turn_s1", BETTER),
                _rows("start", START, "test_seeds"), _rows("score_trajectory_s0", START, "test_seeds"))
    t = rd.config_table(df, n_boot=200)
    fam = t[t.split == "test_families"].set_index("config")
    assert list(fam.index) == ["start (SFT alone)", "score × trajectory", "score × turn", "pass × turn"]
    assert fam.loc["start (SFT alone)", "mean"] == "20.0 [20.0, 20.0]" and fam.loc["start (SFT alone)", "vs SFT alone"] == "—"
    assert fam.loc["score × trajectory", "vs SFT alone"] == "better"
    assert fam.loc["score × trajectory", "seeds"] == "0 1" and fam.loc["score × trajectory", "mean"] == "80.0 ± 0.0"
    assert fam.loc["score × trajectory", "Δ mean (seeds)"] == "+60.0 ± 0.0"
    assert fam.loc["score × trajectory", "Δ mean per seed [95% CI]"] == "s0 +60.0 [+60.0, +60.0]; s1 +60.0 [+60.0, +60.0]"
    assert fam.loc["pass × turn", "vs SFT alone"] == "worse" and fam.loc["pass × turn", "mean"] == "0.0"  # one seed: no sd
    assert fam.loc["score × turn", "vs SFT alone"] == "no clear difference"  # seed 0 mixed, seed 1 better
    assert fam.loc["score × turn", "mean"] == "57.5 ± 31.8"
    assert fam.loc["score × turn", "multi-turn"] == "75.0 ± 7.1"  # the multi-turn tasks t1, t3: 70 and 80
    seeds = t[t.split == "test_seeds"].set_index("config")
    assert list(seeds.index) == ["start (SFT alone)", "score × trajectory"]
    assert seeds.loc["score × trajectory", "vs SFT alone"] == "no clear difference"
    text, better = rd.answer(t)
    assert better == ["score × trajectory"] and text.startswith("score × trajectory beats SFT alone")
    assert "Worse than SFT alone on every seed: pass × turn." in text


def test_answer_cases():
    df = _frame(_rows("start", START), _rows("score_trajectory_s0", MIXED), _rows("pass_turn_s0", MIXED))
    text, better = rd.answer(rd.config_table(df, n_boot=200))
    assert better == [] and text.startswith("no configuration beats SFT alone") and "Worse" not in text
    both = _frame(_rows("start", START), _rows("score_trajectory_s0", BETTER), _rows("pass_turn_s0", BETTER))
    text, better = rd.answer(rd.config_table(both, n_boot=200))
    assert better == ["score × trajectory", "pass × turn"] and " beat SFT alone" in text
    assert rd.answer(rd.config_table(_frame(_rows("start", START)), n_boot=200))[0] == "no configuration evaluated on held-out families yet."
    only_seeds = _frame(_rows("start", START, "test_seeds"), _rows("score_turn_s0", BETTER, "test_seeds"))
    assert rd.answer(rd.config_table(only_seeds, n_boot=200))[0] == "no configuration evaluated on held-out families yet."


def test_missing_start_model_in_the_results():
    "Runs evaluated but not the start model: the table has no Δ or verdict, and the answer says there is no comparison."
    df = _frame(_rows("score_trajectory_s0", BETTER), _rows("score_turn_s0", WORSE))
    t = rd.config_table(df, n_boot=200)
    assert list(t.config) == ["score × trajectory", "score × turn"] and "vs SFT alone" not in t and "Δ mean (seeds)" not in t
    assert list(t["mean"]) == ["80.0", "0.0"]
    text, better = rd.answer(t)
    assert better == [] and "not evaluated on held-out families" in text
    mixed = rd.config_table(_frame(_rows("start", START, "test_seeds"), _rows("score_turn_s0", BETTER, "test_seeds"),
                                   _rows("score_turn_s0", BETTER)), n_boot=200)  # start only on the other split
    assert mixed[mixed.split == "test_families"]["vs SFT alone"].tolist() == ["—"]
    assert "not evaluated on held-out families" in rd.answer(mixed)[0]
    r = rd.runs_table(df, n_boot=200)
    assert list(r.run) == ["score_trajectory_s0", "score_turn_s0"] and "Δ mean" not in r


def _log(run, rewards, zero_std=0.0):
    m = rd.RUN_RE.match(run)
    return pd.DataFrame(dict(run=run, config=rd.config_label(m["reward"], m["credit"]), reward_kind=m["reward"], credit=m["credit"],
                             seed=int(m["seed"]), step=range(1, len(rewards) + 1), wall_s=[10.0 * (i + 1) for i in range(len(rewards))],
                             reward=rewards, **{"cowork/score": rewards, "cowork/pass_rate": [0.0] * len(rewards)},
                             entropy=[2.0] * len(rewards), frac_reward_zero_std=zero_std))


def test_dynamics_summary():
    assert rd.dynamics_summary(pd.DataFrame()).empty and rd.dynamics_summary(None).empty
    dyn = pd.concat([_log("pass_turn_s0", [0.0, 0.0, 1.0, 1.0], 0.5),  # listed first, reported after the score configs
                     _log("score_trajectory_s0", [0.1, 0.2, 0.3, 0.4]), _log("score_trajectory_s1", [0.3, 0.2, 0.3, 0.6]),
                     _log("score_turn_s0", [0.5, 0.5, 0.5, 0.5], 1.0)], ignore_index=True)
    s = rd.dynamics_summary(dyn).set_index("config")
    assert list(s.index) == ["score × trajectory", "score × turn", "pass × turn"]
    # first vs last quarter (one of 4 steps) of each run, mean over seeds: (0.1+0.3)/2 -> (0.4+0.6)/2
    assert s.loc["score × trajectory", "reward"] == "0.200 → 0.500" and s.loc["score × trajectory", "seeds"] == "0 1"
    assert s.loc["pass × turn", "reward"] == "0.000 → 1.000" and s.loc["pass × turn", "zero-spread groups"] == "0.50"
    assert s.loc["score × turn", "zero-spread groups"] == "1.00" and s.loc["score × turn", "entropy"] == "2.000 → 2.000"
    assert (s.steps == 4).all() and (s["wall s per run"] == "40").all()
    half = rd.dynamics_summary(dyn, frac=0.5).set_index("config")
    assert half.loc["score × trajectory", "reward"] == "0.200 → 0.400"  # (0.15+0.25)/2 -> (0.35+0.45)/2
    assert rd.dynamics_summary(dyn.drop(columns=["entropy"])).entropy.eq("—").all()  # a metric not logged


# ---- reusing a saved evaluation of the start model -----------------------------------------------

def _specs(*ids): return [type("Spec", (), {"id": i})() for i in ids]


def test_start_eval_is_reused_relabelled_and_trimmed(tmp_path):
    rows = [dict(r, trial=t) for t in (0, 1) for r in _rows("pocketworker_ep8_s1", START)]
    rows += [dict(r, trial=2) for r in _rows("pocketworker_ep8_s1", START)]  # a trial beyond k: dropped
    rows += _rows("pocketworker_ep8_s1", START, split="other")  # tasks outside the held-out split: dropped
    saved = tmp_path / "saved.csv"
    pd.DataFrame(rows).to_csv(saved, index=False)
    test = _specs(*(f"test_families-{t}" for t, _ in TASKS))
    assert rd.reuse_start_eval(tmp_path / "out", saved, test, k=2) == 8
    got = pd.read_csv(tmp_path / "out" / "eval" / "start.csv")
    assert set(got.agent) == {"start"} and sorted(got.trial.unique()) == [0, 1]
    assert set(got.spec_id) == {s.id for s in test} and got.score.tolist() == [0.2] * 8


def test_start_eval_with_a_gap_or_two_agents_is_refused(tmp_path):
    test = _specs(*(f"test_families-{t}" for t, _ in TASKS))
    one = tmp_path / "one.csv"
    pd.DataFrame(_rows("a", START)).to_csv(one, index=False)  # trial 0 only
    with pytest.raises(ValueError, match=r"lacks 4 of the 8 held-out episodes.*trial 1"):
        rd.reuse_start_eval(tmp_path / "out", one, test, k=2)
    two = tmp_path / "two.csv"
    pd.DataFrame(_rows("a", START) + _rows("b", START)).to_csv(two, index=False)
    with pytest.raises(ValueError, match="2 agents"):
        rd.reuse_start_eval(tmp_path / "out", two, test, k=1)
    with pytest.raises(ValueError, match="no evaluation file"):
        rd.reuse_start_eval(tmp_path / "out", tmp_path / "nope.csv", test, k=1)
    assert not (tmp_path / "out" / "eval" / "start.csv").exists()  # nothing written


def test_start_eval_reuse_skips_the_start_evaluation(tmp_path, capsys):
    "The quick path with --start-eval: the start model's saved evaluation is taken, not recomputed (--stop-after start)."
    first = tmp_path / "first"
    assert rd.main(QUICK_ARGS + ["--out", str(first), "--stop-after", "start"]) == 0
    saved = pd.read_csv(first / "eval" / "start.csv").assign(agent="pocketworker_x")
    saved.to_csv(tmp_path / "saved.csv", index=False)
    out = tmp_path / "second"
    (out / "specs").parent.mkdir(parents=True)
    import shutil
    shutil.copytree(first / "specs", out / "specs")  # the same split
    capsys.readouterr()
    assert rd.main(QUICK_ARGS + ["--out", str(out), "--stop-after", "start", "--start-eval", str(tmp_path / "saved.csv")]) == 0
    assert "taken from" in capsys.readouterr().out
    got = pd.read_csv(out / "eval" / "start.csv")
    assert set(got.agent) == {"start"} and len(got) == len(saved)
    assert json.loads((out / "experiment.json").read_text())["start_eval"] == str(tmp_path / "saved.csv")


def test_report_rewrites_the_same_figure_bytes(quick_run, tmp_path):
    import shutil
    out = tmp_path / "copy"
    shutil.copytree(quick_run, out)
    rd.report(out)
    first = {n: (out / n).read_bytes() for n in ("fig_curves.html", "fig_heldout.html")}
    rd.report(out)  # a rerun of --report on unchanged results must not leave a diff in git
    assert {n: (out / n).read_bytes() for n in first} == first
