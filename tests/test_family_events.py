"""World events in the workflow families (issue 9): the workspace changes on its own while the agent works.

Five families emit events (vendor payment: an invoice amount corrected by finance; incident triage: a new ticket in
the queue; inventory reorder: a warehouse recount; customer escalation: a ticket reopened by the customer; meeting
scheduling: a meeting moved by its organizer). Difficulty adds them: none at easy, one announced at medium, a silent
one at hard. For each family and seed: the events fire in the oracle's run and the oracle, which re-reads after the
event, passes with strict success; the stale plan (the oracle computed from the data before the events) fails every
check the events test and scores < 0.75; announced events reach the user's messages, silent ones never do; reading
alone (the world changes, the agent writes nothing) earns no completion credit; generation is deterministic; the
specs validate with no stale-plan or inert-event finding; the adversary suite wins nothing on event specs."""
import json
from functools import lru_cache
import pytest
from coworkenv.core import NegativePlan, Step, Trigger
from coworkenv.env import CoworkEnv
from coworkenv.agents import OracleAgent, NullAgent, PlanAgent, run_episode
from coworkenv.workflows import (FAMILIES, GenContext, add, as_trigger, completion, event, finish_spec, remove,
                                 stage_day, stale_negative, update)
from coworkenv.validation import validate
from coworkenv.adversaries import audit_grader, audit_failures
import coworkenv.families_finance_ops, coworkenv.families_people_comms  # register the families

EVENT_FAMILIES = ["vendor_payment", "incident_triage", "inventory_reorder", "customer_escalation", "meeting_scheduling"]
SEEDS = range(2)
CASES = [(f, s, d) for f in EVENT_FAMILIES for d in ('medium', 'hard') for s in SEEDS]
READS = ('_list', '_get', '_read', '_search')

@lru_cache(maxsize=None)
def spec_of(name:str, seed:int, diff:str): return FAMILIES[name].generate(seed, diff)

def run(spec, agent): return run_episode(CoworkEnv(spec), agent)
def failing(g): return [f"{i.check_id}: {i.evidence}" for i in g.items if not i.passed]
def kind(t:Trigger) -> str: return next(k for k in ('stage', 'after_turn', 'after_tool', 'after_check') if getattr(t, k) is not None)
def stale(spec) -> NegativePlan: return next(n for n in spec.negatives if n.name == 'stale_plan')
def is_read(tool:str) -> bool: return any(r in tool for r in READS)


def test_families_emit_events():
    "At least 5 registered families emit world events across seeds, at least 3 of them silent ones."
    emit, silent = set(), set()
    for name in FAMILIES:
        for d in ('medium', 'hard'):
            for s in range(3):
                spec = FAMILIES[name].generate(s, d)
                if spec.events: emit.add(name)
                if any(not e.announced for e in spec.events): silent.add(name)
    assert len(emit) >= 5 and len(silent) >= 3, (emit, silent)
    assert set(EVENT_FAMILIES) <= emit and set(EVENT_FAMILIES) <= silent

@pytest.mark.parametrize("name", EVENT_FAMILIES)
def test_difficulty_adds_events(name):
    "Easy: no event (or one announced); medium: one event; hard: at least one silent event, on every seed."
    for s in range(12):
        e, m, h = (FAMILIES[name].generate(s, d) for d in ('easy', 'medium', 'hard'))
        assert len(e.events) <= 1 and all(x.announced for x in e.events), (e.id, e.events)
        assert len(m.events) == 1, m.id
        assert any(not x.announced for x in h.events), h.id
        for spec in (m, h):
            assert {n.name for n in spec.negatives} >= {'stale_plan', 'shortcut'}
            assert all(x.tests for x in spec.events), spec.id

def test_trigger_kinds_and_mutations():
    "The families use every trigger kind (stage via a follow-up, turn, tool, check) and add as well as update records."
    specs = [spec_of(f, s, d) for f, s, d in CASES]
    kinds = {kind(e.trigger) for sp in specs for e in sp.events}
    assert kinds == {'stage', 'after_turn', 'after_tool', 'after_check'}, kinds
    ops = {m.op for sp in specs for e in sp.events for m in e.mutations}
    assert {'add', 'update'} <= ops, ops
    staged = [sp for sp in specs if any(e.trigger.stage for e in sp.events)]
    assert staged and all(any(st.stage == 1 and st.now for st in sp.stages) for sp in staged)  # a stage is a working day
    assert all(any(f.stage == 1 for f in sp.user.followups) for sp in staged)  # reached through the user's follow-up

