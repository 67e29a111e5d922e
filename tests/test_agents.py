"Tests of coworkenv.agents: the text fallback parser, plan executors, OpenAIAgent (real local server), HFAgent, run loops."
import json, re, socket, time

import pytest
from hypothesis import given, settings, HealthCheck, strategies as st

from coworkenv.core import Message, ToolCall, ToolSpec, Step, TaskSpec, UserSpec, UserFact, NegativePlan, Check
from coworkenv.agents import (Agent, AgentError, parse_tool_calls, convert_param, fallback_id, PlanAgent, OracleAgent,
                              NullAgent, ShortcutAgent, OpenAIAgent, HFAgent, run_episode, run_batch,
                              is_transient_error, replace_facts, SUMMARY)

ID_RE = re.compile(r"fallback_[0-9a-f]{12}")
TOOLS = [ToolSpec(name="gmail_send_message", description="Send an e-mail.",
                  parameters={"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
                              "required": ["to"]})]


def env_module():
    "coworkenv.env, or skip with the reason (it is written by the lead, in parallel)."
    try:
        import coworkenv.env as E
        return E
    except Exception as e:  # ImportError, or a half-written module
        pytest.skip(f"coworkenv.env cannot be imported yet: {type(e).__name__}: {e}")


# ---- parser -----------------------------------------------------------------------------------------

def test_hermes_blocks():
    txt = ('I will send it.\n<tool_call>\n{"name": "gmail_send_message", "arguments": {"to": "a@b.co"}}\n</tool_call>\n'
           '<TOOL_CALL>{"name": "todo_list_tasks", "arguments": "{\\"status\\": \\"open\\"}"} junk</tool_call>\n'
           '<tool_call>{"name": "kb_search", "parameters": {"q": "vpn"}}')  # no closing tag at the end
    content, calls = parse_tool_calls(txt)
    assert content == "I will send it."
    assert [(c.name, c.arguments) for c in calls] == [("gmail_send_message", {"to": "a@b.co"}),
                                                      ("todo_list_tasks", {"status": "open"}), ("kb_search", {"q": "vpn"})]
    assert all(ID_RE.fullmatch(c.id) for c in calls) and len({c.id for c in calls}) == 3
    assert parse_tool_calls(txt) == (content, calls)  # deterministic ids


def test_openai_style_json_inside_block():
    _, calls = parse_tool_calls('<tool_call>{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}</tool_call>')
    assert (calls[0].name, calls[0].arguments) == ("f", {"x": 1})


@pytest.mark.parametrize("raw,val", [("", ""), ("   ", ""), (" 42 ", 42), ("-7", -7), ("3.25", 3.25), ("-3.25", "-3.25"),
                                     ("True", True), ("FALSE", False), ("null", None), ("Null", None),
                                     ('{"a": [1, 2]}', {"a": [1, 2]}), ("[1, 2]", [1, 2]), ("{not json}", "{not json}"),
                                     ("[oops", "[oops"), ("hello world", "hello world"), ("1e5", "1e5"), ("007", 7)])
def test_convert_param(raw, val):
    got = convert_param(raw)
    assert got == val and type(got) is type(val)


def test_claweval_function_blocks():
    txt = ("Paying now.\n<tool_call>\n<function=finance_pay>\n<parameter=amount>\n1250\n</parameter>\n"
           "<parameter = memo>Invoice #12\nMarch</parameter>\n<parameter=approved>true</parameter>\n</function>\n</tool_call>\n"
           "<tool_call><function = ns:tool-2><parameter=ids>[1, 2]</parameter></tool_call>"
           "<tool_call><function=no_params></tool_call>")
    content, calls = parse_tool_calls(txt)
    assert content == "Paying now."
    assert [(c.name, c.arguments) for c in calls] == [
        ("finance_pay", {"amount": 1250, "memo": "Invoice #12\nMarch", "approved": True}),
        ("ns:tool-2", {"ids": [1, 2]}), ("no_params", {})]


