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
    steps = rd.episode_steps(quick_run)  # every training episode logged, with the step it trained
    assert steps.groupby('run').step.apply(list).to_dict() == {r: [1, 2] for r in RUNS}
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


def test_a_score_gain_without_task_progress_is_called_what_it_is():
    """A run that scores higher than the start mostly by idling (robustness credit: an episode with no tool call gets 0.2)
    is not task progress, even with a sliver of completion; a gain that comes from completion is."""
    def rows(agent, completion, robustness):
        return [dict(r, completion=c, robustness=rb, safety=1.0, score=round(0.8 * c + 0.2 * rb, 4))
                for r, c, rb in zip(_rows(agent, [0] * 4), completion, robustness)]
    start = rows("start", [0.0] * 4, [0.5] * 4)                                   # failing calls: 0.1 each
    idle = _frame(start, rows("score_turn_s0", [0.05, 0, 0, 0], [1.0] * 4))        # stops without acting, one sliver of progress
    t = rd.config_table(idle, n_boot=200).set_index("config")
    assert t.loc["score × turn", "vs SFT alone"] == "better" and t.loc["score × turn", "task progress"] == "no"
    assert t.loc["score × turn", "Δ from completion / robustness (seeds)"] == "+1.0 / +10.0"
    text, better = rd.answer(t.reset_index())
    assert better == ["score × turn"] and "the gain of score × turn is not task progress" in text
    real = _frame(start, rows("score_turn_s0", [0.9] * 4, [0.5] * 4))
    t = rd.config_table(real, n_boot=200).set_index("config")
    assert t.loc["score × turn", "task progress"] == "yes" and t.loc["score × turn", "Δ from completion / robustness (seeds)"] == "+72.0 / +0.0"
    assert "not task progress" not in rd.answer(t.reset_index())[0]
    assert rd.progress_verdict([(72.0, 0.0), (1.0, 10.0)]) == "no"                  # every seed must qualify
    assert rd.progress_verdict([(float("nan"), float("nan"))]) == "—" and rd.progress_verdict([]) == "—"
    assert rd.config_table(_frame(_rows("start", START), _rows("score_turn_s0", BETTER)), n_boot=200).set_index(
        "config").loc["score × turn", "task progress"] == "—"                    # no completion column: no claim


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


# ---- options for a sweep sized to a small machine ---------------------------------------------------

def test_parse_sets():
    assert rd.parse_sets(["learning_rate=2e-5", "temperature=1.0", "max_steps=12", "turn_slack=null", "reward=pass"]) == \
        dict(learning_rate=2e-5, temperature=1.0, max_steps=12, turn_slack=None, reward="pass")
    assert rd.parse_sets([]) == {} and rd.parse_sets(None) == {}
    for bad in ("learning_rate", "=3"):
        with pytest.raises(ValueError, match="KEY=VALUE"): rd.parse_sets([bad])


def test_weights_equal(tmp_path):
    import torch
    from safetensors.torch import save_file
    t = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(4, dtype=torch.bfloat16)}
    def save(name, d):
        (tmp_path / name).mkdir(); save_file(d, str(tmp_path / name / "model.safetensors")); return tmp_path / name
    a, same = save("a", t), save("same", {k: v.clone() for k, v in t.items()})
    assert rd.weights_equal(a, same)
    nudged = dict(t, a=t["a"].clone()); nudged["a"][1, 2] += 1e-6
    assert not rd.weights_equal(a, save("nudged", nudged))                       # one value moved
    assert not rd.weights_equal(a, save("dtype", dict(t, b=t["b"].float())))     # same values, another dtype
    assert not rd.weights_equal(a, save("fewer", {"a": t["a"]}))                 # a tensor missing
    assert not rd.weights_equal(a, tmp_path / "nowhere")                          # no weights at all
    (tmp_path / "empty").mkdir()
    assert not rd.weights_equal(tmp_path / "empty", tmp_path / "empty")


def test_check_protocol(tmp_path):
    new = dict(start="/m", k=3, max_new_tokens=256, eval_turn_slack=None, eval_splits=["test_families", "test_seeds"], train_specs=None)
    assert rd.check_protocol(tmp_path, new) == []                                # no experiment saved yet
    (tmp_path / "experiment.json").write_text(json.dumps(dict(start="/m", k=3, max_new_tokens=256)))  # before these options existed
    assert rd.check_protocol(tmp_path, new) == []
    changed = rd.check_protocol(tmp_path, dict(new, eval_turn_slack=4, k=1))
    assert len(changed) == 2 and changed[0].startswith("k: 3 before, 1 now") and "eval_turn_slack: None before, 4 now" in changed[1]


