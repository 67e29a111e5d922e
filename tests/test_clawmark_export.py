"""Every shipped example exported to ClawMark and played in our ClawMark environment, adversarially: the reference
solution with one write left out, or with one compared value changed, must lose checkers (the notebook
14c_clawmark_export runs this on two examples; here it runs on all of them)."""
import copy, warnings
from pathlib import Path

import pytest

from coworkenv.core import data_path, load_specs
from coworkenv.agents import run_episode
from coworkenv.clawmark import ClawMarkEnv, ClawMarkPlanAgent, clawmark_agent, load_clawmark_task
from coworkenv.clawmark_export import export_clawmark

SPECS = {s.id: s for s in load_specs(data_path("examples"))}

@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("clawmark")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {i: export_clawmark(s, out) for i, s in SPECS.items()}

def play(task, agent) -> dict:
    env = ClawMarkEnv(task)
    try: traj = run_episode(env, agent)
    finally: env.close()
    return {i.check_id: i.passed for i in traj.grade.items}

def with_solution(task, sol):
    t = copy.copy(task); t.solution = sol
    return ClawMarkPlanAgent(t)

def perturbed(v):
    if isinstance(v, bool): return not v
    if isinstance(v, (int, float)): return v + 7
    if isinstance(v, list): return v[:-1] if v else ["zzz"]
    return str(v) + "-x"

def compared_fields(a, sources, solution) -> list|None:
    """The fields of action `a` the end-state checker compares (None: the end state cannot show the action: a file's
    content is a free field, read by other checkers; an event created and deleted again leaves no trace)."""
    args = a["arguments"]
    files = next((x for x in sources.values() if x.get("files")), {})
    if a["tool"] == "files_write" and "content" in files.get("free", []): return None
    if a["tool"] == "calendar_create" and any(b.get("tool") == "calendar_delete" and b["arguments"]["event"] == args["summary"]
                                              for acts in solution.values() for b in acts): return None
    src = sources.get(args.get("database"), {})
    return [p for p in args.get("properties", {}) if p not in src.get("free", []) and p != src.get("title")] + \
           [k for k in ("to", "start", "end") if k in args]

@pytest.mark.parametrize("spec_id", sorted(SPECS))
def test_adversarial_solutions(exported, spec_id):
    r, spec = exported[spec_id], SPECS[spec_id]
    task = load_clawmark_task(r.path)
    ns = {}
    exec(compile((r.path / "task.py").read_text(), "task.py", "exec"), ns)
    completion = {c.id for c in spec.checks if c.kind == "completion"} & set(r.checkers)
    assert all(play(task, clawmark_agent("oracle", task)).values())
    assert not any(ok for k, ok in play(task, clawmark_agent("null", task)).items() if k in completion)
    lost = set()
    for stage, acts in task.solution.items():
        for i, a in enumerate(acts):
            if "reply" in a: continue
            sol = copy.deepcopy(task.solution); sol[stage].pop(i)
            res = play(task, with_solution(task, sol))  # the write left out
            lost |= {k for k, ok in res.items() if not ok}
            fields = compared_fields(a, ns["SOURCES"], task.solution)
            if fields is None: continue
            if a["tool"] != "db_update_row" or fields:  # a new record, mail or entry, or a compared field
                assert not res["footprint.end_state"], (stage, i, a["tool"])
            for f in fields:  # one compared value changed
                sol = copy.deepcopy(task.solution)
                args = sol[stage][i]["arguments"]
                d = args["properties"] if f in args.get("properties", {}) else args
                d[f] = perturbed(d[f])
                assert not play(task, with_solution(task, sol))["footprint.end_state"], (stage, i, f)
    assert not (completion - lost), f"completion checkers no single omission loses: {sorted(completion - lost)}"

def test_unsupported_listed_in_header(exported):
    for r in exported.values():
        head = (r.path / "task.py").read_text().split("\nimport json", 1)[0]
        for u in r.unsupported: assert "# NOT EXPORTED: " + " ".join(u.split()) in head

@pytest.mark.parametrize("spec_id", sorted(SPECS))
def test_forbidden_calls_are_caught(exported, spec_id):
    "The reference solution plus the call a `tool_not_called` check forbids (made with ClawMark's tools) loses that checker."
    r = exported[spec_id]
    task = load_clawmark_task(r.path)
    for cid, f in r.forbidden.items():
        if not f["actions"]: continue  # a row removal: our agent tools cannot remove a row (upstream agents can archive one)
        sol = copy.deepcopy(task.solution)
        sol[f["stage"]] = sol[f["stage"]][:-1] + f["actions"] + sol[f["stage"]][-1:]  # before the day's reply
        res = play(task, with_solution(task, sol))
        assert res[cid] is False, (cid, f["actions"])
