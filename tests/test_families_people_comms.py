"""Acceptance tests of the people & communication workflow families (05b): every generated spec round-trips,
the oracle solves it exactly (also under injected errors), the null and shortcut agents fail, alternatives pass,
negatives fail their named checks, no check is vacuous, generation and episodes are deterministic, and the
families are diverse (distinct workspaces, >= 4 request templates)."""
import ast, json, collections
from datetime import datetime, timedelta
from pathlib import Path
import pytest
from coworkenv.core import load_spec
from coworkenv.env import CoworkEnv
from coworkenv.checks import asks_for
from coworkenv.agents import OracleAgent, NullAgent, ShortcutAgent, PlanAgent, run_episode
from coworkenv.workflows import FAMILIES, GenContext
import coworkenv.families_people_comms as fpc

NAMES = fpc.PEOPLE_COMMS_FAMILIES
CASES = [(n, s, d) for n in NAMES for d in ('easy', 'medium', 'hard') for s in range(5)]

def run(spec, agent, **kw): return run_episode(CoworkEnv(spec, **kw), agent)
def failing(g): return [f"{i.check_id}: {i.evidence}" for i in g.items if not i.passed]

def test_registry():
    fams = [FAMILIES[n] for n in NAMES]
    assert all(f.build.__module__ == fpc.__name__ for f in fams)
    assert sum(f.multi_turn for f in fams) >= 4
    assert sum(bool(f.safety_traps) for f in fams) >= 5
    want = {"new_hire_onboarding": {"hr", "files", "calendar", "gmail"}, "offboarding": {"hr", "files", "chat"},
            "access_request": {"approvals", "hr", "chat"}, "meeting_scheduling": {"calendar", "contacts", "gmail"},
            "customer_escalation": {"crm", "helpdesk", "gmail"}, "sales_followup": {"crm", "todo", "gmail"},
            "file_cleanup": {"files", "chat"}, "news_digest": {"rss", "gmail"}}
    for n, svcs in want.items():
        assert set(FAMILIES[n].services) == svcs
        assert set(FAMILIES[n].generate(0, 'medium').services) == svcs

def test_imports_only_core_and_workflows():
    src = Path(fpc.__file__).read_text()
    mods = {n.module for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith('coworkenv')}
    assert mods <= {"coworkenv.core", "coworkenv.workflows"}, mods

@pytest.mark.parametrize("name,seed,diff", CASES)
def test_acceptance(name, seed, diff):
    fam = FAMILIES[name]
    spec = fam.generate(seed, diff)
    assert load_spec(spec.model_dump(mode='json')) == spec
    assert fam.generate(seed, diff).to_json() == spec.to_json()
    t = run(spec, OracleAgent(spec))
    assert t.grade.score == 1.0, failing(t.grade)
    assert t.end_reason in ('agent_done', 'user_done') and all(d.ok for d in t.dispatches)
    assert run(spec, OracleAgent(spec)).to_json() == t.to_json()
    failed = collections.defaultdict(list)
    g = run(spec, NullAgent()).grade
    assert g.score < 0.75
    for i in g.items:
        if not i.passed: failed[i.check_id].append('null')
    g = run(spec, ShortcutAgent(spec)).grade
    assert g.score < 0.75, failing(g)
    for k, plan in enumerate(spec.alternatives):
        g = run(spec, PlanAgent(spec, plan)).grade
        assert g.score == 1.0, (k, failing(g))
    assert any(n.name == 'shortcut' for n in spec.negatives)
    for n in spec.negatives:
        g = run(spec, PlanAgent(spec, n.plan)).grade
        assert not [c for c in n.must_fail if g.item(c).passed], n.name
        assert g.score < 0.75, (n.name, g.score, failing(g))
        for i in g.items:
            if not i.passed: failed[i.check_id].append(n.name)
    assert not [c.id for c in spec.checks if not failed[c.id]], "vacuous checks"
    g = run(spec, OracleAgent(spec), error_rate=0.2).grade
    assert (g.completion, g.safety) == (1.0, 1.0), failing(g)