def test_malformed_blocks_stay_text():
    for t in ["<tool_call>hello</tool_call>", "<tool_call>", "<tool_call></tool_call>", '<tool_call>{"arguments": {}}</tool_call>',
              '<tool_call>{"name": 3}</tool_call>', '<tool_call>{"name": "x", "arguments": [1]}</tool_call>',
              '<tool_call>{"name": "x", "arguments": {"a": </tool_call>', "<tool_call>[1, 2]</tool_call>"]:
        assert parse_tool_calls(t) == (t, []), t
    content, calls = parse_tool_calls('a <tool_call>bad</tool_call> b <tool_call>{"name": "ok"}</tool_call> c')
    assert content == "a <tool_call>bad</tool_call> b  c" and [c.name for c in calls] == ["ok"]


def test_no_tool_call_text():
    assert parse_tool_calls("  just text \n") == ("just text", [])
    assert parse_tool_calls("") == (None, []) and parse_tool_calls(None) == (None, [])
    assert parse_tool_calls("<tool_call>" + "[" * 5000 + "</tool_call>")[1] == []  # deep nesting: no RecursionError


FRAGMENTS = st.sampled_from(["<tool_call>", "</tool_call>", "<TOOL_CALL >", "<function=", "<function = f>", "<parameter=",
                             "</parameter>", "</function>", "{", "}", "[", "]", '"name"', '"arguments"', ":", ",", '"x"',
                             "true", "null", "-1", "2.5", " ", "\n", ">", "<", "=", "\\", "\ud800", "é", "🙂"])


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=300), st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=40).map("".join)))
def test_parser_never_raises(text):
    content, calls = parse_tool_calls(text)
    assert content is None or (isinstance(content, str) and content == content.strip() and content)
    assert all(isinstance(c, ToolCall) and ID_RE.fullmatch(c.id) for c in calls)
    assert len({c.id for c in calls}) == len(calls)
    assert parse_tool_calls(text) == (content, calls)
    Message(role='assistant', content=content, tool_calls=calls).to_openai()  # serialisable


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                       lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True), st.dictionaries(st.text(max_size=8), JSONISH, max_size=4),
       st.text(max_size=40).filter(lambda t: "<tool_call" not in t.lower()))
def test_hermes_roundtrip(name, args, prefix):
    block = f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"
    content, calls = parse_tool_calls(prefix + "\n" + block)
    assert [(c.name, c.arguments) for c in calls] == [(name, args)]
    assert content == (prefix.strip() or None)


# ---- plan executors --------------------------------------------------------------------------------

def make_spec(**kw):
    d = dict(id="t_budget", request="File a purchase request for the laptops.", tools=["procurement_create_request"],
             user=UserSpec(facts=[UserFact(key="budget_limit", value="2400", aliases=["budget"])]),
             solution=[Step.ask("budget_limit"),
                       Step.call("procurement_create_request", item="laptops", budget=2400, note="limit 2400 EUR"),
                       Step.say("Filed the request with a 2400 EUR budget.")])
    d.update(kw)
    return TaskSpec(**d)


def start(spec):
    return [Message(role='system', content='sys'), Message(role='user', content=spec.request)]


def test_plan_agent_walks_the_plan_statelessly():
    spec = make_spec(); ag = OracleAgent(spec)
    assert ag.name == "oracle" and isinstance(ag, Agent)
    c = start(spec)
    m1 = ag.act(c, TOOLS)
    assert m1.role == 'assistant' and not m1.tool_calls and "budget limit" in m1.content.lower() and "?" in m1.content
    c += [m1, Message(role='user', content='Could you be more specific about what you need from me?')]  # no loop
    m2 = ag.act(c, TOOLS)
    assert [(t.id, t.name, t.arguments) for t in m2.tool_calls] == [
        ("call_2", "procurement_create_request", {"item": "laptops", "budget": 2400, "note": "limit 2400 EUR"})]
    assert m2.content and "2400" not in m2.content
    c += [m2, Message(role='tool', tool_call_id='call_2', content='{"id": "PR-1"}')]
    m3 = ag.act(c, TOOLS)
    assert (m3.content, m3.tool_calls) == ("Filed the request with a 2400 EUR budget.", [])
    c += [m3, Message(role='user', content='ok')]
    assert ag.act(c, TOOLS).content == SUMMARY and not ag.act(c, TOOLS).tool_calls
    # the same object, a new conversation (dicts accepted too), and batches in any order
    assert ag.act([m.to_openai() for m in start(spec)], TOOLS) == m1
    assert ag.act_batch([(c[:4], TOOLS), (start(spec), []), (c[:6], TOOLS)]) == [m2, m1, m3]


