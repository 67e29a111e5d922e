"`coworkenv clawmark import|run`, `coworkenv eval --suite` on ClawMark folders, and our model agents in a `ClawMarkEnv`."
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from coworkenv.cli import main
from coworkenv.clawmark import ClawMarkEnv, load_clawmark_task
from coworkenv.agents import run_episode

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "clawmark_examples"


def test_import_prints_one_line_per_task(capsys):
    assert main(["clawmark", "import", str(EXAMPLES)]) == 0
    out = capsys.readouterr().out
    ids = [p.name for p in sorted(EXAMPLES.iterdir()) if (p / "task.py").is_file()]
    assert ids and all(i in out for i in ids)
    assert "checkers media-linked" in out and f"{len(ids)} task(s) loaded" in out
    assert main(["clawmark", "import", str(EXAMPLES), "--agent-media", "text,image"]) == 0
    assert "0/4 inputs unsupported" in capsys.readouterr().out  # the finance receipt image is readable by a vision agent


def test_import_reports_broken_tasks(tmp_path, capsys):
    shutil.copytree(EXAMPLES / "finance_receipt_audit", tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "task.py").write_text("METADATA = {'id': 'x'}\nPROMPT = 'p'\n")
    assert main(["clawmark", "import", str(tmp_path)]) == 1
    cap = capsys.readouterr()
    assert "finance_receipt_audit" in cap.out and "1 broken" in cap.out
    assert "broken task" in cap.err and "METADATA lacks name, category, environments" in cap.err


def test_missing_folder_is_a_clear_error(tmp_path, capsys):
    assert main(["clawmark", "run", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_run_writes_result_json_per_run(tmp_path, capsys):
    task = EXAMPLES / "finance_receipt_audit"
    assert main(["clawmark", "run", str(task), "--agent", "oracle", "-k", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "avg@2" in out and "mean over 1 task(s): 1.000" in out and '"office_libraries": true' in out
    for run in ("run0", "run1"):
        res = json.loads((tmp_path / "oracle" / "finance_receipt_audit" / run / "result.json").read_text())
        assert list(res) == ["task_id", "score", "execution_time", "stages", "rubric"] and res["score"] == 1.0
        assert [s["id"] for s in res["stages"]] == ["stage0", "stage1", "final"]
        assert (tmp_path / "oracle" / "finance_receipt_audit" / run / "workspace" / "outputs" / "expense_audit.csv").is_file()
    summary = json.loads((tmp_path / "oracle" / "summary.json").read_text())
    assert summary["avg_at_k"]["overall"] == 1.0 and summary["fidelity"]["create_parents_on_upload"] is False


def test_run_with_fidelity_switches(tmp_path, capsys):
    task = EXAMPLES / "pm_sprint_capacity"
    assert main(["clawmark", "run", str(task), "--agent", "oracle", "-k", "1", "--no-office", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "oracle" / "pm_sprint_capacity" / "run0" / "result.json").read_text())
    assert res["score"] < 1.0  # the workbook checkers cannot parse the files without openpyxl
    assert json.loads((tmp_path / "oracle" / "summary.json").read_text())["fidelity"]["office_libraries"] is False


def test_eval_suite_takes_a_clawmark_folder(tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(["eval", "--suite", str(EXAMPLES), "--agent", "oracle", "--agent", "null", "-k", "1", "--out", str(out),
                 "--quiet", "--n-boot", "20"]) == 0
    assert "ClawMark tasks in" in capsys.readouterr().out
    res = pd.read_csv(out / "results.csv", keep_default_na=False)
    assert set(res.agent) == {"oracle", "null"}
    assert (res[res.agent == "oracle"].score == 1.0).all() and (res[res.agent == "null"].score < 0.5).all()


# ---- our model-backed agents run unchanged through the tools ---------------------------------------------------

def fake_openai(seen):
    "An OpenAI-compatible server: day 0 lists the workspace with a native tool call, then every reply is plain text."
    import httpx, openai
    def handle(request):
        body = json.loads(request.content)
        seen.append(body)
        last_user = max(i for i, m in enumerate(body["messages"]) if m["role"] == "user")
        mine = sum(m["role"] == "assistant" for m in body["messages"][last_user:])
        msg = ({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{len(seen)}", "type": "function",
                "function": {"name": "files_list", "arguments": json.dumps({"path": "/workspace/input", "recursive": True})}}]}
               if mine == 0 and last_user == 1 else {"role": "assistant", "content": "Done for today."})
        return httpx.Response(200, json={"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                         "choices": [{"index": 0, "finish_reason": "stop", "message": msg}]})
    return openai.OpenAI(base_url="http://fake/v1", api_key="x", max_retries=0, http_client=httpx.Client(transport=httpx.MockTransport(handle)))


def test_openai_agent_in_a_clawmark_env():
    pytest.importorskip("openai"); pytest.importorskip("httpx")
    from coworkenv.agents import OpenAIAgent
    seen = []
    task = load_clawmark_task(EXAMPLES / "finance_receipt_audit")
    t = run_episode(ClawMarkEnv(task), OpenAIAgent(model="m", client=fake_openai(seen)))
    assert not t.info.get("errored") and t.end_reason == "agent_done"
    assert [d.tool for d in t.dispatches] == ["files_list"] and t.dispatches[0].status == 200
    assert "/workspace/input/receipts/taxi_2027-03-04.png" in t.messages[3].content
    names = {f["function"]["name"] for f in seen[0]["tools"]}
    assert {"files_read", "mail_send", "sheets_write"} <= names and "db_query" not in names  # no notion in this task
    assert seen[0]["messages"][0]["role"] == "system" and "## /workspace/AGENTS.md" in seen[0]["messages"][0]["content"]
    assert 0 < t.grade.score < 0.5  # it did nothing useful: only the red lines and preservation checks hold


def test_hf_agent_in_a_clawmark_env(tiny_model_path):
    from coworkenv.agents import HFAgent
    task = load_clawmark_task(EXAMPLES / "ea_board_review_scheduling")
    agent = HFAgent(tiny_model_path, max_new_tokens=24, batch_size=2)
    t = run_episode(ClawMarkEnv(task, max_turns_per_stage=2), agent)
    assert t.grade is not None and t.end_reason in ("agent_done", "max_turns") and not t.info.get("errored")
    assert [s["id"] for s in t.info["clawmark"]["stages"]][:2] == ["stage0", "stage1"]


def test_run_exits_1_when_every_run_failed(tmp_path, capsys, monkeypatch):
    "An agent that cannot act at all (here: no server behind openai:) fails every run: exit 1 and say so, as claweval run does."
    import socket
    from coworkenv import llm
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()  # a port nothing listens on
    old = llm.default_policy()
    llm.set_default_policy(timeout=5, max_retries=0)
    try:
        rc = main(["clawmark", "run", str(EXAMPLES / "finance_receipt_audit"), "--agent", "openai:m", "-k", "2",
                   "--base-url", f"http://127.0.0.1:{port}/v1"])
    finally: llm.set_default_policy(**old.model_dump())
    err = capsys.readouterr().err
    assert rc == 1 and "2/2 run(s) failed (agent_error)" in err and "every run failed" in err
