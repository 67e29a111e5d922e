"The `coworkenv` command end to end (in-process, through `main(argv)`)."
import json
import pandas as pd
from coworkenv.cli import main

def test_main_job(tmp_path, capsys):
    assert main(["main", "--out", str(tmp_path), "-n", "16", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "valid: 16/16" in out
    res = pd.read_csv(tmp_path / "results.csv", keep_default_na=False)  # an agent is called "null"
    by = res.groupby("agent").passed.mean()
    assert by["oracle"] == 1.0 and by["null"] == 0.0 and by["shortcut"] == 0.0
    assert len(list((tmp_path / "specs").glob("*.json"))) == 16
    fam = pd.read_csv(tmp_path / "validation_by_family.csv", index_col="family")  # the validation summary per family, events included
    assert fam.specs.sum() == 16 and "with_events" in out and (fam.with_events <= fam.specs).all()
    from coworkenv.core import load_specs
    evented = {s.workflow for s in load_specs(tmp_path / "specs") if s.events}
    assert all(fam.loc[f, "with_events"] >= 1 for f in evented)
    assert all((fam.loc[f, "announced"] + fam.loc[f, "silent"]) >= fam.loc[f, "with_events"] for f in fam.index)

def test_synth_then_validate(tmp_path, capsys):
    assert main(["synth", "--out", str(tmp_path), "-n", "8", "--quiet"]) == 0
    assert main(["synth", "--out", str(tmp_path), "-n", "10", "--quiet"]) == 0   # resumes: only 2 new slots
    lines = (tmp_path / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 10 and len({json.loads(l)["id"] for l in lines}) == 10
    assert main(["validate", str(tmp_path / "specs"), "--out", str(tmp_path / "report"), "--quiet"]) == 0
    assert "10/10 specs valid" in capsys.readouterr().out
    assert (tmp_path / "report" / "report.csv").exists()

def test_validate_reports_a_broken_spec(tmp_path, capsys):
    d = tmp_path / "specs"; d.mkdir()
    (d / "bad.json").write_text(json.dumps({"id": "bad", "request": "x", "tools": ["nope_tool"], "services": {"gmail": []}}))
    assert main(["validate", str(d), "--quiet"]) == 1
    assert "bad" in capsys.readouterr().out

def test_bad_input_is_a_clear_error(tmp_path, capsys):
    assert main(["show", str(tmp_path / "missing.json")]) == 2
    assert "error" in capsys.readouterr().err


# ---- bad input, empty sets, closed pipes: a clear message and an exit status, never a traceback ----------------

import subprocess, sys
import pytest
import coworkenv
from coworkenv.llm import default_policy, set_default_policy


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit): main(["--version"])
    out = capsys.readouterr().out.strip()
    from importlib.metadata import version
    assert out == f"coworkenv {version('coworkenv')}" == f"coworkenv {coworkenv.__version__}"


def test_help_lists_agent_names(capsys):
    for cmd in (["run", "--help"], ["play", "--help"]):
        with pytest.raises(SystemExit): main(cmd)
        out = capsys.readouterr().out
        assert all(n in out for n in ("oracle", "null", "shortcut")), cmd


@pytest.mark.parametrize("argv,needle", [
    (["tools", "--service", "nope"], "unknown service 'nope'"),
    (["show", "{tmp}"], "{tmp}"),                                      # a folder where a file is expected
    (["run", "--specs", "{tmp}/empty"], "no loadable spec files"),
    (["run", "--specs", "{tmp}/missing"], "missing"),
    (["run", "--agents", "oracle,robot"], "unknown agent(s) ['robot']"),
    (["validate", "{tmp}/empty"], "no spec files"),
    (["validate", "{tmp}/file.json"], "not a folder"),
    (["--llm-timeout", "-1", "tools"], "invalid LLM policy"),
    (["synth", "--out", "{tmp}/file.json", "-n", "1", "--quiet"], "file.json"),
])
def test_bad_input_messages(argv, needle, tmp_path, capsys):
    (tmp_path / "empty").mkdir(); (tmp_path / "file.json").write_text("{}")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle.replace("{tmp}", str(tmp_path)) in err and "Traceback" not in err and "error: 'score'" not in err


def test_k_zero_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as e: main(["run", "-k", "0"])
    assert e.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_synth_with_nothing_synthesized_fails(tmp_path, capsys):
    assert main(["synth", "--out", str(tmp_path), "-n", "0", "--quiet"]) == 1
    assert "no spec was synthesized" in capsys.readouterr().err


def test_llm_flags_set_the_default_policy(tmp_path):
    p0 = default_policy()
    try:
        assert main(["--llm-timeout", "12.5", "--llm-retries", "0", "tools", "--service", "gmail"]) == 0
        assert (default_policy().timeout, default_policy().max_retries) == (12.5, 0)
    finally: set_default_policy(**p0.model_dump())


def test_closed_pipe_no_traceback():
    "`coworkenv tools | head -1`: the reader closes the pipe early."
    p = subprocess.Popen([sys.executable, "-c", "import sys; from coworkenv.cli import main; sys.exit(main(['tools']))"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline(); p.stdout.close()
    err = p.stderr.read().decode(); p.wait(timeout=60)
    assert first.strip() and "Traceback" not in err and "BrokenPipeError" not in err and p.returncode in (0, 141)


def test_validate_reports_unloadable_specs_and_continues(tmp_path, capsys):
    (tmp_path / "bin.json").write_bytes(b"\x00\xff\xfe binary")
    (tmp_path / "deep.json").write_text('{"a":' + "[" * 5000 + "]" * 5000 + "}")
    (tmp_path / "torn.json").write_text('{"id": "x", ')
    rc = main(["validate", str(tmp_path), "--quiet"])
    out = capsys.readouterr()
    assert rc == 1 and "0/3 specs valid" in out.out and "Traceback" not in out.err
    assert all(n in out.out for n in ("bin", "deep", "torn"))


def test_main_tables_show_score_pass_and_success(tmp_path, capsys):
    assert main(["main", "--out", str(tmp_path), "-n", "4", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "success" in out and "success^k" in out and "pass" in out and "score" in out


def test_run_skips_unloadable_specs(tmp_path, capsys):
    import shutil
    from coworkenv.cli import DEFAULT_EXAMPLES
    good = sorted(DEFAULT_EXAMPLES.glob("*.json"))[0]
    shutil.copy(good, tmp_path / good.name)
    (tmp_path / "broken.json").write_bytes(b"\xff\xfe not a spec")
    assert main(["run", "--specs", str(tmp_path), "--agents", "oracle", "--quiet"]) == 0
    out = capsys.readouterr()
    assert "broken.json" in out.err and "skipping" in out.err and "success" in out.out


# ---- the pipeline stages: rollout -> curate -> eval, and `main --pipeline --quick` ------------------------------

QUICK_SPLIT = str(__import__("pathlib").Path(__file__).resolve().parent.parent / "experiments" / "configs" / "split_quick.yaml")


def _example_dir(tmp_path, n=3):
    import shutil
    from coworkenv.cli import DEFAULT_EXAMPLES
    d = tmp_path / "specs"; d.mkdir()
    for f in sorted(DEFAULT_EXAMPLES.glob("*.json"))[:n]: shutil.copy(f, d / f.name)
    return d


def test_rollout_resumes_then_curate(tmp_path, capsys):
    specs, store = _example_dir(tmp_path), tmp_path / "store"
    assert main(["rollout", "--specs", str(specs), "--agent", "oracle", "-k", "2", "--store", str(store), "--quiet"]) == 0
    assert "6/6 episodes in the store; passed 6 (100%)" in capsys.readouterr().out
    lines = (store / "trajectories.jsonl").read_text().splitlines()
    assert main(["rollout", "--specs", str(specs), "--agent", "oracle", "-k", "3", "--store", str(store), "--quiet"]) == 0
    keys = [json.loads(l)["key"] for l in (store / "trajectories.jsonl").read_text().splitlines()]
    assert len(keys) == 9 == len(set(keys)) and keys[:6] == [json.loads(l)["key"] for l in lines]   # resumed: 3 new, none repeated
    assert json.loads((store / "manifest.json").read_text())["runs"][-1]["resumed_with"] == 6
    capsys.readouterr()
    assert main(["curate", "--store", str(store), "--out", str(tmp_path / "ds"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "rows from 9 trajectories" in out and "near_duplicate" in out       # k trials of the oracle are duplicates
    assert (tmp_path / "ds" / "dataset").is_dir() and (tmp_path / "ds" / "data_card.html").is_file()
    rows = [json.loads(l) for l in (tmp_path / "ds" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["messages"][-1]["role"] == "assistant" for r in rows)


def test_curate_split_drops_held_out_trajectories(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["rollout", "--specs", f"{QUICK_SPLIT}:test_families", "--store", str(store), "--quiet"]) == 0
    assert main(["rollout", "--specs", f"{QUICK_SPLIT}:train", "--store", str(store), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["curate", "--store", str(store), "--out", str(tmp_path / "ds"), "--split", QUICK_SPLIT, "--no-balance"]) == 0
    out = capsys.readouterr().out
    assert "(4 held-out ones dropped)" in out
    card = json.loads((tmp_path / "ds" / "data_card.json").read_text())
    assert set(card["per_family"]) <= {"access_request", "expense_reimbursement", "meeting_scheduling", "new_hire_onboarding"}


def test_eval_writes_tables_and_figures(tmp_path, capsys):
    specs, out = _example_dir(tmp_path, 4), tmp_path / "eval"
    assert main(["eval", "--suite", str(specs), "--agent", "oracle", "--agent", "lazy=null", "-k", "2",
                 "--out", str(out), "--quiet", "--n-boot", "200"]) == 0
    text = capsys.readouterr().out
    assert "strict success" in text and "lazy" in text and "score per family" in text and "score per capability" in text
    res = pd.read_csv(out / "results.csv", keep_default_na=False)
    assert len(res) == 4 * 2 * 2 and set(res.agent) == {"oracle", "lazy"}
    s = pd.read_csv(out / "summary.csv", keep_default_na=False)
    o = s[(s.group == "overall") & (s.metric == "score")].set_index("agent")
    assert o.loc["oracle", "estimate"] == 100.0 and o.loc["lazy", "hi"] < 50
    assert {"family", "capability", "turns"} <= set(s.group)
    assert all((out / f"fig_{n}.html").is_file() for n in ("overall", "family", "capability", "turns"))


def test_eval_on_a_split_config(tmp_path, capsys):
    assert main(["eval", "--suite", f"{QUICK_SPLIT}:test_seeds", "--agent", "oracle", "-k", "1",
                 "--out", str(tmp_path), "--quiet", "--n-boot", "100"]) == 0
    assert "split test_seeds of" in capsys.readouterr().out
    assert set(pd.read_csv(tmp_path / "results.csv").split) == {"test_seeds"}
    assert main(["eval", "--suite", f"{QUICK_SPLIT}:test", "--agent", "oracle", "-k", "1",
                 "--out", str(tmp_path), "--quiet", "--n-boot", "100"]) == 0
    res = pd.read_csv(tmp_path / "results.csv")
    assert set(res.split) == {"test_seeds", "test_families"} and len(res) == 8
    s = pd.read_csv(tmp_path / "summary.csv")
    assert set(s[s.group == "split"].value) == {"test_seeds", "test_families"}


@pytest.mark.parametrize("argv,needle", [
    (["eval", "--agent", "robot", "--out", "{tmp}/e"], "unknown agent 'robot'"),
    (["eval", "--agent", "hf:{tmp}", "--out", "{tmp}/e"], "not a model folder"),
    (["eval", "--agent", "a=oracle", "--agent", "a=null", "--out", "{tmp}/e"], "two agents are labelled 'a'"),
    (["eval", "--suite", "{tmp}/missing", "--out", "{tmp}/e"], "missing"),
    (["eval", "--suite", "{split}:holdout", "--out", "{tmp}/e"], "unknown split 'holdout'"),
    (["eval", "--suite", "{tmp}/bad_split.yaml", "--out", "{tmp}/e"], "both held out"),
    (["eval", "--out", "{tmp}/file.json", "-k", "1"], "file.json"),
    (["rollout", "--specs", "examples", "--store", "{tmp}/file.json"], "file.json"),
    (["rollout", "--specs", "examples", "--agent", "openai", "--store", "{tmp}/s"], "unknown agent 'openai'"),
    (["curate", "--store", "{tmp}/nostore", "--out", "{tmp}/ds"], "no trajectory store"),
    (["curate", "--store", "{tmp}/empty", "--out", "{tmp}/ds"], "has no episodes"),
])
def test_stage_errors_are_one_line(argv, needle, tmp_path, capsys):
    (tmp_path / "file.json").write_text("{}"); (tmp_path / "empty").mkdir()
    (tmp_path / "bad_split.yaml").write_text("test_families: [offboarding]\ntrain_families: [offboarding, news_digest]\n")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{split}", QUICK_SPLIT) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle.replace("{tmp}", str(tmp_path)) in err and "Traceback" not in err, err


def test_curate_bad_threshold_and_contaminated_suite(tmp_path, capsys, monkeypatch):
    specs, store = _example_dir(tmp_path, 1), tmp_path / "store"
    assert main(["rollout", "--specs", str(specs), "--store", str(store), "--quiet"]) == 0
    assert main(["curate", "--store", str(store), "--out", str(tmp_path / "ds"), "--threshold", "high"]) == 2
    assert "--threshold must be 'passed' or a number" in capsys.readouterr().err
    from coworkenv.synthesis import ProceduralGenerator
    orig = ProceduralGenerator.generate
    monkeypatch.setattr(ProceduralGenerator, "generate", lambda self, fam, seed, d="easy", **kw:
                        orig(self, fam, 0, d, **kw).model_copy(update=dict(id=f"{fam}-{d}-{seed:05d}")))
    assert main(["eval", "--suite", f"{QUICK_SPLIT}:test_seeds", "--agent", "oracle", "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert "contamination:" in err and "near-duplicate" in err and not (tmp_path / "e").exists()


def test_eval_with_the_tiny_model(tiny_model_path, tmp_path, capsys):
    specs = _example_dir(tmp_path, 2)
    assert main(["eval", "--suite", str(specs), "--agent", f"tiny=hf:{tiny_model_path}", "--agent", "oracle", "-k", "1",
                 "--max-new-tokens", "8", "--out", str(tmp_path / "e"), "--quiet", "--n-boot", "100"]) == 0
    res = pd.read_csv(tmp_path / "e" / "results.csv", keep_default_na=False)
    assert set(res.agent) == {"tiny", "oracle"} and len(res) == 4
    assert not res[res.agent == "tiny"].passed.any()                             # random weights solve nothing


def test_main_default_is_unchanged_by_pipeline_flags(capsys):
    with pytest.raises(SystemExit): main(["main", "--help"])
    out = capsys.readouterr().out
    assert "--pipeline" in out and "--quick" in out and "default: runs/main" in out


def test_quick_pipeline_end_to_end(tmp_path, capsys, tiny_model_path, monkeypatch):
    "`coworkenv main --pipeline --quick`: every stage, the tiny model, a before/after table on held-out families."
    import coworkenv.models as M
    monkeypatch.setattr(M, "build_tiny_model", lambda path=None, seed=0: tiny_model_path)   # the session's tiny model
    # an SFT budget that the first step reaches: training stops there (1 of the preset's 4 steps) and the run goes on
    assert main(["main", "--pipeline", "--quick", "--out", str(tmp_path), "--quiet", "--sft-minutes", "1e-6"]) == 0
    out = capsys.readouterr().out
    for step in ("1/6 synthesize", "2/6 validate", "3/6 teach", "4/6 curate", "5/6 SFT", "6/6 evaluate", "before / after SFT",
                 "stopped by the SFT time budget (1e-06 min) after 1 of 4 steps"):
        assert step in out, step
    m = json.loads((tmp_path / "sft" / "sft_result.json").read_text())["metrics"]
    assert (m["steps"], m["planned_steps"], m["stopped_by_time"]) == (1, 4, True)
    t = pd.read_csv(tmp_path / "before_after.csv", keep_default_na=False)
    assert list(t.agent) == ["base", "pocketworker"] * 2 and set(t.split) == {"test_families", "test_seeds"}
    assert {"mean", "general", "multi-turn", "pass^k", "strict success", "Δ mean (paired)", "Δ multi-turn (paired)"} <= set(t.columns)
    res = pd.read_csv(tmp_path / "eval" / "results.csv", keep_default_na=False)
    assert set(res.workflow[res.split == "test_families"]) == {"offboarding", "vendor_payment"}
    card = json.loads((tmp_path / "curated" / "data_card.json").read_text())
    assert not {"offboarding", "vendor_payment"} & set(card["per_family"])        # held-out families never taught
    assert (tmp_path / "sft" / "final" / "config.json").is_file() and (tmp_path / "contamination.csv").is_file()
    assert (tmp_path / "specs" / "DONE").is_file()  # the whole validated split: rl_dynamics.py --specs can reuse it
    assert (tmp_path / "before_after.md").read_text().startswith("| agent | split |")


def test_every_help_text_renders(capsys):
    "`coworkenv --help` and every subcommand's `--help` print (argparse %-formats help texts: a bare `%` breaks them)."
    import argparse
    from coworkenv.cli import parser
    p = parser()
    with pytest.raises(SystemExit) as e: p.parse_args(["--help"])
    assert e.value.code == 0
    subs = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    for name, sp in subs.choices.items():
        assert sp.format_help(), name
    assert "eval" in capsys.readouterr().out


def test_turn_budget_caps_at_plan_length_plus_slack():
    from coworkenv.cli import turn_budget
    from coworkenv.core import load_spec
    from coworkenv.synthesis import synthesize
    s = synthesize(n=1, seed=0, progress=False)[0]
    capped = turn_budget(s, 3)
    assert capped.limits.max_turns == min(s.limits.max_turns, len(s.solution) + 3) < s.limits.max_turns
    assert s.limits.max_turns > capped.limits.max_turns and capped.solution == s.solution  # a copy: the spec is unchanged
    assert turn_budget(s, 10_000) is s  # never raised above the spec's own limit
