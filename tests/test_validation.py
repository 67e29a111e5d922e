"""Validation and repair (07_validation): the examples pass, corrupted specs are flagged with the right code,
the repair loop feeds findings back and quarantines what never passes, reports are written."""
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from coworkenv.core import TaskSpec, Check, Step, NegativePlan, UserSpec, UserFact, FollowUp, load_spec, load_specs
from coworkenv.env import CoworkEnv
from coworkenv.agents import OracleAgent, run_episode
from coworkenv.services import SERVICES, Service, tool
from coworkenv.synthesis import GenerationError, ProceduralGenerator
from coworkenv.workflows import FAMILIES
from coworkenv.validation import (STAGES, FINDING_CODES, CORRUPTIONS, ValidationResult, Runs, validate,
                                  feedback_text, repair, validate_many, validate_dir, run_pipeline, report_figure,
                                  mutation_details, mutation_report, stage_pass_rates, non_json, _rng,
                                  source_findings, sensitivity_findings, sensitivity_sample, attach_footprint,
                                  SENSITIVITY_SAMPLE)
from coworkenv.adversaries import ADVERSARIES

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "data" / "examples"
EXAMPLES = load_specs(EX)
BY_ID = {s.id: s for s in EXAMPLES}


@pytest.mark.parametrize("name", sorted(BY_ID))
def test_examples_pass_every_stage(name):
    r = validate(BY_ID[name])
    assert r.passed, [str(f) for f in r.errors]
    assert r.stages_run == list(STAGES) and r.oracle_score == 1.0
    assert r.scores['null'] < 0.75


def test_examples_from_paths_dicts_and_text():
    p = EX / "expense_approval.json"
    for src in (p, str(p), json.loads(p.read_text()), p.read_text()):
        r = validate(src)
        assert r.passed and r.spec_id == "expense_approval", r


def test_result_is_json_serialisable():
    doc = BY_ID['vpn_kb_fix'].model_dump(mode='json'); doc['tools'].append('helpdesk_teleport')
    r = validate(doc)
    assert ValidationResult.from_json(r.to_json()) == r
    assert all(f.code in FINDING_CODES and f.stage in STAGES for f in r.findings)


def test_finding_codes_are_documented():
    assert all(stage in STAGES and meaning and hint for stage, meaning, hint in FINDING_CODES.values())
    for k in CORRUPTIONS.values(): assert all(c in FINDING_CODES for c in k.expected), k.name


def test_schema_findings_have_paths():
    r = validate({"id": "t", "request": "hi", "limits": {"max_turns": "many"},
                  "checks": [{"id": "a", "type": "audit_field_equals", "params": {"service": "gmail", "action": "sent_messages"}}]})
    assert not r.passed and r.stages_run == ['schema']
    paths = {f.path for f in r.findings}
    assert 'limits.max_turns' in paths and 'checks[0].params.field' in paths
    assert {f.code for f in r.findings} == {'schema.invalid'}


def test_stages_gate_and_subset():
    doc = BY_ID['expense_approval'].model_dump(mode='json'); doc['tools'].append('expenses_refund_claim')
    r = validate(doc)
    assert r.stages_run == ['schema', 'references'] and r.codes == ['ref.unknown_tool'] and r.first_failed_stage == 'references'
    assert validate(BY_ID['expense_approval'], stages=['schema', 'solvability']).stages_run == ['schema', 'solvability']
    with pytest.raises(ValueError, match='unknown validation stage'): validate(BY_ID['expense_approval'], stages=['nope'])


def test_feedback_text_is_actionable():
    doc = BY_ID['expense_approval'].model_dump(mode='json'); doc['solution'][5]['args']['claim_id'] = 'CLM-999'
    r = validate(doc)
    txt = feedback_text(r)
    assert "stage 'solvability'" in txt and 'solve.oracle_failed' in txt and 'checks[1]' in txt and 'CLM-999' in txt
    assert feedback_text(validate(BY_ID['expense_approval'])).startswith("The spec passed validation")


