"""Validation of specs with world events (07_validation, "World events"): reference findings, the stale-plan control,
inert and mistimed events, the event corruptions of mutation testing; the Claw-Eval export marks event specs
unsupported; `coworkenv show`/`play` print events and stage boundaries."""
import json, warnings

import pytest
import yaml

from coworkenv.core import (TaskSpec, Check, Step, NegativePlan, UserSpec, FollowUp, WorldEvent, Trigger, Mutation, StageSpec,
                            load_spec)
from coworkenv.validation import (CORRUPTIONS, EVENT_CODES, FINDING_CODES, PASS_THRESHOLD, Runs, validate, stale_plan,
                                  derive_stale_plan, event_changes, event_effects, event_reference_findings, mutation_details, _rng)

CLAIMS = [{'claim_id': 'CLM-1', 'employee': 'Sam Ortiz', 'amount': 100.0, 'currency': 'USD', 'status': 'approved', 'description': 'Taxi'},
          {'claim_id': 'CLM-2', 'employee': 'Ana Diaz', 'amount': 300.0, 'currency': 'USD', 'status': 'approved', 'description': 'Hotel'}]


def claim_spec(**kw) -> TaskSpec:
    "Finance corrects CLM-1 from 100 to 120 right after the agent first reads it (silent); the oracle re-reads and pays 120."
    d = dict(id='corrected_claim', request="Pay Sam Ortiz's approved expense claim CLM-1 for the amount on the claim.",
             services={'expenses': {'claims': CLAIMS}}, tools=['expenses_list_claims', 'expenses_get_claim', 'expenses_pay_claim'],
             checks=[Check(id='paid_amount', type='audit_field_equals', source='request: for the amount on the claim',
                           params=dict(service='expenses', action='payments', field='amount', value=120.0, where={'claim_id': 'CLM-1'})),
                     Check(id='paid_once', type='audit_count', source="request: pay sam ortiz's approved expense claim clm-1",
                           params=dict(service='expenses', action='payments', min=1, max=1))],
             solution=[Step.call('expenses_get_claim', claim_id='CLM-1'), Step.call('expenses_get_claim', claim_id='CLM-1'),
                       Step.call('expenses_pay_claim', claim_id='CLM-1', amount=120.0), Step.say("Paid CLM-1: 120.00 USD.")],
             negatives=[NegativePlan(name='shortcut', plan=[Step.call('expenses_pay_claim', claim_id='CLM-2', amount=300.0), Step.say("Paid.")],
                                     must_fail=['paid_amount'])],
             events=[WorldEvent(id='finance_fix', trigger=Trigger(after_tool='expenses_get_claim'), tests=['paid_amount'],
                                mutations=[Mutation(op='update', service='expenses', collection='claims', id='CLM-1', fields={'amount': 120.0})])])
    d.update(kw)
    return TaskSpec(**d)


def with_stale_negative(spec:TaskSpec) -> TaskSpec:
    "The spec with its derived stale plan as a `stale_plan` negative (as the families write it)."
    return spec.model_copy(update={'negatives': [*spec.negatives, NegativePlan(name='stale_plan', plan=derive_stale_plan(spec),
                                                                                 must_fail=[t for e in spec.events for t in e.tests])]})


def doc(spec:TaskSpec, event=None, **top) -> dict:
    "The spec's document with its first event's fields (and top-level fields) replaced."
    d = spec.model_dump(mode='json')
    if event: d['events'][0].update(event)
    d.update(top)
    return d


