"Tests of coworkenv.curation: quality filter, near-duplicates, balance, tool-list variation, compact results, output."
import json, random

import pytest

pytest.importorskip("datasets")
from coworkenv.agents import NullAgent, OracleAgent, ShortcutAgent
from coworkenv.core import Grade, Message, ToolCall
from coworkenv.curation import compact_result, curate, fingerprint, load_curated, to_row, vary_tools
from coworkenv.rollout import rollout
from coworkenv.synthesis import synthesize

SPECS = synthesize(n=16, seed=1, progress=False)


@pytest.fixture(scope="module")
def oracle():
    return rollout(SPECS, OracleAgent, k=2, progress=False)


def with_grade(rec, **kw):
    g = rec.trajectory.grade.model_copy(update=kw)
    return rec.model_copy(update=dict(trajectory=rec.trajectory.model_copy(update=dict(grade=g)),
                                      **{k: v for k, v in kw.items() if k in ("score", "passed", "success")}))


def test_threshold_and_strict(oracle):
    null = rollout(SPECS, lambda s: NullAgent(), k=1, progress=False)
    short = rollout(SPECS, ShortcutAgent, k=1, progress=False)
    cur = curate(oracle + null + short, balance=False)
    assert cur.card["rows"] == len(SPECS)  # only the oracle's (deduplicated) episodes
    keys = set(cur.rows.key)
    assert all("#oracle#" in k for k in keys), keys
    low = [with_grade(r, score=0.8, passed=True) for r in oracle[:4]]
    assert curate(low, threshold=0.9, balance=False).card["rows"] == 0
    assert curate(low, threshold=0.75, balance=False).card["rows"] == 2
    # strict success: detected from the data (one record has it), then required of every record
    mixed = [with_grade(oracle[0], success=True)] + [with_grade(r, success=False) for r in oracle[2:6]]
    c = curate(mixed, balance=False)
    assert c.card["settings"]["strict"] is True and c.card["rows"] == 1 and c.card["dropped"]["not_strict_success"] == 4
    assert curate(mixed[1:], balance=False).card["settings"]["strict"] is False  # no grader sets it: not required
    assert curate(mixed, balance=False, strict=False).card["rows"] == 3
    with pytest.raises(ValueError, match="threshold must be"): curate(oracle, threshold=True)


def test_broken_calls_and_empty_episodes_are_dropped(oracle):
    r = oracle[0]
    msgs = list(r.trajectory.messages)
    i = next(i for i, m in enumerate(msgs) if m.tool_calls)
    bad_call = msgs[i].model_copy(update=dict(tool_calls=[ToolCall(id="c", name=msgs[i].tool_calls[0].name, arguments='{"x": ')]))
    bad = r.model_copy(update=dict(key="bad", trajectory=r.trajectory.model_copy(update=dict(messages=msgs[:i] + [bad_call] + msgs[i + 1:]))))
    assert to_row(bad) == (None, "invalid_arguments")
    empty = r.model_copy(update=dict(key="empty", trajectory=r.trajectory.model_copy(update=dict(messages=msgs[:2]))))
    assert to_row(empty) == (None, "no_assistant_turn")
    tail = r.model_copy(update=dict(key="tail", trajectory=r.trajectory.model_copy(update=dict(
        messages=msgs + [Message(role="user", content="thanks!")]))))
    row, _ = to_row(tail)
    assert row["messages"][-1]["role"] == "assistant"
    c = curate([bad, empty], balance=False)
    assert c.card["rows"] == 0 and c.card["dropped"] == {"invalid_arguments": 1, "no_assistant_turn": 1}


def test_near_duplicates(oracle):
    a, _ = to_row(oracle[0]); b, _ = to_row(oracle[1])  # two trials of the same spec: same demonstration
    assert fingerprint(a) == fingerprint(b)
    c, _ = to_row(oracle[2])
    assert fingerprint(a) != fingerprint(c)
    renum = json.loads(json.dumps(a).replace("-001", "-007"))  # only digits differ: still a near-duplicate
    assert fingerprint(renum) == fingerprint(a)
    assert curate(oracle, balance=False, dedup=False).card["rows"] == len(oracle)


def test_balance_caps_families(oracle):
    extra = rollout(synthesize(families=[SPECS[0].workflow], n=6, seed=20, progress=False), OracleAgent, k=1, progress=False)
    c = curate(oracle + extra, max_per_family=2)
    assert max(c.card["per_family"].values()) == 2 and c.card["dropped"]["balance_cap"] > 0
    c2 = curate(oracle + extra)  # default: balance_ratio x the smallest family
    fam = c2.card["per_family"]
    assert fam[SPECS[0].workflow] == 2 * min(fam.values())
    with pytest.raises(ValueError, match="max_per_family"): curate(oracle, max_per_family=0)


