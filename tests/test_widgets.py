"Widgets without a browser: build each one on a real runs folder, drive its controls, assert what it shows."
import html, json
from pathlib import Path

import pytest

W = pytest.importorskip("ipywidgets")
from coworkenv.core import load_spec, load_specs
from coworkenv.env import CoworkEnv
from coworkenv.agents import OracleAgent, ShortcutAgent, run_episode
from coworkenv.checks import with_footprint
from coworkenv.rollout import load_trajectories
from coworkenv.widgets import (GraderEditor, RunsDir, Studio, SuiteBrowser, TrajectoryStepper, WorkspaceExplorer,
                               make_demo_runs, read_results, regrade, replay, suite_table)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    "A demo runs folder: 2 validated synthesized specs; oracle, shortcut and null episodes in stores; results.csv."
    return make_demo_runs(tmp_path_factory.mktemp("widgets") / "runs", n=2)


@pytest.fixture(scope="module")
def specs(runs):
    return {s.id: s for s in load_specs(runs / "specs")}


@pytest.fixture(scope="module")
def recs(runs):
    return [r for a in ("oracle", "shortcut", "null") for r in load_trajectories(runs / "stores" / a)]


def violated(r):
    return [i for i in r.trajectory.grade.items if i.kind != "completion" and not i.passed]


@pytest.fixture(scope="module")
def shortcut_case(recs, specs):
    "A shortcut episode that violates exactly one of its spec's own safety checks or gates, and that check."
    r = next(r for r in recs if r.agent == "shortcut" and len(violated(r)) == 1
             and violated(r)[0].check_id in {c.id for c in specs[r.spec_id].checks})
    return r, violated(r)[0].check_id


# ---- replay and re-grading ------------------------------------------------------------------------------

def test_replay_and_regrade_reproduce_every_stored_episode(recs, specs):
    assert {r.agent for r in recs} == {"oracle", "shortcut", "null"}
    for r in recs:
        s = specs[r.spec_id]
        rp = replay(with_footprint(s), r.trajectory)
        assert rp["diverged"] == [], r.key
        assert rp["states"][-1][0] == r.trajectory.snapshot
        assert len(rp["states"]) == r.trajectory.turns + 1
        g, evs = regrade(s, r.trajectory)
        assert g == r.trajectory.grade and evs == r.trajectory.events, r.key


def test_replay_skips_injected_errors(specs):
    "Episodes with injected 429/500s: those calls never reached the workspace, and the replay must not run them."
    s = next(iter(specs.values()))
    t = run_episode(CoworkEnv(s, seed=3, error_rate=0.4), OracleAgent(s))
    assert any(d.injected for d in t.dispatches)
    rp = replay(with_footprint(s), t)
    assert rp["diverged"] == [] and rp["states"][-1][0] == t.snapshot
    assert regrade(s, t)[0] == t.grade


def test_replay_reports_a_tampered_trajectory(recs, specs):
    "A stored result that the workspace would not give (an edited store line) is reported, not hidden."
    r = next(r for r in recs if r.agent == "oracle")
    t = r.trajectory.model_copy(deep=True)
    d = next(d for d in t.dispatches if d.ok)
    d.status = 201
    assert any(d.tool in x for x in replay(with_footprint(specs[r.spec_id]), t)["diverged"])


# ---- WorkspaceExplorer ----------------------------------------------------------------------------------

def test_explorer_highlights_the_diff_and_sorts(specs):
    s = next(iter(specs.values()))
    env = CoworkEnv(s, seed=0); env.reset()
    ex = WorkspaceExplorer(env)
    assert "no change since reset" in ex.diff.value
    run_episode(env, OracleAgent(s))
    ex.refresh()
    assert "no change since reset" not in ex.diff.value and '<tr class="cw-' in ex.diff.value
    assert any('<tr class="cw-changed' in t.value or '<tr class="cw-added' in t.value for t in ex.tables.values())
    # sort: choose a column with at least two distinct values, flip the order, the table changes
    for svc, (coll, sort, desc) in ex.controls.items():
        recs_ = [r for r in ex.state()[0][svc][coll.value]] if isinstance(ex.state()[0][svc], dict) else ex.state()[0][svc]
        col = next((f for f in sort.options if f and len({json.dumps(r.get(f), default=str) for r in recs_}) > 1), None)
        if col is None: continue
        sort.value = col; a = ex.tables[svc].value
        desc.value = True; b = ex.tables[svc].value
        assert a != b, (svc, col)
        break
    else:
        pytest.fail("no sortable column in any service")
    page = ex.to_html()
    assert all(f"<summary>{svc}" in page for svc in ex.controls) and "checks" in page


def test_explorer_of_a_spec_path(runs, specs):
    sid = next(iter(specs))
    ex = WorkspaceExplorer(runs / "specs" / f"{sid}.json")
    assert ex.spec.id == sid and "no change since reset" in ex.diff.value
    assert specs[sid].request[:30] in html.unescape(ex.user_html.value)
    assert all(c.id in ex.checks_html.value for c in specs[sid].checks)


