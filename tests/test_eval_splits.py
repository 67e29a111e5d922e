"Held-out splits by workflow family, the contamination check, and bootstrap confidence intervals over tasks (coworkenv.evaluate)."
from pathlib import Path

import pandas as pd
import pytest

import coworkenv.evaluate as EV
from coworkenv.evaluate import (ContaminationError, SplitConfigError, bootstrap_ci, check_contamination,
                                contamination_report, eval_summary, headline, load_split_config, paired_delta,
                                split_specs)

CONFIGS = Path(__file__).resolve().parent.parent / "experiments" / "configs"
SMALL = dict(test_families=["offboarding", "vendor_payment"], train_families=["access_request", "expense_reimbursement"],
             train_seeds=2, test_seeds=1, test_family_seeds=1, difficulty="easy")


@pytest.fixture(scope="module")
def small():
    return split_specs(SMALL)


# ---- configs ---------------------------------------------------------------------------------------------

def test_overlapping_families_is_an_error(tmp_path):
    p = tmp_path / "split.yaml"
    p.write_text("test_families: [offboarding, vendor_payment]\ntrain_families: [vendor_payment, access_request]\n")
    with pytest.raises(SplitConfigError, match=r"split.yaml: families \['vendor_payment'\] are both held out"):
        load_split_config(p)
    with pytest.raises(SplitConfigError, match="both held out"):
        split_specs(p)


