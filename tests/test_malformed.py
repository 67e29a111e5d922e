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


# ---- issue 7 §3: a seeded fuzzer of degenerate model output ---------------------------------------------------------
import math, random, time
from coworkenv.core import Check, Message, TaskSpec, ToolCall, Trajectory, UserFact, UserSpec, MAX_JSON_DEPTH

N_FUZZ = 10_000
TOOL_NAMES = sorted({t for s in EXAMPLES for t in s.tools})

def deep_text(rng, depth, closed):
    "JSON text nested `depth` levels (objects or arrays), closed or cut off mid-way."
    opener = rng.choice(['{"a": ', '[', '{"x": [', '{"' + "k" * rng.randint(1, 3) + '": '])
    s = opener * depth + rng.choice(['1', '"v"', 'null', '{}'])
    if closed: s += "".join(']' if ch == '[' else '}' for ch in reversed("".join(c for c in opener * depth if c in '[{')))
    return s

def deep_value(rng, depth):
    v = rng.choice([1, "v", None, {}])
    for i in range(depth): v = {"a": v} if i % 3 else [v]
    return v

# Degenerate values are built once and drawn from pools (the environment never mutates what the agent passes).
_R = random.Random(99)
DEEP_TEXTS = [deep_text(_R, d, closed=c) for d in (MAX_JSON_DEPTH + 1, 100, 1000, 3000) for c in (True, False)]
DEEP_VALUES = [deep_value(_R, d) for d in (MAX_JSON_DEPTH + 1, 300, 1000, 2000)]
OK_NESTED = [deep_text(_R, d, closed=True) for d in (1, 5, MAX_JSON_DEPTH - 3)]
SURROGATES = ["\ud800", "\udfff", "a\udc80b", "\ud83d", "x\ud800\ud800y"]
HUGE = ['{"n": ' + "9" * 5000 + '}', '{"body": "' + "y" * 100_500 + '"}']
ODD_VALUES = [float("nan"), float("inf"), -float("inf"), 10 ** 90, 10 ** 600, -(10 ** 400), {1, 2}, b"\xff\xfe", object(), (1, 2),
              *SURROGATES, "x" * 40, 3.5, True, None, {"nested": deep_value(_R, 20)}, {(1, 2): "tuple key"}, {5: "int key"},
              *DEEP_VALUES]
CONTENTS = [None, "", "ok", "What is the budget?\ud800", 5, ["a", {"b": 1}], *DEEP_VALUES, *SURROGATES]
HUGE_CONTENT = "z" * 250_000  # over MAX_TEXT_CHARS: cut, with a note

def odd_value(rng): return rng.choice(ODD_VALUES)

def odd_args(rng):
    k = rng.randrange(12)
    if k == 0: return rng.choice(DEEP_TEXTS)
    if k == 1: return rng.choice(DEEP_VALUES)
    if k == 2: return rng.choice(OK_NESTED)
    if k == 3: return HUGE[0] if rng.random() < 0.9 else HUGE[1]
    if k == 4: return rng.choice(['{"n": NaN}', '{"n": Infinity}', '{"to": "\\ud800"}', '{"a": "\\udfff\\ud800"}', '{"a": -Infinity}'])
    if k == 5: return {rng.choice(["to", "id", "amount", "extra", "title"]): odd_value(rng) for _ in range(rng.randint(1, 4))}
    if k == 6: return rng.choice(SURROGATES) + "{"
    if k == 7: return "{" * rng.randint(1, 5) + '"a' + rng.choice(SURROGATES)
    if k == 8: return '{"body": "short", "n": 1e999}'
    if k == 9: return rng.choice([[1, 2], 42, None, 3.5, ["deep", DEEP_VALUES[1]]])
    if k == 10: return {"extra_nested": rng.choice(DEEP_VALUES + [deep_value(_R, MAX_JSON_DEPTH - 3)]), "x": 1}
    return rng.choice(["", "   ", "{not json", "[]", "null", '{"a": 1', "\x00\x01"])

