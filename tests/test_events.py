"World events (issue 9): triggers, announced vs silent, stage clock, stage-scoped checks, attribution, rollback, determinism."
import json
import pytest

from coworkenv.core import (Check, FollowUp, Message, Mutation, SpecError, StageSpec, Step, TaskSpec, ToolCall, Trigger,
                            UserSpec, WorldEvent)
from coworkenv.env import CoworkEnv, event_plan_footprint, play_plan
from coworkenv.checks import Evidence, spec_context, state_diff
from coworkenv.workspace import Workspace, WorkspaceError


def T(i, **kw):
    "A todo task record."
    return {"task_id": i, "title": f"Task {i}", "description": "", "status": "pending", "priority": "low", "due_date": None,
            "tags": [], "created_at": "2026-03-01T09:00:00Z", **kw}

def call(name, **args): return Message(role="assistant", tool_calls=[ToolCall(id=f"c_{name}", name=name, arguments=args)])
def say(text): return Message(role="assistant", content=text)
def ev(id, trigger, *mutations, announced=False, message=""):
    return WorldEvent(id=id, trigger=Trigger(**trigger), mutations=list(mutations), announced=announced, message=message)
def upd(id, **fields): return Mutation(op='update', service='todo', id=id, fields=fields)
HIGH = Check(id="high", type="state_equals", params={"service": "todo", "id": "t1", "field": "priority", "value": "high"})
TOOLS = ["todo_list_tasks", "todo_update_task", "todo_create_task", "todo_delete_task"]

def make(events=(), checks=(HIGH,), followups=(), stages=(), solution=None, request="Raise the priority of task t1 to high.", **kw) -> TaskSpec:
    "A small todo task: raise t1 to high priority; t2 and t3 are bystanders."
    return TaskSpec(id="ev", request=request, now="2026-03-02T09:00:00Z",
                    services={"todo": [T("t1"), T("t2"), T("t3")]}, tools=TOOLS,
                    user=UserSpec(followups=list(followups), max_rounds=6), stages=list(stages), events=list(events),
                    checks=list(checks),
                    solution=solution if solution is not None else [Step.call("todo_list_tasks"), Step.call("todo_update_task", task_id="t1", priority="high")],
                    **kw)

def task(env, i): return next(t for t in env.ws.snapshot()["todo"]["tasks"] if t["task_id"] == i)
NEXT = FollowUp(id="next", after_tool="todo_update_task", stage=1, message="Thanks! Next, please add a task 'Review'.")


# ---- triggers ----------------------------------------------------------------------------------------------------

def test_stage0_event_fires_at_reset_before_the_first_turn():
    env = CoworkEnv(make([ev("early", {"stage": 0}, upd("t2", status="in_progress"))]))
    env.reset()
    assert task(env, "t2")["status"] == "in_progress"
    assert env.world_events == [{"id": "early", "turn": 0, "stage": 0, "announced": False}]
    env.reset()  # reset is exact: the event fires again, once
    assert len(env.world_events) == 1 and len(env.ws.world) == 1

def test_after_turn_fires_at_the_end_of_that_turn_only():
    env = CoworkEnv(make([ev("e", {"after_turn": 2}, upd("t2", status="done"))])); env.reset()
    env.step(call("todo_list_tasks"))
    assert task(env, "t2")["status"] == "pending" and env.world_events == []
    r = env.step(call("todo_list_tasks"))
    assert r.info["world"] == ["e"] and task(env, "t2")["status"] == "done"
    assert json.loads(r.messages[0].content)["tasks"][1]["status"] == "pending"  # the turn's own read came before the event
    env.step(call("todo_list_tasks"))
    assert [e["turn"] for e in env.world_events] == [2]  # once

def test_after_tool_needs_a_successful_call():
    env = CoworkEnv(make([ev("e", {"after_tool": "todo_update_task"}, upd("t2", status="done"))])); env.reset()
    env.step(call("todo_update_task", task_id="t1", priority=7))  # 422: not a success
    assert env.world_events == []
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    assert [(e["id"], e["turn"]) for e in env.world_events] == [("e", 2)]

def test_after_check_fires_in_the_turn_the_check_is_first_satisfied():
    env = CoworkEnv(make([ev("e", {"after_check": "high"}, upd("t1", priority="low"))])); env.reset()
    env.step(call("todo_list_tasks"))
    assert env.world_events == []
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    assert [(e["id"], e["turn"]) for e in env.world_events] == [("e", 2)]
    assert task(env, "t1")["priority"] == "low"  # the world undid it: the agent must notice
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    assert len(env.world_events) == 1 and task(env, "t1")["priority"] == "high"

