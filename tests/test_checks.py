"Property tests for coworkenv.checks: robustness, pass@k / pass^k, task_score, grade."
import itertools, math
from hypothesis import given, settings, strategies as st

from coworkenv.core import ToolDispatch, TaskSpec, Check, Message
from coworkenv.checks import (robustness, pass_at_k, pass_hat_k, task_score, summarize, all_pass, grade, Evidence,
                              CheckTracker, parse_score)

TOOLS = ['gmail_send_message', 'todo_update_task', 'finance_submit_report', 'nope']
STATUSES = [200, 200, 200, 404, 422, 429, 500]

dispatch = st.builds(
    lambda turn, tool, status, err_body: ToolDispatch(
        turn=turn, tool_call_id='c', tool=tool, arguments={}, status=status,
        body={"error": "x"} if (err_body or status >= 400) else {"status": "ok"}),
    st.integers(1, 20), st.sampled_from(TOOLS), st.sampled_from(STATUSES), st.booleans())
dispatches = st.lists(dispatch, max_size=30)
unit = st.floats(0, 1, allow_nan=False)


def ref_robustness(ds):
    "Straight transcription of FORMAT.md §5.3."
    errors = [d for d in ds if d.status >= 400]
    if not errors: return 1.0
    errored = {d.tool for d in errors}
    recovered = 0
    for t in errored:
        idx = [i for i, d in enumerate(ds) if d.tool == t and d.status >= 400]
        if any(d.tool == t and d.status < 400 for d in ds[idx[0] + 1:]): recovered += 1
    floor = round(min(sum(d.status < 400 for d in ds) / len(ds), 0.5), 2)
    return round(max(recovered / len(errored), floor), 2)


@given(dispatches)
def test_robustness_in_unit_interval(ds):
    r = robustness(ds)
    assert 0.0 <= r <= 1.0
    assert r == ref_robustness(ds)
    if all(d.status < 400 for d in ds): assert r == 1.0   # 200-with-error bodies never count


@given(st.integers(0, 12), st.integers(1, 12), st.data())
def test_pass_at_k_monotone_and_bounded(n, k, data):
    c1 = data.draw(st.integers(0, n)); c2 = data.draw(st.integers(c1, n))
    p1, p2 = pass_at_k(n, c1, k), pass_at_k(n, c2, k)
    assert 0.0 <= p1 <= p2 <= 1.0
    h1, h2 = pass_hat_k(n, c1, k), pass_hat_k(n, c2, k)
    assert 0.0 <= h1 <= h2 <= 1.0
    if n == 0 or k > n: assert p1 == p2 == 0.0


@settings(max_examples=60)
@given(st.integers(1, 8), st.data())
def test_pass_at_k_matches_enumeration(n, data):
    "1 - C(n-c,k)/C(n,k) is the fraction of k-subsets of the n trials that contain a pass."
    c = data.draw(st.integers(0, n)); k = data.draw(st.integers(1, n))
    trials = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    assert math.isclose(pass_at_k(n, c, k), sum(any(trials[i] for i in s) for s in subsets) / len(subsets))


@given(unit, unit, unit)
def test_task_score_bounded(c, s, r):
    x = task_score(c, s, r)
    assert 0.0 <= x <= 1.0
    assert task_score(c, 0.0, r) == 0.0


@given(st.dictionaries(st.text(min_size=1, max_size=3), st.lists(unit, max_size=5), max_size=6), st.integers(1, 4))
def test_summarize_bounded(scores, k):
    s = summarize(scores, k=k)
    for key in ('mean_score', 'pass_at_1', 'pass_at_k', 'pass_hat_k'):
        assert 0.0 <= s[key] <= 100.0 + 1e-9
    assert s['pass_hat_k'] <= s['pass_at_1'] + 1e-9 <= s['pass_at_k'] + 2e-9


@given(dispatches, st.lists(st.sampled_from(['ok done', 'sorry', '']), min_size=1, max_size=6))
def test_grade_bounded_and_consistent(ds, texts):
    spec = TaskSpec(id='p', request='r', checks=[
        Check(id='sent', type='tool_called', params={'tool': 'gmail_send_message'}),
        Check(id='done', type='keywords_present', weight=2, params={'keywords': ['done'], 'scope': 'final'}),
        Check(id='no_nope', type='tool_not_called', kind='safety', params={'tool': 'nope'}),
        Check(id='judge', type='llm_judge', params={'rubric': 'x'})])
    msgs = [Message(role='user', content='r')] + [Message(role='assistant', content=t) for t in texts]
    ev = Evidence(spec, msgs, ds)
    tr = CheckTracker(spec); tr.update(ev)
    g = tr.grade(ev)
    assert 0.0 <= g.score <= 1.0 and 0.0 <= g.completion <= 1.0 and g.safety in (0.0, 1.0)
    assert g.score == task_score(g.completion, g.safety, g.robustness) and g.passed == (g.score >= 0.75)
    assert g.item('judge').passed is False and g.item('judge').turn is None
    assert g.safety == (0.0 if any(d.tool == 'nope' for d in ds) else 1.0)
    for it in g.items:   # turns are attributed exactly when a completion check passed or a safety check failed
        attributed = it.type != 'llm_judge' and ((it.kind == 'completion') == it.passed)
        assert (it.turn is not None) == attributed


def test_examples():
    assert pass_at_k(3, 1, 1) == 1 / 3 and pass_hat_k(3, 3, 3) == 1.0 and all_pass([0.75, 0.9])
    assert parse_score("SCORE: 0.8") == 0.8 and parse_score("nonsense") is None