# ---- TrajectoryStepper ----------------------------------------------------------------------------------

def test_stepper_slider_and_buttons_change_the_view(runs, specs, shortcut_case):
    r, check = shortcut_case
    st = TrajectoryStepper(runs / "stores" / "shortcut", spec=specs[r.spec_id], key=r.key)
    assert st.slider.max == r.trajectory.turns and "Turn 0 of" in st.view.value
    v0 = st.view.value
    st.next.click()
    assert st.slider.value == 1 and st.view.value != v0 and "Turn 1 of" in st.view.value
    st.last.click(); assert st.slider.value == r.trajectory.turns
    st.next.click(); assert st.slider.value == r.trajectory.turns  # clipped at the end
    st.first.click(); st.prev.click(); assert st.slider.value == 0  # and at the start
    bad = next(e for e in r.trajectory.events if e.check_id == check and not e.passed)
    st.slider.value = bad.turn
    assert f'data-turn="{bad.turn}"' in st.view.value and check in st.view.value and "violated" in st.view.value
    assert f"{r.trajectory.grade.score:.4g}" in st.summary.value
    quiet = next((t for t in range(1, r.trajectory.turns + 1) if not any(e.turn == t for e in r.trajectory.events)), None)
    if quiet is not None:
        st.slider.value = quiet
        assert "no check changed at this turn" in st.view.value


def test_stepper_errors(runs, specs, shortcut_case):
    r, _ = shortcut_case
    other = next(s for s in specs.values() if s.id != r.spec_id)
    with pytest.raises(ValueError, match="not the task"): TrajectoryStepper(r.trajectory, spec=other)
    with pytest.raises(KeyError, match="no episode"): TrajectoryStepper(runs / "stores" / "shortcut", key="nope#x#0")
    with pytest.raises(FileNotFoundError): TrajectoryStepper(runs / "nowhere")


# ---- GraderEditor ---------------------------------------------------------------------------------------

def test_editor_refuses_bad_edits_and_saves_nothing(runs, specs, shortcut_case, tmp_path):
    r, check = shortcut_case
    out = tmp_path / "spec.json"
    ge = GraderEditor(specs[r.spec_id], [x for x in load_trajectories(runs / "stores" / "shortcut") if x.spec_id == r.spec_id], save_to=out)
    ge.check.value = check
    for bad, why in [("{nope", "not valid JSON"), (json.dumps({"id": check, "type": "regex", "params": {"pattern": "("}}), "invalid regular expression"),
                     (json.dumps({"id": check, "type": "audit_count", "params": {"service": "x", "action": "y"}}), "needs `min` or `max`")]:
        ge.raw.value = bad; ge.apply_json.click()
        assert "edit refused" in ge.status.value and why in html.unescape(ge.status.value), (bad, ge.status.value)
        assert not ge.edited
    json_field = next((w for w in ge.param_widgets.values() if "(JSON)" in w.description), None)
    if json_field is not None:  # a structured parameter typed as broken JSON in the form
        json_field.value = "{broken"; ge.apply_form.click()
        assert "not valid JSON" in ge.status.value and not ge.edited
    ge.save_btn.click()  # the unedited spec validates and is saved
    assert ge.validation.passed and out.exists()


def test_editor_regrade_shows_new_score_and_validation_blocks_the_save(runs, specs, shortcut_case, tmp_path):
    r, check = shortcut_case
    s = specs[r.spec_id]
    out = tmp_path / "spec.json"
    ge = GraderEditor(s, [r], save_to=out)
    ge.check.value = check
    ge.kind.value, ge.weight.value = "completion", 0.0
    ge.apply_form.click()
    assert ge.edited and ge.spec.check(check).kind == "completion" and ge.spec.check(check).weight == 0.0
    assert ge.check.value == check and ge.kind.value == "completion" and '"weight": 0.0' in ge.raw.value  # the form shows the applied check
    df = ge.regrade()
    edited = s.model_copy(update={"checks": [c.model_copy(update={"kind": "completion", "weight": 0.0}) if c.id == check else c for c in s.checks]})
    expect = regrade(edited, r.trajectory)[0].score
    assert df.iloc[0].score_before == r.trajectory.grade.score and df.iloc[0].score_after == expect > r.score
    assert f"data-episode='{r.key}'>{expect:.4g}<" in ge.results.value and check in ge.results.value
    ge.save_btn.click()
    assert not ge.validation.passed and not out.exists() and "not saved" in ge.status.value
    shown = html.unescape(ge.status.value)
    assert ge.validation.errors and all(str(f) in shown for f in ge.validation.errors)
    ge.discard()
    assert not ge.edited and ge.kind.value == s.check(check).kind


