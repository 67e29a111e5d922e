"""Synthesis (coworkenv.synthesis): procedural + LLM generators, resumable `synthesize`, record/replay.

The LLM path runs end to end against a real `transformers serve` of the tiny random test model (the
`tiny_server` fixture): its answers are junk, so generations must fail cleanly with `GenerationError`
and a synthesis run must record the errors and finish. Set COWORKENV_RECORD_CASSETTES=1 to re-record the
committed cassette tests/cassettes/llm_synth_tiny.jsonl (it is also written when missing).
"""
import json, os, pickle, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from coworkenv.core import Check, NegativePlan, Step, TaskSpec, save_spec
from coworkenv.workflows import FAMILIES, DIFFICULTIES, GenContext, WorkflowFamily
from coworkenv.synthesis import (GenerationError, LLMGenerator, ProceduralGenerator, RecordingClient, ReplayClient,
                                 ReplayError, derived_seed, extract_json, fingerprint, make_slots, near_duplicate_rate,
                                 read_manifest, synthesis_messages, synthesize)

CASSETTE = Path(__file__).parent / "cassettes" / "llm_synth_tiny.jsonl"
SECRET = "sk-test-DO-NOT-LEAK-7f3a9c"


# ---- a small family of our own (stable whatever the real families do) ------------------------------

def _build(ctx: GenContext) -> TaskSpec:
    people = [ctx.person() for _ in range(ctx.scale(2, 3, 4))]
    nid = ctx.ident("note")
    rcpt = [p["email"] for p in people]
    title = ctx.pick(["Roadmap sync", "Budget review", "Hiring plan", "Vendor review"])
    notes = [{"note_id": nid, "title": title, "content": "Decisions: ...", "created_at": ctx.at(-1, 15),
              "participants": rcpt, "duration_minutes": ctx.pick([30, 45, 60])}]
    return TaskSpec(id=ctx.spec_id, workflow=FAM_NAME, difficulty=ctx.difficulty, now=ctx.now_iso,
                    request=ctx.phrase(["Share the {t} notes with everyone who attended.",
                                        "Please send the notes from the {t} to its participants."], t=title),
                    services={"notes": notes}, tools=["notes_list", "notes_get", "notes_share"],
                    checks=[Check(id="shared", type="audit_field_equals",
                                  params=dict(service="notes", action="shared", field="recipients", value=rcpt))],
                    solution=[Step.call("notes_list"), Step.call("notes_share", note_id=nid, recipients=rcpt), Step.say("Shared.")],
                    negatives=[NegativePlan(name="shortcut", plan=[Step.say("Done.")], must_fail=["shared"])])

FAM_NAME = "test_synth_share_note"
# not registered: the registry is process-wide and other tests / notebooks in this session iterate over it;
# every synthesis function takes `WorkflowFamily` objects as well as names
FAM = WorkflowFamily(FAM_NAME, "Share a note", "Share meeting notes with the attendees.", "productivity", ["notes"],
                     ["tool_coordination"], ["only attendees receive the notes"], _build)

REAL = sorted(n for n in FAMILIES if not n.startswith(("test_", "demo_")))


# ---- stand-in clients ----------------------------------------------------------------------------

class FakeClient:
    "Duck-typed `client.chat.completions.create`; `answer` is a string or a function of the request."
    def __init__(self, answer, reject_structured=False):
        self.requests, self.answer, self.reject = [], answer, reject_structured
        self.chat = NS(completions=NS(create=self._create))
        self.base_url = "http://fake/v1"

    def _create(self, **kw):
        self.requests.append(kw)
        if self.reject and "response_format" in kw:
            e = RuntimeError("Error code: 422 - response_format unsupported"); e.status_code = 422
            raise e
        text = self.answer(kw) if callable(self.answer) else self.answer
        return NS(choices=[NS(message=NS(role="assistant", content=text), finish_reason="stop")])


def _chatty(spec: TaskSpec) -> str:
    return "Sure! Here is the environment you asked for:\n\n```json\n" + spec.to_json(indent=2) + "\n```\n\nAnything else?"


