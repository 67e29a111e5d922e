"The ClawMark SFT-extension experiment script: scores it reports (checked against the harness), text-reachable scores, resume, report, bad input, and the quick model path."
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from coworkenv.clawmark import load_clawmark_tasks, media_report, run_clawmark

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import clawmark_sft  # noqa: E402

SUITE = ROOT / "data" / "clawmark_examples"
BASELINE_ARGS = ["--agent", "oracle", "--agent", "null", "--agent", "shortcut", "-k", "1", "--quiet"]


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    out = tmp_path_factory.mktemp("clawmark_sft") / "run"
    assert clawmark_sft.main(BASELINE_ARGS + ["--out", str(out)]) == 0
    return out


def episodes(out): return [json.loads(l) for l in (out / "episodes.jsonl").read_text().splitlines()]


def test_scores_are_the_harness_scores(baselines):
    tasks = load_clawmark_tasks(SUITE)
    eps = episodes(baselines)
    assert len(eps) == 3 * len(tasks) == len({(e["agent"], e["task_id"], e["trial"]) for e in eps})
    for agent in ("oracle", "null", "shortcut"):
        want = {r["task_id"]: r for r in run_clawmark(tasks, agent, k=1)}
        for e in (e for e in eps if e["agent"] == agent):
            assert e["score"] == pytest.approx(want[e["task_id"]]["score"])
            assert e["stages"] == pytest.approx(want[e["task_id"]]["stages"])
    oracle = [e for e in eps if e["agent"] == "oracle"]
    assert all(e["score"] == 1.0 and e["score_text"] == 1.0 and e["passed"] and e["success"] for e in oracle)
    null = [e for e in eps if e["agent"] == "null"]
    assert not any(e["passed"] or e["success"] for e in null) and max(e["score"] for e in null) < 0.75
    # the shortcut (day 0 only) is reported as failing stage1 on every task
    assert all(e["stages"]["stage1"] == 0.0 and not e["success"] for e in eps if e["agent"] == "shortcut")


def test_text_reachable_score_leaves_out_media_linked_checkers(baselines):
    tasks = {t.id: t for t in load_clawmark_tasks(SUITE)}
    differs = 0
    for e in episodes(baselines):
        linked = {(c["stage"], c["id"]) for c in media_report(tasks[e["task_id"]], ("text",))["checkers"] if c["media_linked"]}
        assert {(c["stage"], c["id"]) for c in e["checkers"] if c["media_linked"]} == linked
        kept = [c for c in e["checkers"] if not c["media_linked"]]
        w = sum(c["weight"] for c in kept)
        assert e["score_text"] == pytest.approx(sum(c["weight"] for c in kept if c["passed"]) / w)
        differs += e["score_text"] != pytest.approx(e["score"])
    assert differs >= 1  # our examples have media-linked checkers, and some agent's result depends on them


def test_report_tables_and_deltas(baselines):
    t = pd.read_csv(baselines / "table.csv", keep_default_na=False)
    assert list(t.agent) == ["oracle", "null", "shortcut"]  # the first agent is the Δ reference
    assert t.loc[0, "score (upstream)"] == "100.0 [100.0, 100.0]" and t.loc[0, "Δ score (upstream)"] == "—"
    m = json.loads((baselines / "summary.json").read_text())
    null = pd.DataFrame(episodes(baselines)).query("agent == 'null'")
    assert m["scores"]["null"]["score"] == round(100 * null.score.mean(), 1)
    assert m["scores"]["null"]["delta_score"]["delta"] == pytest.approx(m["scores"]["null"]["score"] - 100, abs=0.11)
    assert m["scores"]["null"]["delta_score"]["hi"] < 0  # the do-nothing agent is below the oracle on every task
    assert m["media_linked_weight_share"]["finance_receipt_audit"] > 0
    s = pd.read_csv(baselines / "stages.csv")
    assert {"stage0", "stage1", "final"} <= set(s.columns)
    assert "shortcut" in (baselines / "summary.md").read_text() and (baselines / "fig_scores.html").is_file()