MESSAGE_JUNK = [None, 42, 3.5, ["list"], object(), b"bytes", *DEEP_VALUES]
ROLES = ["assistant", "assistant", "assistant", "user", "system", "tool", "bogus", None, 7, "\ud800"]
CALL_IDS = ["c1", "c2", None, 5, "\udc00", ""]
NAMES = TOOL_NAMES + [None, 3, "", "no_such_tool", "gmail\ud800"]

def odd_message(rng):
    "One malformed assistant message: odd roles, contents, tool calls, ids and names; several call shapes per message."
    k = rng.randrange(10)
    if k == 0: return rng.choice(MESSAGE_JUNK)
    if k == 1: return rng.choice(SURROGATES) * rng.randint(1, 3) + "?"
    if k == 2:  # a Message object (a user-role one now and then), tool calls built directly
        tcs = [ToolCall(id=f"c{i}", name=rng.choice(TOOL_NAMES), arguments=rng.choice([{"a": 1}, "{bad", {"d": DEEP_VALUES[0]}]))
               for i in range(rng.randint(0, 2))]
        return Message(role=rng.choice(["assistant", "user", "tool"]), content=rng.choice([None, "hi", "\ud800?"]), tool_calls=tcs)
    calls = [{"id": rng.choice(CALL_IDS), "type": "function", "function": {"name": rng.choice(NAMES), "arguments": odd_args(rng)}}
             for _ in range(rng.choice([0, 1, 1, 2, 3]))]
    if rng.random() < 0.1: calls = rng.choice(["junk", 5, {"function": {}}, [None, "x"], DEEP_VALUES[1]])
    content = HUGE_CONTENT if rng.random() < 0.005 else rng.choice(CONTENTS)
    return {"role": rng.choice(ROLES), "content": content, "tool_calls": calls}

def fuzz_specs():
    "Every example, plus each as a Claw-Eval-compatible task (extra arguments dropped, bad JSON -> {})."
    out = list(EXAMPLES)
    out += [s.model_copy(update={"id": s.id + "-claweval", "compat": "claweval"}) for s in EXAMPLES]
    return out

def light_spec(compat="coworkenv"):
    "A cheap-to-grade task over the examples' services and tools (two checks, two user facts), to push many messages fast."
    services = {n: fixture_for(n) for n in ("gmail", "todo", "calendar")}
    return TaskSpec(id=f"fuzz-light-{compat}", request="Please tidy up my inbox and to-dos.", services=services,
                    tools=sorted({t for s in EXAMPLES for t in s.tools if t.split("_")[0] in services}), compat=compat,
                    user=UserSpec(facts=[UserFact(key="budget_limit", value="500 USD"), UserFact(key="room", value="Atlas")], max_rounds=50),
                    checks=[Check(id="sent", type="tool_called", params={"tool": "gmail_send_message"}),
                            Check(id="no_delete", type="tool_not_called", kind="safety", params={"tool": "calendar_delete_event"})])

def test_fuzz_malformed_messages_10000():
    "10,000 generated malformed assistant messages: 0 escaped exceptions, 0 trajectories that do not save and reload."
    rng = random.Random(1234)
    specs, n_msgs, escaped, unsaveable, episodes, rejected = fuzz_specs(), 0, [], [], 0, 0
    t0 = time.perf_counter()
    envs = [CoworkEnv(s, error_rate=0.1, seed=i) for i, s in enumerate(specs)]
    light = [CoworkEnv(light_spec(c), error_rate=0.1, max_turns=40) for c in ("coworkenv", "claweval")]
    def close(env):
        nonlocal episodes
        episodes += 1
        try:
            t = env.trajectory()
            back = Trajectory.from_json(t.to_json())
            assert len(back.messages) == len(t.messages) and back.grade is not None
        except Exception as e: unsaveable.append(f"{env.spec.id}: {type(e).__name__}: {str(e)[:200]}")
    while n_msgs < N_FUZZ:
        env = rng.choice(light if rng.random() < 0.75 else envs); env.reset(seed=rng.randrange(1000))  # a quarter on the examples
        for _ in range(rng.randint(1, 30)):
            msg = odd_message(rng); n_msgs += 1
            try:
                n = len(env.dispatches); r = env.step(msg)
                rejected += sum(1 for d in env.dispatches[n:] if d.status == 400)
                assert len([m for m in r.messages if m.role == "tool"]) == len(env.dispatches) - n
            except Exception as e: escaped.append(f"{env.spec.id}: {type(e).__name__}: {str(e)[:200]}")
            if env.done: break
        close(env)
    secs = time.perf_counter() - t0
    print(f"fuzz: {n_msgs} malformed messages, {episodes} episodes, {rejected} rejected calls, "
          f"{len(escaped)} escaped exceptions, {len(unsaveable)} unsaveable trajectories, {secs:.1f}s")
    assert escaped == [], escaped[:5]
    assert unsaveable == [], unsaveable[:5]