# ---- procedural ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fam", [FAM_NAME] + REAL)
def test_procedural_byte_identical_and_diverse(fam, tmp_path):
    gen = ProceduralGenerator()
    fam_obj = FAM if fam == FAM_NAME else fam
    for d in DIFFICULTIES:
        a, b = gen.generate(fam_obj, 5, d), gen.generate(fam_obj, 5, d)
        assert a.to_json() == b.to_json()
        pa, pb = save_spec(a, tmp_path / f"a-{d}.json"), save_spec(b, tmp_path / f"b-{d}.json")
        assert pa.read_bytes() == pb.read_bytes()
        assert a.id == f"{fam}-{d}-00005" and a.meta["generator"] == "procedural"
        others = [gen.generate(fam_obj, s, d) for s in range(6, 10)]
        assert all(o.to_json() != a.to_json() for o in others)
        assert len({fingerprint(s) for s in [a] + others}) == 5


def test_procedural_repair_rounds():
    gen = ProceduralGenerator()
    base = gen.generate(FAM, 3, "medium")
    r1, r2 = gen.generate(FAM, 3, "medium", feedback="vacuous check", round=1), gen.generate(FAM, 3, "medium", round=2)
    for r, k in ((r1, 1), (r2, 2)):
        assert r.id == base.id and r.workflow == FAM_NAME and r.difficulty == "medium"
        assert r.meta["repair_round"] == k and r.meta["source_seed"] == derived_seed(3, k)
        assert fingerprint(r) != fingerprint(base)
    assert gen.generate(FAM, 3, "medium", round=1).to_json() == r1.to_json()
    assert derived_seed(3, 1) != derived_seed(4, 1) and derived_seed(3, 0) == 3


def test_procedural_invalid_family_raises_generation_error():
    bad = WorkflowFamily("test_synth_bad", "Bad", "d", "x", ["notes"], ["safety"], [],
                         lambda ctx: TaskSpec(id=ctx.spec_id, workflow="test_synth_bad", difficulty=ctx.difficulty,
                                              request="x", checks=[{"id": "c", "type": "audit_count",
                                                                    "params": {"service": "notes", "action": "shared"}}]))
    with pytest.raises(GenerationError) as e:
        ProceduralGenerator().generate(bad, 1, "easy")
    assert e.value.family == "test_synth_bad" and e.value.seed == 1 and e.value.problems
    wrong_id = WorkflowFamily("test_synth_wrong_id", "W", "d", "x", ["notes"], ["safety"], [],
                              lambda ctx: TaskSpec(id="whatever", workflow="test_synth_wrong_id", difficulty=ctx.difficulty, request="x"))
    with pytest.raises(GenerationError, match="must set id"):
        ProceduralGenerator().generate(wrong_id, 1, "easy")


# ---- synthesize ----------------------------------------------------------------------------------

def test_slots_round_robin():
    fams = [FAM] + REAL[:2]
    names = [FAM_NAME] + REAL[:2]
    sl = make_slots(fams, n=3 * len(fams) * 2, seed=7)
    assert [s.family for s in sl[:len(fams)]] == names
    for f in names:
        mine = [s for s in sl if s.family == f]
        assert [s.seed for s in mine] == list(range(7, 7 + len(mine)))
        assert [s.difficulty for s in mine] == ["easy", "medium", "hard"] * 2
    assert len({s.id for s in sl}) == len(sl)
    assert {s.difficulty for s in make_slots(fams, 9, difficulty="hard")} == {"hard"}
    with pytest.raises(KeyError, match="unknown workflow family"):
        make_slots(["no_such_family"], 3)


class Interrupting:
    "Procedural, but raises KeyboardInterrupt (a killed process) once `stop_after` specs were made."
    name = "procedural"

    def __init__(self, stop_after=None):
        self.made, self.stop_after, self.inner = 0, stop_after, ProceduralGenerator()

    def generate(self, family, seed, difficulty, feedback=None, round=0):
        if self.stop_after is not None and self.made >= self.stop_after:
            raise KeyboardInterrupt
        self.made += 1
        return self.inner.generate(family, seed, difficulty, feedback, round)