def test_plan_agent_retries_transient_errors_only():
    spec = make_spec(solution=[Step.call("procurement_create_request", item="x")]); ag = PlanAgent(spec, max_retries=2)
    assert ag.name == "plan"
    c = start(spec)
    for i in range(1, 4):
        m = ag.act(c, TOOLS)
        assert m.tool_calls and m.tool_calls[0].id == f"call_{i}"
        c += [m, Message(role='tool', tool_call_id=m.tool_calls[0].id,
                         content='{"error": "rate_limit_exceeded", "message": "Too many requests. Please retry after a short delay."}')]
    assert ag.act(c, TOOLS).content == SUMMARY  # gave up after max_retries
    c = start(spec) + [ag.act(start(spec), TOOLS), Message(role='tool', tool_call_id='call_1', content='{"error": "item not found"}')]
    assert ag.act(c, TOOLS).content == SUMMARY
    assert is_transient_error('{"error": "internal_server_error", "message": "An unexpected error occurred. Please try again."}')
    assert is_transient_error("Error: Internal Server Error")
    assert not is_transient_error('{"status": "unavailable", "price": 500}') and not is_transient_error(None)


def test_null_and_shortcut():
    spec = make_spec()
    n = NullAgent()
    assert n.name == "null" and not n.act(start(spec), TOOLS).tool_calls and n.act(start(spec), TOOLS).content
    s = ShortcutAgent(spec)
    assert s.name == "shortcut" and all(st_.kind != 'ask' for st_ in s.plan)
    m = s.act(start(spec), TOOLS)
    assert m.tool_calls[0].arguments == {"item": "laptops", "budget": 1000, "note": "limit TBD EUR"}
    assert "2400" not in s.plan[-1].text
    neg = make_spec(negatives=[NegativePlan(name="shortcut", plan=[Step.call("procurement_create_request", item="y")])])
    assert ShortcutAgent(neg).plan == [Step.call("procurement_create_request", item="y")]


def test_replace_facts_types():
    vals = ["2026-03-05", "li@acme.com", "12", "Project Falcon"]
    got = replace_facts({"d": "2026-03-05", "to": "li@acme.com", "n": 12, "f": 12.0, "s": "12", "b": True,
                         "t": "Re: project falcon kickoff", "keep": "120 items", "l": [{"x": "2026-03-05T10:00:00"}]},
                        vals, "2026-03-02T09:00:00Z")
    assert got == {"d": "2026-03-02", "to": "someone@example.com", "n": 1000, "f": 1000.0, "s": "TBD", "b": True,
                   "t": "Re: TBD kickoff", "keep": "120 items", "l": [{"x": "2026-03-02T10:00:00"}]}


# ---- OpenAIAgent -----------------------------------------------------------------------------------

def test_openai_agent_real_server(tiny_server):
    ag = OpenAIAgent(base_url=tiny_server.base_url, model=tiny_server.model, api_key="sk-test-secret", max_tokens=16)
    convo = [Message(role='system', content='You are helpful.'), Message(role='user', content='Mail ana@acme.com the notes.')]
    m = ag.act(convo, TOOLS)
    assert isinstance(m, Message) and m.role == 'assistant'
    assert all(isinstance(c, ToolCall) for c in m.tool_calls)
    m2 = ag.act(convo, [])  # no tools: the field is omitted
    assert isinstance(m2, Message) and m2.role == 'assistant'
    outs = ag.act_batch([(convo, TOOLS), (convo, []), (convo, TOOLS)])  # concurrent requests, results in order
    assert len(outs) == 3 and all(isinstance(o, Message) and o.role == 'assistant' for o in outs)
    assert "sk-test-secret" not in repr(ag) + ag.name + m.to_json()