def test_stage_trigger_fires_when_a_followup_moves_the_user():
    env = CoworkEnv(make([ev("e", {"stage": 1}, Mutation(op='add', service='todo', record=T("t9", title="Urgent")))], followups=[NEXT]))
    env.reset()
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    assert env.world_events == [] and env.stage == 0
    r = env.step(say("Done."))
    assert env.stage == 1 and [(e["id"], e["turn"], e["stage"]) for e in env.world_events] == [("e", 2, 1)]
    assert "Review" in r.messages[0].content and "t9" in {t["task_id"] for t in env.ws.snapshot()["todo"]["tasks"]}

def test_an_event_can_make_another_due_in_the_same_turn():
    env = CoworkEnv(make([ev("b", {"after_check": "high"}, upd("t3", status="done")),
                          ev("a", {"after_turn": 1}, upd("t1", priority="high"))])); env.reset()
    r = env.step(call("todo_list_tasks"))
    assert r.info["world"] == ["a", "b"] and task(env, "t3")["status"] == "done"


# ---- announced vs silent ---------------------------------------------------------------------------------------

def test_announced_event_is_a_user_message_after_the_tool_results():
    env = CoworkEnv(make([ev("e", {"after_turn": 1}, upd("t2", status="done"), announced=True, message="FYI: Sam finished t2.")])); env.reset()
    r = env.step(call("todo_list_tasks"))
    assert [m.role for m in r.messages] == ["tool", "user"] and r.messages[1].content == "FYI: Sam finished t2."
    assert env.messages[-1].content == "FYI: Sam finished t2." and env.world_events[0]["announced"]

def test_silent_event_says_nothing_but_a_reread_shows_it():
    env = CoworkEnv(make([ev("e", {"after_turn": 1}, upd("t2", status="done"))])); env.reset()
    r = env.step(call("todo_list_tasks"))
    assert [m.role for m in r.messages] == ["tool"] and not any(m.role == "user" for m in env.messages[2:])
    r = env.step(call("todo_list_tasks"))
    assert json.loads(r.messages[0].content)["tasks"][1]["status"] == "done"

def test_announced_event_joins_the_users_reply():
    env = CoworkEnv(make([ev("e", {"stage": 1}, upd("t2", status="done"), announced=True, message="Also: t2 is done now.")],
                         followups=[NEXT])); env.reset()
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    r = env.step(say("Done."))
    assert len(r.messages) == 1 and r.messages[0].role == "user"
    assert "Review" in r.messages[0].content and r.messages[0].content.endswith("Also: t2 is done now.")

def test_announced_stage0_event_joins_the_request():
    env = CoworkEnv(make([ev("e", {"stage": 0}, upd("t2", status="done"), announced=True, message="Note: t2 was closed.")]))
    msgs, _ = env.reset()
    assert msgs[1].content.startswith("Raise the priority") and msgs[1].content.endswith("Note: t2 was closed.")


# ---- stages as working days --------------------------------------------------------------------------------------

def test_stage_clock_moves_tool_timestamps_and_the_notification_line():
    env = CoworkEnv(make(followups=[NEXT], stages=[StageSpec(stage=1, now="2026-03-03T09:00:00Z")])); env.reset()
    r = env.step(call("todo_create_task", title="Early"))
    assert json.loads(r.messages[0].content)["task"]["created_at"].startswith("2026-03-02")
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    r = env.step(say("Done."))
    assert r.messages[0].content.startswith("[Tue 2026-03-03 09:00] Thanks!")
    r = env.step(call("todo_create_task", title="Review"))
    assert json.loads(r.messages[0].content)["task"]["created_at"].startswith("2026-03-03T09:00")
    env.reset()  # the spec's clock again
    assert env.ws.clock.now().isoformat().startswith("2026-03-02T09:00") and env.stage == 0

def test_stage_label_and_stage0_day_in_the_request():
    env = CoworkEnv(make(stages=[StageSpec(stage=0, now="2026-03-02T08:30:00Z", label="Day 1")]))
    msgs, _ = env.reset()
    assert msgs[1].content.startswith("[Day 1 2026-03-02 08:30] Raise")
    assert json.loads(env.step(call("todo_create_task", title="x")).messages[0].content)["task"]["created_at"].startswith("2026-03-02T08:30")


# ---- stage-scoped checks -----------------------------------------------------------------------------------------