@pytest.mark.parametrize("cfg,needle", [
    (dict(test_families=["offboarding"], train_seeds=[0, 1, 2], test_seeds=[2, 3]), "seeds [2] are both"),
    (dict(test_families=["no_such_family"]), "unknown workflow families ['no_such_family']"),
    (dict(test_families=[]), "test_families"),
    (dict(test_families=["offboarding"], train_seeds=-1), "train_seeds"),
    (dict(test_families=["offboarding"], tets_seeds=2), "tets_seeds"),               # a typo is not silently ignored
    (dict(test_families=["offboarding"], difficulty="brutal"), "difficulty"),
    (dict(test_families=["offboarding"], train_seeds=[1, 1]), "repeated seeds"),
])
def test_bad_configs_name_the_problem(cfg, needle):
    with pytest.raises(SplitConfigError) as e: load_split_config(cfg)
    assert needle in str(e.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(SplitConfigError, match="not found"): load_split_config(tmp_path / "nope.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(SplitConfigError, match="expected a mapping"): load_split_config(tmp_path / "list.yaml")
    (tmp_path / "bad.yaml").write_text("test_families: [a\n")
    with pytest.raises(SplitConfigError, match="not valid YAML"): load_split_config(tmp_path / "bad.yaml")


def test_seed_rules():
    s = load_split_config(dict(test_families=["offboarding"], train_seeds=3, test_seeds=2, test_family_seeds=[5])).seeds()
    assert s == {"train": [0, 1, 2], "test_seeds": [3, 4], "test_families": [5]}
    cfg = load_split_config(dict(test_families=["offboarding"]))
    assert "offboarding" not in cfg.train_families and len(cfg.train_families) >= 10   # default: every other family


# ---- clean splits ----------------------------------------------------------------------------------------

def test_clean_split_is_a_partition(small):
    tr, tf, ts = small["train"], small["test_families"], small["test_seeds"]
    assert (len(tr), len(tf), len(ts)) == (4, 2, 2)
    assert {s.workflow for s in tr} == {"access_request", "expense_reimbursement"}
    assert {s.workflow for s in tf} == {"offboarding", "vendor_payment"}
    assert {s.workflow for s in ts} <= {s.workflow for s in tr}                 # held-out seeds of training families
    assert {s.meta["seed"] for s in tr} == {0, 1} and {s.meta["seed"] for s in ts} == {2}
    ids = [s.id for v in small.values() for s in v]
    assert len(ids) == len(set(ids))
    assert {s.split for s in tr} == {"train"} and {s.split for s in ts} == {"test_seeds"}
    assert len(small.contamination) == 0


@pytest.mark.parametrize("name", ["split_default.yaml", "split_quick.yaml"])
def test_shipped_configs_are_clean(name):
    sp = split_specs(CONFIGS / name)
    assert sp["train"] and sp["test_families"] and sp["test_seeds"]
    assert len(sp.contamination) == 0
    held = set(sp.config.test_families)
    assert not held & {s.workflow for s in sp["train"]}
    assert any(s.multi_turn for s in sp["test_families"]) and not all(s.multi_turn for s in sp["test_families"])


# ---- contamination ---------------------------------------------------------------------------------------

def test_planted_duplicate_fails_the_check(small):
    planted = small["train"][1].model_copy(update=dict(id="innocent-looking-id", split="test_families"))
    with pytest.raises(ContaminationError) as e:
        check_contamination(small["train"], small["test_families"] + [planted])
    msg = str(e.value)
    assert "1 of 3 test specs" in msg and f"innocent-looking-id ~ {small['train'][1].id}" in msg
    rep = e.value.report
    assert rep[["test_id", "train_id", "kind"]].values.tolist() == [["innocent-looking-id", small["train"][1].id, "same_workspace"]]
    # a threshold above the observed rate lets it through, the report still lists it
    assert len(check_contamination(small["train"], small["test_families"] + [planted], max_rate=0.5)) == 1


def test_a_near_copy_is_caught_by_similarity(small):
    "One record edited: not the same fingerprint, still a near-duplicate."
    src = small["train"][0]
    doc = src.model_dump(mode="json")
    svc = next(k for k, v in doc["services"].items() if isinstance(v, list) and v and isinstance(v[0], dict))
    rec = doc["services"][svc][0]
    key = next(k for k, v in rec.items() if isinstance(v, str) and k != "id")
    rec[key] = rec[key] + " (edited)"
    near = type(src).model_validate({**doc, "id": "near-copy", "split": "test_seeds"})
    rep = contamination_report(small["train"], [near])
    assert rep.kind.tolist() == ["similar"] and 0.8 <= rep.similarity[0] < 1.0
    assert contamination_report(small["train"], [near], similarity=1.0).empty   # a stricter threshold: not a duplicate


def test_a_generator_that_ignores_the_seed_fails_the_split(monkeypatch):
    "A family whose generator ignores the seed makes 'held-out seeds' copies of training specs: split_specs refuses."
    from coworkenv.synthesis import ProceduralGenerator
    orig = ProceduralGenerator.generate
    monkeypatch.setattr(ProceduralGenerator, "generate", lambda self, fam, seed, d="easy", **kw:
                        orig(self, fam, 0, d, **kw).model_copy(update=dict(id=f"{fam}-{d}-{seed:05d}")))
    with pytest.raises(ContaminationError, match="near-duplicate"): split_specs(SMALL)
    assert len(split_specs(SMALL, check=False).contamination) > 0


# ---- confidence intervals over tasks ---------------------------------------------------------------------

def _rows(agent, scores_by_task, multi=()):
    return [dict(agent=agent, spec_id=t, trial=i, score=s, passed=s >= 0.75, success=s == 1.0, workflow=t.split("-")[0],
                 capabilities="a,b" if t.endswith("0") else "b", multi_turn=t in multi)
            for t, ss in scores_by_task.items() for i, s in enumerate(ss)]


def test_resampling_unit_is_the_task():
    "Two tasks, ten trials each: the interval over tasks spans both; resampling trials would make it narrow."
    df = pd.DataFrame(_rows("x", {"f-0": [1.0] * 10, "f-1": [0.0] * 10}))
    s = eval_summary(df, n_boot=2000)
    o = s[(s.group == "overall") & (s.metric == "score")].iloc[0]
    assert o.estimate == 50.0 and o.lo == 0.0 and o.hi == 100.0 and o.tasks == 2 and o.k == 10


def test_ci_is_seeded_and_covers_the_estimate():
    import random
    rng = random.Random(1)
    df = pd.DataFrame(_rows("x", {f"f{t % 3}-{t}": [rng.random() for _ in range(3)] for t in range(40)}))
    a, b = eval_summary(df, seed=0), eval_summary(df, seed=0)
    assert a.equals(b)
    assert (a.lo <= a.estimate).all() and (a.estimate <= a.hi).all()
    o = a[(a.group == "overall") & (a.metric == "score")].iloc[0]
    assert 0 < o.hi - o.lo < 25
    assert not eval_summary(df, seed=1)[["lo", "hi"]].equals(a[["lo", "hi"]])
    lo, hi = bootstrap_ci([0, 1] * 200, n_boot=2000)
    assert abs((hi - lo) / 2 - 1.96 * 0.025) < 0.01


def test_slices_family_capability_turns():
    df = pd.DataFrame(_rows("x", {"f-0": [1.0, 1.0], "f-1": [0.0, 1.0], "g-0": [0.5, 0.5]}, multi=("g-0",)))
    s = eval_summary(df).set_index(["group", "value", "metric"])
    assert s.loc[("family", "f", "score"), "estimate"] == 75.0 and s.loc[("family", "g", "score"), "estimate"] == 50.0
    assert s.loc[("capability", "a", "score"), "tasks"] == 2 and s.loc[("capability", "b", "score"), "tasks"] == 3
    assert s.loc[("turns", "multi-turn", "score"), "estimate"] == 50.0 and s.loc[("turns", "general", "score"), "estimate"] == 75.0
    assert s.loc[("overall", "all", "pass@k"), "estimate"] == round(200 / 3, 1)      # f-0 and f-1 pass once
    assert s.loc[("overall", "all", "pass^k"), "estimate"] == round(100 / 3, 1)      # only f-0 passes every trial
    h = headline(eval_summary(df))
    assert list(h.columns) == ["mean", "general", "multi-turn", "pass^k", "strict success"]
    assert h.loc["x", "multi-turn"].startswith("50.0 [")


def test_paired_delta_uses_the_same_tasks():
    df = pd.DataFrame(_rows("base", {f"f-{t}": [0.2] for t in range(10)}) + _rows("sft", {f"f-{t}": [0.2 + 0.05 * t] for t in range(10)}))
    d = paired_delta(df, "base", "sft")
    assert d["delta"] == 22.5 and d["lo"] < 22.5 < d["hi"] and d["tasks"] == 10
    with pytest.raises(KeyError, match="robot"): paired_delta(df, "base", "robot")
    with pytest.raises(ValueError, match="metric"): paired_delta(df, "base", "sft", metric="accuracy")


# ---- agents by description and batched evaluation ----------------------------------------------------------

def test_agent_descriptions(tmp_path):
    assert EV.parse_agent("sft=hf:runs/x/final") == ("sft", "hf", "runs/x/final")
    for bad in ("robot", "hf:", "vllm:model", ""):
        with pytest.raises(EV.AgentSpecError, match="unknown agent"): EV.parse_agent(bad)
    with pytest.raises(EV.AgentSpecError, match="no config.json"): EV.agent_factory(f"hf:{tmp_path}")


def test_batching_agent_runs_in_lockstep():
    "An agent with its own act_batch gets several conversations per call; results are one row per spec x trial."
    from coworkenv.agents import Agent
    from coworkenv.core import Message, load_specs
    from coworkenv.cli import DEFAULT_EXAMPLES
    class Batcher(Agent):
        name, batch_size = "batcher", 4
        def __init__(self): self.sizes = []
        def act_batch(self, batch):
            self.sizes.append(len(batch))
            return [Message(role="assistant", content="Done.") for _ in batch]
        def act(self, messages, tools=None): return self.act_batch([(messages, tools)])[0]
    a = Batcher()
    specs = list(load_specs(DEFAULT_EXAMPLES))[:3]
    df = EV.evaluate(specs, {"batcher": lambda s: a}, k=2, progress=False)
    assert len(df) == 6 and max(a.sizes) == 4 and sorted(df.spec_id.unique()) == sorted(s.id for s in specs)
    assert set(df.split) == {"train"} and not df.passed.any()


def test_before_after_per_split_with_paired_gains():
    rows = []
    for split, gain in (("test_families", 0.1), ("test_seeds", 0.3)):
        for t in range(6):
            mt = t % 2 == 0
            for agent, s in (("base", 0.2), ("sft", 0.2 + gain + (0.2 if mt else 0.0))):
                rows += [dict(r, split=split) for r in _rows(agent, {f"{split[:6]}-{t}": [s]}, multi=(f"{split[:6]}-{t}",) if mt else ())]
    df = pd.DataFrame(rows)
    t = EV.before_after(df, "base", "sft", n_boot=200).set_index(["split", "agent"])
    assert t.loc[("test_families", "sft"), "Δ mean (paired)"].startswith("+20.0 [")       # 0.1 + half of 0.2
    assert t.loc[("test_families", "sft"), "Δ multi-turn (paired)"] == "+30.0 [+30.0, +30.0]"
    assert t.loc[("test_seeds", "sft"), "Δ multi-turn (paired)"] == "+50.0 [+50.0, +50.0]"
    assert t.loc[("test_seeds", "base"), "Δ mean (paired)"] == "" and t.loc[("test_seeds", "base"), "tasks"] == 6
    s = eval_summary(df, n_boot=100)
    assert set(s[s.group == "split"].value) == {"test_families", "test_seeds"}
