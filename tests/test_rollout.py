"Tests of coworkenv.rollout: the append-only store, resume after SIGKILL, the local pool and Ray backends."
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from coworkenv.agents import NullAgent, OracleAgent
from coworkenv.rollout import RolloutRecord, StoreError, TrajectoryStore, load_trajectories, rollout
from coworkenv.synthesis import synthesize

SPECS = synthesize(n=6, seed=3, progress=False)
K = 2

KILLABLE = """
import sys, time
from coworkenv.synthesis import synthesize
from coworkenv.agents import OracleAgent
from coworkenv.rollout import rollout
class Slow(OracleAgent):
    def act(self, m, t=None): time.sleep(0.04); return super().act(m, t)
rollout(synthesize(n=6, seed=3, progress=False), Slow, k=2, store=sys.argv[1], workers=int(sys.argv[2]),
        agent_name='oracle', progress=False)
"""


@pytest.fixture(scope="module")
def reference():
    "The records of one uninterrupted in-memory run."
    return rollout(SPECS, OracleAgent, k=K, progress=False)


def lines(store: Path) -> int:
    f = store / "trajectories.jsonl"
    return f.read_bytes().count(b"\n") if f.exists() else 0


def kill_after(store: Path, n_lines: int, workers: int = 1) -> int:
    "Start the run in a subprocess, SIGKILL it once the store has `n_lines` lines; return the lines it left."
    import psutil
    p = subprocess.Popen([sys.executable, "-c", KILLABLE, str(store), str(workers)], stderr=subprocess.PIPE)
    kids = []
    try:
        deadline = time.time() + 60
        while lines(store) < n_lines or (workers > 1 and not kids):
            assert p.poll() is None, f"run ended before the kill point: {p.stderr.read().decode()[-2000:]}"
            assert time.time() < deadline
            kids = psutil.Process(p.pid).children(recursive=True)
            time.sleep(0.01)
    finally:
        p.send_signal(signal.SIGKILL); p.wait()
    gone, alive = psutil.wait_procs(kids, timeout=10)
    for k in alive: k.kill()
    assert not alive, f"pool workers outlived the killed run: {alive}"
    return lines(store)


def test_records_are_deterministic(reference):
    assert [r.key for r in reference] == [f"{s.id}#oracle#{t}" for s in SPECS for t in range(K)]
    assert all(r.passed for r in reference)
    again = rollout(SPECS, OracleAgent, k=K, progress=False)
    assert [r.trajectory for r in again] == [r.trajectory for r in reference]


