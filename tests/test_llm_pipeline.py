"""The LLM synthesis path through validation and repair: malformed or invalid generations are repaired or quarantined,
and the run never crashes — against a real OpenAI-compatible server (the tiny model) and with scripted replies."""
import json
from types import SimpleNamespace as NS
import pytest

from coworkenv.synthesis import LLMGenerator, ProceduralGenerator, RecordingClient, synthesis_messages
from coworkenv.validation import repair, run_pipeline
from coworkenv.workflows import get_family

FAMILY = "expense_reimbursement"

class ScriptedClient:
    "Duck-typed OpenAI client answering from a list of replies (one per request) and keeping the requests."
    def __init__(self, replies):
        self.replies, self.requests = list(replies), []
        self.chat = NS(completions=NS(create=self._create))
        self.base_url = "http://scripted/v1"
    def _create(self, **kw):
        self.requests.append(kw)
        text = self.replies.pop(0)
        return NS(choices=[NS(message=NS(content=text), finish_reason="stop")])

def prompt_text(req): return "\n".join(m["content"] for m in req["messages"] if isinstance(m.get("content"), str))

def valid_reply(seed=3, difficulty="easy"):
    spec = ProceduralGenerator().generate(get_family(FAMILY), seed, difficulty)
    return "Here is the task spec you asked for:\n```json\n" + spec.model_dump_json(indent=1) + "\n```\nLet me know!"

def test_junk_then_valid_is_repaired():
    client = ScriptedClient(["I cannot do that.", valid_reply()])
    out = repair(FAMILY, 3, "easy", LLMGenerator(client=client, model="scripted"), max_rounds=2)
    assert out.passed and out.rounds == 1 and out.spec.id == f"{FAMILY}-easy-00003"
    assert out.history[0]["findings"][0]["code"] == "gen.unparseable"
    assert "gen.unparseable" in prompt_text(client.requests[1])        # the findings went back into the prompt

def test_invalid_plan_then_valid_is_repaired():
    bad = json.loads(valid_reply().split("```json\n")[1].split("\n```")[0])
    call = next(s for s in bad["solution"] if s["kind"] == "call" and s["tool"] == "expenses_pay_claim")
    call["args"]["claim_id"] = "CLM-000"                                 # a wrong reference-plan argument
    client = ScriptedClient([json.dumps(bad), valid_reply()])
    out = repair(FAMILY, 3, "easy", LLMGenerator(client=client, model="scripted"), max_rounds=2)
    assert out.passed and out.rounds == 1
    codes = {f["code"] for f in out.history[0]["findings"]}
    assert "solve.oracle_failed" in codes and "solve.oracle_failed" in prompt_text(client.requests[1])

def test_never_valid_is_quarantined(tmp_path):
    client = ScriptedClient(["{}", "not json at all", '{"id": 1}'])
    out = repair(FAMILY, 4, "medium", LLMGenerator(client=client, model="scripted"), max_rounds=2, quarantine_dir=tmp_path)
    assert not out.passed and out.quarantined
    q = json.loads((tmp_path / f"{FAMILY}-medium-00004.json").read_text())
    assert len(q["rounds"]) == 3 and q["findings"] and all(r["passed"] is False for r in q["rounds"])

@pytest.fixture(scope="module")
def wide_tiny_server(tiny_model_path, tmp_path_factory):
    """The tiny model with a 16k-token window (a copy: only `max_position_embeddings` changes; with RoPE the weights do
    not depend on it), so a full synthesis prompt fits (the tiny tokenizer needs ~9k tokens for it)."""
    import shutil
    from coworkenv.models import serve_model
    wide = tmp_path_factory.mktemp("wide") / "tiny-qwen3-16k"
    shutil.copytree(tiny_model_path, wide)
    cfg = json.loads((wide / "config.json").read_text())
    (wide / "config.json").write_text(json.dumps(cfg | {"max_position_embeddings": 16384}))
    with serve_model(wide, timeout=180) as srv:
        yield srv

def _cassette(path): return [json.loads(l) for l in path.read_text().splitlines()]