def _manifest_lines(d):
    "Every readable manifest line (a torn line, from a killed process, is skipped as `read_manifest` does)."
    out = []
    for l in (Path(d) / "manifest.jsonl").read_text().splitlines():
        try: out.append(json.loads(l))
        except json.JSONDecodeError: pass
    return out


def test_synthesize_resumes_without_duplicates(tmp_path):
    fams = [FAM] + REAL[:2]
    n = 10
    with pytest.raises(KeyboardInterrupt):
        synthesize(fams, n=n, seed=0, generator=Interrupting(stop_after=4), out_dir=tmp_path, progress=False)
    assert len(_manifest_lines(tmp_path)) == 4
    # simulate a process killed in the middle of writing a manifest line
    with open(tmp_path / "manifest.jsonl", "a") as f:
        f.write('{"id": "torn')
    second = Interrupting()
    with pytest.warns(UserWarning, match="moved 1 unreadable line"):
        specs = synthesize(fams, n=n, seed=0, generator=second, out_dir=tmp_path, progress=False)
    assert (tmp_path / "manifest.jsonl.corrupt").read_text() == '{"id": "torn\n'  # kept aside, out of the way
    assert second.made == n - 4  # only the missing slots were generated
    slots = make_slots(fams, n, 0)
    assert [s.id for s in specs] == [s.id for s in slots]
    ok = [l["id"] for l in _manifest_lines(tmp_path) if l.get("status") == "ok"]
    assert sorted(ok) == sorted(s.id for s in slots) and len(ok) == len(set(ok))
    assert sorted(p.stem for p in (tmp_path / "specs").glob("*.json")) == sorted(s.id for s in slots)
    # the specs on disk are those of an uninterrupted in-memory run, byte for byte
    fresh = synthesize(fams, n=n, seed=0, progress=False)
    assert [s.to_json() for s in specs] == [s.to_json() for s in fresh]
    # a third run does nothing; a longer run only adds the new slots
    third = Interrupting()
    assert len(synthesize(fams, n=n, seed=0, generator=third, out_dir=tmp_path, progress=False)) == n and third.made == 0
    more = Interrupting()
    assert len(synthesize(fams, n=n + 3, seed=0, generator=more, out_dir=tmp_path, progress=False)) == n + 3 and more.made == 3


class Failing:
    "Fails some slots with GenerationError, some with an unexpected exception."
    name = "failing"

    def generate(self, family, seed, difficulty, feedback=None, round=0):
        if seed == 1:
            raise GenerationError("could not read a JSON object", "junk!", [("", "no JSON object in the output")],
                                  family.name, seed, difficulty)
        if seed == 2:
            raise RuntimeError("family bug")
        return ProceduralGenerator().generate(family, seed, difficulty)


def test_synthesize_records_errors_and_retries_them(tmp_path):
    specs = synthesize([FAM], n=5, generator=Failing(), out_dir=tmp_path, progress=False)
    assert [s.meta["generator"] for s in specs] == ["procedural"] * 3
    m = read_manifest(tmp_path)
    assert [m[s.id]["status"] for s in make_slots([FAM], 5)] == ["ok", "error", "error", "ok", "ok"]
    e1 = m[f"{FAM_NAME}-medium-00001"]
    assert e1["problems"] == [["", "no JSON object in the output"]] and e1["generator"] == "failing"
    assert "RuntimeError: family bug" in m[f"{FAM_NAME}-hard-00002"]["error"]
    raw = json.loads((tmp_path / "errors" / f"{FAM_NAME}-medium-00001.json").read_text())
    assert raw["raw"] == "junk!"
    assert all(m[i]["fingerprint"] for i in m if m[i]["status"] == "ok")
    # in memory: the same, without files
    assert len(synthesize([FAM], n=5, generator=Failing(), progress=False)) == 3
    # a rerun with a working generator fills the failed slots only
    gen = Interrupting()
    assert len(synthesize([FAM], n=5, generator=gen, out_dir=tmp_path, progress=False)) == 5 and gen.made == 2
    assert all(e["status"] == "ok" for e in read_manifest(tmp_path).values())


