"""Claw-Eval hardening (issue 7): the grader hook builds its arguments from the checkout's own model classes (a
stand-in checkout in tests/fixtures/claweval_standin), errored trials keep their reason, graders run in a separate
limited process (time, memory, no secrets, no solution, no cross-task effect), task folders cannot make us read or
write outside them, exports are atomic under SIGKILL, YAML alias bombs are refused, tasks without
scoring_components are flagged, sandbox-only fields are classified by mode."""
import json, os, re, shutil, signal, subprocess, sys, textwrap, time, warnings
from pathlib import Path
import pytest, yaml

import coworkenv.checks
from coworkenv.core import Step, load_spec
from coworkenv.agents import PlanAgent, run_episode
from coworkenv.claweval import (ClawEvalEnv, ClawEvalError, GraderError, claweval_cli, claweval_status, contained_path,
                                export_claweval, load_claweval_task, load_yaml_bounded, needs_grader, run_claweval_task,
                                run_grader, scrubbed_env, task_grader, to_claweval_evidence)

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "data" / "claweval_examples"
STANDIN = Path(__file__).parent / "fixtures" / "claweval_standin"
TRAJ = json.loads((Path(__file__).parent / "claweval_trajectories.json").read_text())
VPN = "ce_helpdesk_vpn_cert"
FAST = dict(timeout=4.0)

def quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)

def run_plan(spec, steps):
    env = quiet(ClawEvalEnv, spec)
    return run_episode(env, PlanAgent(spec, [Step.model_validate(s) for s in steps]))

@pytest.fixture(scope="module")
def vpn():
    "(spec, correct trajectory, wrong trajectory) of the helpdesk example task."
    spec = quiet(load_claweval_task, EX / VPN)
    return spec, run_plan(spec, TRAJ[VPN]["correct"]), run_plan(spec, TRAJ[VPN]["wrong"])

def checkout(tmp_path) -> Path:
    "A stand-in Claw-Eval checkout with the helpdesk example under tasks/ and an official-style grader."
    root = tmp_path / "claw-eval"
    shutil.copytree(STANDIN / "src", root / "src")
    task = shutil.copytree(EX / VPN, root / "tasks" / VPN)
    shutil.copy(STANDIN / "graders" / "standin_grader.py", task / "grader.py")
    return root

# ---- 1. evidence from the checkout's classes / stand-ins ---------------------------------------------------------

def test_grader_gets_the_checkouts_own_classes(tmp_path):
    root = checkout(tmp_path)
    spec = quiet(load_claweval_task, root / "tasks" / VPN)
    cm = spec.meta["claweval"]
    assert cm["repo_root"] == str(root.resolve()) and cm["task_file"] == str((root / "tasks" / VPN / "task.yaml").resolve())
    assert task_grader(spec) == (root / "tasks" / VPN / "grader.py").resolve()
    good, bad = run_plan(spec, TRAJ[VPN]["correct"]), run_plan(spec, TRAJ[VPN]["wrong"])
    ev = to_claweval_evidence(good, spec)
    assert ev.repo_root == str(root.resolve()) and ev.task_file == cm["task_file"]
    g = run_grader(task_grader(spec), good, spec, **FAST)     # every isinstance assertion in the grader holds
    assert (g.completion, g.safety, g.robustness, g.score, g.passed) == (1.0, 1.0, 1.0, 1.0, True)
    assert g.item("grader.communication").score == 0.8
    gb = run_grader(task_grader(spec), bad, spec, **FAST)
    assert (gb.safety, gb.score, gb.passed) == (0.0, 0.0, False)
    r = run_claweval_task(spec, "oracle", k=2, grader="auto", grader_timeout=4)
    assert r.scores == [1.0, 1.0] and r.errors == [None, None] and r.all_pass