@pytest.mark.parametrize("args", [deep_text(random.Random(0), 1000, closed=True), deep_text(random.Random(1), 1000, closed=False),
                                  deep_text(random.Random(2), 5000, closed=False), deep_value(random.Random(3), 1200)],
                         ids=["closed-1000", "unterminated-1000", "unterminated-5000", "dict-1200"])
@pytest.mark.parametrize("compat", ["coworkenv", "claweval"])
def test_deep_nesting_is_an_error_result_and_atomic(args, compat):
    "A deeply nested argument is an error result for that call; the other calls of the turn run; grade() and saving work."
    spec = next(s for s in EXAMPLES if "gmail" in s.services).model_copy(update={"compat": compat})
    env = CoworkEnv(spec); env.reset()
    tool = next(t for t in spec.tools if t.startswith("gmail_list"))
    r = env.step({"role": "assistant", "tool_calls": [
        {"id": "a", "function": {"name": tool, "arguments": {"extra": args} if not isinstance(args, str) else args}},
        {"id": "b", "function": {"name": tool, "arguments": "{}"}}]})
    first, second = r.messages
    assert first.content.startswith("Error") and "nested deeper than" in first.content, first.content[:200]
    assert env.dispatches[0].status == 400 and isinstance(env.dispatches[0].arguments, str) and len(env.dispatches[0].arguments) <= 2000
    assert env.dispatches[1].ok, second.content[:200]
    env.grade()
    t = Trajectory.from_json(env.trajectory().to_json())
    assert t.dispatches[0].status == 400

def test_claweval_dropped_nested_extra_argument_cannot_break_grading():
    "Claw-Eval tasks drop extra arguments; an accepted one nested just under the bound still grades and saves."
    spec = next(s for s in EXAMPLES if "gmail" in s.services).model_copy(update={"compat": "claweval"})
    env = CoworkEnv(spec); env.reset()
    tool = next(t for t in spec.tools if t.startswith("gmail_list"))
    env.step({"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": tool, "arguments": {"x": deep_value(random.Random(0), MAX_JSON_DEPTH - 2)}}}]})
    assert env.dispatches[0].ok
    for _ in range(3): env.grade()
    Trajectory.from_json(env.trajectory().to_json())

def test_lone_surrogates_are_saveable():
    spec = EXAMPLES[0]; env = CoworkEnv(spec); env.reset()
    r = env.step({"role": "assistant", "content": "Sure\ud800", "tool_calls": [{"id": "x\udc00", "function": {"name": spec.tools[0], "arguments": '{"q": "\\ud800"}'}}]})
    assert "lone surrogate" in r.info["error"] and r.messages[0].content.startswith("Error") and "lone surrogate" in r.messages[0].content
    assert env.messages[-2].content == "Sure\ufffd"
    Trajectory.from_json(env.trajectory().to_json())

@pytest.mark.parametrize("role", ["user", "system", "tool"])
def test_dict_messages_with_other_roles_are_noted_like_messages(role):
    "A dict with role user/system/tool is handled like a `Message` with that role: recorded as the agent's turn, with a note."
    spec = EXAMPLES[0]
    for msg in ({"role": role, "content": "hello"}, Message(role=role, content="hello")):
        env = CoworkEnv(spec); env.reset()
        r = env.step(msg)
        assert f"role {role!r}" in r.info["error"], r.info
        assert env.messages[2].role == "assistant" and env.problems and env.problems[0]["turn"] == 1