def test_synthesize_workers_same_result(tmp_path):
    a = synthesize([FAM] + REAL, n=12, progress=False)
    b = synthesize([FAM] + REAL, n=12, progress=False, workers=4, out_dir=tmp_path)
    assert [s.to_json() for s in a] == [s.to_json() for s in b]
    assert [l["id"] for l in _manifest_lines(tmp_path)] == [s.id for s in a]


def test_synthesize_all_registered_families():
    specs = synthesize(n=2 * len(FAMILIES), progress=False)
    assert {s.workflow for s in specs} == set(FAMILIES) and FAM_NAME not in FAMILIES


def test_near_duplicate_rate():
    specs = synthesize([FAM] + REAL, n=30, progress=False)
    assert near_duplicate_rate(specs) == 0.0
    assert near_duplicate_rate([]) == 0.0
    dup = specs[0].model_copy(update=dict(id="other-id", request="a different request"))
    assert fingerprint(dup) == fingerprint(specs[0])
    assert near_duplicate_rate(specs + [dup, dup]) == pytest.approx(2 / 32)
    other_wf = specs[0].model_copy(update=dict(workflow="something_else"))
    assert fingerprint(other_wf) != fingerprint(specs[0])


# ---- LLM generator, offline --------------------------------------------------------------------

def test_llm_parses_chatty_fenced_spec_and_forces_slot():
    src = ProceduralGenerator().generate(FAM, 99, "hard")
    client = FakeClient(_chatty(src.model_copy(update=dict(id="model-made-this-up", workflow="nope", difficulty="easy"))))
    spec = LLMGenerator(model="fake", client=client).generate(FAM, 4, "medium")
    assert (spec.id, spec.workflow, spec.difficulty) == (f"{FAM_NAME}-medium-00004", FAM_NAME, "medium")
    assert spec.services == src.services and spec.checks == src.checks
    assert spec.meta["generator"] == "llm" and spec.meta["model"] == "fake" and spec.meta["structured"] is True
    req = client.requests[0]
    assert req["response_format"]["json_schema"]["name"] == "TaskSpec"
    assert req["response_format"]["json_schema"]["schema"] == TaskSpec.model_json_schema()


@pytest.mark.parametrize("fam", [FAM_NAME] + REAL)
def test_llm_prompt_and_roundtrip_for_every_family(fam):
    from coworkenv.services import SERVICES
    from coworkenv.workflows import get_family
    f = FAM if fam == FAM_NAME else get_family(fam)
    gen = LLMGenerator(model="fake", client=FakeClient(lambda kw: _chatty(ProceduralGenerator().generate(f, 11, "medium"))))
    msgs = synthesis_messages(gen, f, 3, "medium", feedback="checks[0] is vacuous", round=1)
    user = msgs[1]["content"]
    assert f.requirements() in user and "checks[0] is vacuous" in user and f"{fam}-medium-00003" in user
    for s in f.services:
        for t in SERVICES[s].tool_specs():
            assert t.name in user
    for c in f.capabilities:
        assert c in user
    assert "audit_sequence(" in user and "asked_for(" in user
    spec = gen.generate(f, 3, "medium", feedback="x", round=1)
    assert spec.id == f"{fam}-medium-00003" and spec.meta["repair_round"] == 1
    assert spec.services == ProceduralGenerator().generate(f, 11, "medium").services


def test_llm_fallback_when_structured_rejected_is_remembered():
    src = ProceduralGenerator().generate(FAM, 1, "easy")
    client = FakeClient(_chatty(src), reject_structured=True)
    gen = LLMGenerator(model="fake", client=client)
    assert gen.generate(FAM, 1, "easy").meta["structured"] is False
    gen.generate(FAM, 2, "easy")
    assert ["response_format" in r for r in client.requests] == [True, False, False]
    # 'json_schema' never falls back: the rejection is a GenerationError
    strict = LLMGenerator(model="fake", client=FakeClient(_chatty(src), reject_structured=True), structured="json_schema")
    with pytest.raises(GenerationError, match="request") as e:
        strict.generate(FAM, 1, "easy")
    assert e.value.problems[0][0] == "request"
    plain = FakeClient(_chatty(src))
    LLMGenerator(model="fake", client=plain, structured="none").generate(FAM, 1, "easy")
    assert "response_format" not in plain.requests[0]