# ---- mutation testing --------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def example_mutations():
    return mutation_details(EXAMPLES, seed=0)


def test_at_least_12_corruption_kinds():
    assert len(CORRUPTIONS) >= 12


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_each_corruption_flagged_on_examples(kind, example_mutations):
    g = example_mutations[example_mutations.kind == kind]
    assert len(g) > 0, f"{kind} applies to no example"
    assert g.failed.all(), g[~g.failed]
    assert g.flagged.mean() >= 0.9, g[~g.flagged][['spec', 'codes']]


def test_mutation_rate_overall(example_mutations):
    assert example_mutations.flagged.mean() >= 0.98
    rep = mutation_report(EXAMPLES[:2], seed=0)
    assert list(rep.kind)[-1] == 'ALL' and set(rep.columns) >= {'kind', 'applied', 'flagged', 'rate'}


def test_corruptions_are_deterministic():
    s = BY_ID['vpn_kb_fix']
    for k in CORRUPTIONS.values():
        assert k.fn(s, _rng(3, s.id, k.name)) == k.fn(s, _rng(3, s.id, k.name)), k.name
        assert s == BY_ID['vpn_kb_fix']  # the spec itself is not modified


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.sampled_from(EXAMPLES), kind=st.sampled_from(list(CORRUPTIONS)), seed=st.integers(0, 10_000))
def test_random_corruptions_flagged(spec, kind, seed):
    k = CORRUPTIONS[kind]
    doc = k.fn(spec, _rng(seed, spec.id, kind))
    if doc is None: return
    r = validate(doc)
    assert not r.passed and set(r.codes) & set(k.expected), (kind, r.codes)


@pytest.fixture(scope='module')
def generated():
    g = ProceduralGenerator()
    return [g.generate(f, 2, d) for f in sorted(FAMILIES) for d in ('easy', 'hard')]


def test_generated_specs_pass_and_corruptions_flagged(generated):
    assert len(FAMILIES) >= 16
    bad = [(s.id, r.codes) for s in generated for r in [validate(s)] if not r.passed]
    assert not bad, bad
    det = mutation_details(generated[::2], seed=5)
    assert det.flagged.mean() >= 0.98, det[~det.flagged]


# ---- other stages ------------------------------------------------------------------------------------------

class _Leaky(Service):
    name, collections, mutation_keys = "leaky_pytest", {"items": "item_id"}, ("made",)
    n = 0
    @tool("/leaky/make")
    def leaky_make(self, title:str):
        "Make an item (bug: the counter is shared by every instance)."
        _Leaky.n += 1
        item = {"item_id": f"I{_Leaky.n}", "title": title}
        self.record("made", item); return item


def test_nondeterminism_detected():
    SERVICES['leaky_pytest'] = _Leaky
    try:
        spec = TaskSpec(id='leaky', request='Make an item called x.', services={'leaky_pytest': []}, tools=['leaky_make'],
                        checks=[Check(id='made', type='audit_field_equals', source='request: make an item called x',
                                      params=dict(service='leaky_pytest', action='made', field='title', value='x'))],
                        solution=[Step.call('leaky_make', title='x')],
                        negatives=[NegativePlan(name='shortcut', plan=[Step.call('leaky_make', title='y')], must_fail=['made'])])
        r = validate(spec)
        assert r.codes == ['det.nondeterministic'] and r.stages_run[-1] == 'determinism'
    finally: SERVICES.pop('leaky_pytest')


def test_non_json_values():
    assert non_json({"a": [1, 2.5, "x", None, True]}) is None
    assert non_json({"a": [1, (2, 3)]}) == "a[1]"
    assert non_json({"a": float('nan')}) == "a"
    spec = BY_ID['vpn_kb_fix'].model_copy(deep=True)
    spec.meta = {"when": (1, 2)}
    assert 'det.not_roundtrip' in validate(spec).codes