def test_official_style_grader_outside_a_checkout_is_an_errored_trial_with_the_reason(tmp_path, vpn):
    spec, good, _ = vpn
    task = shutil.copytree(EX / VPN, tmp_path / VPN)
    shutil.copy(STANDIN / "graders" / "standin_grader.py", task / "grader.py")
    with pytest.raises(GraderError, match=r"No module named 'claw_eval'.*Claw-Eval checkout"):
        run_grader(task / "grader.py", good, spec, **FAST)
    r = run_claweval_task(task, "oracle", k=1, grader="auto", grader_timeout=4)
    assert r.errored == [True] and r.task_errored and "claw_eval" in r.errors[0] and r.summary()["errors"] == r.errors

STANDIN_SHAPES_GRADER = '''
from pathlib import Path
class G:
    def grade(self, messages, dispatches, task, audit_data=None, judge=None):
        m0 = messages[0]
        assert type(m0).__name__ == "TraceMessage" and m0.type == "message" and m0.trace_id and m0.usage.input_tokens == 0
        assert m0.message.role == "user" and m0.message.text == task.prompt.text
        assert type(dispatches[0]).__name__ == "ToolDispatch" and dispatches[0].endpoint_url.startswith("http://localhost:")
        assert Path(task.task_file).name == "task.yaml" and task.environment.max_turns >= 1
        assert task.user_agent.enabled in (True, False)            # defaults filled in
        uses = [b for m in messages for b in m.message.content if b.type == "tool_use"]
        res = [b for m in messages for b in m.message.content if b.type == "tool_result"]
        assert [u.id for u in uses] == [r.tool_use_id for r in res] == [d.tool_use_id for d in dispatches]
        assert all(m.message.role == "user" for m in messages if any(b.type == "tool_result" for b in m.message.content))
        return {"completion": 1.0, "robustness": 1.0, "safety": 1.0}
'''

def test_standin_shapes_without_a_checkout(tmp_path, vpn):
    spec, good, _ = vpn
    (tmp_path / "grader.py").write_text(STANDIN_SHAPES_GRADER)
    assert run_grader(tmp_path / "grader.py", good, spec, **FAST).score == 1.0

# ---- 2. errored trials keep their reason; the CLI says so ---------------------------------------------------------

def test_grader_exception_is_reported_and_cli_exits_nonzero(tmp_path, capsys):
    task = shutil.copytree(EX / VPN, tmp_path / VPN)
    (task / "grader.py").write_text("class G:\n    def grade(self, messages, dispatches, task):\n        raise ValueError('boom: no audit')\n")
    r = run_claweval_task(task, "oracle", k=2, grader="auto", grader_timeout=4)
    assert r.errored == [True, True] and r.scores == [0.0, 0.0] and all("boom: no audit" in e for e in r.errors)
    rc = quiet(claweval_cli, ["run", str(task), "-k", "1", "--grader-timeout", "4"])
    out, err = capsys.readouterr()
    assert rc == 1 and "trial 1 errored:" in out and "ValueError: boom: no audit" in out and "every trial errored" in err
    (task / "grader.py").write_text("class G:\n    def grade(self, messages, dispatches, task):\n        return {'completion': 1.0, 'robustness': 1.0}\n")
    assert quiet(claweval_cli, ["run", str(task), "-k", "1", "--grader-timeout", "4"]) == 0

@pytest.mark.parametrize("body,why", [
    ("return None", "returned None"),
    ("return {'completion': float('nan')}", "completion is nan"),
    ("return {'completion': 'high'}", "not a number"),
    ("import sys; sys.exit(0)", "SystemExit"),
    ("import os; os._exit(3)", "exited with code 3"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "SIGSEGV"),
])
def test_misbehaving_graders_are_errors_with_reasons(tmp_path, vpn, body, why):
    spec, good, _ = vpn
    (tmp_path / "grader.py").write_text(f"class G:\n    def grade(self, messages, dispatches, task):\n        {body}\n")
    with pytest.raises(GraderError, match=re.escape(why)):
        run_grader(tmp_path / "grader.py", good, spec, **FAST)

# ---- 5. hostile graders -----------------------------------------------------------------------------------------

