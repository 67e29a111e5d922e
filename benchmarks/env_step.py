"""Benchmark the environment's hot paths on one core and print the figures.

  .venv/bin/python benchmarks/env_step.py [--calls 20000] [--http-calls 2000] [--envs 200]

Each rate is the best of 3 runs (timeit's convention). Measures, in the same run:
  1. simple tool calls per second in-process (Workspace.call -> Service.call: validation, handler, audit),
     in episodes of 100 calls (reset included, as in training: an episode's log never grows without bound),
     and the same through CoworkEnv.step (one tool call per assistant message, grading events included);
  2. the same calls as HTTP requests to the same workspace served by FastAPI + uvicorn on 127.0.0.1
     (the architecture of Claw-Eval's mock services), with a keep-alive httpx client; and the ratio;
  3. reset() time of a workspace and of an environment;
  4. memory per live environment (tracemalloc, N environments built and reset).
"""
import argparse, gc, json, os, socket, statistics, subprocess, sys, time, tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coworkenv.core import load_spec, Message, ToolCall
from coworkenv.workspace import Workspace
from coworkenv.env import CoworkEnv

SPEC = ROOT / "data" / "examples" / "expense_approval.json"
CALLS = [("contacts_get", {"contact_id": "c2"}), ("gmail_get_message", {"message_id": "m1"}),
         ("todo_list_tasks", {"status": "pending"})]

def pin_one_core():
    try: os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    except (AttributeError, OSError): pass

def bench_workspace():
    recs = {"contacts": [{"contact_id": f"c{i}", "name": f"Person {i}", "department": "Ops", "title": "Analyst",
                          "email": f"p{i}@acme.com", "phone": "555-0100"} for i in range(20)],
            "gmail": [{"message_id": f"m{i}", "from": "a@acme.com", "to": "me@acme.com", "subject": f"S{i}",
                       "date": "2026-03-01T10:00:00Z", "is_read": False, "labels": ["inbox"], "body": "hello " * 20} for i in range(20)],
            "todo": [{"task_id": f"t{i}", "title": f"Task {i}", "status": "pending" if i % 2 else "done", "priority": "low",
                      "description": "", "due_date": None, "tags": []} for i in range(10)]}
    return Workspace(recs, tools=[c[0] for c in CALLS])

def rate(fn, n, repeat=3):
    "Calls/s of `fn(i)` over n calls: the best of `repeat` runs (as timeit does: noise only ever slows a run down)."
    best = 0.0
    for _ in range(repeat):
        t = time.perf_counter()
        for i in range(n): fn(i)
        best = max(best, n / (time.perf_counter() - t))
    return best

def in_process(n, episode=100):
    "Calls/s through Workspace.call (validation, handler, audit, log); the workspace is reset every `episode` calls."
    ws = bench_workspace(); out = {}
    for name, args in CALLS:
        def one(i):
            if i % episode == 0: ws.reset()
            ws.call(name, args)
        out[name] = rate(one, n)
    return out

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

SERVER = """
import sys; sys.path.insert(0, {root!r}); sys.path.insert(0, {benchdir!r})
from env_step import bench_workspace
import uvicorn
from coworkenv.workspace import http_app
uvicorn.run(http_app(bench_workspace()), host='127.0.0.1', port={port}, log_level='warning', access_log=False)
"""

def over_http(n, server_core=None):
    "Calls/s over HTTP; the server runs on `server_core` (None: the benchmark's own core, shared with the client)."
    import httpx
    port = free_port()
    code = SERVER.format(root=str(ROOT), benchdir=str(Path(__file__).resolve().parent), port=port)
    pre = (lambda: os.sched_setaffinity(0, {server_core})) if server_core is not None else None
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=pre)
    try:
        ws = bench_workspace()
        eps = {t: ws.routes[t][1].tool_defs()[t].endpoint for t, _ in CALLS}
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10) as cl:
            for _ in range(200):
                try: cl.post(eps["contacts_get"], json={"contact_id": "c1"}); break
                except httpx.TransportError: time.sleep(0.05)
            else: raise RuntimeError("HTTP server did not start: " + proc.stderr.read().decode()[-2000:])
            out = {}
            for name, args in CALLS:
                r = cl.post(eps[name], json=args); assert r.status_code == 200, r.text
                out[name] = rate(lambda i: cl.post(eps[name], json=args), n)
        return out
    finally:
        proc.terminate(); proc.wait(10)

def env_steps(n, episode=10):
    "Steps/s of CoworkEnv.step, one contacts_get call per message, in episodes of `episode` turns (reset included)."
    spec = load_spec(SPEC); env = CoworkEnv(spec)
    msg = Message(role='assistant', tool_calls=[ToolCall(id="c", name="contacts_get", arguments={"contact_id": "c2"})])
    def one(i):
        if i % episode == 0: env.reset()
        env.step(msg)
    return rate(one, n), "contacts_get"

def reset_times(reps=2000):
    spec = load_spec(SPEC)
    ws = Workspace.from_spec(spec); env = CoworkEnv(spec)
    t = time.perf_counter()
    for _ in range(reps): ws.reset()
    w = (time.perf_counter() - t) / reps * 1e6
    t = time.perf_counter()
    for _ in range(reps): env.reset()
    e = (time.perf_counter() - t) / reps * 1e6
    return w, e

def memory_per_env(n):
    spec = load_spec(SPEC)
    CoworkEnv(spec).reset()  # warm caches (tool schemas, argument models)
    gc.collect(); tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    envs = []
    for _ in range(n):
        e = CoworkEnv(spec); e.reset(); envs.append(e)
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return used / n, len(json.dumps(spec.model_dump(mode='json')))

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20000); ap.add_argument("--http-calls", type=int, default=2000)
    ap.add_argument("--envs", type=int, default=200)
    a = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    pin_one_core()
    ip = in_process(a.calls)
    hp = over_http(a.http_calls)
    hp2 = over_http(a.http_calls, server_core=cores[-1]) if len(cores) > 1 else None
    st, st_tool = env_steps(min(a.calls, 5000))
    wr, er = reset_times()
    mem, spec_bytes = memory_per_env(a.envs)
    print("HTTP A: FastAPI+uvicorn server and httpx keep-alive client share the benchmark's core;"
          " HTTP B: the server has a core of its own")
    print(f"{'tool':20s} {'in-process/s':>13s} {'HTTP A/s':>9s} {'ratio A':>8s} {'HTTP B/s':>9s} {'ratio B':>8s}")
    rows = [(name, ip[name], hp[name], hp2[name] if hp2 else float('nan')) for name, _ in CALLS]
    rows.append(("mean", statistics.mean(ip.values()), statistics.mean(hp.values()),
                 statistics.mean(hp2.values()) if hp2 else float('nan')))
    for name, i, h, h2 in rows:
        print(f"{name:20s} {i:13,.0f} {h:9,.0f} {i / h:7.0f}x {h2:9,.0f} {i / h2:7.0f}x")
    print(f"CoworkEnv.step with one {st_tool} call, 10-turn episodes incl. reset, all checks tracked each turn: {st:,.0f} steps/s")
    print(f"reset(): workspace {wr:.1f} us, environment {er:.1f} us  (spec {SPEC.name})")
    print(f"memory per live environment: {mem / 1024:.1f} KB over {a.envs} environments (spec JSON {spec_bytes / 1024:.1f} KB)")
