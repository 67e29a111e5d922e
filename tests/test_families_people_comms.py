"""Acceptance tests of the people & communication workflow families (05b): every generated spec round-trips,
the oracle solves it exactly and succeeds (also under injected errors), the null agent earns no completion,
the shortcut fails, alternatives pass, negatives fail their named checks, no check is vacuous, every check cites
a source the task states, generation is deterministic, the families are diverse (>= 12 request templates),
the mismatches of issue 8 stay fixed, and the adversary suite finds no way to pass or succeed."""
import ast, json, collections, re
from datetime import datetime, timedelta
from pathlib import Path
import pytest
from coworkenv.core import load_spec
from coworkenv.env import CoworkEnv
from coworkenv.checks import asks_for
from coworkenv.agents import OracleAgent, NullAgent, ShortcutAgent, PlanAgent, run_episode
from coworkenv.workflows import FAMILIES, GenContext, source_ok
import coworkenv.families_people_comms as fpc

NAMES = fpc.PEOPLE_COMMS_FAMILIES
CASES = [(n, s, d) for n in NAMES for d in ('easy', 'medium', 'hard') for s in range(2)]
TEMPLATES = {"new_hire_onboarding": fpc.ONB_TEMPLATES, "offboarding": fpc.OFF_TEMPLATES,
             "access_request": fpc.ACC_TEMPLATES, "meeting_scheduling": fpc.MEET_TEMPLATES,
             "customer_escalation": fpc.ESC_TEMPLATES, "sales_followup": fpc.SALES_TEMPLATES,
             "file_cleanup": fpc.CLEAN_TEMPLATES, "news_digest": fpc.NEWS_TEMPLATES}

def run(spec, agent, **kw): return run_episode(CoworkEnv(spec, **kw), agent)
def failing(g): return [f"{i.check_id}: {i.evidence}" for i in g.items if not i.passed]
def neg(spec, name): return next(n for n in spec.negatives if n.name == name)

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
    assert t.grade.score == 1.0 and t.grade.success, failing(t.grade)
    assert t.end_reason in ('agent_done', 'user_done') and all(d.ok for d in t.dispatches)
    assert run(spec, OracleAgent(spec)).to_json() == t.to_json()
    failed = collections.defaultdict(list)
    g = run(spec, NullAgent()).grade
    assert g.completion == 0 and not g.success and g.score < 0.75, [i.check_id for i in g.items if i.passed]
    for i in g.items:
        if not i.passed: failed[i.check_id].append('null')
    g = run(spec, ShortcutAgent(spec)).grade
    assert g.score < 0.75 and not g.success, failing(g)
    for k, plan in enumerate(spec.alternatives):
        g = run(spec, PlanAgent(spec, plan)).grade
        assert g.score == 1.0 and g.success, (k, failing(g))
    assert any(n.name == 'shortcut' for n in spec.negatives)
    for n in spec.negatives:
        g = run(spec, PlanAgent(spec, n.plan)).grade
        assert not [c for c in n.must_fail if g.item(c).passed], n.name
        assert g.score < 0.75 and not g.success, (n.name, g.score, failing(g))
        for i in g.items:
            if not i.passed: failed[i.check_id].append(n.name)
    assert not [c.id for c in spec.checks if not failed[c.id]], "vacuous checks"
    g = run(spec, OracleAgent(spec), error_rate=0.2).grade
    assert (g.completion, g.safety) == (1.0, 1.0), failing(g)