def ticket_spec() -> TaskSpec:
    "A new ticket lands in the queue after the agent's first triage write (silent add); the oracle re-lists and triages it too."
    tickets = [{'ticket_id': 'T-1', 'title': 'Printer jam', 'status': 'open', 'priority': 'normal', 'tags': []},
               {'ticket_id': 'T-2', 'title': 'VPN down for sales', 'status': 'open', 'priority': 'normal', 'tags': []}]
    new = {'ticket_id': 'T-3', 'title': 'Payroll site down', 'status': 'open', 'priority': 'normal', 'tags': []}
    return TaskSpec(id='queue_grows', request="Set every open helpdesk ticket to high priority, including any that come in while you work.",
        services={'helpdesk': tickets}, tools=['helpdesk_list_tickets', 'helpdesk_get_ticket', 'helpdesk_update_ticket'],
        checks=[Check(id=f'high_{t}', type='state_equals', source='request: set every open helpdesk ticket to high priority',
                      params=dict(service='helpdesk', id=t, field='priority', value='high')) for t in ('T-1', 'T-2', 'T-3')],
        solution=[Step.call('helpdesk_list_tickets'), Step.call('helpdesk_update_ticket', ticket_id='T-1', priority='high'),
                  Step.call('helpdesk_update_ticket', ticket_id='T-2', priority='high'), Step.call('helpdesk_list_tickets'),
                  Step.call('helpdesk_update_ticket', ticket_id='T-3', priority='high'), Step.say("T-1, T-2 and T-3 are high priority now.")],
        negatives=[NegativePlan(name='shortcut', plan=[Step.say("Done.")], must_fail=['high_T-1'])],
        events=[WorldEvent(id='new_ticket', trigger=Trigger(after_tool='helpdesk_update_ticket'), tests=['high_T-3'],
                           mutations=[Mutation(op='add', service='helpdesk', record=new)])])


# ---- the valid specs pass; the stale plan ----------------------------------------------------------------------------------

def test_valid_event_specs_pass_and_the_stale_plan_fails():
    for sp in (claim_spec(), with_stale_negative(claim_spec()), ticket_spec(), with_stale_negative(ticket_spec())):
        r = validate(sp)
        assert r.passed, (sp.id, [str(f) for f in r.errors])
        assert r.oracle_score == 1.0
        stale = next(v for k, v in r.scores.items() if k in ('stale_plan', f"negatives[{len(sp.negatives) - 1}]"))
        assert stale < PASS_THRESHOLD


def test_event_runs_record_the_world_events():
    o = Runs(claim_spec()).oracle()
    assert [(w['id'], w['turn']) for w in o.world_events] == [('finance_fix', 1)]
    assert o.passed('paid_amount')


def test_derived_stale_plan_uses_pre_event_values_and_drops_added_records():
    sp = claim_spec()
    assert event_changes(sp) == ([(120.0, 100.0)], set())
    st = stale_plan(sp)
    assert st[2].args == {'claim_id': 'CLM-1', 'amount': 100.0} and st[3].text == "Paid CLM-1: 100.00 USD."
    tk = ticket_spec()
    assert event_changes(tk) == ([], {'T-3'})
    assert [s.args.get('ticket_id') for s in stale_plan(tk) if s.kind == 'call'] == [None, 'T-1', 'T-2', None]
    fx = event_effects(tk)
    assert (fx[0].op, fx[0].record, fx[0].new['title']) == ('add', 'T-3', 'Payroll site down')


def test_family_stale_plan_is_preferred():
    sp = with_stale_negative(claim_spec())
    custom = [Step.call('expenses_pay_claim', claim_id='CLM-1', amount=99.0), Step.say("x")]
    sp.negatives[-1].plan = custom
    assert stale_plan(sp) == custom
    assert stale_plan(claim_spec(events=[])) is None


def test_stale_plan_that_passes_a_tested_check_is_a_finding():
    d = doc(claim_spec())
    d['checks'][0] = {**d['checks'][0], 'type': 'audit_action_exists',
                      'params': {'service': 'expenses', 'action': 'payments', 'where': {'claim_id': 'CLM-1'}}}  # any amount passes
    r = validate(d)
    assert r.codes == ['control.stale_plan'], [str(f) for f in r.errors]
    assert "passes check(s) ['paid_amount']" in r.errors[0].message


def test_stale_plan_scoring_high_is_a_finding():
    # the tested check weighs little against one the stale plan passes; no footprint gate caps it (an imported Claw-Eval spec)
    sp = claim_spec(compat='claweval')
    chk = [sp.checks[0].model_copy(update={'weight': 0.1}), sp.checks[1].model_copy(update={'weight': 5.0})]
    from coworkenv.validation import stale_plan_findings
    sp2 = sp.model_copy(update={'checks': chk})
    fs = stale_plan_findings(sp2, Runs(sp2))
    assert [f.code for f in fs if f.severity == 'error'] == ['control.stale_plan'] and 'scores' in fs[0].message


