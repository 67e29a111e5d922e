"""The adversary suite (06a_adversaries): variants are built systematically from a spec's solution and workspace,
run through the real environment, and a sound grader fails every one of them while valid plans pass."""
import json
from pathlib import Path

import pandas as pd
import pytest

from coworkenv.core import TaskSpec, Check, Step, load_specs
from coworkenv.adversaries import (ADVERSARIES, Catalog, Variant, adversary_variants, audit_env, audit_failures,
                                   audit_grader, audit_summary, audit_table, add_audit_parser, perturbations,
                                   play_variant, plausible_args, stuffed_question, is_free, _writes)
from coworkenv.synthesis import ProceduralGenerator
from coworkenv.workflows import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {s.id: s for s in load_specs(ROOT / "data" / "examples")}
EX = EXAMPLES['expense_approval']


def test_registry_matches_the_contract():
    assert list(ADVERSARIES) == ['omit_write', 'perturb_arg', 'duplicate_write', 'other_record', 'trap_action', 'spray',
                                 'dump_ids', 'stuff_keywords', 'do_nothing']
    with pytest.raises(KeyError, match="unknown adversaries"): adversary_variants(EX, ['teleport'])


def test_variants_are_built_from_the_solution():
    cat = Catalog(EX)
    vs = adversary_variants(EX)
    by = {a: [v for v in vs if v.adversary == a] for a in ADVERSARIES}
    writes = _writes(EX.solution, cat)
    assert [EX.solution[j].tool for j in writes] == ['approvals_decide', 'expenses_pay_claim', 'gmail_send_message', 'todo_update_task']
    assert len(by['omit_write']) == len(writes) and len(by['duplicate_write']) == len(writes)
    for v in by['perturb_arg']:  # exactly one argument of one write differs from the solution
        diff = [(a, b) for a, b in zip(EX.solution, v.plan) if a != b]
        assert len(v.plan) == len(EX.solution) and len(diff) == 1 and diff[0][0].tool == diff[0][1].tool, v.name
    names = " | ".join(v.name for v in by['perturb_arg'])
    for want in ("claim_id another record", "decision another value: \"rejected\"", "to an outsider", "to another person", "task_id another record"):
        assert want in names, (want, names)
    assert not any('.body ' in v.name or '.subject ' in v.name for v in by['perturb_arg'])  # free text is left alone
    other = {v.name for v in by['other_record']}
    assert "other_record[5].claim_id=CLM-205" in other and "other_record[4].request_id=REQ-032" in other
    assert all(len(v.plan) == len(EX.solution) + 1 for v in by['other_record'])
    negs = [v for v in by['trap_action'] if 'negatives[' in v.name]
    assert [v.plan for v in negs if not v.name.endswith(')')] == [n.plan for n in EX.negatives]  # each negative as it is ...
    assert any(v.name.endswith('(dashes)') for v in negs) and any(v.name.endswith('(unprefixed)') for v in negs)  # ... and reformatted
    assert any('expenses_reject_claim(claim_id=CLM-205)' in v.name for v in by['trap_action'])
    assert len(by['spray']) == 2 and by['dump_ids'] and 'REQ-032' in by['dump_ids'][0].plan[-1].text
    assert by['stuff_keywords'] == []  # no private facts
    assert len({v.key() for v in vs}) == len(vs)  # deduplicated


def test_perturbations_by_kind():
    cat = Catalog(EX)
    assert perturbations(cat, 'expenses_pay_claim', 'claim_id', 'CLM-204') == [('another record', 'CLM-198')]
    assert perturbations(cat, 'expenses_pay_claim', 'amount', 842.5) == [('amount', 926.75)]
    assert perturbations(cat, 'todo_create_task', 'due_date', '2026-03-13') == [('a day later', '2026-03-14'), ('a day earlier', '2026-03-12')]
    assert perturbations(cat, 'todo_update_task', 'status', 'completed')[0][1] in ('pending',)
    assert [l for l, _ in perturbations(cat, 'files_share', 'recipients', ['sam.ortiz@northwind.example', 'li.wei@northwind.example'])] == \
           ['[0] another person', '[1] another person', 'dropped one', 'added one']
    assert perturbations(cat, 'gmail_send_message', 'body', 'Hi Sam, it is paid.') == []
    assert is_free(EX, 'gmail_send_message', 'subject') and not is_free(EX, 'todo_update_task', 'status')
    assert plausible_args(cat, 'expenses_reject_claim', avoid=['CLM-204', 'CLM-198'])['claim_id'] == 'CLM-205'


def test_valid_plans_pass_and_every_adversary_fails_on_an_example():
    df = audit_grader([EX], progress=False)
    valid = df[df.adversary.isin(['oracle', 'alternative'])]
    assert len(valid) == 1 + len(EX.alternatives) and valid.passed.all() and valid.success.all()
    assert df.error.isna().all(), df[df.error.notna()]
    bad = audit_failures(df)
    assert bad.empty, bad[['variant', 'score', 'passed', 'success']]
    s = audit_summary(df)
    assert set(s.adversary) >= set(ADVERSARIES) - {'stuff_keywords'} and (s[~s.adversary.isin(['oracle', 'alternative'])].pass_rate == 0).all()