@pytest.mark.parametrize("text,needle", [
    ("", "empty output"), ("Sorry, I cannot do that.", "no JSON object"), ('{"id": "x", "request": "hi", "checks": [', "not closed"),
    ('{"request": "hi", "checks": [{"id": "a", "type": "bogus"}], "solution": [{"kind": "ask", "fact": "nope"}]}', "checks[0].type"),
    ('{"request": 5}', "request"),
])
def test_llm_junk_raises_generation_error(text, needle):
    with pytest.raises(GenerationError) as e:
        LLMGenerator(model="fake", client=FakeClient(text)).generate(FAM, 1, "easy")
    assert needle in str(e.value) and e.value.raw == text
    assert (e.value.family, e.value.seed, e.value.difficulty) == (FAM_NAME, 1, "easy")
    e2 = pickle.loads(pickle.dumps(e.value))
    assert e2.problems == e.value.problems and str(e2) == str(e.value)


def test_extract_json_tolerance():
    assert extract_json('noise {"a": {"b": "{"}, "c": [1,],} tail') == {"a": {"b": "{"}, "c": [1]}
    assert extract_json('{"small": 1} then the real one ```json\n{"request": "r", "x": [1, 2]}\n```') == {"request": "r", "x": [1, 2]}


def test_llm_config_from_env_and_key_never_leaks(tmp_path, monkeypatch):
    monkeypatch.setenv("COWORKENV_SYNTH_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens on port 9
    monkeypatch.setenv("COWORKENV_SYNTH_MODEL", "env-model")
    monkeypatch.setenv("COWORKENV_SYNTH_API_KEY", SECRET)
    gen = LLMGenerator(max_retries=0, timeout=5)
    assert gen.base_url == "http://127.0.0.1:9/v1" and gen.model == "env-model"
    assert gen._client.api_key == SECRET  # the key is inside the client, and only there
    assert SECRET not in repr(gen) + gen.name + json.dumps({k: str(v) for k, v in vars(gen).items() if k != "_client"})
    assert SECRET.encode() not in pickle.dumps(gen)
    copy = pickle.loads(pickle.dumps(gen))
    assert copy._client.api_key == SECRET  # rebuilt from the environment where it is unpickled
    # a run against a dead server: every slot is a recorded error, nothing leaks into any file
    gen._client = RecordingClient(gen._client, tmp_path / "cassette.jsonl")
    specs = synthesize([FAM], n=2, generator=gen, out_dir=tmp_path / "out", progress=False)
    assert specs == []
    m = read_manifest(tmp_path / "out")
    assert [e["status"] for e in m.values()] == ["error", "error"] and all(e["problems"][0][0] == "request" for e in m.values())
    # and with a working (fake) server the spec meta carries no key either
    ok = LLMGenerator(api_key=SECRET, client=FakeClient(_chatty(ProceduralGenerator().generate(FAM, 1, "easy"))))
    synthesize([FAM], n=2, generator=ok, out_dir=tmp_path / "out2", progress=False)
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert SECRET not in p.read_text(), p


# ---- record / replay -----------------------------------------------------------------------------

def test_record_replay_fake(tmp_path):
    cas = tmp_path / "c.jsonl"
    answers = iter([_chatty(ProceduralGenerator().generate(FAM, 1, "easy")), "junk", _chatty(ProceduralGenerator().generate(FAM, 2, "hard"))])
    rec = LLMGenerator(model="fake", client=RecordingClient(FakeClient(lambda kw: next(answers), reject_structured=True), cas))

    def run(gen):
        out = []
        for s in (1, 2, 3):
            try: out.append(gen.generate(FAM, s, "easy").to_json())
            except GenerationError as e: out.append(("error", e.raw, e.problems))
        return out

    first = run(rec)
    lines = [json.loads(l) for l in cas.read_text().splitlines()]
    assert [("error" in l, l["request"]["structured"]) for l in lines] == [(True, True), (False, False), (False, False), (False, False)]
    assert lines[0]["error"]["status"] == 422
    for _ in range(2):
        assert run(LLMGenerator(model="fake", client=ReplayClient(cas))) == first
    # a different request is refused, naming the difference; so is one past the end
    with pytest.raises(ReplayError, match=r"messages\[1\] differs"):
        LLMGenerator(model="fake", client=ReplayClient(cas)).generate(FAM, 1, "hard")
    with pytest.raises(ReplayError, match="model"):
        LLMGenerator(model="other", client=ReplayClient(cas)).generate(FAM, 1, "easy")
    rc = ReplayClient(cas)
    run(LLMGenerator(model="fake", client=rc))
    with pytest.raises(ReplayError, match="not recorded"):
        rc.chat.completions.create(model="fake", messages=[])
    with pytest.raises(FileNotFoundError):
        ReplayClient(tmp_path / "missing.jsonl")


# ---- against a real OpenAI-compatible server (tiny random model) -------------------------------

class _RejectStructuredProxy:
    "A real HTTP front for the tiny server that answers 422 to `response_format` (like servers without it)."
    def __init__(self, upstream: str):
        import httpx
        outer = self
        self.seen = []

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a): pass

            def _send(self, code, body: bytes, ctype="application/json"):
                self.send_response(code); self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)

            def do_GET(self):
                r = httpx.get(upstream + self.path, timeout=60)
                self._send(r.status_code, r.content)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.seen.append("response_format" in body)
                if "response_format" in body:
                    return self._send(422, json.dumps({"detail": "response_format is not supported"}).encode())
                r = httpx.post(upstream + self.path, json=body, timeout=300)
                self._send(r.status_code, r.content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown(); self.server.server_close()


def _tiny_gen(srv, **kw):
    return LLMGenerator(base_url=srv.base_url, model=srv.model, api_key=SECRET, max_tokens=48, max_retries=0, timeout=120, **kw)


def test_llm_tiny_server_structured_attempt_junk_is_generation_error(tiny_server, tmp_path):
    gen = _tiny_gen(tiny_server)
    gen._client = RecordingClient(gen._client, tmp_path / "c.jsonl")
    with pytest.raises(GenerationError) as e:
        gen.generate(FAM, 0, "easy")
    assert e.value.raw is not None and e.value.problems and e.value.family == FAM_NAME
    lines = [json.loads(l) for l in (tmp_path / "c.jsonl").read_text().splitlines()]
    # transformers serve accepts `response_format` (and ignores it): one structured request, answered
    assert len(lines) == 1 and lines[0]["request"]["structured"] and lines[0]["response"]["content"] == e.value.raw
    assert gen._structured_ok is not False


def test_llm_tiny_server_fallback_through_rejecting_proxy(tiny_server):
    proxy = _RejectStructuredProxy(tiny_server.url)
    try:
        gen = LLMGenerator(base_url=proxy.base_url, model=tiny_server.model, api_key=SECRET, max_tokens=32, max_retries=0, timeout=120)
        for seed in (0, 1):
            with pytest.raises(GenerationError) as e:
                gen.generate(FAM, seed, "easy")
            assert e.value.problems[0][0] != "request", e.value  # the model answered (junk), the request did not fail
        assert proxy.seen == [True, False, False] and gen._structured_ok is False
    finally:
        proxy.close()


def test_synthesize_llm_tiny_server_never_crashes(tiny_server, tmp_path):
    gen = _tiny_gen(tiny_server)
    specs = synthesize([FAM] + REAL[:1], n=3, generator=gen, out_dir=tmp_path, progress=False)
    m = read_manifest(tmp_path)
    assert len(m) == 3 and all(e["generator"] == gen.name for e in m.values())
    errors = [e for e in m.values() if e["status"] == "error"]
    assert len(specs) + len(errors) == 3 and errors  # junk from a random model: errors, recorded
    assert all(e["problems"] for e in errors)
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert SECRET not in p.read_text()


def test_record_tiny_server_then_replay_twice(tiny_server, tmp_path):
    record = os.environ.get("COWORKENV_RECORD_CASSETTES") == "1" or not CASSETTE.exists()
    cas = CASSETTE if record else tmp_path / "tiny.jsonl"
    if record and cas.exists():
        cas.unlink()
    gen = _tiny_gen(tiny_server)
    gen._client = RecordingClient(gen._client, cas)

    def run(g):
        out = []
        for s, d in ((0, "easy"), (1, "medium")):
            try: out.append(("ok", g.generate(FAM, s, d).to_json()))
            except GenerationError as e: out.append(("error", e.raw, e.problems, str(e)))
        return out

    first = run(gen)
    assert all(r[0] == "error" for r in first)  # the tiny model's junk never parses
    text = cas.read_text()
    assert SECRET not in text and "authorization" not in text.lower()
    for _ in range(2):
        assert run(LLMGenerator(model=tiny_server.model, max_tokens=48, client=ReplayClient(cas))) == first


def test_committed_cassette_replays():
    assert CASSETTE.exists(), "run the tiny-server tests once to record it"
    rc = ReplayClient(CASSETTE, strict=False)
    assert len(rc.exchanges) >= 2 and SECRET not in CASSETTE.read_text()
    gen = LLMGenerator(client=rc, max_tokens=48)
    results = []
    for s in range(len(rc.exchanges)):
        with pytest.raises(GenerationError) as e:
            gen.generate(FAM, s, "easy")
        results.append(e.value.raw)
    assert results == [x["response"]["content"] for x in rc.exchanges]
    assert gen.model == rc.exchanges[0]["request"]["model"]


# ---- request diversity and the paraphrase pass --------------------------------------------------------------

from coworkenv.synthesis import (DIVERSITY_TARGET, cited_phrases, family_names, paraphrase_problem, paraphrase_requests,
                                 request_diversity, request_template)


def _with_request(spec, request, cited=()):
    "The spec with another request, and one check per cited phrase (copies of its first check) citing it."
    cites = [spec.checks[0].model_copy(update=dict(id=f"cite{i}", source=f"request: {p}")) for i, p in enumerate(cited)]
    return spec.model_copy(update=dict(request=request, checks=[*cites, *spec.checks]))


def test_request_template_masks_variable_parts():
    s = ProceduralGenerator().generate(FAM, 1, "easy")
    a = _with_request(s, "Pay INV-1042 ($1,250.00) to ana@acme.com before March 3rd at 3pm, then ping Ana Lopez in Finance Ops.")
    b = _with_request(s, "Pay CLM-7 ($90) to li@corp.example.org before 11 April at 10:30, then ping Bo Chen in Sales.")
    assert request_template(a) == request_template(b)
    assert "<email>" in request_template(a) and "<amount>" in request_template(a) and "<date>" in request_template(a)
    c = _with_request(s, "Could you settle INV-1042 for me?")
    assert request_template(a) != request_template(c)


def test_request_diversity_table_for_every_family():
    specs = synthesize(REAL, n=3 * len(REAL), progress=False)
    dv = request_diversity(specs)
    assert set(dv.index) == {s.workflow for s in specs}
    assert (dv.templates <= dv.distinct_requests).all() and (dv.distinct_requests <= dv.specs).all()
    assert (dv.meets_target == (dv.templates >= DIVERSITY_TARGET)).all()


class ScriptedParaphraser:
    "An OpenAI-style client answering from a list (exceptions are raised); keeps the prompts."
    def __init__(self, replies):
        self.replies, self.prompts = list(replies), []
        self.chat = NS(completions=NS(create=self._create))
        self.models = NS(list=lambda: [NS(id="scripted")])
    def _create(self, **kw):
        self.prompts.append(kw["messages"][-1]["content"])
        r = self.replies.pop(0)
        if isinstance(r, Exception): raise r
        return r if not isinstance(r, str) else NS(choices=[NS(message=NS(content=r), finish_reason="stop")])


def test_paraphrase_keeps_cited_phrases_or_the_original():
    s = _with_request(ProceduralGenerator().generate(FAM, 1, "easy"),
                      "Share the Budget review notes with everyone who attended, and mention INV-204.",
                      cited=["share the budget review notes", "everyone who attended"])
    assert cited_phrases(s) == ["share the budget review notes", "everyone who attended"]
    ok = "Hey, could you share the Budget review notes with everyone who attended? Please reference INV-204."
    replies = [ok,
               "Could you send the budget notes to all attendees? Reference INV-204.",           # loses a cited phrase
               "Please share the budget review notes with everyone who attended.",               # loses the id
               NS(choices=[NS(message=NS(content=["not", "text"]), finish_reason="stop")]),      # non-string content
               NS(choices=[]),                                                                   # no choices
               RuntimeError("Error code: 429 - slow down (key sk-proj-ABCDEFGHIJKLMNOPQRSTUV)"),  # endpoint error
               s.request]                                                                        # unchanged
    client = ScriptedParaphraser(replies)
    out = paraphrase_requests([s] * len(replies), client)
    verdicts = [o.meta["paraphrase"] for o in out]
    assert verdicts[0] == "accepted" and out[0].request == ok and out[0].meta["original_request"] == s.request
    assert "cited phrase 'everyone who attended'" in verdicts[1] or "cited phrase 'share the budget review notes'" in verdicts[1]
    assert "INV-204" in verdicts[2]
    assert all(v.startswith("rejected") for v in verdicts[1:]) and all(o.request == s.request for o in out[1:])
    assert "sk-proj-ABCD" not in verdicts[5] and "429" in verdicts[5]
    assert all('"share the budget review notes"' in p for p in client.prompts)  # the prompt names the phrases to keep
    for o in out[1:]: assert paraphrase_problem(s, o.request) == "unchanged"


def test_paraphrase_problem_rules():
    s = _with_request(ProceduralGenerator().generate(FAM, 1, "easy"), "Pay $1,250 to ana@acme.com.", cited=["Pay"])
    assert paraphrase_problem(s, "") == "empty paraphrase"
    assert paraphrase_problem(s, "Send ana@acme.com $1,250.") == "drops the cited phrase 'Pay'"
    assert "ana@acme.com" in paraphrase_problem(s, "Pay $1,250 to Ana.")
    assert paraphrase_problem(s, "Please pay ana@acme.com the $1,250.") is None


def test_paraphrase_rejects_secrets_and_bloat():
    s = _with_request(ProceduralGenerator().generate(FAM, 1, "easy"), "Pay INV-9 today.", cited=["Pay"])
    assert paraphrase_problem(s, "Pay INV-9 today, key sk-proj-ABCDEFGHIJKLMNOPQRSTUV") == "contains a secret"
    assert paraphrase_problem(s, "Pay INV-9 today. " + "really " * 200).startswith("too long")


def test_synth_paraphrase_flag(tmp_path, monkeypatch):
    "`coworkenv synth --paraphrase`: accepted paraphrases are written back (once), rejected ones keep the original."
    import coworkenv.synthesis as S
    from coworkenv.cli import main
    fam = REAL[0]
    base = synthesize([fam], n=2, progress=False)
    replies = [base[0].request + " Thanks!", "nope"]
    client = ScriptedParaphraser(replies)
    monkeypatch.setattr(S, "openai_client", lambda *a, **k: client)
    assert main(["synth", "--families", fam, "-n", "2", "--out", str(tmp_path), "--quiet", "--paraphrase", "--model", "m"]) == 0
    after = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "specs").glob("*.json")}
    got = sorted(d["meta"]["paraphrase"].split(":")[0] for d in after.values())
    assert got == ["accepted", "rejected"]
    acc = next(d for d in after.values() if d["meta"]["paraphrase"] == "accepted")
    assert acc["request"].endswith(" Thanks!") and acc["meta"]["original_request"] == base[0].request
    assert main(["synth", "--families", fam, "-n", "2", "--out", str(tmp_path), "--quiet", "--paraphrase", "--model", "m"]) == 0
    assert client.replies == [] and len(client.prompts) == 2  # already paraphrased specs are not sent again