@pytest.mark.parametrize("name,seed,diff", CASES)
def test_oracle_passes_and_stale_plan_fails(name, seed, diff):
    spec = spec_of(name, seed, diff)
    t = run(spec, OracleAgent(spec))
    assert t.grade.score == 1.0 and t.grade.success, failing(t.grade)
    fired = t.info.get('world_events') or []
    assert [w['id'] for w in fired] == [e.id for e in spec.events] and not any('error' in w for w in fired), fired
    neg = stale(spec)
    tests = list(dict.fromkeys(c for e in spec.events for c in e.tests))
    assert neg.must_fail == tests and tests
    g = run(spec, PlanAgent(spec, neg.plan)).grade
    assert not [c for c in tests if g.item(c).passed], (tests, failing(g))
    assert g.score < 0.75 and not g.success, (g.score, failing(g))
    # the checks the events test grade the post-event truth: the oracle passes them, and they can fail
    assert all(t.grade.item(c).passed for c in tests)
    assert all(spec.check(c).kind in ('completion', 'gate') and spec.check(c).source for c in tests)

@pytest.mark.parametrize("name,seed,diff", CASES)
def test_oracle_rereads_after_the_event(name, seed, diff):
    """A careful coworker: after each event fires, the oracle reads the changed service again, before any write that
    names the changed record and before its final report."""
    spec = spec_of(name, seed, diff)
    t = run(spec, OracleAgent(spec))
    fired = {w['id']: w['turn'] for w in t.info['world_events']}
    for e in spec.events:
        m = e.mutations[0]
        rid = m.id or next(iter(m.record.values()))
        after = [d for d in t.dispatches if d.turn > fired[e.id] and d.ok]
        reads = [d for d in after if d.tool.startswith(m.service + "_") and is_read(d.tool)]
        assert reads, (e.id, [(d.turn, d.tool) for d in after])
        early = [d for d in after if d.turn < reads[0].turn and not is_read(d.tool) and rid in json.dumps(d.arguments)]
        assert not early, (e.id, rid, [(d.turn, d.tool) for d in early])

@pytest.mark.parametrize("name,seed,diff", CASES)
def test_announced_reach_the_user_silent_never(name, seed, diff):
    spec = spec_of(name, seed, diff)
    t = run(spec, OracleAgent(spec))
    said = "\n".join(m.content or "" for m in t.messages if m.role == 'user')
    for e in spec.events:
        if e.announced: assert e.message in said, e.message
        else:
            assert not e.message
            ids = [m.id or next(iter(m.record.values())) for m in e.mutations]
            assert not any(i in said for i in ids), (e.id, ids)  # nothing tells the agent which record changed

@pytest.mark.parametrize("name,seed,diff", CASES)
def test_world_change_earns_no_credit(name, seed, diff):
    "Only reading (every read of the oracle, no question, no write): the world may change, the agent earns nothing."
    spec = spec_of(name, seed, diff)
    reads = [s for s in spec.solution if s.kind == 'call' and is_read(s.tool)]
    g = run(spec, PlanAgent(spec, reads)).grade
    assert g.completion == 0.0 and g.score < 0.75 and not g.success, [i.check_id for i in g.items if i.passed and i.kind == 'completion']
    assert run(spec, NullAgent()).grade.completion == 0.0

@pytest.mark.parametrize("name", EVENT_FAMILIES)
def test_deterministic(name):
    "Same seed, same spec (events included); another seed, other events."
    for d in ('medium', 'hard'):
        a, b = FAMILIES[name].generate(4, d), FAMILIES[name].generate(4, d)
        assert a.to_json() == b.to_json() and a.events
        c = FAMILIES[name].generate(5, d)
        assert [e.model_dump() for e in c.events] != [e.model_dump() for e in a.events]
        t1, t2 = run(a, OracleAgent(a)), run(b, OracleAgent(b))
        assert t1.to_json() == t2.to_json()