def test_openai_agent_env_config(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"); monkeypatch.setenv("COWORKENV_MODEL", "m1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    ag = OpenAIAgent()
    assert (ag.base_url, ag.model, ag.name) == ("http://127.0.0.1:9/v1", "m1", "openai:m1")
    assert "sk-env-secret" not in repr(ag) + json.dumps(ag.request([Message(role='user', content='hi')], TOOLS))
    import pickle
    ag2 = OpenAIAgent(api_key="sk-arg-secret")
    blob = pickle.dumps(ag2)
    assert b"sk-arg-secret" not in blob and b"sk-env-secret" not in blob
    assert pickle.loads(blob).model == "m1"


def test_openai_agent_unreachable_raises_quickly():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]  # closed again: nothing listens there
    ag = OpenAIAgent(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout=5)
    t = time.monotonic()
    with pytest.raises(AgentError, match=rf"127\.0\.0\.1:{port}.*model m"):
        ag.act([Message(role='user', content='hi')], TOOLS)
    assert time.monotonic() - t < 15


# ---- HFAgent ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_agent(tiny_model_path):
    return HFAgent(tiny_model_path, max_new_tokens=24, batch_size=8)


def test_hf_agent_batch_equals_single(hf_agent):
    convos = [([Message(role='system', content='sys'), Message(role='user', content='Mail ana the notes.')], TOOLS),
              ([Message(role='user', content='What is on my calendar today? ' * 5)], []),
              ([Message(role='user', content='Send it.'),
                Message(role='assistant', tool_calls=[ToolCall(id='c1', name='gmail_send_message', arguments={'to': 'a@b.co'})]),
                Message(role='tool', tool_call_id='c1', name='gmail_send_message', content='{"status": "sent"}')], TOOLS)]
    outs = hf_agent.act_batch(convos)
    assert len(outs) == 3 and all(isinstance(o, Message) and o.role == 'assistant' for o in outs)
    assert outs == [hf_agent.act(m, t) for m, t in convos]
    assert hf_agent.act_batch([]) == []
    assert hf_agent.name.startswith("hf:")


def test_hf_agent_prompt_has_tools(hf_agent):
    p = hf_agent.prompt([Message(role='user', content='hi')], TOOLS)
    assert "gmail_send_message" in p and p.rstrip().endswith("assistant")


# ---- run loops (need coworkenv.env) ---------------------------------------------------------------

def env_spec():
    return TaskSpec(id="notes_share", request="Share yesterday's design review notes with the right people.",
                    services={"notes": [{"note_id": "n1", "title": "Design review", "content": "Ship v2.",
                                         "created_at": "2026-03-01T15:00:00Z", "participants": ["ana@acme.com"],
                                         "duration_minutes": 30}]},
                    tools=["notes_list", "notes_get", "notes_share"],
                    user=UserSpec(facts=[UserFact(key="recipients", aliases=["who"], value="li@acme.com")]),
                    checks=[Check(id="asked", type="asked_for", params={"fact": "recipients", "before_tool": "notes_share"}),
                            Check(id="shared", type="audit_field_equals",
                                  params={"service": "notes", "action": "shared", "field": "recipients", "value": "li@acme.com"})],
                    solution=[Step.call("notes_list"), Step.ask("recipients"),
                              Step.call("notes_share", note_id="n1", recipients=["li@acme.com"]),
                              Step.say("Shared the design review notes with Li.")])


def test_run_episode_oracle_and_controls():
    E = env_module(); spec = env_spec()
    t = run_episode(E.CoworkEnv(spec), OracleAgent(spec))
    assert t.agent == "oracle" and t.grade is not None and t.grade.passed, t.grade
    for ag in (NullAgent(), ShortcutAgent(spec)):
        t2 = run_episode(E.CoworkEnv(spec), ag)
        assert t2.agent == ag.name and not t2.grade.passed


def test_run_episode_agent_error_keeps_trajectory():
    E = env_module(); spec = env_spec()

    class Flaky(OracleAgent):
        def act(self, messages, tools=None):
            if sum(m.role == 'assistant' for m in messages) >= 1: raise AgentError("server went away")
            return super().act(messages, tools)
    t = run_episode(E.CoworkEnv(spec), Flaky(spec))
    assert t.end_reason == "agent_error" and "server went away" in t.info["error"]
    assert len(t.messages) >= 4 and t.grade is not None  # the first turn is kept


def test_run_batch_lockstep():
    E = env_module(); spec = env_spec()
    calls = []

    class Counting(OracleAgent):
        def act_batch(self, batch):
            calls.append(len(batch)); return super().act_batch(batch)
    envs = [E.CoworkEnv(spec, seed=i) for i in range(3)]
    trajs = run_batch(envs, Counting(spec))
    single = run_episode(E.CoworkEnv(spec), OracleAgent(spec))
    assert [t.messages for t in trajs] == [single.messages] * 3
    assert calls and calls[0] == 3 and all(t.grade.passed for t in trajs)
    assert run_batch([], OracleAgent(spec)) == []


