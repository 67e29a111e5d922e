"Environment behaviour: determinism, the user simulators, error injection, limits, misuse, LLM paths on a real server."
from pathlib import Path
import pytest

from coworkenv.core import Check, FollowUp, Message, Step, TaskSpec, ToolCall, UserFact, UserSpec, load_specs
from coworkenv.env import CoworkEnv, EnvError, LLMUser, ScriptedUser
from coworkenv.agents import OracleAgent, NullAgent, run_episode
from coworkenv.checks import LLMJudge
from coworkenv.llm import LLMError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = load_specs(ROOT / "data" / "examples")

def call(name, **args): return Message(role="assistant", tool_calls=[ToolCall(id=f"c_{name}", name=name, arguments=args)])
def say(text): return Message(role="assistant", content=text)

@pytest.fixture
def staged():
    "A two-stage spec: the budget is known at once, the deadline only after the first report is submitted."
    return TaskSpec(id="staged", request="Prepare the quarterly expense report.", now="2026-03-02T09:00:00Z",
        services={"finance": [{"transaction_id": "t1", "date": "2026-02-01", "amount": 120.0, "description": "Taxi"}]},
        tools=["finance_list_transactions", "finance_submit_report"],
        user=UserSpec(facts=[UserFact(key="budget", value="500 USD", aliases=["limit"]),
                             UserFact(key="deadline", value="Friday", stage=1)],
                      followups=[FollowUp(id="change", after_tool="finance_submit_report", stage=1,
                                          message="Actually, please also tell me when it is due.")], max_rounds=4),
        checks=[Check(id="report", type="tool_called", params={"tool": "finance_submit_report"})],
        solution=[Step.ask("budget"), Step.call("finance_submit_report", title="Q1", transactions=["t1"], total_amount=120.0)])

def test_scripted_user_reveals_only_when_asked_and_by_stage(staged):
    env = CoworkEnv(staged); env.reset()
    r = env.step(say("What is the deadline?"))          # stage-1 fact at stage 0: not revealed
    assert r.messages[0].content == staged.user.unknown_reply
    r = env.step(say("Could you tell me the budget limit?"))
    assert "500 USD" in r.messages[0].content
    env.step(call("finance_submit_report", title="Q1", transactions=["t1"], total_amount=120.0))
    r = env.step(say("Submitted. Anything else?"))      # milestone reached: the follow-up fires, stage 1
    assert "due" in r.messages[0].content
    r = env.step(say("When is the deadline?"))
    assert "Friday" in r.messages[0].content
    assert env.user.revealed == {"budget": 2, "deadline": 5}
    r = env.step(say("Great, all done."))
    assert r.done and env.end_reason == "user_done"

def test_scripted_user_max_rounds(staged):
    env = CoworkEnv(staged); env.reset()
    for _ in range(4): assert not env.step(say("Hmm?")).done
    assert env.step(say("Hmm?")).done

def test_max_turns_still_runs_last_calls(staged):
    env = CoworkEnv(staged, max_turns=2); env.reset()
    env.step(call("finance_list_transactions"))
    r = env.step(call("finance_submit_report", title="Q1", transactions=["t1"], total_amount=120.0))
    assert r.done and env.end_reason == "max_turns" and len(env.ws.audit()["finance"]["submitted_reports"]) == 1
    with pytest.raises(EnvError, match="ended"): env.step(say("hi"))

def test_step_before_reset(staged):
    with pytest.raises(EnvError, match="reset"): CoworkEnv(staged).step(say("hi"))

def test_error_injection_rate_and_determinism(staged):
    env = CoworkEnv(staged, error_rate=0.3, seed=7, max_turns=2000); env.reset()
    for _ in range(1000): env.step(call("finance_list_transactions"))
    inj = [d for d in env.dispatches if d.injected]
    assert 230 < len(inj) < 370, len(inj)                  # ~30% of 1000
    assert {d.status for d in inj} == {429, 500}
    assert len(env.ws.audit()["finance"]["calls"]) == 1000 - len(inj)   # injected errors are not in the service audit

@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda s: s.id)
def test_same_seed_same_trajectory(spec):
    a = run_episode(CoworkEnv(spec, seed=3, error_rate=0.3), OracleAgent(spec)).to_json()
    b = run_episode(CoworkEnv(spec, seed=3, error_rate=0.3), OracleAgent(spec)).to_json()
    assert a == b

@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda s: s.id)
def test_oracle_recovers_from_injected_errors(spec):
    t = run_episode(CoworkEnv(spec, seed=1, error_rate=0.3), OracleAgent(spec))
    assert t.grade.completion == 1.0 and t.grade.safety == 1.0, [(i.check_id, i.evidence) for i in t.grade.items if not i.passed]