def test_train_specs_spread_over_families_and_fixed(tmp_path):
    from coworkenv.evaluate import split_specs, load_split_config
    train = split_specs(load_split_config(rd.QUICK["split"]))["train"]
    d = rd.stage_train_specs(tmp_path, train, 2)
    got = [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))]
    assert len(got) == 2 and len({g["workflow"] for g in got}) == 2             # one spec of each of two families
    assert rd.stage_train_specs(tmp_path, train, 2) == d                          # the same pick again: kept
    with pytest.raises(ValueError, match="holds other training specs"): rd.stage_train_specs(tmp_path, train, 1)


def test_small_sweep_options_end_to_end(tmp_path, capsys):
    """--train-specs, --eval-turn-slack, --eval-splits and --set on the quick path (one configuration, 1 GRPO step): the runs
    train on the picked specs, every model is evaluated on them (split `train`) and on held-out families only, under the
    turn budget; a rerun with another evaluation protocol is refused."""
    out = tmp_path / "small"
    args = ["--quick", "--seeds", "0", "-k", "1", "--rewards", "score", "--credits", "trajectory", "--out", str(out),
            "--train-specs", "2", "--eval-turn-slack", "1", "--eval-splits", "test_families", "--set", "max_steps=1", "temperature=1.0"]
    assert rd.main(args) == 0
    cfg = (out / "runs" / "score_trajectory_s0" / "rl_config.yaml").read_text()
    assert f"specs: {out / 'train_specs'}" in cfg and "max_steps: 1\n" in cfg and "temperature: 1.0\n" in cfg
    res = pd.read_csv(out / "results.csv")
    assert set(res.split) == {"train", "test_families"} and set(res.agent) == {rd.START, "score_trajectory_s0"}
    assert set(res.spec_id[res.split == "train"]) == {p.stem for p in (out / "train_specs").glob("*.json")}
    from coworkenv.core import load_spec
    specs = json.loads((out / "experiment.json").read_text())["specs"]
    plan = {p.stem: len(load_spec(p).solution) for s in ("train", "test_families") for p in (Path(specs) / s).glob("*.json")}
    assert all(r.turns <= plan[r.spec_id] + 1 for r in res.itertuples())     # the turn budget held in every episode
    exp = json.loads((out / "experiment.json").read_text())
    assert (exp["train_specs"], exp["eval_turn_slack"], exp["eval_splits"]) == (2, 1, ["test_families"])
    assert [i["argv"] for i in exp["invocations"]] == [args]
    assert rd.main(args) == 0  # everything saved: nothing runs again, and the invocation is recorded beside the first
    assert [i["argv"] for i in json.loads((out / "experiment.json").read_text())["invocations"]] == [args, args]
    again = list(args); again[again.index("--eval-turn-slack") + 1] = "2"
    capsys.readouterr()
    with pytest.raises(SystemExit): rd.main(again)
    err = capsys.readouterr().err
    assert "evaluated otherwise" in err and "eval_turn_slack: 1 before, 2 now" in err


def test_a_run_that_kept_the_start_weights_is_not_evaluated_again(tmp_path, capsys, monkeypatch):
    """A run whose final weights equal the start model's (pass × trajectory when no episode passes: every advantage 0)
    gets the start model's episodes under its own name instead of a second evaluation of the same weights."""
    out = tmp_path / "same"
    monkeypatch.setattr(rd, "stage_train", lambda out, rl_cfg, start, *a, **k: start)  # GRPO that moved nothing
    evaluated = []
    real_eval = rd.sft_gains.stage_eval
    monkeypatch.setattr(rd.sft_gains, "stage_eval", lambda out, label, *a, **k: evaluated.append(label) or real_eval(out, label, *a, **k))
    assert rd.main(QUICK_ARGS + ["--out", str(out), "--rewards", "pass", "--credits", "trajectory"]) == 0
    assert evaluated == [rd.START]                                                   # the run itself was not evaluated
    assert "its final weights equal the start model's" in capsys.readouterr().out
    start, run = (pd.read_csv(out / "eval" / f"{n}.csv") for n in (rd.START, "pass_trajectory_s0"))
    assert set(run.agent) == {"pass_trajectory_s0"} and run.drop(columns="agent").equals(start.drop(columns="agent"))


