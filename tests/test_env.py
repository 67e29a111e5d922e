"Environment behaviour: determinism, the user simulators, error injection, limits, misuse, LLM paths on a real server."
from pathlib import Path
import pytest

from coworkenv.core import Check, FollowUp, Message, Step, TaskSpec, ToolCall, UserFact, UserSpec, load_specs
from coworkenv.env import CoworkEnv, EnvError, LLMUser, ScriptedUser
from coworkenv.agents import OracleAgent, NullAgent, run_episode
from coworkenv.checks import LLMJudge

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
    judge = LLMJudge(base_url=tiny_server.base_url, model=tiny_server.model, api_key="none")
    score, reply = judge("Did the assistant submit the report?", env.messages)
    assert 0.0 <= score <= 1.0 and isinstance(reply, str)

def test_llm_user_error_ends_conversation(staged):
    user = LLMUser(staged.user, base_url="http://127.0.0.1:9/v1", model="none", api_key="none")
    env = CoworkEnv(staged, user=user); env.reset()
    r = env.step(say("What is the budget?"))
    assert r.done and user.errors
