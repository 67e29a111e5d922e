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
              "<tool_call>[1, 2]</tool_call>", '<tool_call>{"nome": "x", "arguments": {"a": </tool_call>']:
        assert parse_tool_calls(t) == (t, []), t
    # a readable name with unparsable arguments is a call (issue 13): the raw arguments go to the environment, which
    # answers with an error the model can read, instead of the block being silently dropped into the text
    assert [(c.name, c.arguments) for c in parse_tool_calls('<tool_call>{"name": "x", "arguments": {"a": </tool_call>')[1]] == [("x", '{"a":')]
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


# ---- issue 13: what the real base model showed (parsing, templates, generation budget, context, server 500) ---------

from coworkenv.agents import (ContextOverflow, COMPACTED, compact_tool_results, compactable, hf_message, fast_dtype,
                              cpu_has_native_bf16, unique_call_ids, to_assistant, tools_text)


@pytest.mark.parametrize("body", ['```json\n{"name": "kb_search", "arguments": {"q": "vpn"}}\n```',
                                  '\n```\n{"name": "kb_search", "arguments": {"q": "vpn"}}\n```\n',
                                  '```JSON {"name": "kb_search", "arguments": {"q": "vpn"}}```',
                                  '```json\n{"name": "kb_search", "arguments": {"q": "vpn"}}'])  # fence left open
def test_fenced_json_call_parses(body):
    content, calls = parse_tool_calls(f"Looking.\n<tool_call>{body}</tool_call>")
    assert content == "Looking." and [(c.name, c.arguments) for c in calls] == [("kb_search", {"q": "vpn"})]


def test_invalid_json_arguments_kept_raw():
    for raw in ['{"q": "vpn",}', '{"q": vpn}', '{"q": "vpn" "x"}', "q=vpn"]:
        _, calls = parse_tool_calls('<tool_call>{"name": "kb_search", "arguments": ' + raw + '}</tool_call>')
        assert [(c.name, c.arguments) for c in calls] == [("kb_search", raw)], raw
    # only the outer brace forgotten: the arguments are fine
    _, calls = parse_tool_calls('<tool_call>{"name": "kb_search", "arguments": {"q": "vpn"}</tool_call>')
    assert calls[0].arguments == {"q": "vpn"}
    # shown back as written, never as {}
    m = Message(role='assistant', content='Trying.', tool_calls=[ToolCall(id='a', name='kb_search', arguments='{"q": "vpn",}'),
                                                                 ToolCall(id='b', name='kb_search', arguments={'q': 'x'})])
    d = hf_message(m)
    assert d['content'] == 'Trying.\n<tool_call>\n{"name": "kb_search", "arguments": {"q": "vpn",}}\n</tool_call>'
    assert [c['function']['arguments'] for c in d['tool_calls']] == [{'q': 'x'}]


def test_fallback_ids_unique_per_turn():
    same = '<tool_call>{"name": "x", "arguments": {}}</tool_call><tool_call>{"name": "x", "arguments": {}}</tool_call>'
    ids = [c.id for t in (1, 2, 3) for c in parse_tool_calls(same, turn=t)[1]]
    assert len(set(ids)) == 6 and all(ID_RE.fullmatch(i) for i in ids)
    assert parse_tool_calls(same, turn=2) == parse_tool_calls(same, turn=2)  # still reproducible
    # native ids a server repeats in every turn (call_0) are renamed so that two results never answer one id
    hist = [Message(role='user', content='hi'), Message(role='assistant', tool_calls=[ToolCall(id='call_0', name='x')]),
            Message(role='tool', tool_call_id='call_0', content='{}')]
    m = unique_call_ids(Message(role='assistant', tool_calls=[ToolCall(id='call_0', name='x'), ToolCall(id='call_0', name='y'),
                                                              ToolCall(id='', name='z')]), hist, turn=2)
    assert len({c.id for c in m.tool_calls} | {'call_0'}) == 4 and [c.name for c in m.tool_calls] == ['x', 'y', 'z']
    ok = Message(role='assistant', tool_calls=[ToolCall(id='call_9', name='x')])
    assert unique_call_ids(ok, hist) is ok