def test_grader_time_limit(tmp_path, vpn):
    spec, good, _ = vpn
    for body in ("while True: pass", "import time; time.sleep(60)"):
        (tmp_path / "grader.py").write_text(f"class G:\n    def grade(self, messages, dispatches, task):\n        {body}\n")
        t0 = time.monotonic()
        with pytest.raises(GraderError, match="timed out after 1.5 s"):
            run_grader(tmp_path / "grader.py", good, spec, timeout=1.5)
        assert time.monotonic() - t0 < 5

def test_grader_memory_limit(tmp_path, vpn):
    spec, good, _ = vpn
    (tmp_path / "grader.py").write_text("class G:\n    def grade(self, messages, dispatches, task):\n        x = bytearray(6 << 30)\n")
    with pytest.raises(GraderError, match="MemoryError"):
        run_grader(tmp_path / "grader.py", good, spec, timeout=4, memory_mb=600)

SNOOP = '''
import gc, json, os
MARK = "SOLUTION-MARKER-" + "7d1e"      # built at run time: the grader's own code does not contain it

def strings_in_memory():
    "Every string held by a container the garbage collector tracks (str objects themselves are not tracked)."
    for o in gc.get_objects():
        vals = list(o.keys()) + list(o.values()) if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()
        yield from (v for v in vals if isinstance(v, str))

class G:
    def grade(self, messages, dispatches, task, audit_data=None, judge=None, media_events=None, env_snapshot=None):
        env = json.dumps(dict(os.environ))
        secret = any(s in env for s in ("sk-planted-4242", "hf_planted", "tok-planted")) or any(
            k in os.environ for k in ("OPENAI_API_KEY", "HF_TOKEN", "MY_SERVICE_TOKEN", "DB_PASSWORD", "ANTHROPIC_API_KEY"))
        args = repr(messages) + repr(dispatches) + json.dumps(task.model_dump()) + json.dumps(audit_data) + repr(env_snapshot)
        in_args = MARK in args or "negatives" in args or "footprint" in args or "x_coworkenv" in args
        in_memory = any(v is not MARK and MARK in v for v in strings_in_memory())
        import coworkenv.checks, coworkenv.claweval
        coworkenv.checks.task_score = lambda *a, **k: 1.0          # try to make the *next* task score 1.0
        coworkenv.claweval.task_score = lambda *a, **k: 1.0
        return {"completion": 0.5 * secret + 0.25 * in_args + 0.125 * in_memory, "robustness": 0.0, "safety": 1.0}
'''

def test_hostile_grader_sees_no_secret_no_solution_and_cannot_patch_us(tmp_path, vpn, monkeypatch):
    spec, good, _ = vpn
    for k, v in {"OPENAI_API_KEY": "sk-planted-4242", "HF_TOKEN": "hf_planted", "MY_SERVICE_TOKEN": "tok-planted",
                 "DB_PASSWORD": "pw", "ANTHROPIC_API_KEY": "sk-planted-4242"}.items(): monkeypatch.setenv(k, v)
    assert not {"OPENAI_API_KEY", "HF_TOKEN", "MY_SERVICE_TOKEN", "DB_PASSWORD"} & set(scrubbed_env())
    assert "PATH" in scrubbed_env()
    marked = spec.model_copy(update={"solution": [*spec.solution, Step(kind="say", text="SOLUTION-MARKER-7d1e")],
                                     "negatives": [], "footprint": {"note": "SOLUTION-MARKER-7d1e"}})
    (tmp_path / "grader.py").write_text(SNOOP)
    g = run_grader(tmp_path / "grader.py", good, marked, **FAST)
    assert g.completion == 0.0, "the grader saw a secret (0.5), the solution in its arguments (0.25) or in memory (0.125)"
    assert g.score == 0.0                                        # our scoring, unpatched
    assert coworkenv.checks.task_score(0.0, 1.0, 0.0) == 0.0
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "grader.py").write_text("class G:\n    def grade(self, messages, dispatches, task):\n        return {'completion': 0.5}\n")
    assert run_grader(tmp_path / "ok" / "grader.py", good, spec, **FAST).score == 0.4   # the next task: 0.8 * 0.5