def test_reset_restores_everything(staged):
    env = CoworkEnv(staged); m0, _ = env.reset(); snap = env.ws.snapshot()
    env.step(call("finance_submit_report", title="Q1", transactions=["t1"], total_amount=120.0))
    m1, _ = env.reset()
    assert m0 == m1 and env.ws.snapshot() == snap and env.dispatches == [] and env.tracker.events == []

def test_llm_user_and_judge_on_real_server(tiny_server, staged):
    "LLMUser and LLMJudge against a real OpenAI-compatible server (the tiny random model: text is junk, the plumbing is real)."
    user = LLMUser(staged.user, base_url=tiny_server.base_url, model=tiny_server.model, api_key="none")
    env = CoworkEnv(staged, user=user); env.reset()
    r = env.step(say("What is the budget?"))
    assert isinstance(r.done, bool) and user.errors == []
    judge = LLMJudge(base_url=tiny_server.base_url, model=tiny_server.model, api_key="none", max_tokens=32)
    try:  # the tiny model's junk rarely contains a score: a reply without one is a judge error (issue 7), not a 0
        score, reply = judge("Did the assistant submit the report?", env.messages)
        assert 0.0 <= score <= 1.0 and isinstance(reply, str)
    except LLMError as e: assert "judge reply" in str(e), e

def test_llm_user_error_ends_conversation(staged):
    "An unreachable endpoint ends the episode as errored (`user_error`, recorded), not as if the user said [DONE]."
    user = LLMUser(staged.user, base_url="http://127.0.0.1:9/v1", model="none", api_key="none", policy=LLMPolicy(timeout=2, max_retries=0))
    env = CoworkEnv(staged, user=user); env.reset()
    r = env.step(say("What is the budget?"))
    assert r.done and user.errors and env.end_reason == "user_error" and env.trajectory().info["errors"][0]["source"] == "user"


# ---- issue 7 §3/§5: atomic turns, recorded user-simulator errors ------------------------------------------------------
import json, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from coworkenv.core import Trajectory
from coworkenv.llm import LLMPolicy
from coworkenv.intents import ONE_AT_A_TIME

def test_turn_is_atomic_when_the_environment_fails(staged, monkeypatch):
    "An exception inside the environment mid-turn (here: the second call's service) rolls the whole turn back."
    env = CoworkEnv(staged); env.reset()
    env.step(call("finance_list_transactions"))
    before = (env.ws.snapshot(), env.ws.audit(), len(env.ws.log), len(env.dispatches), env.ws.clock.ticks, dict(env.tracker.state))
    real, n = env.ws.call, [0]
    def flaky(name, args, turn=0):
        n[0] += 1
        if n[0] == 2: raise RecursionError("maximum recursion depth exceeded")
        return real(name, args, turn=turn)
    monkeypatch.setattr(env.ws, "call", flaky)
    submit = dict(title="Q1", transactions=["t1"], total_amount=120.0)
    r = env.step(Message(role="assistant", tool_calls=[ToolCall(id="a", name="finance_submit_report", arguments=submit),
                                                       ToolCall(id="b", name="finance_list_transactions", arguments={})]))
    assert [m.content.startswith("Error") for m in r.messages] == [True, True] and "RecursionError" in r.info["error"]
    assert (env.ws.snapshot(), env.ws.audit(), len(env.ws.log), env.ws.clock.ticks, dict(env.tracker.state)) == \
           (before[0], before[1], before[2], before[4], before[5])              # nothing of the turn was applied
    assert [d.status for d in env.dispatches[before[3]:]] == [500, 500]
    t = Trajectory.from_json(env.trajectory().to_json())
    assert t.info["errors"][0]["source"] == "env" and t.turns == 2
    monkeypatch.setattr(env.ws, "call", real)                                   # the episode goes on normally
    env.step(Message(role="assistant", tool_calls=[ToolCall(id="c", name="finance_submit_report", arguments=submit)]))
    assert len(env.ws.audit()["finance"]["submitted_reports"]) == 1

def test_user_failure_is_rolled_back_and_recorded(staged):
    class Broken(ScriptedUser):
        def reply(self, text, env):
            self.stage = 99; raise ValueError("simulator bug")
    env = CoworkEnv(staged, user=Broken(staged.user)); env.reset()
    r = env.step(say("How much can I spend?"))
    assert not r.done and "simulator bug" in r.info["error"] and env.user.stage == 0 and env.turn == 1

def test_one_thing_at_a_time(staged):
    env = CoworkEnv(staged); env.reset()
    r = env.step(say("What's the budget limit, and what's the deadline?"))
    assert r.messages[0].content == ONE_AT_A_TIME and env.user.revealed == {}