def test_same_text_every_turn_gets_fresh_ids_in_an_episode():
    E = env_module(); spec = env_spec()

    class Repeating(Agent):
        name = "repeat"
        def act(self, messages, tools=None):
            turn = sum(m.role == 'assistant' for m in messages) + 1
            return to_assistant(Message(role='assistant', content='<tool_call>{"name": "notes_list", "arguments": {}}</tool_call>'),
                                turn, messages)
    t = run_episode(E.CoworkEnv(spec, max_turns=4), Repeating())
    ids = [c.id for m in t.messages for c in m.tool_calls]
    assert len(ids) >= 3 and len(set(ids)) == len(ids)
    answered = [m.tool_call_id for m in t.messages if m.role == 'tool']
    assert sorted(answered) == sorted(ids)


def test_invalid_arguments_reach_the_model_with_the_error(tiny_model_path):
    E = env_module(); spec = env_spec()
    env = E.CoworkEnv(spec, max_turns=3); env.reset()
    bad = '<tool_call>{"name": "notes_list", "arguments": {"limit": 5,}}</tool_call>'
    env.step(to_assistant(Message(role='assistant', content=bad), 1, env.messages))
    result = env.messages[-1]
    assert result.role == 'tool' and 'not valid JSON' in result.content
    p = HFAgent(tiny_model_path, max_new_tokens=4).prompt(env.messages, env.tools)
    assert '"arguments": {"limit": 5,}' in p and 'not valid JSON' in p and '"arguments": {}' not in p


# -- templates and the Claw-Eval system prompt

def test_no_qwen_identity_and_schemas_once(tiny_model_path):
    from coworkenv.claweval import claweval_system_prompt
    ag = HFAgent(tiny_model_path, max_new_tokens=4)
    tools = [ToolSpec(name="kb_search", description="Search the knowledge base.",
                      parameters={"type": "object", "properties": {"zq_unique_param": {"type": "string"}}})]
    for msgs in ([Message(role='user', content='hi')], [Message(role='system', content='Be brief.'), Message(role='user', content='hi')]):
        for ts in (tools, []):
            p = ag.prompt(msgs, ts)
            assert 'Qwen' not in p and 'Alibaba' not in p, p
    sys_prompt = claweval_system_prompt(tools)
    p = ag.prompt([Message(role='system', content=sys_prompt), Message(role='user', content='hi')], tools)
    assert p.count('zq_unique_param') == 1 and p.count(sys_prompt) == 1   # the schema once, the system prompt once
    assert '<tool_call>' in p and 'never write a tool call out as text' not in p  # markup instructions not contradicted
    assert 'never describe a call in prose' in sys_prompt


def test_prepared_smollm2_template_has_no_qwen_identity():
    from coworkenv.models import _default_out, is_complete_model
    path = _default_out('smollm2')
    if not is_complete_model(path): pytest.skip(f"SmolLM2 not prepared at {path} (run `coworkenv model prepare`)")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(path)
    p = tok.apply_chat_template([{"role": "user", "content": "hi"}], tools=[TOOLS[0].to_openai()], tokenize=False, add_generation_prompt=True)
    assert 'Qwen' not in p and '<tool_call>' in p and p.count('gmail_send_message') == 1


# -- the generation loop, with a scripted stand-in model (exact stops, per-row dropping, positions)

torch = pytest.importorskip("torch")