def test_idempotent_duplicate_is_equivalent_not_an_adversary():
    df = audit_grader([EX], ['duplicate_write'], progress=False)
    row = df[df.variant.str.contains(r"duplicate_write\[8\] todo_update_task")].iloc[0]  # ticking the to-do twice
    assert row.equivalent
    assert not df[df.variant.str.contains('expenses_pay_claim')].iloc[0].equivalent  # paying twice is not


def _read_only(checks):
    return TaskSpec(id='ro', request="What is the amount of Sam's expense claim CLM-204? Just tell me.",
                    services={'expenses': EX.services['expenses']}, tools=['expenses_list_claims', 'expenses_get_claim', 'expenses_pay_claim'],
                    solution=[Step.call('expenses_get_claim', claim_id='CLM-204'), Step.say("CLM-204 is 842.50 USD.")], checks=checks)


def test_a_gameable_grader_is_caught():
    weak = _read_only([Check(id='said', type='keywords_present', params={'keywords': ['842.5'], 'scope': 'final'}, source='request: amount')])
    bad = audit_failures(audit_grader([weak], progress=False))
    assert set(bad.adversary) == {'dump_ids'}, bad


def test_keyword_stuffing_reveals_nothing():
    sp = EXAMPLES['planning_meeting_reschedule']
    q = stuffed_question(sp)
    env = audit_env(sp); env.reset()
    r = env.step({"role": "assistant", "content": q})
    assert not any(f.value.lower() in r.info['user'].lower() for f in sp.user.facts), r.info['user']
    v = adversary_variants(sp, ['stuff_keywords'])[0]
    o = play_variant(env, v)
    assert o.grade is not None and not o.grade.passed and not o.grade.success


def test_play_variant_never_raises():
    o = play_variant(audit_env(EX), Variant(adversary='x', name='junk', plan=[Step.call('expenses_pay_claim', claim_id=['not', 'a', 'string'])]))
    assert o.error is None and o.grade is not None and not o.grade.passed


def test_audit_grader_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="no spec file"): audit_grader(tmp_path / 'nope')
    (tmp_path / 'ex.json').write_text(EX.model_dump_json())
    df = audit_grader(tmp_path, ['do_nothing'], progress=False)
    assert list(df.columns)[:7] == ['spec_id', 'workflow', 'adversary', 'variant', 'score', 'passed', 'success']
    assert set(df.adversary) == {'oracle', 'alternative', 'do_nothing'}
    t = audit_table(df)
    assert list(t.index)[-1] == 'ALL' and t.loc['ALL', 'oracle'] == 1.0 and t.loc['ALL', 'do_nothing'] == 0.0


def test_cli(tmp_path, capsys):
    import argparse
    ap = argparse.ArgumentParser(); add_audit_parser(ap.add_subparsers(dest='cmd'))
    (tmp_path / 'weak.json').write_text(_read_only([Check(id='said', type='keywords_present', source='request: amount',
                                                          params={'keywords': ['842.5'], 'scope': 'final'})]).model_dump_json())
    a = ap.parse_args(['audit-grader', str(tmp_path / 'weak.json'), '--adversaries', 'dump_ids,do_nothing', '--out', str(tmp_path / 'o'),
                       '--strict', '--quiet'])
    assert a.fn(a) == 1
    out = capsys.readouterr().out
    assert 'strict success rate' in out and 'dump_ids' in out and '1 row(s) miss the targets' in out
    assert (tmp_path / 'o' / 'audit.csv').exists() and len(pd.read_csv(tmp_path / 'o' / 'summary.csv')) >= 3


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_sample_meets_the_targets(family):
    "One synthesized spec per family (CI sample): valid plans pass with success, no adversary passes or succeeds."
    spec = ProceduralGenerator().generate(family, 1, 'medium')
    df = audit_grader([spec], progress=False)
    bad = audit_failures(df)
    assert bad.empty, bad[['variant', 'score', 'passed', 'success', 'failed_checks']].to_string()


def test_plan_turn_is_exactly_the_coerced_step_message():
    "`plan_turn` (coerced once per step) gives the same turn as coercing the step's message at every turn."
    import coworkenv.env as envmod
    from coworkenv.adversaries import plan_turn
    from coworkenv.agents import PlanAgent
    from coworkenv.core import Step
    spec = EX
    bad = Step.call('list_expenses', note='a\ud800b')  # needs repair: never cached
    plan = list(spec.solution) + [bad, Step.say("All done.")]
    agent, cache = PlanAgent(spec, plan), {}
    for turn in (1, 2, 7, 13):
        for s in plan:
            got, want = plan_turn(cache, agent, s, turn), envmod.coerce_turn(agent.step_message(s, turn))
            assert got.message.model_dump() == want.message.model_dump()
            assert (got.problems, got.call_problems) == (want.problems, want.call_problems)
    assert cache[id(bad)][2] is None and any(envmod.coerce_turn(agent.step_message(bad, 1)).call_problems)
    t1, t2 = plan_turn(cache, agent, spec.solution[0], 3), plan_turn(cache, agent, spec.solution[0], 3)
    if t1.message.tool_calls: assert t1.message.tool_calls[0].arguments is not t2.message.tool_calls[0].arguments  # copies