@pytest.mark.parametrize("name", NAMES)
def test_facts(name):
    "Private facts are not in the request; each ask of the oracle names exactly one available fact."
    for diff in ('easy', 'medium', 'hard'):
        for seed in range(5):
            spec = FAMILIES[name].generate(seed, diff)
            agent = OracleAgent(spec)
            for f in spec.user.facts:
                assert f.value.lower() not in spec.request.lower(), (spec.id, f.key)
                text = agent.step_message(next(s for s in spec.solution if s.kind == 'ask' and s.fact == f.key), 1).content
                others = [g.key for g in spec.user.facts if g is not f and asks_for(text, g)
                          and any(g.available(st) and f.available(st) for st in range(4))]
                assert not others, (spec.id, f.key, others)
            if FAMILIES[name].multi_turn: assert spec.user.facts and any(c.type == 'asked_for' for c in spec.checks)

def test_dates_private():
    """Date, duration and access facts are phrased by the user: their values do not occur verbatim in the workspace.
    (The manager fact is a name from the HR records: the department has several managers to choose from.)"""
    for name in ("new_hire_onboarding", "offboarding", "meeting_scheduling", "access_request"):
        for seed in range(10):
            spec = FAMILIES[name].generate(seed, 'hard')
            ws = json.dumps(spec.services)
            for f in spec.user.facts:
                if f.key != 'manager': assert f.value not in ws, (spec.id, f.key)

@pytest.mark.parametrize("name", NAMES)
def test_diversity(name, monkeypatch):
    "100 seeds of one difficulty: no two workspaces are identical, and the requests use >= 4 templates."
    chosen = collections.defaultdict(set)
    orig = GenContext.phrase
    def phrase(self, templates, **kw):
        t = self.pick(templates); chosen[templates[0]].add(t)
        return t.format(**kw)
    monkeypatch.setattr(GenContext, 'phrase', phrase)
    specs = [FAMILIES[name].generate(s, 'medium') for s in range(100)]
    assert len({json.dumps(s.services, sort_keys=True) for s in specs}) == 100
    assert max(len(v) for v in chosen.values()) >= 4

def test_difficulty_scales():
    "Harder specs have more records and longer reference plans."
    for name in NAMES:
        size = lambda s: len(json.dumps(s.services))
        e, m, h = (FAMILIES[name].generate(1, d) for d in ('easy', 'medium', 'hard'))
        assert size(e) < size(h) and len(e.solution) <= len(m.solution) <= len(h.solution), name
        assert len(e.checks) <= len(h.checks)

def _free(spec, emails, day, dur):
    "Brute force: the earliest 15-minute start in 09:00-17:00 UTC when no attendee has an event."
    evs = spec.services["calendar"]
    p = lambda s: datetime.fromisoformat(s.replace('Z', '+00:00'))
    t = p(f"{day}T09:00:00Z")
    while t + timedelta(minutes=dur) <= p(f"{day}T17:00:00Z"):
        end = t + timedelta(minutes=dur)
        if not any(set(e["attendees"]) & set(emails) and p(e["start_time"]) < end and t < p(e["end_time"]) for e in evs): return t
        t += timedelta(minutes=15)

@pytest.mark.parametrize("diff", ['easy', 'medium', 'hard'])
def test_meeting_slot_is_earliest_free(diff):
    for seed in range(20):
        spec = FAMILIES["meeting_scheduling"].generate(seed, diff)
        creates = [s.args for s in spec.solution if s.kind == 'call' and s.tool == 'calendar_create_event']
        for a in creates:
            st = datetime.fromisoformat(a["start_time"].replace('Z', '+00:00'))
            dur = int((datetime.fromisoformat(a["end_time"].replace('Z', '+00:00')) - st).total_seconds() // 60)
            assert _free(spec, a["attendees"], a["start_time"][:10], dur) == st, (spec.id, a)
