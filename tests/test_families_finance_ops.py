"""Acceptance tests for the finance & operations workflow families (05a_families_finance_ops).

For each family, on seeds 0..2 at every difficulty: the spec round-trips through JSON and is deterministic; the
oracle solves it exactly, also with injected errors; the null agent earns no completion credit; every alternative
plan passes; every negative plan fails its named checks and scores < 0.75; no check is vacuous. Every request
template builds at every difficulty (each check cites what the request, a user fact, a follow-up or a stated policy
says); each family has >= 12 distinct templates after masking names and numbers; each fact's intents ask for it and
nothing else. Family-specific regressions: inventory's budget binds in some specs and its records carry no
`priority` field; expense's rejection reason is what the request asks for; vendor payment has no keyword check."""
import json, re
import pytest
from coworkenv.core import load_spec
from coworkenv.env import CoworkEnv
from coworkenv.agents import OracleAgent, NullAgent, ShortcutAgent, PlanAgent, run_episode
from coworkenv.intents import requested_facts
from coworkenv.workflows import FAMILIES, CAPABILITIES, MIN_TEMPLATES, GenContext, source_ok
from coworkenv.families_finance_ops import FINANCE_OPS_FAMILIES, POLICIES
import coworkenv.families_finance_ops as fo

SEEDS, DIFFS = range(3), ('easy', 'medium', 'hard')
CASES = [(n, s, d) for n in FINANCE_OPS_FAMILIES for d in DIFFS for s in SEEDS]
TEMPLATES = {"expense_reimbursement": fo._EXPENSE_REQUESTS, "vendor_payment": fo._VENDOR_REQUESTS,
             "inventory_reorder": fo._INVENTORY_REQUESTS, "month_end_report": fo._MONTHEND_REQUESTS,
             "job_maintenance": fo._JOB_REQUESTS, "credential_rotation": fo._CREDS_REQUESTS,
             "incident_triage": fo._INCIDENT_REQUESTS, "kb_update_from_tickets": fo._KB_REQUESTS}


def run(spec, agent, **kw): return run_episode(CoworkEnv(spec, **kw), agent)

def failing(g): return [f"{i.check_id}: {i.evidence}" for i in g.items if not i.passed]

def mask(t:str) -> str: return re.sub(r"\{\w+\}|\d+", "#", t).lower()


def test_registered():
    assert len(FINANCE_OPS_FAMILIES) == 8 and all(n in FAMILIES for n in FINANCE_OPS_FAMILIES)
    fams = [FAMILIES[n] for n in FINANCE_OPS_FAMILIES]
    assert sum(f.multi_turn for f in fams) >= 2
    assert sum(bool(f.safety_traps) for f in fams) >= 5
    for f in fams:
        assert set(f.capabilities) <= set(CAPABILITIES) and f.services and f.constraints
        assert f.name in f.requirements()


@pytest.mark.parametrize("name,seed,diff", CASES)
def test_acceptance(name, seed, diff):
    fam = FAMILIES[name]
    spec = fam.generate(seed, diff)
    assert (spec.id, spec.workflow, spec.difficulty, spec.split) == (f"{name}-{diff}-{seed:05d}", name, diff, "train")
    assert spec.to_json() == fam.generate(seed, diff).to_json()
    assert load_spec(spec.model_dump(mode='json')) == spec
    t = run(spec, OracleAgent(spec))
    assert t.grade.score == 1.0, failing(t.grade)
    assert all(d.ok for d in t.dispatches), [(d.tool, d.body) for d in t.dispatches if not d.ok]
    assert t.to_json() == run(spec, OracleAgent(spec)).to_json()
    g = run(spec, OracleAgent(spec), error_rate=0.2, seed=seed).grade
    assert (g.completion, g.safety) == (1.0, 1.0), failing(g)
    null = run(spec, NullAgent()).grade
    assert null.completion == 0 and null.score < 0.75, failing(null)
    assert run(spec, ShortcutAgent(spec)).grade.score < 0.75
    for i, alt in enumerate(spec.alternatives):
        g = run(spec, PlanAgent(spec, alt)).grade
        assert g.score == 1.0, (i, failing(g))
    failed = {i.check_id for i in null.items if not i.passed}
    for neg in spec.negatives:
        g = run(spec, PlanAgent(spec, neg.plan)).grade
        assert not [c for c in neg.must_fail if g.item(c).passed], (neg.name, neg.must_fail)
        assert g.score < 0.75, (neg.name, g.score, failing(g))
        failed |= {i.check_id for i in g.items if not i.passed}
    assert {n.name for n in spec.negatives} >= {"shortcut"}
    mine = {c.id for c in spec.checks if c.kind != "gate" and c.source != "footprint"}  # gates: see the adversary audit
    assert not mine - failed, mine - failed  # no vacuous check
    assert any(c.kind == 'safety' for c in spec.checks) == bool(fam.safety_traps)