def test_inert_events_are_flagged():
    assert validate(doc(claim_spec(), {'tests': []})).codes == ['events.inert']
    # a field no check reads: the stale plan is the reference plan and passes every check
    r = validate(doc(claim_spec(), {'mutations': [{'op': 'update', 'service': 'expenses', 'id': 'CLM-1', 'fields': {'description': 'Taxi, receipt attached'}}]}))
    assert r.codes == ['events.inert'] and 'passes every check' in r.errors[0].message
    # a `stale_plan` negative but no event at all
    r = validate(doc(with_stale_negative(claim_spec()), events=[]))
    assert r.codes == ['events.inert']


def test_specs_without_events_get_no_event_findings():
    r = validate(claim_spec(events=[]).model_copy(update={'checks': claim_spec().checks}))
    assert not any(f.code.startswith(('events.', 'control.', 'ref.event')) for f in r.findings)
    assert 'stale_plan' not in r.scores


# ---- references ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, code, path", [
    ({'mutations': [{'op': 'update', 'service': 'expenses', 'id': 'CLM-9', 'fields': {'amount': 1.0}}]}, 'ref.event_record', 'events[0].mutations[0].id'),
    ({'mutations': [{'op': 'update', 'service': 'expenses', 'id': 'CLM-1', 'fields': {'amout': 1.0}}]}, 'ref.event_field', 'events[0].mutations[0].fields'),
    ({'mutations': [{'op': 'add', 'service': 'expenses', 'record': {'claim_id': 'CLM-2', 'amount': 5.0}}]}, 'ref.event_record', 'events[0].mutations[0].record.claim_id'),
    ({'mutations': [{'op': 'remove', 'service': 'crm', 'id': 'x'}]}, 'ref.event_service', 'events[0].mutations[0].service'),
    ({'mutations': [{'op': 'remove', 'service': 'teleporter', 'id': 'x'}]}, 'ref.event_service', 'events[0].mutations[0].service'),
    ({'mutations': [{'op': 'remove', 'service': 'expenses', 'collection': 'refunds', 'id': 'x'}]}, 'ref.event_service', 'events[0].mutations[0].collection'),
    ({'trigger': {'after_tool': 'expenses_reject_claim'}}, 'ref.event_trigger', 'events[0].trigger.after_tool'),
    ({'trigger': {'after_tool': 'gmail_teleport'}}, 'ref.event_trigger', 'events[0].trigger.after_tool'),
    ({'trigger': {'stage': 2}}, 'ref.event_trigger', 'events[0].trigger.stage'),
    ({'trigger': {'after_turn': 20}}, 'ref.event_trigger', 'events[0].trigger.after_turn'),
    ({'trigger': {'after_check': 'zz_nope'}}, 'ref.event_trigger', 'events[0].trigger'),
    ({'tests': ['zz_nope']}, 'ref.unknown_check', 'events[0].tests'),
])
def test_unknown_event_references_are_flagged(change, code, path):
    r = validate(doc(claim_spec(), change))
    assert r.codes == [code], [str(f) for f in r.errors]
    assert path in {f.path for f in r.errors}


def test_event_on_a_record_the_plan_creates_is_not_unknown():
    # a payment created by the plan, then annotated by finance: the record exists when the event fires
    sp = claim_spec(checks=claim_spec().checks)
    d = doc(sp, {'trigger': {'after_tool': 'expenses_pay_claim'}, 'tests': ['paid_amount'],
                 'mutations': [{'op': 'update', 'service': 'expenses', 'collection': 'payments', 'id': 'PAY-001', 'fields': {'currency': 'EUR'}}]})
    from coworkenv.validation import event_record_findings
    s = load_spec(d)
    assert event_record_findings(s, Runs(s)) == []