HIGH0 = HIGH.model_copy(update={"id": "high_day1", "stage": 0})

def test_scoped_check_passes_at_stage_end_but_fails_at_episode_end():
    "The agent raised t1 on day 1; on day 2 the world lowers it again: the day-1 check holds, the end-of-episode one does not."
    spec = make([ev("undo", {"stage": 1}, upd("t1", priority="low"))], checks=[HIGH0, HIGH], followups=[NEXT])
    env = CoworkEnv(spec); env.reset()
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    env.step(say("Done."))
    env.step(say("Nothing else to add."))
    g = env.grade()
    assert g.item("high_day1").passed and not g.item("high").passed
    assert set(g.stages) == {0, 1} and g.stages[0] == 1.0 and g.stages[1] < 0.75
    assert env.tracker.state["high_day1"] and not env.tracker.state["high"]  # per-turn tracking agrees

def test_scoped_check_fails_at_stage_end_but_passes_at_episode_end():
    "Raised only on day 2: too late for the day-1 check, fine for the episode."
    spec = make(checks=[HIGH0, HIGH], followups=[FollowUp(id="nudge", after_tool="todo_list_tasks", stage=1, message="It's Tuesday already.")])
    env = CoworkEnv(spec); env.reset()
    env.step(call("todo_list_tasks"))
    env.step(say("Looked at the list."))  # the user moves to stage 1: day 1 ends with t1 still low
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    g = env.grade()
    assert not g.item("high_day1").passed and g.item("high").passed
    assert g.stages[0] < 0.75 and g.stages[1] == 1.0 and g.score < 1.0

def test_scoped_check_for_a_stage_never_left_uses_the_final_evidence():
    env = CoworkEnv(make(checks=[HIGH0])); env.reset()
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    g = env.grade()
    assert g.item("high_day1").passed and g.stages == {0: 1.0}

def test_specs_without_events_pay_nothing():
    env = CoworkEnv(make()); env.reset()
    assert not env._has_world and env._checkpoint(set())["world"] is None
    e = env.evidence()
    assert e.initial is None and e.stages == {} and env.grade().stages == {}


# ---- attribution -----------------------------------------------------------------------------------------------

def test_audit_and_log_tell_the_world_from_the_agent():
    count = Check(id="one_update", type="audit_count", params={"service": "todo", "action": "updated_tasks", "min": 1})
    world = Check(id="world_list", type="audit_action_exists", params={"service": "todo", "action": "world"})
    env = CoworkEnv(make([ev("e", {"after_turn": 1}, upd("t1", priority="high"))], checks=[HIGH, count, world])); env.reset()
    r = env.step(call("todo_list_tasks"))
    assert {"turn": 1, "check_id": "high", "passed": True} in r.info["events"]  # per-turn check events see the world's change
    aud = env.ws.audit()["todo"]
    assert aud["updated_tasks"] == [] and [w["event"] for w in aud["world"]] == ["e"]
    assert [(e["actor"], e.get("event")) for e in env.ws.log] == [("agent", None), ("world", "e")]
    g = env.grade()
    assert g.item("high").passed  # the state is what it is...
    assert not g.item("one_update").passed and not g.item("world_list").passed  # ...but no agent action is credited
    assert [d.tool for d in env.dispatches] == ["todo_list_tasks"]

def test_footprint_neither_blames_nor_credits_the_agent_for_world_changes():
    spec = make([ev("e", {"after_turn": 1}, upd("t2", status="done"), Mutation(op='remove', service='todo', id='t3'))])
    fp = CoworkEnv(spec).spec.footprint["plans"][0]
    assert fp["changed"] == {"todo.tasks": {"t1": {"set": {"priority": "high"}, "free": []}}} and fp["removed"] == {}
    env = CoworkEnv(spec); env.reset()
    env.step(call("todo_list_tasks")); env.step(call("todo_update_task", task_id="t1", priority="high"))
    g = env.grade()
    assert g.item("footprint.end_state").passed and g.success
    raw = state_diff(spec_context(env.spec), *env.ws.live_views())  # from reset, the world's changes are there...
    assert "t2" in raw["changed"]["todo.tasks"] and raw["removed"] == {"todo.tasks": ["t3"]}
    env.reset(); env.step(call("todo_list_tasks")); env.step(say("I looked."))  # ...an idle agent is not credited with them
    ev_ = env.grade().item("footprint.end_state")
    assert not ev_.passed and "t1" in ev_.evidence and "t2" not in ev_.evidence and "t3" not in ev_.evidence
    # and the trajectory rebuilds the same baseline
    traj = env.trajectory()
    assert traj.info["world_events"][0]["id"] == "e"
    from coworkenv.checks import grade
    verdicts = lambda g: [(i.check_id, i.passed, i.evidence) for i in g.items]
    assert verdicts(grade(env.spec, Evidence.from_trajectory(env.spec, traj))) == verdicts(env.grade())