def test_pipeline_against_real_server_quarantines_junk(wide_tiny_server, tmp_path):
    "The tiny random model writes junk: every slot must end in quarantine with its findings, and nothing crashes."
    srv = wide_tiny_server
    gen = LLMGenerator(base_url=srv.base_url, model=srv.model, api_key="sk-secret-test", max_tokens=32,
                       max_retries=0, timeout=120)
    gen._client = RecordingClient(gen._client, tmp_path / "cassette.jsonl")
    res = run_pipeline(generator=gen, families=[FAMILY, "news_digest"], n=2, max_rounds=1,
                       quarantine_dir=tmp_path / "q", out_dir=tmp_path / "specs", progress=False)
    assert len(res.df) == 2 and not res.df.passed.any() and res.specs == []
    files = sorted((tmp_path / "q").glob("*.json"))
    assert len(files) == 2
    for f in files:
        q = json.loads(f.read_text())
        assert q["findings"] and q["findings"][0]["code"] == "gen.unparseable" and len(q["rounds"]) == 2
    recs = _cassette(tmp_path / "cassette.jsonl")
    assert all("response" in r for r in recs), [r.get("error") for r in recs]  # the server answered every request
    reqs = [r["request"] for r in recs]
    assert len(reqs) == 4 and any("gen.unparseable" in json.dumps(r) for r in reqs[1::2])   # round 2 carries feedback
    for p in [*files, tmp_path / "cassette.jsonl"]:
        assert "sk-secret-test" not in p.read_text()

def test_prompt_over_the_window_is_a_request_failure(tiny_server, tmp_path):
    """A prompt longer than the model's window (the tiny model's is 4096 tokens) is rejected by the server: the finding
    says the request failed and carries the server's reason; the next round resends the same prompt (no feedback on a
    spec the model never wrote), and a rejection is not taken as "this server has no structured output"."""
    import httpx
    gen = LLMGenerator(base_url=tiny_server.base_url, model=tiny_server.model, max_tokens=32, max_retries=0, timeout=120)
    gen._client = RecordingClient(gen._client, tmp_path / "cassette.jsonl")
    out = repair(FAMILY, 0, "easy", gen, max_rounds=1, quarantine_dir=tmp_path / "q")
    assert not out.passed and out.quarantined and out.rounds == 1
    reason = httpx.post(tiny_server.base_url + "/chat/completions", timeout=120,
                        json=dict(model=tiny_server.model, messages=synthesis_messages(gen, FAMILY, 0, "easy"), max_tokens=32))
    assert reason.status_code == 400
    reason = reason.json()["detail"]
    for h in out.history:
        assert [f["code"] for f in h["findings"]] == ["gen.request_failed"]
        assert "400" in h["findings"][0]["message"] and reason in h["findings"][0]["message"]
    assert out.history[1]["feedback"] is None
    recs = _cassette(tmp_path / "cassette.jsonl")
    assert [r["request"]["structured"] for r in recs] == [True, False, True, False] and all("error" in r for r in recs)
    assert recs[0]["request"]["messages"] == recs[2]["request"]["messages"]  # the same prompt, resent
    assert gen._structured_ok is None  # a failed plain request proves nothing about structured output


# ---- faulty endpoints: every bad reply is a GenerationError, never a crash; nothing persisted holds a secret ------

from coworkenv.llm import default_policy, set_default_policy, LLMPolicy
from coworkenv.synthesis import GenerationError, ReplayClient, read_manifest, synthesize

class RawClient(ScriptedClient):
    "Replies with whole response objects (or raises exceptions) from a list."
    def _create(self, **kw):
        self.requests.append(kw)
        r = self.replies.pop(0)
        if isinstance(r, Exception): raise r
        return r

def reply(content, finish="stop"): return NS(choices=[NS(message=NS(content=content), finish_reason=finish)])