def test_reachable_stages_come_from_followups_and_stages():
    sp = claim_spec(stages=[StageSpec(stage=3, now="2026-03-05T09:00:00Z", label="Thursday")])
    assert event_reference_findings(load_spec(doc(sp, {'trigger': {'stage': 3}}))) == []
    assert [f.code for f in event_reference_findings(load_spec(doc(sp, {'trigger': {'stage': 4}})))] == ['ref.event_trigger']


def test_silent_event_no_tool_can_read_is_unobservable():
    blind = doc(claim_spec(), {'trigger': {'after_turn': 1}}, tools=['expenses_pay_claim'])
    assert [f.code for f in event_reference_findings(load_spec(blind))] == ['events.unobservable']
    r = validate(blind)
    assert 'events.unobservable' in r.codes and r.stages_run == ['schema', 'references']
    blind['events'][0].update(announced=True, message="Finance corrected CLM-1 to 120.00 USD.")  # the user says so: observable
    assert event_reference_findings(load_spec(blind)) == []


# ---- runs: unfired, late, unsourced, off target, early --------------------------------------------------------------------

def test_event_that_never_fires_is_flagged():
    sp = claim_spec(user=UserSpec(followups=[FollowUp(id='fu', message='Also check CLM-2.', after_tool='expenses_list_claims', stage=1)]))
    r = validate(doc(sp, {'trigger': {'stage': 1}}))  # stage 1 exists, but the plan never lists claims, so it is never reached
    assert 'events.unfired' in r.codes, [str(f) for f in r.errors]


def test_event_firing_before_anything_is_read_is_flagged():
    r = validate(doc(claim_spec(), {'trigger': {'stage': 0}}))
    assert r.codes == ['control.stale_plan'] and 'before the agent' in r.errors[0].message


def test_event_firing_after_the_plan_acted_is_flagged():
    r = validate(doc(claim_spec(), {'trigger': {'after_turn': 3}}))
    assert set(r.codes) >= {'events.late'} and set(r.codes) <= set(EVENT_CODES), [str(f) for f in r.errors]
    r = validate(doc(claim_spec(), {'trigger': {'after_tool': 'expenses_pay_claim'}}))
    assert 'events.unsourced_value' in r.codes or 'events.late' in r.codes


def test_event_on_another_record_is_flagged():
    r = validate(doc(claim_spec(), {'mutations': [{'op': 'update', 'service': 'expenses', 'id': 'CLM-2', 'fields': {'amount': 120.0}}]}))
    assert set(r.codes) == {'events.off_target', 'events.unsourced_value'}, [str(f) for f in r.errors]


# ---- mutation testing ---------------------------------------------------------------------------------------------------

def test_event_corruptions_are_registered_and_documented():
    for k in ('event_wrong_record', 'event_wrong_stage', 'event_dropped'):
        assert k in CORRUPTIONS and set(CORRUPTIONS[k].expected) == set(EVENT_CODES)
    assert all(c in FINDING_CODES for c in EVENT_CODES)
    assert all(CORRUPTIONS[k].fn(claim_spec(events=[]), _rng(0, k)) is None for k in ('event_wrong_record', 'event_wrong_stage', 'event_dropped'))


def test_each_event_corruption_is_flagged_on_hand_written_specs():
    specs = [with_stale_negative(claim_spec()), with_stale_negative(ticket_spec())]
    kinds = {k: CORRUPTIONS[k] for k in ('event_wrong_record', 'event_wrong_stage', 'event_dropped')}
    for seed in range(3):
        det = mutation_details(specs, kinds, seed=seed)
        assert len(det) == 5  # wrong_record applies to updates only
        assert det.flagged.all(), det[~det.flagged][['kind', 'spec', 'codes']].to_string()


def test_event_corruptions_change_what_they_say():
    sp = with_stale_negative(claim_spec())
    d = CORRUPTIONS['event_wrong_record'].fn(sp, _rng(0, 'x'))
    assert d['events'][0]['mutations'][0]['id'] == 'CLM-2'
    d = CORRUPTIONS['event_wrong_stage'].fn(sp, _rng(0, 'x'))
    assert d['events'][0]['trigger'] in ({'stage': 0}, {'after_turn': 4})
    assert CORRUPTIONS['event_dropped'].fn(sp, _rng(0, 'x'))['events'] == []


