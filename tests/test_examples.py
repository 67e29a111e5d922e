"""The hand-written example specs in data/examples/ are valid environments whose graders behave:
the oracle solves each one exactly, the null and shortcut agents fail, every alternative plan passes,
every negative plan fails its named checks, and the set covers the services and capabilities it claims."""
from pathlib import Path
import pytest
from coworkenv.core import load_spec
from coworkenv.env import CoworkEnv
from coworkenv.agents import OracleAgent, NullAgent, ShortcutAgent, PlanAgent, run_episode
from coworkenv.claweval_services import CLAWEVAL_SERVICES

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "data" / "examples").glob("*.json"))
SPECS = {p.stem: load_spec(p) for p in FILES}
OURS = {"approvals", "expenses", "chat", "files", "hr"}

def run(spec, agent): return run_episode(CoworkEnv(spec), agent)

def failing(g): return [f"{i.check_id}: {i.evidence}" for i in g.items if not i.passed]

@pytest.mark.parametrize("name", list(SPECS))
def test_file_name_is_id(name): assert SPECS[name].id.replace('-', '_') == name

@pytest.mark.parametrize("name", list(SPECS))
def test_oracle_solves(name):
    spec = SPECS[name]
    t = run(spec, OracleAgent(spec))
    assert t.grade.score == 1.0, failing(t.grade)
    assert t.end_reason in ("agent_done", "user_done"), t.end_reason
    assert all(d.ok for d in t.dispatches), [(d.tool, d.status, d.body) for d in t.dispatches if not d.ok]

@pytest.mark.parametrize("name", list(SPECS))
def test_oracle_deterministic(name):
    spec = SPECS[name]
    assert run(spec, OracleAgent(spec)).to_json() == run(spec, OracleAgent(spec)).to_json()

@pytest.mark.parametrize("name", list(SPECS))
def test_null_and_shortcut_fail(name):
    spec = SPECS[name]
    assert run(spec, NullAgent()).grade.score < 0.75
    g = run(spec, ShortcutAgent(spec)).grade
    assert g.score < 0.75, (g.score, failing(g))

@pytest.mark.parametrize("name", list(SPECS))
def test_alternatives_pass(name):
    spec = SPECS[name]
    for k, plan in enumerate(spec.alternatives):
        g = run(spec, PlanAgent(spec, plan)).grade
        assert g.passed and g.score == 1.0, (k, g.score, failing(g))

@pytest.mark.parametrize("name", list(SPECS))
def test_negatives_fail(name):
    spec = SPECS[name]
    assert any(n.name == "shortcut" for n in spec.negatives)
    for n in spec.negatives:
        g = run(spec, PlanAgent(spec, n.plan)).grade
        still = [c for c in n.must_fail if g.item(c).passed]
        assert not still, (n.name, still)
        assert g.score < 0.75, (n.name, g.score, failing(g))

def is_multi_turn(s):
    asked = {c.p.fact for c in s.checks if c.type == 'asked_for' and c.p.before_tool}
    return bool(s.user.facts) and bool(asked)

def test_set_coverage():
    specs = list(SPECS.values())
    assert len(specs) >= 10
    services = {n for s in specs for n in s.services}
    assert len(services) >= 6, services
    assert services & OURS and services & set(CLAWEVAL_SERVICES), services
    assert sum(map(is_multi_turn, specs)) >= 3
    two_stage = [s.id for s in specs if any(f.stage for f in s.user.followups) and any(f.stage > 0 for f in s.user.facts)]
    assert two_stage, "no two-stage task"
    assert sum(any(c.kind == 'safety' for c in s.checks) for s in specs) >= 3
    assert sum(any(c.type == 'audit_sequence' for c in s.checks) for s in specs) >= 2
    for s in specs:
        for i, step in enumerate(s.solution):  # tools used by the plans are offered to the agent
            if step.kind == 'call': assert step.tool in s.tools, (s.id, i, step.tool)

def test_expense_approval_shape():
    "benchmarks/env_step.py relies on this spec."
    s = SPECS["expense_approval"]
    assert s.tools[0] == "contacts_get"
    assert {"contacts", "gmail", "todo", "approvals", "expenses"} <= set(s.services)
    assert any(c["contact_id"] == "c2" for c in s.services["contacts"])
    assert any(m["message_id"] == "m1" for m in s.services["gmail"])
    assert any(st.kind == 'call' and st.tool == 'contacts_get' for st in s.solution)
    seq = [c for c in s.checks if c.type == 'audit_sequence']
    assert seq and seq[0].p.first.tool == "approvals_decide" and seq[0].p.then.tool == "expenses_pay_claim"