def test_fast_runner_matches_run_episode():
    for sp in EXAMPLES:
        for rate in (0.0, 0.4):
            ref = run_episode(CoworkEnv(sp, error_rate=rate, seed=11), OracleAgent(sp))
            run = Runs(sp).play('oracle', OracleAgent(sp), CoworkEnv(sp, error_rate=rate, seed=11))
            assert run.messages == ref.messages, (sp.id, rate)
            assert run.grade.score == ref.grade.score and [i.passed for i in run.grade.items] == [i.passed for i in ref.grade.items]


def test_runs_are_cached():
    sp = BY_ID['expense_approval']
    runs = Runs(sp)
    assert runs.oracle() is runs.oracle()
    validate(sp)  # smoke: nothing raises


# ---- repair loop -------------------------------------------------------------------------------------------

class FailsTwice:
    name = 'fails-twice'
    def __init__(self): self.feedback = []
    def generate(self, family, seed, difficulty, feedback=None, round=0):
        self.feedback.append(feedback)
        d = BY_ID['expense_approval'].model_dump(mode='json')
        if round == 0: d['tools'].append('expenses_refund_claim')
        elif round == 1: raise GenerationError("no JSON object in the reply", raw="Sure! {", problems=[("", "Expecting value")])
        return load_spec(d)


class AlwaysBad:
    name = 'always-bad'
    def generate(self, family, seed, difficulty, feedback=None, round=0):
        d = BY_ID['vpn_kb_fix'].model_dump(mode='json')
        d['id'] = f"bad-{seed}"
        d['checks'].append({"id": "trivial", "type": "keywords_absent", "source": "request: fix the KB article",
                            "params": {"keywords": ["zz-never"]}})
        return load_spec(d)


def test_repair_fails_twice_then_succeeds(tmp_path):
    g = FailsTwice()
    o = repair('expense_reimbursement', 4, 'medium', g, max_rounds=3, quarantine_dir=tmp_path)
    assert o.passed and o.rounds == 2 and o.spec is not None and o.quarantined is None
    assert [h['passed'] for h in o.history] == [False, False, True]
    assert o.history[1]['findings'][0]['code'] == 'gen.unparseable'
    assert g.feedback[0] is None and 'ref.unknown_tool' in g.feedback[1] and 'gen.unparseable' in g.feedback[2]
    assert not list(tmp_path.iterdir())


def test_repair_always_fails_is_quarantined(tmp_path):
    o = repair('vpn', 9, 'easy', AlwaysBad(), max_rounds=2, quarantine_dir=tmp_path)
    assert not o.passed and o.rounds == 2 and o.spec is None
    q = json.loads(Path(o.quarantined).read_text())
    assert Path(o.quarantined).name == 'bad-9.json'
    assert q['spec']['id'] == 'bad-9' and len(q['rounds']) == 3
    assert {f['code'] for f in q['findings'] if f['severity'] == 'error'} == {'disc.vacuous_check', 'disc.inaction_credit'}
    assert all(r['feedback'] for r in q['rounds'][1:])


def test_repair_unparseable_quarantine_keeps_raw(tmp_path):
    class Raw:
        name = 'raw'
        def generate(self, family, seed, difficulty, feedback=None, round=0):
            raise GenerationError("not JSON", raw="I cannot do that.", problems=[("", "no JSON object")], family=family, seed=seed, difficulty=difficulty)
    o = repair('fam', 1, 'hard', Raw(), max_rounds=0, quarantine_dir=tmp_path)
    q = json.loads((tmp_path / 'fam-hard-00001.json').read_text())
    assert q['spec'] == "I cannot do that." and q['findings'][0]['code'] == 'gen.unparseable' and o.rounds == 0