# ---- 6. paths: hostile task folders read and write nothing outside ------------------------------------------------

OPENED: list = []
def _audit(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)): OPENED.append(os.fsdecode(args[0]))
sys.addaudithook(_audit)

def base_task(d:Path, **over) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    doc = yaml.safe_load((EX / VPN / "task.yaml").read_text())
    doc.pop("x_coworkenv", None)
    shutil.copytree(EX / VPN / "fixtures", d / "fixtures", dirs_exist_ok=True)
    for k, v in over.items():
        if k == "env": doc["services"][0]["env"] = v
        else: doc[k] = v
    (d / "task.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True))
    return d

def hostile_folders(tmp_path, sentinel):
    "(name, task folder) pairs that each try to make the import read `sentinel`, which lies outside them."
    out = []
    def new(name, **over): d = base_task(tmp_path / "tasks" / name, **over); out.append((name, d)); return d
    new("abs_fixture", env={"HELPDESK_FIXTURES": str(sentinel)})
    new("dotdot_fixture", env={"HELPDESK_FIXTURES": "../../sentinel.json"})
    new("dotdot_inside", env={"HELPDESK_FIXTURES": "tasks/x/../../../sentinel.json"})
    d = new("symlink_fixture", env={"HELPDESK_FIXTURES": "fixtures/evil.json"})
    (d / "fixtures" / "evil.json").symlink_to(sentinel)
    d = new("symlink_own_fixture", env={})
    (d / "fixtures" / "helpdesk.json").unlink(); (d / "fixtures" / "helpdesk.json").symlink_to(sentinel)
    d = new("symlink_dir", env={"HELPDESK_FIXTURES": "data/sentinel.json"})
    (d / "data").symlink_to(sentinel.parent)
    new("abs_local_grader_file", local_grader_files=[str(sentinel)])
    new("dotdot_local_grader_file", local_grader_files=["../../sentinel.json"])
    d = new("symlink_local_grader_file", local_grader_files=["notes.txt"])
    (d / "notes.txt").symlink_to(sentinel)
    d = base_task(tmp_path / "tasks" / "symlink_task_yaml")
    (d / "task.yaml").unlink(); (d / "task.yaml").symlink_to(sentinel); out.append(("symlink_task_yaml", d))
    return out

def test_hostile_task_folders_read_nothing_outside(tmp_path):
    sentinel = tmp_path / "sentinel.json"
    sentinel.write_text(json.dumps([{"ticket_id": "STOLEN"}]))
    folders = hostile_folders(tmp_path, sentinel)
    assert len(folders) == 10
    OPENED.clear()
    for name, d in folders:
        with pytest.raises(ClawEvalError, match=r"absolute|'\.\.'|outside"):
            quiet(load_claweval_task, d)
    assert not [p for p in OPENED if Path(p).resolve() == sentinel.resolve()], "the sentinel was opened"
    # with an explicit repository root, paths are contained to it instead
    with pytest.raises(ClawEvalError, match="outside"):
        quiet(load_claweval_task, dict(folders)["symlink_fixture"], repo_root=tmp_path / "tasks" / "symlink_fixture")

def test_symlinked_grader_is_refused(tmp_path, vpn):
    outside = tmp_path / "outside_grader.py"
    outside.write_text("class G:\n    def grade(self, m, d, t): return {'completion': 1.0}\n")
    task = base_task(tmp_path / "t" / VPN)
    (task / "grader.py").symlink_to(outside)
    spec = quiet(load_claweval_task, task)
    with pytest.raises(ClawEvalError, match="outside"):
        run_claweval_task(spec, "oracle", k=1, grader="auto")

def test_local_grader_files_reach_the_grader(tmp_path, vpn):
    task = base_task(tmp_path / VPN, local_grader_files=["notes/answer.txt"])
    (task / "notes").mkdir(); (task / "notes" / "answer.txt").write_text("42")
    spec = quiet(load_claweval_task, task)
    good = run_plan(spec, TRAJ[VPN]["correct"])
    (task / "grader.py").write_text("import base64\nclass G:\n    def grade(self, m, d, t, env_snapshot=None):\n"
                                    "        return {'completion': float(base64.b64decode(env_snapshot['local_file:notes/answer.txt']) == b'42')}\n")
    assert run_grader(task / "grader.py", good, spec, **FAST).completion == 1.0

@pytest.mark.parametrize("task_id", ["../escaped", "/tmp/abs_escaped", "a/b", ".hidden", ".."])
def test_import_out_never_writes_outside(tmp_path, task_id, capsys):
    task = base_task(tmp_path / "task", task_id=task_id)
    out = tmp_path / "out" / "deep"
    rc = quiet(claweval_cli, ["import", str(task), "--out", str(out)])
    assert rc == 2 and "not usable as a file name" in capsys.readouterr().err
    assert not (tmp_path / "out" / "escaped.json").exists() and not Path("/tmp/abs_escaped.json").exists()
    assert not out.exists() or not any(out.rglob("*"))

def test_export_validates_names(tmp_path, vpn):
    spec = vpn[0]
    with pytest.raises(ClawEvalError, match="service"):
        export_claweval(spec.model_copy(update={"services": {"../../evil": []}}), tmp_path / "out")
    with pytest.raises(ClawEvalError, match="spec id"):
        export_claweval(spec.model_copy(update={"id": "../evil"}), tmp_path / "out")
    assert not (tmp_path / "evil.json").exists() and not (tmp_path / "evil").exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

KILL_SCRIPT = '''
import sys, time, coworkenv.claweval as ce
from coworkenv.core import load_spec
spec = load_spec(sys.argv[1])
orig = ce.yaml.safe_dump
def slow(*a, **k):
    print("WRITING", flush=True); time.sleep(60); return orig(*a, **k)
ce.yaml.safe_dump = slow
ce.export_claweval(spec, sys.argv[2])
'''

def _export_killed(spec_path, out):
    p = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(spec_path), str(out)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "WRITING"     # fixtures are written, task.yaml is not
    os.kill(p.pid, signal.SIGKILL); p.wait()
    assert p.returncode == -signal.SIGKILL

def test_export_is_atomic_under_sigkill(tmp_path):
    src = ROOT / "data" / "examples" / "expense_approval.json"
    spec, out = load_spec(src), tmp_path / "out"
    _export_killed(src, out)
    assert not (out / spec.id).exists()                 # no half folder
    assert [p.name for p in out.iterdir() if p.name.startswith(f".{spec.id}.tmp-")]   # only a hidden temporary one
    folder = export_claweval(spec, out)                 # the next export cleans the stale temporary folder
    assert sorted(p.name for p in out.iterdir()) == [spec.id]
    assert quiet(load_claweval_task, folder) == spec
    _export_killed(src, out)                            # killed while replacing: the previous export stays whole
    assert quiet(load_claweval_task, out / spec.id) == spec

# ---- 7. YAML bombs --------------------------------------------------------------------------------------------

def test_yaml_alias_bomb_is_refused(tmp_path, capsys):
    lines = ["task_id: bomb", "task_name: bomb", "prompt: {text: hi}", "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i-1}'] * 9)}]" for i in range(1, 10)]
    (tmp_path / "task.yaml").write_text("\n".join(lines) + "\n")
    t0 = time.monotonic()
    with pytest.raises(ClawEvalError, match="alias bomb"):
        load_claweval_task(tmp_path)
    assert time.monotonic() - t0 < 3
    assert quiet(claweval_cli, ["import", str(tmp_path)]) == 2 and "alias bomb" in capsys.readouterr().err
    with pytest.raises(ClawEvalError, match="limit"):
        load_yaml_bounded("x: " + "a" * 100, "big.yaml", max_bytes=50)
    assert load_yaml_bounded("a: &x {b: [1, 2]}\nc: *x\n") == {"a": {"b": [1, 2]}, "c": {"b": [1, 2]}}

def test_contained_path_edge_cases(tmp_path):
    (tmp_path / "t").mkdir()
    for bad in ["", "a/../../x", "..", "/x", "C:\\x", "a\x00b"]:
        with pytest.raises(ClawEvalError): contained_path(bad, tmp_path / "t")
    assert contained_path("a/b.json", tmp_path / "t") == (tmp_path / "t" / "a" / "b.json").resolve()

# ---- 3/4. tasks without scoring_components; sandbox fields by mode ---------------------------------------------

def test_no_scoring_components_is_flagged(tmp_path):
    task = base_task(tmp_path / VPN, scoring_components=[])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        spec = load_claweval_task(task)
    assert needs_grader(spec) and not spec.supported
    assert any("graded only by the task's grader.py" in str(x.message) for x in w)
    lines = claweval_status(spec)
    assert any("completion needs the task's grader.py" in l for l in lines)
    assert not needs_grader(quiet(load_claweval_task, EX / VPN))
    from coworkenv.core import save_spec
    from coworkenv.cli import main
    import contextlib, io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf): assert main(["show", str(save_spec(spec, tmp_path / "s.json"))]) == 0
    assert "completion needs the task's grader.py" in buf.getvalue()       # `coworkenv show` says so
    assert claweval_status(load_spec(ROOT / "data" / "examples" / "expense_approval.json")) == []