def test_rerun_resumes_and_repairs_a_torn_line(baselines, tmp_path):
    out = tmp_path / "run"
    import shutil
    shutil.copytree(baselines, out)
    lines = (out / "episodes.jsonl").read_text().splitlines()
    assert clawmark_sft.main(BASELINE_ARGS + ["--out", str(out)]) == 0
    assert (out / "episodes.jsonl").read_text().splitlines() == lines  # nothing run again
    (out / "episodes.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])  # killed while writing the last row
    assert clawmark_sft.main(BASELINE_ARGS + ["--out", str(out)]) == 0
    again = episodes(out)
    assert len(again) == len(lines)
    last = json.loads(lines[-1])
    assert [e for e in again if (e["agent"], e["task_id"]) == (last["agent"], last["task_id"])][0]["score"] == last["score"]


def test_more_trials_extend_a_run(baselines, tmp_path):
    import shutil
    out = tmp_path / "run"
    shutil.copytree(baselines, out)
    assert clawmark_sft.main(["--agent", "null", "-k", "2", "--quiet", "--out", str(out)]) == 0
    eps = episodes(out)
    assert sorted(e["trial"] for e in eps if e["agent"] == "null") == [0] * 6 + [1] * 6 and len(eps) == 24
    t = pd.read_csv(out / "table.csv", keep_default_na=False)
    assert dict(zip(t.agent, t.k)) == {"oracle": 1, "null": 2, "shortcut": 1}
    assert json.loads((out / "experiment.json").read_text())["k"] == 2


def test_bad_input(tmp_path, monkeypatch, baselines):
    with pytest.raises(SystemExit):  # other settings in the same folder would mix two experiments
        clawmark_sft.main(["--agent", "oracle", "--max-turns", "5", "--quiet", "--out", str(baselines)])
    with pytest.raises(SystemExit):
        clawmark_sft.main(["--agent", "oracle", "--agent", "oracle", "--quiet", "--out", str(tmp_path / "dup")])
    monkeypatch.setattr(clawmark_sft, "PW_DEFAULT", tmp_path / "no_model")
    with pytest.raises(SystemExit):  # the default PocketWorker has not been trained here
        clawmark_sft.main(["--out", str(tmp_path / "x"), "--quiet"])
    with pytest.raises(FileNotFoundError, match="no episodes saved"):
        clawmark_sft.report(tmp_path)


def test_quick_path_runs_the_model_agents(tmp_path):
    out = tmp_path / "quick"
    assert clawmark_sft.main(["--quick", "--quiet", "--out", str(out)]) == 0
    eps = episodes(out)
    assert sorted({e["agent"] for e in eps}) == ["base", "pocketworker"]
    assert {e["task_id"] for e in eps} == set(clawmark_sft.QUICK["tasks"]) and len(eps) == 4
    # every episode ended with a reason and ran every day: finance_receipt_audit's first prompt (~4.2k tokens of the
    # tiny model's tokenizer) outgrows its 4,096-token window, and each of its days then fails (upstream goes on)
    assert all(e["end_reason"] != "running" and e["stages_run"] == e["stages_total"] for e in eps)
    full = [e for e in eps if e["end_reason"] == "context_overflow"]
    assert {e["task_id"] for e in full} == {"finance_receipt_audit"} and all(e["turns"] == 0 for e in full)
    trajs = (out / "trajectories" / "base.jsonl").read_text().splitlines()
    assert len(trajs) == 2 and all(json.loads(t)["info"]["clawmark"]["task_id"] for t in trajs)
    assert json.loads((out / "summary.json").read_text())["quick"] is True
    # a stage that never ran is a blank cell: the figure still draws from the CSV as the notebook reads it
    fig = clawmark_sft.scores_figure(pd.read_csv(out / "results.csv", keep_default_na=False), ["base", "pocketworker"])
    assert [t.name for t in fig.data] == ["base", "pocketworker"]


class FullAfter:
    "The oracle of `task` for its first `n` turns; then its context window is full (as a small model's fills)."
    def __new__(cls, task, n:int):
        from coworkenv.agents import Agent, ContextOverflow, as_messages
        from coworkenv.clawmark import clawmark_agent
        oracle = clawmark_agent("oracle", task)
        class _Full(Agent):
            name = "full"
            def act(self, messages, tools=None):
                if sum(m.role == "assistant" for m in as_messages(messages)) >= n: raise ContextOverflow("the prompt is 9,000 tokens")
                return oracle.act(messages, tools)
        return _Full()


def test_replay_overflows_reruns_cut_episodes_without_the_model(tmp_path):
    "An episode saved when an overflow still ended the whole episode is replayed: every day's checkers run, same prefix."
    from coworkenv.agents import run_episode
    from coworkenv.clawmark import ClawMarkEnv
    task = next(t for t in load_clawmark_tasks(SUITE) if t.id == "research_reading_digest")
    class OldEnv(ClawMarkEnv): agent_failed = None  # the behaviour before: an overflow ended the episode on its day
    n = len(task.solution["stage0"]) - 1  # day 0's tool calls done, its reply never written
    old = run_episode(OldEnv(task, seed=0, agent_media=("text",)), FullAfter(task, n))
    assert old.end_reason == "context_overflow" and old.info["clawmark"]["stages_run"] == 0 < len(task.stages)
    out = tmp_path / "run"; (out / "trajectories").mkdir(parents=True)
    (out / "experiment.json").write_text(json.dumps(dict(suite=str(SUITE), agents=["full"], k=1, max_turns=30, max_new_tokens=256, quick=False)))
    rec = clawmark_sft.episode_record(task, "full", 0, old, 12.5)
    (out / "episodes.jsonl").write_text(json.dumps(rec) + "\n")
    line = old.model_dump_json()
    (out / "trajectories" / "full.jsonl").write_text(line + "\n")
    # a saved trajectory the environment does not reproduce is refused, and nothing is written
    (out / "trajectories" / "full.jsonl").write_text(line.replace('"role":"tool","content":"{', '"role":"tool","content":"{\\"x\\": 1, ', 1) + "\n")
    with pytest.raises(RuntimeError, match="does not reproduce"): clawmark_sft.replay_overflows(out, SUITE)
    assert json.loads((out / "episodes.jsonl").read_text()) == rec
    (out / "trajectories" / "full.jsonl").write_text(line + "\n")
    assert clawmark_sft.main(["--replay-overflows", "--quiet", "--out", str(out)]) == 0
    new = episodes(out)[0]
    want = run_episode(ClawMarkEnv(task, seed=0, agent_media=("text",)), FullAfter(task, n))
    assert new["replayed"] and new["stages_run"] == new["stages_total"] == len(task.stages) and new["seconds"] == 12.5
    assert new["end_reason"] == want.end_reason == "context_overflow" and new["score"] == pytest.approx(want.grade.score)
    assert new["score"] == pytest.approx(want.info["clawmark"]["score"]) and new["score_all"] == pytest.approx(want.info["clawmark"]["score_all_checkers"])
    assert {s["id"]: s["verification_score"] for s in want.info["clawmark"]["stages"]} == new["stages"]
    traj = json.loads((out / "trajectories" / "full.jsonl").read_text())
    assert traj["messages"][:len(old.messages)] == json.loads(line)["messages"] and len(traj["messages"]) > len(old.messages)
    assert clawmark_sft.replay_overflows(out, SUITE) == 0  # nothing left to replay
    assert (out / "table.csv").is_file()


def test_report_is_the_same_from_any_working_directory(baselines, monkeypatch, tmp_path):
    "experiment.json keeps the suite relative to the project: the media shares must not depend on the cwd (the notebook runs in experiments/)."
    want = json.loads((baselines / "summary.json").read_text())["media_linked_weight_share"]
    assert want["finance_receipt_audit"] > 0
    monkeypatch.chdir(tmp_path)
    clawmark_sft.report(baselines)
    assert json.loads((baselines / "summary.json").read_text())["media_linked_weight_share"] == want