def test_a_check_the_world_alone_makes_true_gives_an_inactive_agent_no_pass_and_validation_flags_it():
    "Honest design: `state_equals` reads the state as it is; a check that inaction passes is caught by the null control."
    made = Check(id="review", type="tool_called", params={"tool": "todo_create_task"}, source="request: add a task 'Review'")
    high = HIGH.model_copy(update={"source": "request: Raise the priority of task t1 to high"})
    spec = make([ev("boss", {"stage": 0}, upd("t1", priority="high"))], checks=[high, made],
                request="Raise the priority of task t1 to high, and add a task 'Review'.",
                solution=[Step.call("todo_list_tasks"), Step.call("todo_create_task", title="Review")])
    from coworkenv.agents import NullAgent, run_episode
    from coworkenv.validation import Runs, discrimination_findings
    env = CoworkEnv(spec)
    traj = run_episode(env, NullAgent())
    assert traj.grade.item("high").passed and traj.grade.score < 0.75 and not traj.grade.passed
    fs = discrimination_findings(spec, Runs(spec))  # validation's null control, run with the events
    msg = next(f.message for f in fs if f.code == "disc.inaction_credit" and f.severity == "error")
    assert "'high'" in msg and "'review'" not in msg
    # without the event the same check is not passed by inaction: the finding is the world's doing
    quiet = spec.model_copy(update={"events": []})
    assert not any(f.code == "disc.inaction_credit" for f in discrimination_findings(quiet, Runs(quiet)))


# ---- rollback, errors, determinism -------------------------------------------------------------------------------

def test_a_failed_turn_undoes_the_event_it_fired():
    env = CoworkEnv(make([ev("e", {"after_turn": 1}, upd("t2", status="done"), announced=True, message="t2 done.")])); env.reset()
    before, real = env.ws.snapshot(), env._track
    def boom():
        if env.world_events: raise RuntimeError("checks crashed")
        return real()
    env._track = boom
    r = env.step(call("todo_list_tasks"))
    assert "could not run this turn" in r.messages[0].content and env.errors[-1]["source"] == "env"
    assert env.world_events == [] and env.ws.world == [] and "world" not in env.ws.audit()["todo"]
    assert env.ws.snapshot() == before and not any(m.role == "user" for m in env.messages[2:])
    del env._track
    env.step(call("todo_list_tasks"))  # the event is still pending, and fires now
    assert [(e["id"], e["turn"]) for e in env.world_events] == [("e", 2)] and task(env, "t2")["status"] == "done"

def test_a_failed_turn_undoes_a_stage_move_and_its_clock():
    env = CoworkEnv(make([ev("e", {"stage": 1}, upd("t2", status="done"))], followups=[NEXT],
                         stages=[StageSpec(stage=1, now="2026-03-05T10:00:00Z")])); env.reset()
    env.step(call("todo_update_task", task_id="t1", priority="high"))
    real = env._track
    def boom():
        if env.stage == 1: raise RuntimeError("checks crashed")
        return real()
    env._track = boom
    env.step(say("Done."))
    assert env.stage == 0 and env.user.stage == 0 and env.world_events == [] and task(env, "t2")["status"] == "pending"
    assert env.ws.clock.now().isoformat()[:10] == "2026-03-02"
    del env._track
    r = env.step(say("Done."))
    assert env.stage == 1 and r.messages[0].content.startswith("[Thu 2026-03-05 10:00]") and task(env, "t2")["status"] == "done"

def test_same_spec_and_seed_same_world():
    spec = make([ev("a", {"after_turn": 1}, upd("t2", status="done"), announced=True, message="t2 done."),
                  ev("b", {"stage": 1}, Mutation(op='add', service='todo', record=T("t9"))),
                  ev("c", {"after_tool": "todo_create_task"}, upd("t3", priority="high"))],
                 followups=[NEXT], stages=[StageSpec(stage=1, now="2026-03-03T09:00:00Z")])
    def run(s, seed):
        env = CoworkEnv(s, seed=seed, error_rate=0.3); env.reset()
        for m in [call("todo_list_tasks"), call("todo_update_task", task_id="t1", priority="high"), say("Done."),
                  call("todo_create_task", title="Review"), say("Added.")]:
            if not env.done: env.step(m)
        return env.trajectory().model_dump_json()
    again = TaskSpec.model_validate_json(spec.model_dump_json())
    first = run(spec, 3)
    assert first == run(spec, 3) == run(again, 3)
    assert [e["id"] for e in json.loads(first)["info"]["world_events"]][:1] == ["a"]

