"Evaluation tables (coworkenv.evaluate): strict success beside score and pass; errored trials counted, never crashing."
import pandas as pd
import pytest

import coworkenv.evaluate as EV
from coworkenv.cli import DEFAULT_EXAMPLES
from coworkenv.core import load_specs


@pytest.fixture(scope="module")
def specs():
    return list(load_specs(DEFAULT_EXAMPLES))[:3]


def test_success_columns(specs):
    df = EV.evaluate(specs, k=2, progress=False)
    assert {"success", "errored"} <= set(df.columns) and len(df) == len(specs) * 3 * 2
    s = EV.summarize(df)
    assert s.loc["oracle", "success"] == 100.0 and s.loc["oracle", "success^k"] == 100.0
    assert s.loc["null", "success"] == 0.0 and s.loc["shortcut", "success^k"] == 0.0
    # success never exceeds pass: strict success implies score 1 >= 0.75
    assert (df.success <= df.passed).all()


def test_success_is_stricter_than_pass():
    df = pd.DataFrame(dict(agent="a", spec_id=["t1", "t1", "t2", "t2"], score=[1.0, 0.8, 0.9, 0.5],
                           passed=[True, True, True, False], success=[True, False, True, False]))
    s = EV.summarize(df).loc["a"]
    assert (s["pass^k"], s["success"], s["success^k"]) == (50.0, 50.0, 0.0)


def test_grading_failure_is_an_errored_row(specs, monkeypatch):
    class JudgeDown(EV.CoworkEnv):
        def grade(self): raise RuntimeError("judge: 503")
    monkeypatch.setattr(EV, "CoworkEnv", JudgeDown)
    df = EV.evaluate(specs[:1], ["oracle"], progress=False)
    r = df.iloc[0]
    assert (r.score, r.passed, r.success, r.errored, r.end_reason) == (0.0, False, False, True, "grade_error")
    assert EV.summarize(df).loc["oracle", "errored"] == 1


def test_empty_and_bad_k(specs):
    with pytest.raises(ValueError, match="no results"): EV.summarize(EV.evaluate([], progress=False))
    with pytest.raises(ValueError, match="at least 1"): EV.evaluate(specs, k=0, progress=False)
    with pytest.raises(KeyError, match="robot"): EV.evaluate(specs, ["robot"], progress=False)


def test_tool_call_constraints_reach_the_hf_agent(tiny_model_path):
    "`--constrain-tool-names` / `--constrain-argument-keys` (CLI) and `agent_factory(...)` configure the HFAgent's constraint; off by default."
    from coworkenv.cli import _agents, parser
    spec = load_specs(DEFAULT_EXAMPLES)[0]
    _, on = EV.agent_factory(f"hf:{tiny_model_path}", constrain_tool_names=True)
    _, off = EV.agent_factory(f"hf:{tiny_model_path}")
    assert (on(spec).constraint.names, on(spec).constraint.keys) == (True, False) and off(spec).constraint is None
    for cmd in ("eval", "rollout"):
        extra = ["--suite", "examples"] if cmd == "eval" else ["--specs", "examples", "--store", "s"]
        for flags, want in (([], None), (["--constrain-tool-names"], (True, False)), (["--constrain-argument-keys"], (False, True)),
                            (["--constrain-tool-names", "--constrain-argument-keys"], (True, True))):
            a = parser().parse_args([cmd, "--agent", f"hf:{tiny_model_path}", *flags, *extra])
            (f,) = _agents([f"hf:{tiny_model_path}"], a).values()
            c = f(spec).constraint
            assert (None if c is None else (c.names, c.keys)) == want, (cmd, flags)
