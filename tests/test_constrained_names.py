"The constrained-tool-names experiment script: the whole path with the tiny model, resume, protocol check, call counts."
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import constrained_names  # noqa: E402


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("constrained_names") / "run"
    constrained_names.main(["--quick", "--out", str(out)])
    return out


def test_quick_run_writes_both_modes(quick_run):
    df = pd.read_csv(quick_run / "results.csv")
    assert sorted(df.agent.unique()) == ["constrained", "constrained_keys", "free"]
    assert df.groupby("agent").spec_id.nunique().tolist() == [2, 2, 2]
    t = pd.read_csv(quick_run / "table.csv")
    assert list(t["mode"]) == ["free", "constrained", "constrained_keys"]
    assert {"failed: tool not offered", "failed: arguments not valid JSON", "failed: arguments break the schema",
            "failed: error answer", "failed calls",
            "completion", "robustness"} <= set(t.columns)
    s = json.loads((quick_run / "summary.json").read_text())
    assert [(m, d["tasks"]) for m, d in s["deltas"].items()] == [("constrained", 2), ("constrained_keys", 2)]
    meta = json.loads((quick_run / "experiment.json").read_text())
    assert [r["mode"] for r in meta["runs"]] == ["free", "constrained", "constrained_keys"] and len(meta["weights_sha256"]) == 64


def test_a_rerun_resumes_and_a_torn_line_is_rerun(quick_run):
    f = quick_run / "episodes" / "constrained.jsonl"
    lines = f.read_text().splitlines()
    f.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # killed mid-write of the second episode
    constrained_names.main(["--quick", "--out", str(quick_run)])
    again = [json.loads(x) for x in f.read_text().splitlines()]
    assert [(r["spec_id"], r["trial"]) for r in again] == [(json.loads(x)["spec_id"], json.loads(x)["trial"]) for x in lines]
    meta = json.loads((quick_run / "experiment.json").read_text())
    assert [r["episodes"] for r in meta["runs"] if r["mode"] == "constrained"] == [2, 1]  # only the torn one ran again
    assert len((quick_run / "episodes" / "free.jsonl").read_text().splitlines()) == 2  # nothing duplicated


def test_another_setting_is_refused(quick_run):
    with pytest.raises(SystemExit, match="another setting"):
        constrained_names.main(["--quick", "--out", str(quick_run), "--turn-slack", "3"])


def test_call_stats_counts_tools_not_offered_and_failed_calls():
    traj = {"tools": [{"name": "chat_read_messages"}, {"name": "helpdesk_get_ticket"}],
            "dispatches": [
                {"turn": 1, "tool_call_id": "a", "tool": "helpdesk_get_ticket", "arguments": {}, "status": 200, "body": {"ok": 1}},
                {"turn": 2, "tool_call_id": "b", "tool": "helpdesk_read_messages", "arguments": {}, "status": 404,
                 "body": {"error": "unknown tool 'helpdesk_read_messages'"}},
                {"turn": 3, "tool_call_id": "c", "tool": "helpdesk_get_ticket", "arguments": {}, "status": 200,
                 "body": {"error": "Ticket 1 not found"}}]}
    traj["dispatches"].append({"turn": 4, "tool_call_id": "d", "tool": "chat_read_messages", "arguments": {"ticket_id": "1"},
                               "status": 422, "body": {"detail": [{"type": "missing", "loc": ["body", "channel_id"]}]}})
    traj["dispatches"].append({"turn": 5, "tool_call_id": "e", "tool": "chat_read_messages", "arguments": '{"channel_id": "C-',
                               "status": 400, "body": {"error": "arguments of 'chat_read_messages' are not valid JSON"}})
    assert constrained_names.call_stats(traj) == dict(calls=5, unknown_calls=1, failed_calls=4, malformed_calls=1,
                                                      invalid_args_calls=1, error_answer_calls=1)
    assert constrained_names.call_stats({"tools": [], "dispatches": []}) == dict(
        calls=0, unknown_calls=0, failed_calls=0, malformed_calls=0, invalid_args_calls=0, error_answer_calls=0)
