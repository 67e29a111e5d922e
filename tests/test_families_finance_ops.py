"""Acceptance tests for the finance & operations workflow families (05a_families_finance_ops).

For each family, on seeds 0..4 at every difficulty: the spec round-trips through JSON; the oracle solves it
exactly and deterministically, and still completes everything safely with injected errors; the null and
shortcut agents fail; every alternative plan passes; every negative plan fails its named checks and scores
< 0.75; no check is vacuous (each one is failed by the null agent or some negative); facts are asked for with
words that reveal only them. Across 100 seeds the workspaces are all distinct and the requests use >= 4
phrasings. (The full sweep, seeds 0..39, was run while writing the families.)"""
import json
import pytest
from coworkenv.core import load_spec
from coworkenv.env import CoworkEnv
from coworkenv.agents import OracleAgent, NullAgent, ShortcutAgent, PlanAgent, run_episode, ask_sentence
from coworkenv.checks import asks_for
from coworkenv.workflows import FAMILIES, CAPABILITIES
from coworkenv.families_finance_ops import FINANCE_OPS_FAMILIES

SEEDS, DIFFS = range(5), ('easy', 'medium', 'hard')
CASES = [(n, s, d) for n in FINANCE_OPS_FAMILIES for d in DIFFS for s in SEEDS]


def run(spec, agent, **kw): return run_episode(CoworkEnv(spec, **kw), agent)

def failing(g): return [f"{i.check_id}: {i.evidence}" for i in g.items if not i.passed]


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
    assert null.score < 0.75
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
    vacuous = {c.id for c in spec.checks} - failed
    assert not vacuous, vacuous
    assert any(c.kind == 'safety' for c in spec.checks) == bool(fam.safety_traps)


@pytest.mark.parametrize("name", FINANCE_OPS_FAMILIES)
def test_facts_asked_precisely(name):
    "Each oracle question reveals exactly its fact; no `say` text mentions a fact's words."
    for d in DIFFS:
        spec = FAMILIES[name].generate(0, d)
        facts = {f.key: f for f in spec.user.facts}
        assert bool(facts) == (FAMILIES[name].multi_turn and (d != 'easy' or name != "month_end_report"))
        for s in spec.solution:
            if s.kind == 'ask': text, want = ask_sentence(facts[s.fact].words[0]), [s.fact]
            elif s.kind == 'say': text, want = s.text, []
            else: continue
            assert [k for k, f in facts.items() if asks_for(text, f)] == want, (d, text)
        for f in facts.values():  # private: not given away by the request or the workspace text
            assert f.value not in spec.request
            assert not any(c.type == 'asked_for' and c.params['fact'] == f.key and c.kind != 'completion' for c in spec.checks)


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
    specs = [fam.generate(s, 'medium') for s in range(100)]
    services = {json.dumps(s.services, sort_keys=True) for s in specs}
    assert len(services) == len(specs)  # no two workspaces identical
    assert len({s.meta['template'] for s in specs}) >= 4
    assert len({s.request for s in specs}) >= 20