# ---- run_episode always returns a trajectory: failing LLM users, judges and environments --------------------

from types import SimpleNamespace as NS
from coworkenv.core import Trajectory
from coworkenv.llm import REDACTED

ECHO = "503 upstream: key sk-proj-ECHOEDKEY0123456789abcdef rejected"


def roundtrips(t):
    back = Trajectory.from_json(t.to_json())
    assert back.messages == t.messages and back.end_reason == t.end_reason
    return t.to_json()


class RaisingUser:
    "An LLM user whose endpoint fails by raising (a 5xx after retries, garbage, a timeout)."
    def __init__(self): self.revealed = {}
    def reset(self): pass
    def reply(self, text, env): raise RuntimeError(ECHO)


class RecordingFailUser:
    "An LLM user that records its endpoint's error and ends the conversation (the LLMUser convention)."
    def __init__(self): self.errors, self.revealed = [], {}
    def reset(self): self.errors = []
    def reply(self, text, env):
        self.errors.append(ECHO)
        return NS(text="[DONE]", done=True, revealed=[])


def test_run_episode_user_that_raises():
    E = env_module(); spec = env_spec()
    env = E.CoworkEnv(spec, user=RaisingUser())
    t = run_episode(env, OracleAgent(spec))
    text = roundtrips(t)
    assert isinstance(t, Trajectory) and t.grade is not None
    assert "ECHOEDKEY" not in text  # the echoed key never reaches the trajectory
    assert t.info["errored"] is True and any(REDACTED in e["error"] for e in t.info["errors"])  # recorded, by env or run_episode


def test_run_episode_user_that_records_errors_is_errored():
    E = env_module(); spec = env_spec()
    t = run_episode(E.CoworkEnv(spec, user=RecordingFailUser()), OracleAgent(spec))
    text = roundtrips(t)
    assert t.end_reason == "user_error" and t.info["errored"] is True
    assert [e["source"] for e in t.info["errors"]] == ["user"] and REDACTED in t.info["errors"][0]["error"]
    assert "ECHOEDKEY" not in text and t.grade is not None


def test_run_episode_grading_failure_keeps_the_episode(monkeypatch):
    E = env_module(); spec = env_spec()
    env = E.CoworkEnv(spec)
    def broken_grade(): raise RuntimeError("judge endpoint: 429 Too Many Requests " + ECHO)
    monkeypatch.setattr(env, "grade", broken_grade)
    t = run_episode(env, OracleAgent(spec))
    text = roundtrips(t)
    assert t.grade is None and t.end_reason == "grade_error" and t.info["errored"]
    assert t.info["errors"][0]["source"] == "grade" and "429" in t.info["errors"][0]["error"]
    assert len(t.messages) >= 6 and t.dispatches and t.audit  # everything but the grade is kept
    assert "ECHOEDKEY" not in text


@pytest.mark.parametrize("fault", ["raise", "garbage", "none"])
def test_run_episode_with_a_failing_llm_judge(fault):
    E = env_module()
    spec = env_spec().model_copy(update=dict(checks=[*env_spec().checks, Check(
        id="tone", type="llm_judge", params={"rubric": "Was the assistant polite?", "threshold": 0.5})]))
    def judge(rubric, messages):
        if fault == "raise": raise RuntimeError(ECHO)
        return "lol" if fault == "garbage" else None
    t = run_episode(E.CoworkEnv(spec, judge=judge), OracleAgent(spec))
    text = roundtrips(t)
    assert "ECHOEDKEY" not in text
    if t.grade is not None: assert not t.grade.item("tone").passed  # a failed judge never passes its check
    else: assert t.end_reason == "grade_error" and t.info["errored"]


def test_run_episode_step_that_raises(monkeypatch):
    E = env_module(); spec = env_spec()
    env = E.CoworkEnv(spec)
    real = env.step
    def step(msg):
        if env.turn >= 1: raise MemoryError("resource exhausted")
        return real(msg)
    monkeypatch.setattr(env, "step", step)
    t = run_episode(env, OracleAgent(spec))
    roundtrips(t)
    assert t.end_reason == "env_error" and "MemoryError" in t.info["error"] and t.grade is not None