def test_run_pipeline_small(tmp_path):
    pr = run_pipeline(n=8, quarantine_dir=tmp_path / 'q', out_dir=tmp_path / 'out', progress=False)
    assert len(pr.df) == 8 and pr.df.passed_first.all() and len(pr.specs) == 8
    assert len(list((tmp_path / 'out').glob('*.json'))) == 8
    fig = report_figure(pr.df)
    assert len(fig.data) >= 3


# ---- many specs --------------------------------------------------------------------------------------------

def test_validate_dir_writes_reports(tmp_path):
    src = tmp_path / 'specs'; src.mkdir()
    for p in sorted(EX.glob('*.json'))[:3]: (src / p.name).write_text(p.read_text())
    bad = BY_ID['vpn_kb_fix'].model_dump(mode='json'); bad['id'] = 'dup'; bad['services']['helpdesk'].append(dict(bad['services']['helpdesk'][0]))
    (src / 'dup.json').write_text(json.dumps(bad))
    (src / 'broken.yaml').write_text("id: broken\nrequest: [1, 2\n")
    df = validate_dir(src, out=tmp_path / 'rep', progress=False)
    assert len(df) == 5 and int(df.passed.sum()) == 3
    assert set(df[df.id == 'dup'].codes) == {'ref.duplicate_record_id'}
    csv = pd.read_csv(tmp_path / 'rep' / 'report.csv')
    assert len(csv) == 5 and 'findings' not in csv.columns
    lines = [json.loads(l) for l in (tmp_path / 'rep' / 'findings.jsonl').read_text().splitlines()]
    assert {l['spec_id'] for l in lines if l['severity'] == 'error'} == {'dup', 'broken'}
    sp = stage_pass_rates(df)
    assert list(sp.stage) == list(STAGES) and sp.reached.iloc[0] == 5
    assert len(report_figure(df).data) >= 2
    with pytest.raises(FileNotFoundError): validate_dir(tmp_path / 'nope')


def test_validate_many_list():
    df = validate_many(EXAMPLES[:2] + [{"id": "x", "request": 1}], progress=False)
    assert list(df.passed) == [True, True, False] and df.first_failed_stage.iloc[2] == 'schema'


# ---- sources, inaction, sensitivity (issue 8) -----------------------------------------------------------------

def _src_spec(sources, **kw):
    return TaskSpec(id='src', request="Close ticket T-7 and keep T-9 open.", system_prompt="Never share passwords.",
                    user=UserSpec(facts=[UserFact(key='due', value='Friday')], followups=[FollowUp(id='fu1', message='x', after_tool='t')]),
                    checks=[Check(id=f"c{i}", type='keywords_present', params={'keywords': ['x']}, source=s) for i, s in enumerate(sources)], **kw)


@pytest.mark.parametrize("source,code", [
    ("request: close ticket T-7", None), ("request:   CLOSE   ticket t-7 ", None), ("fact:due", None), ("followup:fu1", None),
    ("policy: never share passwords", None), ("", 'src.missing'), ("   ", 'src.missing'), ("request: reopen T-9", 'src.invalid'),
    ("request: T-", 'src.invalid'), ("fact:budget", 'src.invalid'), ("followup:fu9", 'src.invalid'), ("policy: be nice", 'src.invalid'),
    ("footprint", 'src.invalid'), ("vibes: yes", 'src.invalid'), ("request:", 'src.invalid')])
def test_check_sources(source, code):
    fs = source_findings(_src_spec([source]))
    assert [f.code for f in fs] == ([code] if code else []), fs
    if code: assert fs[0].path == 'checks[0].source' and fs[0].stage == 'references'


def test_sources_exempt_for_claweval_and_footprint_checks_cite_footprint():
    assert source_findings(_src_spec(["", "vibes"], compat='claweval')) == []
    sp = attach_footprint(BY_ID['expense_approval'])
    fp = [c for c in sp.checks if c.type in ('end_state', 'no_collateral')]
    assert fp and all(c.source == 'footprint' for c in fp)
    assert not [f for f in source_findings(sp) if f.path.startswith(f"checks[{len(sp.checks) - 1}]")]