class ScriptedLM(torch.nn.Module):
    """A stand-in causal LM for `HFAgent.generate_ids`: the r-th fresh row it sees emits `scripts[r % len(scripts)]` token
    by token, then `eos`. It keeps each row's id in a real `DynamicCache`, so merged batches, dropped rows and reused
    caches are followed exactly, and records (batch size, tokens fed, largest position) of every forward."""
    def __init__(self, scripts, vocab_size, eos, window=4096):
        super().__init__()
        from transformers import GenerationConfig, LlamaConfig
        self.config = LlamaConfig(num_hidden_layers=1, hidden_size=8, num_attention_heads=1, num_key_value_heads=1,
                                  intermediate_size=8, vocab_size=vocab_size, max_position_embeddings=window)
        self.generation_config = GenerationConfig(eos_token_id=eos)
        self.scripts, self.eos, self.calls, self.count, self.last, self.fresh = scripts, eos, [], {}, {}, 0
        self.w = torch.nn.Parameter(torch.zeros(1))
    @property
    def device(self): return torch.device('cpu')
    @property
    def dtype(self): return torch.float32
    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, use_cache=True, logits_to_keep=0, **kw):
        B, T = input_ids.shape
        assert attention_mask.shape[1] == cache.get_seq_length() + T  # the mask covers the cache and the new tokens
        self.calls.append((B, T, int(position_ids.max())))
        if cache.get_seq_length() == 0:  # a fresh row (rows are prefilled one by one): the next id
            rid = torch.arange(self.fresh, self.fresh + B, dtype=torch.float32); self.fresh += B
        else: rid = cache.layers[0].keys[:, 0, -1, 0]
        k = rid.view(B, 1, 1, 1).expand(B, 1, T, 1).clone()
        cache.update(k, k, 0)
        logits = torch.full((B, 1, self.config.vocab_size), -1e4)
        for b, r in enumerate(int(x) for x in rid):
            decoding = T == 1 and self.last.get(r) == int(input_ids[b, 0])
            self.count[r] = self.count.get(r, 0) + 1 if decoding else 0
            s = self.scripts[r % len(self.scripts)]
            t = s[self.count[r]] if self.count[r] < len(s) else self.eos
            logits[b, 0, t] = 0.0; self.last[r] = t
        return NS(logits=logits)