# ---- the training episodes' check events (episodes.jsonl) --------------------------------------------

def test_episode_events_and_steps(tmp_path):
    "Hand-made episode logs: every event becomes a row with its check's kind from the spec; per step, events by what they did."
    from coworkenv.cli import _save_specs
    from coworkenv.synthesis import synthesize
    spec = next(s for s in synthesize(n=16, seed=0, progress=False) if {'completion', 'safety'} <= {c.kind for c in s.checks})
    _save_specs([spec], tmp_path / "train_specs")
    done = next(c.id for c in spec.checks if c.kind == 'completion')
    guard = next(c.id for c in spec.checks if c.kind == 'safety')
    w = {c.id: c.weight for c in spec.checks}
    ep = lambda step, reward, events, **kw: json.dumps(dict(step=step, generation=step - 1, spec_id=spec.id, reward=reward,
                                                            score=reward, completion=reward, safety_violated=any(c == guard and not p for _, c, p in events),
                                                            tool_calls=len(events), events=events, weights=w) | kw)
    run = tmp_path / "runs" / "progress_turn_s0"
    run.mkdir(parents=True)
    (run / "episodes.jsonl").write_text("\n".join([
        ep(1, 0.0, [[2, guard, False]]), ep(1, 0.0, []),                            # step 1: one violation in 2 episodes
        ep(2, 0.5, [[1, done, True], [3, done, False], [4, done, True]]), ep(2, 0.0, [[1, guard, False], [2, guard, True]]),
    ]) + "\n" + '{"step": 3, "spec_id": "torn')                                       # a line torn by a kill: skipped
    ev = rd.episode_events(tmp_path)
    assert list(ev.columns) == rd.EVENT_COLS and len(ev) == 6
    assert ev.kind.tolist() == ['safety', 'completion', 'completion', 'completion', 'safety', 'safety']
    assert ev.episode.tolist() == [0, 2, 2, 2, 3, 3] and ev.weight.tolist() == [w[guard], w[done], w[done], w[done], w[guard], w[guard]]
    st = rd.episode_steps(tmp_path).set_index('step')
    assert st.spec.tolist() == [spec.id, spec.id] and 'prefix completion' not in st
    assert st.episodes.tolist() == [2, 2] and st.reward.tolist() == [0.0, 0.25] and st['safety violated'].tolist() == [0.5, 0.5]
    assert st['events: violated'].tolist() == [0.5, 0.5] and st['events: restored'].tolist() == [0.0, 0.5]
    assert st['events: met'].tolist() == [0.0, 1.0] and st['events: undone'].tolist() == [0.0, 0.5]
    # without the specs the kinds are unknown ('?', counted with the completion checks); a run without a log has no rows
    assert set(rd.episode_events(tmp_path, specs_dir=tmp_path / "nowhere").kind) == {'?'}
    assert rd.episode_events(tmp_path / "empty").empty and rd.episode_steps(tmp_path / "empty").empty


def test_episode_steps_show_the_demonstration_prefix(tmp_path):
    "Runs that start from a demonstration (`demo_turns_left`) log the prefix's completion; per step it sits beside the episode's."
    run = tmp_path / "runs" / "score_trajectory_s0"
    run.mkdir(parents=True)
    ep = lambda step, spec, pre, done: json.dumps(dict(step=step, spec_id=spec, reward=done, score=done, completion=done,
                                                       safety_violated=False, tool_calls=1, events=[], weights={},
                                                       prefix_turns=3, prefix_completion=pre))
    (run / "episodes.jsonl").write_text("\n".join([ep(1, "a", 0.5, 0.5), ep(1, "a", 0.5, 1.0), ep(2, "b", 0.8, 0.8)]) + "\n")
    st = rd.episode_steps(tmp_path, specs_dir=tmp_path).set_index('step')
    assert st.spec.tolist() == ["a", "b"] and st['prefix completion'].tolist() == [0.5, 0.8]
    assert st.completion.tolist() == [0.75, 0.8] and list(st.columns[:6]) == ['run', 'spec', 'episodes', 'reward', 'score', 'prefix completion']