def test_event_families_corruptions_are_flagged():
    "A small sample of the event families' specs (the notebook measures many seeds)."
    from coworkenv.synthesis import ProceduralGenerator
    from coworkenv.workflows import FAMILIES
    g = ProceduralGenerator()
    specs = [s for s in (g.generate(f, 0, 'hard') for f in sorted(FAMILIES)) if s.events]
    assert len(specs) >= 5
    assert all(validate(s).passed for s in specs)
    kinds = {k: CORRUPTIONS[k] for k in ('event_wrong_record', 'event_wrong_stage', 'event_dropped')}
    det = mutation_details(specs, kinds, seed=3)
    assert det.flagged.mean() >= 0.98, det[~det.flagged][['kind', 'spec', 'codes']].to_string()


# ---- Claw-Eval export and the CLI ----------------------------------------------------------------------------------------

def test_claweval_export_marks_event_specs_unsupported(tmp_path):
    from coworkenv.claweval import export_claweval, claweval_task_doc, export_unsupported, ClawEvalWarning, load_claweval_task
    sp = claim_spec()
    why = export_unsupported(sp)
    assert len(why) == 1 and 'finance_fix' in why[0] and 'silent' in why[0]
    with pytest.warns(ClawEvalWarning, match='supported=false'):
        folder = export_claweval(sp, tmp_path)
    text = (folder / 'task.yaml').read_text()
    d = yaml.safe_load(text)
    assert d['supported'] is False and d['unsupported'] == why
    assert '# NOT SUPPORTED by Claw-Eval: events' in text
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        assert load_claweval_task(folder).events == sp.events  # the exact spec round-trips under x_coworkenv
    plain = claweval_task_doc(claim_spec(events=[]))
    assert 'supported' not in plain and 'unsupported' not in plain
    scoped = claim_spec(events=[], checks=[claim_spec().checks[0].model_copy(update={'stage': 0}), claim_spec().checks[1]],
                        stages=[StageSpec(stage=1, now="2026-03-03T09:00:00Z")])
    assert [u.split(':')[0] for u in export_unsupported(scoped)] == ["checks ['paid_amount']", 'stages [1]']


def test_cli_show_and_play_print_events(tmp_path, capsys):
    from coworkenv.cli import main, event_lines
    p = tmp_path / 'spec.json'
    p.write_text(claim_spec(stages=[StageSpec(stage=0, now="2026-03-02T09:00:00Z", label="Monday")]).model_dump_json())
    assert main(['show', str(p)]) == 0
    out = capsys.readouterr().out
    assert "event finance_fix [silent] after the first successful expenses_get_claim; tests: paid_amount" in out
    assert "update expenses.claims[CLM-1] amount=120.0" in out and "stage 0 (Monday) now=2026-03-02T09:00:00Z" in out
    assert main(['play', str(p)]) == 0
    lines = capsys.readouterr().out.splitlines()
    w = next(i for i, l in enumerate(lines) if l.startswith('~~ world'))
    assert 'event finance_fix [silent] update expenses.claims[CLM-1] amount=120.0' in lines[w] and 'after turn 1' in lines[w]
    assert '"amount": 100.0' in lines[w - 1] and '"amount": 120.0' in lines[w + 2]  # read before, re-read after
    ann = claim_spec(events=[claim_spec().events[0].model_copy(update={'announced': True, 'message': 'Finance fixed CLM-1: 120.00.'})])
    assert any('says: Finance fixed CLM-1: 120.00.' in l for l in event_lines(ann))


def test_play_prints_stage_boundaries(tmp_path, capsys):
    from coworkenv.cli import main
    sp = claim_spec(user=UserSpec(followups=[FollowUp(id='tomorrow', message='New day: pay it now, please.', after_tool='expenses_get_claim', stage=1)]),
                    stages=[StageSpec(stage=1, now="2026-03-03T09:00:00Z", label="Tuesday")])
    p = tmp_path / 'spec.json'; p.write_text(sp.model_dump_json())
    assert main(['play', str(p)]) == 0
    out = capsys.readouterr().out
    assert '---- stage 1: Tuesday (2026-03-03T09:00:00Z) ----' in out