def test_inaction_credit_is_an_error():
    d = BY_ID['expense_approval'].model_dump(mode='json')
    d['checks'].append({"id": "req032_pending", "type": "state_equals", "kind": "completion", "source": "request: approve his request",
                        "params": {"service": "approvals", "id": "REQ-032", "field": "status", "value": "pending"}})
    r = validate(d)
    f = [f for f in r.errors if f.code == 'disc.inaction_credit']
    assert f and 'req032_pending' in f[0].message, r
    d['checks'][-1]['kind'] = 'gate'  # the same check as a gate earns nothing for inaction
    assert 'disc.inaction_credit' not in validate(d).codes


def _read_only(checks):
    ex = BY_ID['expense_approval']
    return TaskSpec(id='ro', request="What is the amount of Sam's expense claim CLM-204? Just tell me.",
                    services={'expenses': ex.services['expenses']}, tools=['expenses_list_claims', 'expenses_get_claim', 'expenses_pay_claim'],
                    solution=[Step.call('expenses_get_claim', claim_id='CLM-204'), Step.say("CLM-204 is 842.50 USD.")], checks=checks)


def test_sensitivity_flags_a_gameable_grader_and_names_the_variant():
    said = Check(id='said', type='keywords_present', params={'keywords': ['842.5'], 'scope': 'final'}, source='request: amount of sam')
    weak = _read_only([said])
    fs = sensitivity_findings(weak, Runs(weak), sample=8)
    dump = [f for f in fs if f.code == 'sens.dump_ids']
    assert dump and 'dump_ids' in dump[0].message and 'said' in dump[0].message and FINDING_CODES['sens.dump_ids'][0] == 'sensitivity'
    # gating the answer on the other claims' amounts closes the hole
    gate = Check(id='only_clm204', type='keywords_absent', kind='gate', params={'keywords': ['2310', '120.0']}, source='request: CLM-204')
    strong = _read_only([said, gate])
    assert not [f for f in sensitivity_findings(strong, Runs(strong), sample=8) if f.code.startswith('sens.')]


def test_sensitivity_sample_is_bounded_systematic_and_deterministic():
    sp = attach_footprint(BY_ID['expense_approval'])
    vs = sensitivity_sample(sp)
    assert len(vs) == SENSITIVITY_SAMPLE and [v.adversary for v in vs][:2] == ['omit_write', 'perturb_arg']
    assert [v.name for v in vs] == [v.name for v in sensitivity_sample(sp)]
    assert len(sensitivity_sample(sp, 8)) >= 6 and sensitivity_sample(sp, 0) == []
    # over many spec ids every rotating adversary and several variant positions are covered
    seen = {(v.adversary, v.name) for i in range(40) for v in sensitivity_sample(sp.model_copy(update={'id': f"s{i}"}))}
    assert {a for a, _ in seen} >= set(ADVERSARIES) - {'stuff_keywords', 'do_nothing'}
    assert len({n for a, n in seen if a == 'omit_write'}) >= 3


def test_validate_attaches_footprint_and_runs_sensitivity(tmp_path):
    r = validate(BY_ID['expense_approval'])
    assert 'sensitivity' in r.stages_run and any(k.startswith('sens:') for k in r.scores), r.scores
    assert all(v < 0.75 for k, v in r.scores.items() if k.startswith('sens:'))
    pr = run_pipeline(n=2, out_dir=tmp_path / 'out', progress=False)
    saved = [load_spec(p) for p in sorted((tmp_path / 'out').glob('*.json'))]
    assert saved and all(s.footprint and any(c.type == 'end_state' for c in s.checks) for s in saved)