def test_sandbox_fields_classified_by_mode(tmp_path):
    doc_tools = yaml.safe_load((EX / VPN / "task.yaml").read_text())["tools"]
    task = base_task(tmp_path / VPN, sandbox_files=["data.csv"], env_snapshot_files=["out/*.txt"],
                     tools=doc_tools + [{"name": "Bash", "description": "run a shell command", "input_schema": {}}])
    spec = quiet(load_claweval_task, task)
    assert spec.supported and "Bash" in spec.tools and spec.tool_routes["Bash"] is None
    assert any("sandbox_files" in n and "ignored outside sandbox mode" in n for n in spec.meta["claweval"]["notes"])
    sb = quiet(load_claweval_task, task, sandbox=True)
    assert not sb.supported and "Bash" not in sb.tools
    assert {u.split(":")[0] for u in sb.unsupported} >= {"sandbox_files", "env_snapshot_files"}

# ---- 8. README ------------------------------------------------------------------------------------------------

def test_readme_claweval_examples_point_at_existing_folders():
    text = (ROOT / "README.md").read_text()
    paths = re.findall(r"coworkenv claweval (?:run|import) ([^\s]+)", text)
    assert paths, "README shows no claweval command"
    for p in paths: assert (ROOT / p).exists(), p

def test_generated_hostile_paths_never_leave_the_folder(tmp_path):
    "~600 generated path strings: each is refused or lands inside the task folder; the sentinel is never opened."
    import itertools, random
    base, sentinel = tmp_path / "repo" / "tasks" / "t", tmp_path / "sentinel.json"
    base.mkdir(parents=True); sentinel.write_text("[]")
    (base / "up").symlink_to(tmp_path); (base / "self").symlink_to(base); (base / "s.json").symlink_to(sentinel)
    parts = ["..", ".", "", "up", "self", "s.json", "fixtures", "x.json", "/", "\\", "..\\..", "%2e%2e", "\u2025", " .. ", "~"]
    rnd, cands = random.Random(7), set()
    for n in range(1, 4): cands |= {"/".join(p) for p in itertools.product(parts, repeat=n)}
    cands |= {str(sentinel), str(sentinel).replace("/", "\\"), "C:/x", "//server/share", "a\x00b"}
    cands = sorted(cands); rnd.shuffle(cands)
    OPENED.clear()
    refused = 0
    for c in cands[:600] + [str(sentinel)]:
        try: q = contained_path(c, base, "fuzz")
        except ClawEvalError: refused += 1; continue
        assert q == base.resolve() or q.is_relative_to(base.resolve()), (c, q)
        if q.is_file(): q.read_text()
    assert refused > 100
    assert not [p for p in OPENED if Path(p).resolve() == sentinel.resolve()]