BAD_REPLIES = {
    "list content": reply([{"type": "text", "text": "{}"}]),
    "dict content": reply({"id": "x"}),
    "int content": reply(42),
    "no choices": NS(choices=[]),
    "choices None": NS(choices=None),
    "no message": NS(choices=[NS(finish_reason="stop")]),
    "None response": None,
    "deep nesting": reply("{" + '"a":[' * 5000 + "1" + "]" * 5000 + "}"),
    "unterminated deep nesting": reply('{"a":' + "[" * 100_000),
    "empty": reply(""),
    "none content": reply(None),
    "server error": RuntimeError("Error code: 503 - upstream down"),
}

@pytest.mark.parametrize("name", list(BAD_REPLIES))
def test_bad_replies_are_generation_errors(name):
    gen = LLMGenerator(client=RawClient([BAD_REPLIES[name]]), model="scripted", structured="none")
    with pytest.raises(GenerationError) as e: gen.generate(FAMILY, 1, "easy")
    assert e.value.family == FAMILY and e.value.problems

def test_pipeline_survives_every_bad_reply(tmp_path):
    "run_pipeline with a generator whose replies are all bad: every slot quarantined, no exception escapes."
    replies = list(BAD_REPLIES.values()) * 2
    gen = LLMGenerator(client=RawClient(replies), model="scripted", structured="none")
    res = run_pipeline(generator=gen, families=[FAMILY], n=4, max_rounds=1, quarantine_dir=tmp_path / "q",
                       out_dir=tmp_path / "specs", progress=False)
    assert len(res.df) == 4 and res.specs == [] and not res.df.passed.any()

def test_echoed_key_is_redacted_everywhere(tmp_path, monkeypatch):
    key = "zz-live-key-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    echo = f"Unauthorized: key {key} / sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA is not valid"
    replies = [reply(echo), RuntimeError(echo), reply(echo + " " + "x" * 100_000)] + [reply(echo)] * 10
    gen = LLMGenerator(client=RecordingClient(RawClient(replies), tmp_path / "cassette.jsonl"), model="scripted",
                       structured="none")
    specs = synthesize([FAMILY], n=3, generator=gen, out_dir=tmp_path / "out", progress=False)
    assert specs == []
    files = [tmp_path / "cassette.jsonl", tmp_path / "out" / "manifest.jsonl", *(tmp_path / "out" / "errors").glob("*.json")]
    assert len(files) == 5
    for f in files:
        text = f.read_text()
        assert key not in text and "sk-proj-AAAA" not in text and "[REDACTED]" in text, f
        if f.name != "cassette.jsonl": assert len(text) < 30_000, f"{f} stores uncapped raw output ({len(text)} chars)"
    contents = [json.loads(l).get("response", {}).get("content") or "" for l in (tmp_path / "cassette.jsonl").read_text().splitlines()]
    assert max(map(len, contents)) < 51_000  # the 100k reply was capped
    assert all(e["status"] == "error" for e in read_manifest(tmp_path / "out").values())

def test_generator_follows_the_shared_policy(monkeypatch):
    p0 = default_policy()
    try:
        set_default_policy(timeout=7, max_retries=0)
        g = LLMGenerator(base_url="http://127.0.0.1:9/v1", model="m")
        assert (g._client.timeout, g._client.max_retries) == (7, 0)
        g = LLMGenerator(base_url="http://127.0.0.1:9/v1", model="m", timeout=3)
        assert (g._client.timeout, g._client.max_retries) == (3, 0) and g.policy() == LLMPolicy(timeout=3, max_retries=0)
    finally: set_default_policy(**p0.model_dump())


def test_a_failed_request_is_retried_with_the_same_prompt():
    "A request that fails (here a timeout) is a `gen.request_failed` finding; the next round resends the same prompt."
    import httpx
    client = RawClient([httpx.ReadTimeout("timed out"), reply(valid_reply())])
    out = repair(FAMILY, 3, "easy", LLMGenerator(client=client, model="scripted", structured="none"), max_rounds=1)
    assert out.passed and out.rounds == 1
    f = out.history[0]["findings"]
    assert [x["code"] for x in f] == ["gen.request_failed"] and "ReadTimeout: timed out" in f[0]["message"]
    assert out.history[1]["feedback"] is None and client.requests[0]["messages"] == client.requests[1]["messages"]