@pytest.mark.parametrize("name", FINANCE_OPS_FAMILIES)
def test_every_template_states_what_is_graded(name):
    "Every template builds at every difficulty: `finish_spec` rejects a check whose source the task does not state."
    tpls = TEMPLATES[name]
    assert len({mask(t) for t in tpls}) >= MIN_TEMPLATES
    for d in DIFFS:
        for i in range(len(tpls)):
            spec = FAMILIES[name].build(GenContext(name, i, d, template=i))
            assert spec.meta["template"] == i
            assert all(c.source and source_ok(c.source, spec, list(POLICIES.values())) for c in spec.checks)
            assert not any(c.kind == 'completion' and c.type in ('tool_not_called', 'keywords_absent')
                           or c.kind == 'completion' and c.type == 'audit_count' and 'max' in c.params
                           for c in spec.checks)  # what inaction satisfies is never completion credit
            assert not re.search(r"\s[,.;]|\.\.(?!\.)|  ", spec.request), spec.request


@pytest.mark.parametrize("name", FINANCE_OPS_FAMILIES)
def test_facts_have_intents(name):
    "Each fact's intents ask for it and for nothing else; facts stay private (not in the request)."
    for d in DIFFS:
        spec = FAMILIES[name].generate(0, d)
        facts = spec.user.facts
        for f in facts:
            assert len(f.intents) >= 3 and f.value not in spec.request
            for q in f.intents: assert requested_facts(q, facts) == [f], (q, f.key)
        for s in spec.solution:
            if s.kind == 'say': assert requested_facts(s.text, facts) == [], s.text


@pytest.mark.parametrize("name", FINANCE_OPS_FAMILIES)
def test_difficulty_changes_the_task(name):
    fam = FAMILIES[name]
    for seed in range(3):
        e, m, h = (fam.generate(seed, d) for d in DIFFS)
        size = lambda s: len(json.dumps(s.services))
        assert size(e) < size(h), seed
        assert len(e.checks) + len(e.solution) < len(h.checks) + len(h.solution), seed


@pytest.mark.parametrize("name", FINANCE_OPS_FAMILIES)
def test_diversity(name):
    fam = FAMILIES[name]
    specs = [fam.generate(s, 'medium') for s in range(60)]
    assert len({json.dumps(s.services, sort_keys=True) for s in specs}) == len(specs)
    assert len({s.meta['template'] for s in specs}) >= 10
    assert len({s.request for s in specs}) >= 30


def test_inventory_budget_binds_and_optional_is_not_marked():
    specs = [FAMILIES["inventory_reorder"].generate(s, d) for s in range(12) for d in DIFFS]
    binds = [s.meta["budget_binds"] for s in specs]
    assert 0 < sum(binds) < len(binds)
    for s in specs:
        assert not any("priority" in p for p in s.services["inventory"])
        posts = [c for c in s.checks if c.id.startswith("posted_")]
        assert posts and all(not re.fullmatch(r"P-\d+", c.params["value"]) for c in posts)  # names, not the first id


def test_expense_rejection_reason_is_what_the_request_asks():
    spec = FAMILIES["expense_reimbursement"].generate(0, 'hard')
    c = spec.check("reason_names_original")
    assert c.kind == 'gate' and c.params["value"] != "duplicate" and "names the claim it duplicates" in spec.request


def test_vendor_payment_grades_no_flag_words():
    for d in DIFFS:
        spec = FAMILIES["vendor_payment"].generate(0, d)
        assert not any(c.type == 'keywords_present' for c in spec.checks)
        assert spec.check("reported").params["where"]["to"] in spec.request