@pytest.mark.parametrize("kill_at,workers", [(0, 1), (1, 1), (5, 1), (3, 2)])
def test_resume_after_sigkill(tmp_path, reference, kill_at, workers):
    store = tmp_path / "store"
    left = kill_after(store, kill_at, workers)
    assert left < len(reference), "the run finished before it was killed: the test proved nothing"
    recs = rollout(SPECS, OracleAgent, k=K, store=store, progress=False)
    keys = [json.loads(l)["key"] for l in (store / "trajectories.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == len(reference)  # nothing duplicated, nothing lost
    assert [r.key for r in recs] == [r.key for r in reference]
    assert [r.trajectory for r in recs] == [r.trajectory for r in reference]
    runs = json.loads((store / "manifest.json").read_text())["runs"]
    assert runs[-1]["resumed_with"] == left and runs[-1]["ran"] == len(reference) - left


def test_torn_tail_is_repaired(tmp_path, reference):
    store = tmp_path / "s"
    rollout(SPECS[:2], OracleAgent, k=K, store=store, progress=False)
    with open(store / "trajectories.jsonl", "ab") as f: f.write(b'{"key": "' + reference[-1].key.encode() + b'", "spec')
    recs = rollout(SPECS, OracleAgent, k=K, store=store, progress=False)
    assert len(recs) == len(reference) and lines(store) == len(reference)
    for l in (store / "trajectories.jsonl").read_text().splitlines(): json.loads(l)


def test_agents_share_a_store_and_k_grows(tmp_path):
    store = tmp_path / "s"
    a = rollout(SPECS, OracleAgent, k=1, store=store, progress=False)
    b = rollout(SPECS, lambda s: NullAgent(), k=1, store=store, workers=2, progress=False)
    c = rollout(SPECS, OracleAgent, k=2, store=store, progress=False)  # only the second trial runs
    assert len(a) == len(b) == 6 and len(c) == 12 and lines(store) == 18
    assert not any(r.passed for r in b) and all(r.passed for r in c)
    assert json.loads((store / "manifest.json").read_text())["runs"][-1]["ran"] == 6


def test_failing_episode_is_reported_and_retried(tmp_path):
    store = tmp_path / "s"
    calls = {"n": 0}
    def flaky(spec):
        if spec.id == SPECS[1].id and calls["n"] == 0:
            calls["n"] += 1; raise RuntimeError("agent could not be built")
        return OracleAgent(spec)
    with pytest.warns(UserWarning, match="1 episode"):
        recs = rollout(SPECS, flaky, k=1, store=store, agent_name="oracle", progress=False)
    assert len(recs) == 5 and "agent could not be built" in json.dumps(json.loads((store / "manifest.json").read_text())["errors"])
    recs = rollout(SPECS, flaky, k=1, store=store, agent_name="oracle", progress=False)
    assert len(recs) == 6 and lines(store) == 6


def test_store_errors(tmp_path):
    f = tmp_path / "file"; f.write_text("x")
    with pytest.raises(StoreError, match="is a file"): TrajectoryStore(f)
    s = tmp_path / "s"; s.mkdir(); (s / "trajectories.jsonl").write_text('{"key": "a"}\n')
    with pytest.raises(StoreError, match=r"trajectories.jsonl:1: not a rollout record"): load_trajectories(s)
    with pytest.raises(ValueError, match="workers must be"): rollout(SPECS, OracleAgent, workers=0)
    with pytest.raises(TypeError, match="must return an Agent"): rollout(SPECS, lambda s: 42)


def test_ray_backend(tmp_path, reference):
    pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    store = tmp_path / "ray"
    rollout(SPECS[:3], OracleAgent, k=K, store=store, progress=False)  # half done locally
    t0 = time.time()
    try: recs = rollout(SPECS, OracleAgent, k=K, store=store, backend="ray", workers=2, progress=False)
    except Exception as e:
        if "timed out during startup" in str(e): pytest.skip(f"a local Ray node could not start on this machine: {e}")
        raise
    took = time.time() - t0
    assert [r.trajectory for r in recs] == [r.trajectory for r in reference]
    assert lines(store) == len(reference)
    runs = json.loads((store / "manifest.json").read_text())["runs"]
    assert runs[-1]["backend"] == "ray" and runs[-1]["ran"] == len(reference) - 6
    import ray
    assert not ray.is_initialized()  # the local Ray it started is shut down
    assert took < 60, took


class BatchedOracle(OracleAgent):
    "One shared agent for every spec that generates in batches: records each `act_batch` width."
    batch_size = 4
    def __init__(self):
        self.widths, self.name, self.by_conv = [], "oracle", {}
    def _agent(self, messages):
        spec = next(s for s in SPECS if s.request in (messages[1].content or ""))
        return self.by_conv.setdefault(id(messages[0]), OracleAgent(spec))
    def act_batch(self, batch):
        self.widths.append(len(batch))
        return [self._agent(m).act(m, t) for m, t in batch]


def test_shared_batched_agent_runs_in_lockstep_groups(tmp_path, reference):
    agent = BatchedOracle()
    recs = rollout(SPECS, lambda spec: agent, k=K, store=tmp_path / "s", progress=False)
    assert max(agent.widths) == 4 and len(recs) == len(SPECS) * K  # 12 episodes in groups of 4, not one by one
    assert [(r.key, r.score, r.passed) for r in recs] == [(r.key, r.score, r.passed) for r in reference]
    assert lines(tmp_path / "s") == len(recs)