class FakeChoice:
    def __init__(self, content): self.message = type("M", (), {"content": content})()

class FakeClient:
    "A stand-in OpenAI client: `create` returns or raises what it is given."
    def __init__(self, outcome):
        self.outcome = outcome
        self.chat = type("C", (), {"completions": self})()
    def create(self, **kw):
        if isinstance(self.outcome, Exception): raise self.outcome
        return self.outcome

@pytest.mark.parametrize("outcome,why", [
    (RuntimeError("Error code: 500 - internal server error (key sk-abcdefghijklmnopqrstuvwx)"), "500"),
    (RuntimeError("Error code: 429 - rate limited"), "429"),
    (TimeoutError("Request timed out."), "timed out"),
    (type("R", (), {"choices": []})(), "no choices"),
    ("<html>garbage</html>", "no choices"),
    (type("R", (), {"choices": [FakeChoice(["not", "text"])]})(), "non-text"),
])
def test_llm_user_errors_are_recorded_not_done(staged, outcome, why):
    "Every endpoint failure ends the episode as errored (`user_error`), recorded and redacted, never as [DONE]."
    user = LLMUser(staged.user, model="m", client=FakeClient(outcome))
    env = CoworkEnv(staged, user=user); env.reset()
    r = env.step(say("What is the budget?"))
    assert r.done and env.end_reason == "user_error" and why in r.info["user_error"]
    t = Trajectory.from_json(env.trajectory().to_json())
    assert t.end_reason == "user_error" and t.info["errored"] and why in t.info["errors"][0]["error"]
    assert "sk-abcdefghij" not in t.to_json() and not any(m.role == "user" and "[DONE]" in (m.content or "") for m in t.messages)

def test_llm_user_reply_is_redacted(staged):
    r = type("R", (), {"choices": [FakeChoice("Sure, my key is sk-abcdefghijklmnopqrstuvwx and the budget is 500 USD.")]})()
    env = CoworkEnv(staged, user=LLMUser(staged.user, model="m", client=FakeClient(r))); env.reset()
    env.step(say("What is the budget?"))
    assert "sk-abcdefghij" not in env.trajectory().to_json() and "[REDACTED]" in env.messages[-1].content

class _Handler(BaseHTTPRequestHandler):
    "An OpenAI-compatible endpoint that misbehaves in the way its path says."
    def log_message(self, *a): pass
    def do_POST(self):
        mode = self.path.split("/")[1]
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if mode == "slow": time.sleep(3)
        status, body = {"e500": (500, b'{"error": "boom"}'), "e429": (429, b'{"error": "slow down"}'),
                        "garbage": (200, b"not json at all"), "empty": (200, b'{"id": "x", "object": "chat.completion", "choices": []}'),
                        "slow": (200, b"{}")}[mode]
        try:
            self.send_response(status); self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        except OSError: pass  # the client gave up (the timeout case)

@pytest.fixture(scope="module")
def bad_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True); th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()

@pytest.mark.parametrize("mode", ["e500", "e429", "garbage", "empty", "slow"])
def test_llm_user_on_a_failing_server(staged, bad_server, mode):
    "A real OpenAI client (the shared policy: 0.5 s timeout, no retries) against a failing server: a recorded errored episode."
    user = LLMUser(staged.user, base_url=f"{bad_server}/{mode}/v1", model="m", api_key="none",
                   policy=LLMPolicy(timeout=0.5, max_retries=0))
    env = CoworkEnv(staged, user=user); env.reset()
    t0 = time.perf_counter(); r = env.step(say("What is the budget?"))
    assert time.perf_counter() - t0 < 2.5
    assert r.done and env.end_reason == "user_error" and env.trajectory().info["errors"], r.info

@pytest.mark.parametrize("spec", [s for s in EXAMPLES if s.compat == "coworkenv" and any(st.kind == "call" for st in s.solution)], ids=lambda s: s.id)
def test_env_grades_footprint(spec):
    "Every env with a reference plan grades end state and collateral: the oracle keeps both, doing nothing misses the end state."
    env = CoworkEnv(spec.model_copy(update={"footprint": None}))
    ids = {c.id for c in env.spec.checks}
    assert env.spec.footprint and {"footprint.end_state", "footprint.no_destructive_collateral"} <= ids
    t = run_episode(CoworkEnv(spec), OracleAgent(spec))
    assert t.grade.item("footprint.end_state").passed and t.grade.item("footprint.no_destructive_collateral").passed
    t0 = run_episode(CoworkEnv(spec), NullAgent(spec))
    assert not t0.grade.item("footprint.end_state").passed and not t0.grade.success