@pytest.fixture(scope="module")
def tiny_tok(tiny_model_path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(tiny_model_path)


def scripted(tok, texts, **kw):
    enc = lambda s: tok(s, add_special_tokens=False)['input_ids'] if isinstance(s, str) else s
    scripts = [[t for part in (x if isinstance(x, list) else [x]) for t in enc(part)] for x in texts]
    lm = ScriptedLM(scripts, len(tok), tok.eos_token_id, **kw)
    return lm, scripts


def test_generation_stops_per_row_and_drops_finished_rows(tiny_tok):
    call = 'Checking.<tool_call>\n{"name": "kb_search", "arguments": {"q": "vpn"}}\n</tool_call>'
    lm, scripts = scripted(tiny_tok, [call + ' and then more text that must not be generated',
                                      ['Hello there', [tiny_tok.eos_token_id], 'junk after the end'],
                                      'word ' * 200])
    ag = HFAgent(lm, tokenizer=tiny_tok, max_new_tokens=50, dtype='keep', reuse_cache=False)
    convos = [([Message(role='user', content='Find the VPN doc.')], TOOLS), ([Message(role='user', content='hi')], TOOLS),
              ([Message(role='user', content='Write a lot. ' * 5)], TOOLS)]
    outs = ag.act_batch(convos)
    assert outs[0].content == 'Checking.' and [(c.name, c.arguments) for c in outs[0].tool_calls] == [("kb_search", {"q": "vpn"})]
    assert outs[1].content == 'Hello there' and not outs[1].tool_calls
    assert ('word ' * 200).startswith(outs[2].content) and len(outs[2].content) > 50 and not outs[2].tool_calls  # cut at the budget
    n_call = len(tiny_tok(call, add_special_tokens=False)['input_ids'])
    assert ag.stats['generated_tokens'] == n_call + len(tiny_tok('Hello there', add_special_tokens=False)['input_ids']) + 50
    decode = [b for b, T, _ in lm.calls if T == 1]
    assert decode == sorted(decode, reverse=True) and decode[0] == 3 and decode[-1] == 1 and 2 in decode  # rows leave
    assert len(decode) == 49  # as many steps as the longest row, none after it: no padding along


def test_context_window_compacts_then_ends_with_context_overflow(tiny_tok):
    E = env_module(); spec = env_spec()
    call = '<tool_call>\n{"name": "notes_list", "arguments": {}}\n</tool_call>'
    lm, _ = scripted(tiny_tok, [call])
    probe = HFAgent(lm, tokenizer=tiny_tok, dtype='keep')
    env = E.CoworkEnv(spec, max_turns=200); env.reset()
    first = len(probe._ids(env.messages, env.tools))
    window = first + 700
    lm.config.max_position_embeddings = window
    ag = HFAgent(lm, tokenizer=tiny_tok, max_new_tokens=48, min_new_tokens=32, compact_step=2, dtype='keep')
    assert ag.window == window
    t = run_episode(E.CoworkEnv(spec, max_turns=200), ag)
    assert t.end_reason == 'context_overflow' and t.info.get('context_overflow') is True
    assert not t.info.get('errored') and t.grade is not None
    notes = t.info['agent_notes']
    assert notes and all(n['event'] == 'compacted' and n['prompt_tokens'] + 32 <= window for n in notes)
    assert [n['tool_results'] for n in notes] == sorted(n['tool_results'] for n in notes)  # compaction only grows
    assert notes[0]['tool_results'] % 2 == 0  # in groups of compact_step
    assert max(pos for _, _, pos in lm.calls) < window  # never fed past the window
    assert sum(m.role == 'tool' for m in t.messages) > 5  # it did work for a while before the window was full


def test_context_overflow_from_the_first_prompt(tiny_model_path):
    ag = HFAgent(tiny_model_path, max_new_tokens=16, window=40)
    with pytest.raises(ContextOverflow, match="40-token window"):
        ag.act([Message(role='user', content='hello ' * 50)], TOOLS)


def test_compaction_is_whole_results_and_visible():
    res = json.dumps({"rows": [{"id": i, "text": "x" * 30} for i in range(20)]})
    msgs = [Message(role='user', content='go')]
    for i in range(4):
        msgs += [Message(role='assistant', tool_calls=[ToolCall(id=f'c{i}', name='kb_search', arguments={})]),
                 Message(role='tool', tool_call_id=f'c{i}', content=res)]
    assert compactable(msgs) == [2, 4, 6]  # the newest result (not answered yet) is never compacted
    out = compact_tool_results(msgs, 2)
    assert [m.content for m in out] == [msgs[0].content, None, COMPACTED.format(n=len(res)), None, COMPACTED.format(n=len(res)),
                                        None, res, None, res]
    assert compactable(out) == [6] and compact_tool_results(msgs, 0) == msgs
    assert [m.tool_call_id for m in out] == [m.tool_call_id for m in msgs]  # calls and results stay paired


# -- KV cache reuse and dtype

def test_kv_cache_reuse_gives_the_same_reply(tiny_model_path):
    a = HFAgent(tiny_model_path, max_new_tokens=12)
    b = HFAgent(tiny_model_path, max_new_tokens=12, reuse_cache=False)
    c1 = [Message(role='system', content='sys'), Message(role='user', content='Mail ana the notes from the design review.')]
    r1 = a.act(c1, TOOLS)
    c2 = c1 + [Message(role='assistant', content='Which notes?'), Message(role='user', content='The ones from Monday.')]
    r2 = a.act(c2, TOOLS)
    assert a.stats['reused_tokens'] >= len(a._ids(c1, TOOLS)) - 1 and b.stats['reused_tokens'] == 0
    assert r2 == b.act(c2, TOOLS) and r1 == b.act(c1, TOOLS)
    # in a batch too: each conversation finds its own previous turn among the stored caches
    convs = [[Message(role='user', content=f'Conversation {i}: ' + 'please check the calendar. ' * (i + 1))] for i in range(3)]
    first = a.act_batch([(c, TOOLS) for c in convs])
    nxt = [c + [r, Message(role='user', content='And tomorrow?')] for c, r in zip(convs, first)]
    before = a.stats['reused_tokens']; second = a.act_batch([(c, TOOLS) for c in nxt])
    assert a.stats['reused_tokens'] - before >= sum(len(a._ids(c, TOOLS)) for c in convs) - 3
    assert first == b.act_batch([(c, TOOLS) for c in convs]) and second == b.act_batch([(c, TOOLS) for c in nxt])
    c3 = [Message(role='user', content='Something else entirely.')]  # no common prefix worth reusing: a fresh cache
    before = a.stats['reused_tokens']; r3 = a.act(c3, [])
    assert a.stats['reused_tokens'] == before and r3 == b.act(c3, [])


def test_dtype_auto_follows_the_hardware(tiny_model_path, monkeypatch):
    import coworkenv.agents as A
    assert fast_dtype('cpu', cpuinfo="flags\t\t: fpu sse2 avx avx2 fma f16c") == 'float32'
    assert fast_dtype('cpu', cpuinfo="processor : 0\nflags : fpu avx512f avx512_bf16\n") == 'bfloat16'
    assert fast_dtype('cpu', cpuinfo="flags : amx_bf16 amx_tile") == 'bfloat16' and fast_dtype('cpu', cpuinfo="") == 'float32'
    assert not cpu_has_native_bf16("model name : bf16 lover\nflags : avx2")  # only the flags line counts
    monkeypatch.setattr(A, 'cpu_has_native_bf16', lambda cpuinfo=None: True)
    assert HFAgent(tiny_model_path, max_new_tokens=2).hf_model.dtype == torch.bfloat16
    monkeypatch.setattr(A, 'cpu_has_native_bf16', lambda cpuinfo=None: False)
    assert HFAgent(tiny_model_path, max_new_tokens=2).hf_model.dtype == torch.float32
    assert HFAgent(tiny_model_path, max_new_tokens=2, dtype='bfloat16').hf_model.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="unknown dtype"): HFAgent(tiny_model_path, dtype='int3')