@pytest.mark.parametrize("name", EVENT_FAMILIES)
def test_validates(name):
    "The event specs validate, with no stale-plan control or inert-event finding (not even a warning)."
    for d in ('medium', 'hard'):
        for s in range(2):
            r = validate(spec_of(name, s, d))
            assert r.passed, [str(f) for f in r.errors]
            assert not [f for f in r.findings if f.code in ('control.stale_plan', 'events.inert')], [str(f) for f in r.findings]

def test_adversaries_win_nothing_on_event_specs():
    "Wrong, duplicated, collateral or missing writes, sprays, dumps and inaction score < 0.75 with events firing too."
    specs = [spec_of("vendor_payment", 0, 'hard'), spec_of("customer_escalation", 1, 'medium')]
    bad = audit_failures(audit_grader(specs, progress=False))
    assert bad.empty, bad[['spec_id', 'adversary', 'variant', 'score', 'success']].to_string()

def test_corrected_value_is_what_is_graded():
    "Family specifics: the payment must be the corrected amount; the recounted item must be ordered; the moved meeting's slot is earlier."
    v = spec_of("vendor_payment", 0, 'hard')
    new = v.events[0].mutations[0].fields["amount"]
    assert v.check("paid_a").params["where"]["amount"] == new and v.check("paid_a").source.startswith("policy:")
    stale_amounts = [s.args["amount"] for s in stale(v).plan if s.tool == "approvals_create_request"]
    assert new not in stale_amounts
    inv = spec_of("inventory_reorder", 0, 'medium')
    pid = inv.events[0].mutations[0].id
    p = next(x for x in inv.services["inventory"] if x["product_id"] == pid)
    assert p["quantity"] > p["reorder_level"] > inv.events[0].mutations[0].fields["quantity"]
    m = spec_of("meeting_scheduling", 0, 'medium')
    moved = m.events[0].mutations[0]
    assert m.check("event").params["where"]["start_time"] < next(
        s.args["start_time"] for s in stale(m).plan if s.tool == "calendar_create_event")
    assert moved.fields["start_time"][:10] != m.check("event").params["where"]["start_time"][:10]  # moved off the day

def test_vocabulary():
    "event/add/update/remove/stale_negative/stage_day/as_trigger, and finish_spec's refusals."
    e = event("late_mail", "after_turn:2", add("gmail", {"message_id": "m9", "subject": "Urgent"}),
              update("finance", "TXN-1", amount=10.0), remove("calendar", "evt_001"), tests=["paid"])
    assert [m.op for m in e.mutations] == ['add', 'update', 'remove'] and e.trigger.after_turn == 2 and not e.announced
    assert as_trigger("stage:1") == Trigger(stage=1) and as_trigger({"after_check": "paid"}).after_check == "paid"
    for bad, msg in (("after_turn:x", "whole number"), ("later", "kind:value"), ("when:1", "kind:value")):
        with pytest.raises(ValueError, match=msg): as_trigger(bad)
    with pytest.raises(ValueError, match="needs a `message`"): event("x", "stage:0", remove("calendar", "e1"), announced=True)
    with pytest.raises(ValueError, match="at least one mutation"): event("x", "stage:0")
    neg = stale_negative([Step.say("Paid the old amount.")], [e])
    assert (neg.name, neg.must_fail) == ("stale_plan", ["paid"])
    ctx = GenContext("demo", 1, 'hard')
    st = stage_day(ctx, 2, 1, 10, 30)
    assert (st.stage, st.now, st.label) == (2, "2026-03-03T10:30:00Z", "Tuesday")
    req = "Please pay invoice INV-1 for the invoice amount."
    kw = dict(title="t", domain="finance", capabilities=["tool_coordination"], services={}, tools=[], request=req,
              checks=[completion("paid", "tool_called", "request: invoice amount", tool="x")], solution=[Step.say("Paid.")])
    with pytest.raises(ValueError, match="stale_plan"): finish_spec(ctx, "demo", **kw, events=[e])
    spec = finish_spec(ctx, "demo", **kw, events=[e], negatives=[neg], stages=[st])
    assert spec.has_events and spec.stages == [st]