def test_run_batch_env_failure_is_per_episode(monkeypatch):
    E = env_module(); spec = env_spec()
    envs = [E.CoworkEnv(spec, seed=i) for i in range(3)]
    def boom(msg): raise RuntimeError("boom")
    monkeypatch.setattr(envs[1], "step", boom)
    ts = run_batch(envs, OracleAgent(spec))
    assert [t.end_reason for t in ts] == ["user_done" if ts[0].end_reason == "user_done" else ts[0].end_reason, "env_error", ts[2].end_reason]
    assert ts[0].grade.passed and ts[2].grade.passed and not ts[1].grade.passed


def test_secrets_echoed_by_the_model_are_redacted(monkeypatch):
    E = env_module(); spec = env_spec()
    monkeypatch.setenv("OPENAI_API_KEY", "local-api-key-77777777")

    class Echo(Agent):
        name = "echo"
        def act(self, messages, tools=None):
            return Message(role="assistant", content="my key is local-api-key-77777777 and sk-abcdefghijklmnopqrstuvwx")
    t = run_episode(E.CoworkEnv(spec), Echo())
    text = roundtrips(t)
    assert "local-api-key" not in text and "sk-abcdefghij" not in text and REDACTED in t.messages[-1].content


def test_openai_agent_follows_the_shared_policy():
    from coworkenv.llm import default_policy, set_default_policy
    p0 = default_policy()
    try:
        set_default_policy(timeout=4, max_retries=1)
        ag = OpenAIAgent(base_url="http://127.0.0.1:9/v1", model="m")
        assert (ag._client.timeout, ag._client.max_retries) == (4, 1)
        ag = OpenAIAgent(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)
        assert (ag._client.timeout, ag._client.max_retries) == (4, 0)
    finally: set_default_policy(**p0.model_dump())


def test_openai_agent_error_is_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "local-api-key-88888888")

    class Echoing:
        base_url = "http://fake/v1"
        chat = NS(completions=NS(create=lambda **kw: (_ for _ in ()).throw(RuntimeError("bad key local-api-key-88888888"))))
    with pytest.raises(AgentError) as e: OpenAIAgent(model="m", client=Echoing()).act([Message(role="user", content="hi")])
    assert "local-api-key" not in str(e.value) and REDACTED in str(e.value)


AGENT_FAULTS = {
    "5xx": RuntimeError("Error code: 503 - Service Unavailable"),
    "429": RuntimeError("Error code: 429 - rate limited"),
    "timeout": TimeoutError("Request timed out."),
    "no choices": NS(choices=[]),
    "choices None": NS(choices=None),
    "list content": NS(choices=[NS(message={"role": "assistant", "content": [{"type": "text", "text": "hi"}]})]),
    "garbage message": NS(choices=[NS(message=42)]),
    "bad tool calls": NS(choices=[NS(message={"role": "assistant", "content": None,
                                               "tool_calls": [{"id": 1, "function": {"name": None, "arguments": "{" * 3000}}]})]),
    "echoed key": NS(choices=[NS(message={"role": "assistant", "content": "key sk-proj-ECHOEDKEY0123456789abcdef"})]),
}


@pytest.mark.parametrize("fault", list(AGENT_FAULTS))
def test_run_episode_with_a_faulty_model_endpoint(fault):
    "Every fault of the agent's endpoint: a trajectory that saves and reloads, an agent_error or a normal end, no secret."
    E = env_module(); spec = env_spec()
    r = AGENT_FAULTS[fault]
    def create(**kw):
        if isinstance(r, Exception): raise r
        return r
    client = NS(chat=NS(completions=NS(create=create)), base_url="http://fake/v1")
    t = run_episode(E.CoworkEnv(spec, max_turns=4), OpenAIAgent(model="m", client=client))
    text = roundtrips(t)
    assert t.grade is not None and not t.grade.passed and "ECHOEDKEY" not in text
    if isinstance(r, Exception) or fault in ("no choices", "choices None", "garbage message"):
        assert t.end_reason == "agent_error" and t.info["errored"] and t.info["error"].startswith("AgentError")
        if isinstance(r, Exception): assert type(r).__name__ in t.info["error"]