# -- OpenAIAgent and a server that answers 500 on tool-call markup it cannot parse

def fake_server(fail_with_tools=True, fail_always=False, seen=None):
    import httpx, openai
    def handle(request):
        body = json.loads(request.content)
        if seen is not None: seen.append(body)
        if fail_always or (fail_with_tools and body.get('tools')):
            return httpx.Response(500, json={"error": {"message": "Internal Server Error: could not parse tool call"}})
        n = sum(m['role'] == 'assistant' for m in body['messages'])
        text = ('<tool_call>{"name": "notes_list", "arguments": {}}</tool_call>' if n == 0 else "All done.")
        return httpx.Response(200, json={"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]})
    return openai.OpenAI(base_url="http://fake/v1", api_key="x", max_retries=0, http_client=httpx.Client(transport=httpx.MockTransport(handle)))


def test_openai_agent_retries_without_server_tool_parsing_on_500():
    E = env_module(); spec = env_spec(); seen = []
    ag = OpenAIAgent(model="m", client=fake_server(seen=seen))
    t = run_episode(E.CoworkEnv(spec, max_turns=4), ag)
    assert t.end_reason != 'agent_error' and not t.info.get('errored')
    assert [d.tool for d in t.dispatches] == ['notes_list']  # the call written as text was parsed here and ran
    assert [bool(b.get('tools')) for b in seen] == [True, False, False]  # one failure, then text mode for the rest
    assert tools_text(t.tools) in seen[1]['messages'][0]['content'] and seen[1]['messages'][0]['role'] == 'system'
    notes = t.info['agent_notes']
    assert notes[0]['event'] == 'server_tool_parse_error' and '500' in notes[0]['error'] and notes[0]['turn'] == 1
    assert [n['event'] for n in notes[1:]] == ['text_tool_mode']


def test_openai_agent_500_without_tools_or_twice_is_an_agent_error():
    E = env_module(); spec = env_spec()
    t = run_episode(E.CoworkEnv(spec, max_turns=4), OpenAIAgent(model="m", client=fake_server(fail_always=True)))
    assert t.end_reason == 'agent_error' and t.info['errored'] and '500' in t.info['error']
    ag = OpenAIAgent(model="m", client=fake_server(fail_always=True))
    with pytest.raises(AgentError): ag.act([Message(role='user', content='hi')], [])
    assert ag.server_tool_parsing and not ag.notes_for([Message(role='user', content='hi')])
    off = OpenAIAgent(model="m", client=fake_server(), text_fallback=False)
    with pytest.raises(AgentError, match="500"): off.act([Message(role='user', content='hi')], TOOLS)


# -- Claw-Eval runs: an errored trial's trajectory says why

def test_run_claweval_task_never_leaves_running_without_error(monkeypatch):
    import coworkenv.claweval as CE
    from pathlib import Path
    ex = Path(__file__).resolve().parents[1] / "data" / "claweval_examples"
    task = next(p for p in sorted(ex.iterdir()) if (p / "task.yaml").is_file())
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore"); spec = CE.load_claweval_task(task)

    def broken(env, agent, seed=None):  # the harness fails mid-episode, after the environment started
        env.reset(); raise RuntimeError("harness failed (token sk-proj-SECRET0123456789abcdef)")
    monkeypatch.setattr(CE, 'run_episode', broken)
    r = CE.run_claweval_task(spec, "null", k=2)
    assert r.errored == [True, True]
    for t, e in zip(r.trajectories, r.errors):
        assert t is not None and t.end_reason == 'env_error' and t.info['errored'] and 'harness failed' in t.info['error']
        assert 'SECRET0123' not in t.info['error'] + e
    monkeypatch.undo()

    def bad_grader(*a, **k): raise ValueError("grader exploded")
    r = CE.run_claweval_task(spec, "null", k=1, grader=bad_grader)
    t = r.trajectories[0]
    assert r.errored == [True] and t.end_reason not in ('', 'running') and 'grader exploded' in t.info['error'] and t.info['errored']


def test_growing_kv_cache_matches_dynamic_cache(tiny_model_path):
    "The in-place cache gives the same keys/values as transformers' DynamicCache through update, crop and row selection."
    from transformers import AutoConfig, DynamicCache
    from coworkenv.agents import new_kv_cache
    cfg = AutoConfig.from_pretrained(tiny_model_path)
    ours, ref = new_kv_cache(cfg), DynamicCache(config=cfg)
    g = torch.Generator().manual_seed(0)
    def step(T, B=3):
        for li in range(cfg.num_hidden_layers):
            k, v = torch.randn(B, 2, T, 32, generator=g), torch.randn(B, 2, T, 32, generator=g)
            a, b = ours.update(k, v, li), ref.update(k.clone(), v.clone(), li)
            assert all(torch.equal(x, y) for x, y in zip(a, b))
    step(300); [step(1) for _ in range(300)]  # past the first buffer's spare room
    ours.crop(-250); ref.crop(-250); step(5)
    idx = torch.tensor([0, 2]); ours.batch_select_indices(idx); ref.batch_select_indices(idx); step(1, B=2); step(4, B=2)
    assert ours.get_seq_length() == ref.get_seq_length() == 300 + 300 - 250 + 5 + 1 + 4
    assert type(ours.layers[0]).__name__ == 'GrowingLayer'
