"""Property-based robustness: thousands of malformed tool calls and agent messages thrown at every service and at
the environment. No exception escapes; every rejected call gets an error result and a log entry; rejected calls
leave the workspace (records and Claw-Eval audit `calls`) unchanged."""
import json
from pathlib import Path
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from coworkenv.core import load_specs
from coworkenv.services import SERVICES
from coworkenv.workspace import Workspace
from coworkenv.env import CoworkEnv, EnvError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = load_specs(ROOT / "data" / "examples")

def fixture_for(service):
    "Records for a service from the first example spec that has it (else empty)."
    for s in EXAMPLES:
        if service in s.services: return s.services[service]
    return []

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                         st.text(max_size=30))
json_values = st.recursive(json_scalars, lambda c: st.one_of(st.lists(c, max_size=4),
                           st.dictionaries(st.text(max_size=10), c, max_size=4)), max_leaves=12)

def arguments_for(tools):
    "Argument objects near the real schemas (right names, wrong/odd values), plus junk of every shape."
    names = sorted({p for t in tools for p in t.parameters.get("properties", {})}) or ["x"]
    near = st.dictionaries(st.sampled_from(names + ["extra_field", ""]), json_values, max_size=5)
    raw = st.one_of(st.text(max_size=40), st.just("{not json"), st.just(""), st.just("[]"), st.just("null"))
    return st.one_of(near, near, raw, json_values)

SERVICE_NAMES = sorted(SERVICES)

@pytest.mark.parametrize("service", SERVICE_NAMES)
def test_malformed_tool_calls_never_escape(service):
    ws = Workspace({service: fixture_for(service)})
    tools = ws.tool_specs()
    names = st.one_of(st.sampled_from([t.name for t in tools]), st.text(max_size=20), st.none(), st.integers())

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(name=names, args=arguments_for(tools))
    def run(name, args):
        snap, calls = ws.snapshot(), sum(len(a["calls"]) for a in ws.audit().values())
        n_log = len(ws.log)
        r = ws.call(name, args)
        assert isinstance(r.status, int) and isinstance(r.text, str)
        assert len(ws.log) == n_log + 1 and ws.log[-1]["status"] == r.status
        if r.status >= 400:
            assert r.text, "an error result must say something"
            assert ws.snapshot() == snap, f"rejected call {name}({args!r}) changed the workspace"
            assert sum(len(a["calls"]) for a in ws.audit().values()) == calls
        json.dumps(r.body, default=str)  # the body is JSON-serialisable
    run()

tool_call = st.one_of(
    st.fixed_dictionaries({"id": st.one_of(st.text(max_size=8), st.none(), st.integers()),
                           "type": st.just("function"),
                           "function": st.fixed_dictionaries({"name": st.one_of(st.text(max_size=20), st.none(), st.integers(),
                                                                                st.sampled_from(["gmail_send_message", "expenses_pay_claim", "todo_list_tasks"])),
                                                              "arguments": st.one_of(st.text(max_size=40), json_values)})}),
    json_values)
assistant_messages = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["assistant", "user", "tool", "bogus"]),
                           "content": st.one_of(st.none(), st.text(max_size=60), json_values),
                           "tool_calls": st.one_of(st.none(), st.lists(tool_call, max_size=3), json_values)}),
    st.text(max_size=60), json_values)

@pytest.mark.parametrize("spec", EXAMPLES[:4], ids=lambda s: s.id)
def test_malformed_agent_messages_never_escape(spec):
    env = CoworkEnv(spec, error_rate=0.2)
    env.reset()

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(msg=assistant_messages)
    def run(msg):
        if env.done: env.reset()
        n = len(env.dispatches)
        r = env.step(msg)
        assert isinstance(r.done, bool)
        new = env.dispatches[n:]
        tool_msgs = [m for m in r.messages if m.role == "tool"]
        assert len(tool_msgs) == len(new)  # every call answered
        for d, m in zip(new, tool_msgs):
            assert m.tool_call_id == d.tool_call_id
            if d.status >= 400: assert m.content.startswith(("Error", "{")), m.content
        env.trajectory().to_json()  # always serialisable
    run()
    env.reset()
    with pytest.raises(EnvError):
        e2 = CoworkEnv(spec); e2.step("hi")