@pytest.mark.parametrize("name", NAMES)
def test_sources_and_kinds(name):
    """Every check cites what the task states (a request phrase verbatim, a fact, a follow-up); checks that inaction
    satisfies are gates or safety checks; every fact carries natural questions."""
    for diff in ('easy', 'medium', 'hard'):
        for seed in range(4):
            spec = FAMILIES[name].generate(seed, diff)
            for c in spec.checks:
                assert source_ok(c.source, spec), (spec.id, c.id, c.source)
                if c.source.startswith('request: '): assert c.source[9:].lower() in spec.request.lower()
                if c.type in ('tool_not_called', 'audit_count', 'audit_sequence'): assert c.kind != 'completion', c.id
            for f in spec.user.facts:
                assert len(f.intents) >= 5 and all(q.endswith('?') for q in f.intents), (spec.id, f.key)

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
    (The manager fact is a name from the HR records: the department has several managers to choose from. The meeting
    day is an ISO date, which other meetings of that day carry: a policy that books without asking must guess it.)"""
    for name in ("new_hire_onboarding", "offboarding", "meeting_scheduling", "access_request"):
        for seed in range(10):
            spec = FAMILIES[name].generate(seed, 'hard')
            ws = json.dumps(spec.services)
            for f in spec.user.facts:
                if f.key not in ('manager', 'day', 'new_day'): assert f.value not in ws, (spec.id, f.key)

def mask(text:str, spec) -> str:
    "A request with names, numbers and workspace values masked (what `benchmarks/synthesis.py` compares)."
    people = {p for recs in spec.services.values() for r in (recs if isinstance(recs, list) else sum(recs.values(), []))
              for k, p in r.items() if isinstance(p, str) and k in ('name', 'contact_person', 'title', 'department')}
    for p in sorted(people, key=len, reverse=True): text = text.replace(p, "<X>")
    text = re.sub(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)?\b", "<N>", text)
    return re.sub(r"\d+", "#", text)

@pytest.mark.parametrize("name", NAMES)
def test_templates(name):
    ">= 12 distinct templates per family; 100 seeds draw >= 12 of them, >= 12 distinct masked request texts."
    ts = TEMPLATES[name]
    assert len({re.sub(r"\{\w+\}", "", t) for t in ts}) >= 12
    specs = [FAMILIES[name].generate(s, 'medium') for s in range(100)]
    assert len({s.meta["template"] for s in specs}) >= 12
    assert len({mask(s.request, s) for s in specs}) >= 12
    assert len({json.dumps(s.services, sort_keys=True) for s in specs}) == 100

def test_requests_grammatical():
    "Requests are sentences: no doubled words or punctuation, no unfilled slot, capitalised sentence starts."
    for name in NAMES:
        for d in ('easy', 'medium', 'hard'):
            for seed in range(40):
                r = FAMILIES[name].generate(seed, d).request
                assert not re.search(r"\b(\w+) \1\b|[,;.] ?[,;.]|\{|\}|  ", r), (name, r)
                assert all(s[0].isupper() or s[0] in "'#/" for s in re.split(r"(?<=[.?!]) ", r) if s), (name, r)

def test_difficulty_scales():
    "Harder specs have more records and longer reference plans."
    for name in NAMES:
        size = lambda s: len(json.dumps(s.services))
        e, m, h = (FAMILIES[name].generate(1, d) for d in ('easy', 'medium', 'hard'))
        assert size(e) < size(h) and len(e.solution) <= len(m.solution) <= len(h.solution), name
        assert len(e.checks) <= len(h.checks)

def _calendar_after_events(spec):
    "The calendar once the spec's world events have moved, added or removed meetings: the truth a booking follows."
    evs = {e["event_id"]: dict(e) for e in spec.services["calendar"]}
    for m in (m for ev in spec.events for m in ev.mutations if m.service == "calendar"):
        if m.op == "update": evs[m.id].update(m.fields)
        elif m.op == "remove": evs.pop(m.id)
        else: evs[m.record["event_id"]] = dict(m.record)
    return list(evs.values())

def _free(spec, emails, day, dur):
    "Brute force: the earliest 15-minute start in 09:00-17:00 UTC when no attendee has an event (after the world events)."
    evs = _calendar_after_events(spec)
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

@pytest.mark.parametrize("diff", ['easy', 'medium', 'hard'])
def test_meeting_request_and_grading_agree(diff):
    "The request says: ask the day, then book the earliest common free time *that day*; the graded event is that one."
    for seed in range(6):
        spec = FAMILIES["meeting_scheduling"].generate(seed, diff)
        req = spec.request.lower()
        assert "that day" in req and ("ask me" in req or "check with me" in req), spec.request
        ev = next(c for c in spec.checks if c.id == 'event')
        day = next(f for f in spec.user.facts if f.key == ('new_day' if diff == 'hard' else 'day'))
        assert ev.source == f"fact:{day.key}" and ev.params['where']['start_time'].startswith(day.value)

def test_issue_regressions():
    "Gaming patterns of issue 8 fail (score < 0.75, no success): slot spraying, no report, mailing everyone, leaks."
    cases = [("meeting_scheduling", "mail_every_slot"), ("meeting_scheduling", "book_every_slot"),
             ("file_cleanup", "never_report"), ("customer_escalation", "mail_every_contact"),
             ("customer_escalation", "close_after_escalating"), ("new_hire_onboarding", "wrong_title"),
             ("new_hire_onboarding", "checklist_items_renamed"), ("offboarding", "task_owned_by_manager"),
             ("sales_followup", "normal_priority"), ("news_digest", "missing_recipient")]
    for name, n in cases:
        for d in ('easy', 'hard'):
            spec = FAMILIES[name].generate(3, d)
            g = run(spec, PlanAgent(spec, neg(spec, n).plan)).grade
            assert g.score < 0.75 and not g.success, (spec.id, n, g.score)
    # news digest: the requester lists a personal address; the request itself says company addresses only
    spec = FAMILIES["news_digest"].generate(3, 'medium')
    personal = next(c for c in spec.checks if c.id == 'no_outside_recipient').params['contains']['recipients']
    assert personal in json.dumps(spec.services["gmail"])
    assert "company addresses" in spec.request.lower() or "internal addresses" in spec.request.lower(), spec.request

def test_adversaries():
    "The adversary suite on one medium spec per family: no adversary passes or succeeds; valid plans pass and succeed."
    adv = pytest.importorskip("coworkenv.adversaries")
    df = adv.audit_grader([FAMILIES[n].generate(0, 'medium') for n in NAMES], progress=False)
    valid = df.adversary.isin(['oracle', 'alternative'])
    assert (df[valid].passed & df[valid].success).all()
    bad = df[~valid & ~df.equivalent.astype(bool) & (df.passed | df.success)]
    assert bad.empty, bad[['spec_id', 'adversary', 'variant', 'score']].to_string()