def test_bad_mutations_are_clear_errors():
    with pytest.raises(SpecError, match=r"events\[0\]\.mutations\[0\].*unknown service 'crm'"):
        CoworkEnv(make([ev("e", {"stage": 0}, Mutation(op='remove', service='crm', id='x'))]))
    with pytest.raises(SpecError, match="no collection 'lists'"):
        CoworkEnv(make([ev("e", {"stage": 0}, Mutation(op='remove', service='todo', collection='lists', id='x'))]))
    with pytest.raises(SpecError, match=r"stages\[0\]\.now"):
        CoworkEnv(make(stages=[StageSpec(stage=1, now="tomorrow")]))
    ws = Workspace.from_spec(make())
    before = ws.snapshot()
    with pytest.raises(WorkspaceError, match=r"event 'e': mutations\[1\].*no record task_id='t7'"):
        ws.apply_event(ev("e", {"stage": 0}, upd("t1", priority="high"), Mutation(op='remove', service='todo', id='t7')))
    with pytest.raises(WorkspaceError, match=r"no field\(s\) \['prio'\]"):
        ws.apply_event(ev("e", {"stage": 0}, upd("t1", prio="high")))
    assert ws.snapshot() == before and ws.world == [] and ws.log == []  # all or nothing

def test_an_event_that_cannot_apply_mid_episode_is_an_environment_error_not_the_agents():
    env = CoworkEnv(make([ev("e", {"after_turn": 2}, upd("t3", status="done"))])); env.reset()
    env.step(call("todo_delete_task", task_id="t3"))
    r = env.step(call("todo_list_tasks"))
    assert r.messages[0].role == "tool" and "could not run" not in r.messages[0].content  # the agent's turn ran
    assert "error" in env.world_events[0] and env.errors[-1]["source"] == "world" and env.errored


# ---- the validation fast path and the footprint player -------------------------------------------------------

def test_validation_runs_fire_events_and_grade_scoped_checks():
    from coworkenv.validation import Runs
    from coworkenv.adversaries import fast_step
    spec = make([ev("undo", {"stage": 1}, upd("t1", priority="low"))], checks=[HIGH0],
                followups=[NEXT], solution=[Step.call("todo_update_task", task_id="t1", priority="high"), Step.say("Done.")])
    run = Runs(spec).oracle()
    assert run.error is None and run.grade.item("high_day1").passed and run.grade.stages[0] == 1.0
    assert run.grade.item("footprint.end_state").passed  # the world's undo is not the oracle's collateral
    env = CoworkEnv(spec); env.reset()
    fast_step(env, call("todo_update_task", task_id="t1", priority="high")); fast_step(env, say("Done."))
    assert [e["id"] for e in env.world_events] == ["undo"] and task(env, "t1")["priority"] == "low"

def test_play_plan_matches_a_stepped_episode():
    spec = make([ev("e", {"after_tool": "todo_update_task"}, upd("t2", status="done"))])
    env = play_plan(spec, spec.solution)
    assert env.done and [e["id"] for e in env.world_events] == ["e"]
    fp = event_plan_footprint(spec, "solution", spec.solution)
    assert fp["changed"] == {"todo.tasks": {"t1": {"set": {"priority": "high"}, "free": []}}}


def test_event_spec_gets_its_footprint_checks_without_importing_the_env_first():
    "The footprint of a spec with world events needs the environment's replay: `with_footprint` loads it itself (never a spec left without its footprint checks)."
    import subprocess, sys
    from pathlib import Path
    ex = next(p for p in sorted((Path(__file__).resolve().parents[1] / "data" / "examples").glob("*.json"))
              if '"events"' in p.read_text())
    code = ("import sys; from coworkenv.checks import with_footprint; from coworkenv.core import load_spec; "
            "assert 'coworkenv.env' not in sys.modules; s = with_footprint(load_spec(sys.argv[1])); "
            "assert s.footprint and {'footprint.end_state', 'footprint.no_destructive_collateral'} <= {c.id for c in s.checks}")
    subprocess.run([sys.executable, "-c", code, str(ex)], check=True)