def test_tool_list_variation(oracle):
    row, _ = to_row(oracle[0])
    pool = {t["function"]["name"]: t for r in oracle for t in to_row(r)[0]["tools"]}
    called = {c["function"]["name"] for m in row["messages"] for c in m["tool_calls"]}
    own = [t["function"]["name"] for t in row["tools"]]
    shows = [vary_tools(row, pool, random.Random(i), n_distractors=2, keep_unused=0.5) for i in range(20)]
    for s in shows:
        names = [t["function"]["name"] for t in s]
        assert called <= set(names) and len(names) == len(set(names))
        assert len(set(names) - set(own)) == 2  # distractors from other tasks
    assert len({tuple(t["function"]["name"] for t in s) for s in shows}) > 10  # orders and subsets vary
    c1, c2 = curate(oracle, seed=3), curate(oracle, seed=3)
    assert c1.dataset[:] == c2.dataset[:]
    assert curate(oracle, seed=4).dataset[:] != c1.dataset[:]
    plain = curate(oracle, vary=False)
    assert all(r["tools"] == to_row(o)[0]["tools"] for r, o in zip(plain.dataset, oracle[::2]))


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_compact_result_stays_valid_json(n):
    data = {"items": [{"id": f"X-{i}", "text": "word " * 200, "tags": list(range(30))} for i in range(n)], "total": n}
    out = compact_result(json.dumps(data), 1500)
    parsed = json.loads(out)  # never cut mid-JSON
    assert len(out) <= 1500 and parsed["total"] == n and parsed["items"][0]["id"] == "X-0"


def test_compact_result_text():
    t = "alpha beta gamma\n" * 200
    out = compact_result(t, 200)
    assert out.startswith("alpha beta gamma\n") and out.endswith("chars]") and len(out) < 230
    assert compact_result("x" * 50, 100) == "x" * 50


def test_output_files_and_card(oracle, tiny_model_path, tmp_path):
    c = curate(oracle, tokenizer=tiny_model_path, out=tmp_path / "cur", max_result_chars=300)
    ds = load_curated(tmp_path / "cur")
    assert ds.column_names == ["messages", "tools"] and len(ds) == c.card["rows"] == len(SPECS)
    lines = (tmp_path / "cur" / "train.jsonl").read_text().splitlines()
    assert len(lines) == len(ds)
    first = json.loads(lines[0])
    assert first["messages"] == ds[0]["messages"] and first["tools"] == ds[0]["tools"]
    # arguments keep their own keys (Json feature), not the union of every tool's keys
    for m in ds[0]["messages"]:
        for call in m["tool_calls"]:
            assert None not in call["function"]["arguments"].values()
    raw = [m.content for r in oracle for m in r.trajectory.messages if m.role == "tool"]
    tool_msgs = [m["content"] for r in ds for m in r["messages"] if m["role"] == "tool"]
    assert max(map(len, raw)) > 1000 and sorted(map(len, tool_msgs))[len(tool_msgs) // 2] <= 300
    whole = [t for t in tool_msgs if len(t) >= 600]  # over the budget only when kept whole (a later call needs a value in it)
    assert set(whole) <= set(raw) and len(whole) <= c.card["long_results"]["kept_whole"]
    assert c.card["long_results"]["compacted"] > 0 and c.card["long_results"]["kept_whole"] > 0
    for t in tool_msgs:
        if t.startswith(("{", "[")): json.loads(t)  # compacted JSON is still JSON
    card = json.loads((tmp_path / "cur" / "data_card.json").read_text())
    assert sum(card["per_family"].values()) == card["rows"] and card["tokens"]["total"] > 0
    assert sum(h["rows"] for h in card["tokens"]["histogram"]) == card["rows"]
    assert 0 < card["multi_turn_share"] < 1 and "## Token lengths" in (tmp_path / "cur" / "data_card.md").read_text()
    (tmp_path / "junk").mkdir(); (tmp_path / "junk" / "x").write_text("x")
    with pytest.raises(FileExistsError, match="not a curated dataset"): curate(oracle, out=tmp_path / "junk")
    with pytest.raises(FileNotFoundError, match="no curated dataset"): load_curated(tmp_path / "junk")


def test_oracle_demonstrations_are_grounded():
    """Every family, every difficulty, two seeds: every single-token argument value the teacher uses (an id, a filter,
    a tag, a channel) was shown earlier in the row; only composed values (free text, dates, amounts) may be new."""
    import re
    from coworkenv.curation import unseen_values
    from coworkenv.synthesis import family_names
    n = 6 * len(family_names())  # 6 per family: easy, medium, hard twice
    bad = []
    for rec in rollout(synthesize(n=n, seed=3, progress=False), OracleAgent, progress=False):
        row, _ = to_row(rec)
        bad += [(rec.spec_id, u["tool"], v) for u in unseen_values(row) for v in u["unseen"]
                if " " not in v and not re.fullmatch(r"[\d.:TZ+-]+", v)]
    assert not bad, bad[:10]