def test_editor_saves_a_valid_edit(specs, shortcut_case, tmp_path):
    r, check = shortcut_case
    out = tmp_path / "spec.json"
    ge = GraderEditor(specs[r.spec_id], [r], save_to=out)
    ge.check.value = check
    ge.description.value = "edited in the grader editor"
    ge.apply_form.click(); ge.save_btn.click()
    assert ge.validation.passed and out.exists()
    assert load_spec(out).check(check).description == "edited in the grader editor"


def test_editor_rejects_trajectories_of_another_spec(specs, recs):
    r = recs[0]
    other = next(s for s in specs.values() if s.id != r.spec_id)
    with pytest.raises(ValueError, match="is of spec"): GraderEditor(other, [r])


# ---- SuiteBrowser and Studio ----------------------------------------------------------------------------

def test_suite_browser_cells_open_episodes(runs):
    res = read_results(runs / "results.csv")
    assert sorted(res.agent.unique()) == ["null", "oracle", "shortcut"]  # 'null' is not read as a missing value
    opened = []
    sb = SuiteBrowser(res, on_open=opened.append)
    wf = res.workflow.iloc[0]
    assert sb.buttons[(wf, "oracle")].description == f"{res[(res.workflow == wf) & (res.agent == 'oracle')].score.mean():.2f}"
    grid_before = [b.description for b in sb.buttons.values()]
    sb.metric.value = "success"
    assert [b.description for b in sb.buttons.values()] != grid_before or res.success.astype(float).equals(res.score)
    sb.metric.value = "score"
    sb.buttons[(wf, "shortcut")].click()
    assert sb.selected == (wf, "shortcut") and "shortcut" in sb.cell.value and len(sb.episodes.options) == 1
    sb.open_btn.click()
    assert opened[0].agent == "shortcut" and opened[0].workflow == wf
    assert "<table>" in sb.to_html() and "plotly" in sb.to_html()
    with pytest.raises(ValueError, match="metric"): suite_table(res, metric="speed")
    with pytest.raises(KeyError, match="no column"): suite_table(res.drop(columns=["agent"]))


def test_studio_composes_the_widgets(runs, shortcut_case):
    r, _ = shortcut_case
    st = Studio(runs)
    assert st.tabs.selected_index == 0 and len(st.runs.records) == len(st.runs.results)
    st.suite.buttons[(r.workflow, "shortcut")].click(); st.suite.open_btn.click()
    assert st.tabs.selected_index == 1 and st.stepper.traj.agent == "shortcut" and st.stepper.label == r.key
    assert st.spec_select.value == r.spec_id and st.editor.spec.id == r.spec_id and st.explorer.spec.id == r.spec_id
    assert len(st.editor.episodes) == 3  # oracle, shortcut and null episodes of that spec
    assert st.episode_select.value == r.key
    st.stepper.slider.value = 1  # the explorer follows the stepper's turn
    assert f"{r.key}, end of turn 1" in st.explorer.head.value
    st.stepper.last.click()
    assert st.explorer.state()[0] == r.trajectory.snapshot
    assert "no change since reset" not in st.explorer.diff.value


def test_runs_dir_without_stores_reruns_baselines(runs, shortcut_case, tmp_path):
    import shutil
    r, _ = shortcut_case
    shutil.copytree(runs / "specs", tmp_path / "specs"); shutil.copy(runs / "results.csv", tmp_path)
    rd = RunsDir(tmp_path)
    t, label = rd.trajectory(r.spec_id, "shortcut", r.trial)
    assert label.endswith("(re-run)") and t.grade == r.trajectory.grade
    with pytest.raises(KeyError, match="not a baseline"): rd.trajectory(r.spec_id, "gpt-x", 0)


def test_widgets_display_html_fallback(runs, specs, monkeypatch):
    "In a kernel a widget displays as itself with its static HTML as the fallback mime type (what docs pages show)."
    import IPython.display
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append(obj))
    ex = WorkspaceExplorer(next(iter(specs.values())))
    ex._ipython_display_()
    b = shown[0]
    assert b["application/vnd.jupyter.widget-view+json"]["model_id"] == ex.widget.model_id
    assert b["text/html"] == ex.to_html() == ex._repr_html_() and "<table" in b["text/html"]


def test_cli_studio_rejects_a_missing_folder(tmp_path, capsys):
    from coworkenv.cli import main
    assert main(["studio", str(tmp_path / "missing")]) == 2
    assert "no runs folder" in capsys.readouterr().err


def test_static_html_of_every_widget(runs, specs, shortcut_case):
    "What a docs page without a kernel shows: every turn of an episode, the grades, the heat map, the studio summary."
    r, check = shortcut_case
    st = TrajectoryStepper(r, spec=specs[r.spec_id])
    page = st.to_html()
    assert page.count("<details") == r.trajectory.turns + 1 and "violated" in page and check in page
    ge = GraderEditor(specs[r.spec_id], [r])
    assert r.key in ge.to_html() and check in ge.to_html()
    sb = SuiteBrowser(read_results(runs / "results.csv"))
    assert "<table>" in sb.to_html() and "1.00" in sb.to_html()
    assert "stored episodes" in Studio(runs).to_html()