def test_sensitivity_exempts_claweval_and_valid_plans_must_succeed():
    sp = BY_ID['expense_approval']
    assert sensitivity_findings(sp.model_copy(update={'compat': 'claweval'}), Runs(sp)) == []
    d = attach_footprint(sp).model_dump(mode='json')
    d['alternatives'].append([s for s in d['solution'] if s.get('tool') != 'todo_update_task'])  # not valid: misses a write
    r = validate(d)
    assert 'solve.alternative_failed' in r.codes or 'sens.valid_not_success' in r.codes, r


def test_repair_quarantines_a_gameable_grader(tmp_path):
    class Weak:
        name = 'weak'
        def generate(self, family, seed, difficulty, feedback=None, round=0):
            self.feedback = feedback
            return _read_only([Check(id='said', type='keywords_present', params={'keywords': ['842.5'], 'scope': 'final'},
                                     source='request: amount of sam')]).model_copy(update={'id': f"weak-{round}"})
    import coworkenv.validation as V
    k, V.SENSITIVITY_SAMPLE = V.SENSITIVITY_SAMPLE, 8
    try: o = repair('ro', 1, 'easy', (g := Weak()), max_rounds=1, quarantine_dir=tmp_path)
    finally: V.SENSITIVITY_SAMPLE = k
    assert not o.passed and o.quarantined and 'sens.dump_ids' in g.feedback
    assert 'sens.dump_ids' in {f.code for f in o.findings}


def test_a_stored_footprint_is_never_trusted():
    fresh = attach_footprint(BY_ID['expense_approval'])
    assert fresh.footprint and attach_footprint(fresh) is fresh  # not derived twice
    bogus = fresh.model_copy(update={'footprint': {'version': 1, 'plans': [{"name": "anything", "changed": {}, "added": {}, "removed": {}, "destructive": []}]}})
    assert attach_footprint(bogus).footprint == fresh.footprint


def test_risky_pattern_is_a_clear_finding_and_cannot_hang():
    "A catastrophic-backtracking regex is reported by validation (not left to time out in an episode), and grading stays bounded."
    import time
    from coworkenv.core import load_spec, Check
    from coworkenv.validation import validate, static_reference_findings
    spec = load_spec("data/examples/expense_approval.json")
    assert not [f for f in static_reference_findings(spec) if f.code == 'ref.risky_pattern']
    evil = Check(id='evil', type='regex', kind='gate', source=spec.checks[0].source,
                 params={'pattern': '(a+)+$', 'scope': 'sent', 'should_match': False})
    bad = spec.model_copy(update={'checks': spec.checks + [evil]})
    r = validate(bad)
    assert not r.passed and [f.code for f in r.findings if f.severity == 'error'] == ['ref.risky_pattern']
    assert 'nested quantifier' in r.findings[0].message and r.findings[0].path.endswith('.params.pattern')
    from coworkenv.checks import Evidence, run_check
    from coworkenv.core import Message
    ev = Evidence(bad, messages=[Message(role='assistant', content="a" * 40 + "!")])
    t0 = time.perf_counter()
    res = run_check(evil, ev)                      # would take hours with a backtracking engine
    assert time.perf_counter() - t0 < 10
    assert res.passed or (res.errored and 'timed out' in res.evidence)  # linear-time engine, or errored at the time limit


def test_validation_result_renders_as_markdown():
    "A `ValidationResult` shows in a notebook as its verdict and a table of findings (one row per finding)."
    import json
    from coworkenv.core import data_path
    d = json.loads(data_path('examples', 'expense_approval.json').read_text())
    d['checks'][0]['source'] = ''
    r = validate(d)
    md = r._repr_markdown_()
    assert "**INVALID**" in md and "`src.missing`" in md and md.count("\n| error |") == len(r.errors)
    ok = validate(data_path('examples', 'expense_approval.json'))._repr_markdown_()
    assert "**valid**" in ok and "| severity |" not in ok or "| warning |" in ok
