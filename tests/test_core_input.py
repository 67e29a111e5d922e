"""Specs and documents from untrusted files (issue 7 §4): clear `SpecError`s naming the file, bounded YAML, a folder
that reports and continues."""
import json
from pathlib import Path
import pytest

from coworkenv.core import (MAX_DOC_DEPTH, SpecError, SpecFileNotFound, TaskSpec, ToolCall, Message, Trajectory, json_safe,
                            load_spec, load_specs, safe_arguments, safe_yaml_load, save_spec)

ROOT = Path(__file__).resolve().parents[1]
GOOD = {"id": "t1", "request": "Email Ana the agenda.", "services": {"gmail": []}, "tools": ["gmail_send_message"]}

def bomb(levels=9, width=10):
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"

def test_long_one_line_json_is_text():
    text = json.dumps({**GOOD, "title": "x" * 400})
    assert len(text) > 256 and "\n" not in text
    assert load_spec(text).title == "x" * 400

def test_missing_path_is_named():
    for p in ["specs/missing.json", "specs/missing.yaml", "specs/missing", Path("nowhere/x.yml")]:
        with pytest.raises(SpecFileNotFound, match=f"spec file not found: {Path(p)}"): load_spec(p)
    with pytest.raises(FileNotFoundError): load_spec("missing.json")   # still a FileNotFoundError for old callers

@pytest.mark.parametrize("name,content,needle", [
    ("deep.json", '{"id": "x", "request": "r", "meta": {"a": ' + "[" * 3000 + "]" * 3000 + "}}", "nested deeper"),
    ("deep_open.json", '{"id": "x", "meta": ' + '{"a": ' * 5000, "nested deeper"),
    ("deep.yaml", "id: x\nrequest: r\nmeta: " + "[" * 3000 + "]" * 3000 + "\n", "nested deeper"),
    ("deep_block.yaml", "id: x\nmeta:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 400)) + "  " * 400 + "v: 1\n", "nested deeper"),
    ("binary.json", b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "not a text file"),
    ("bomb.yaml", bomb(), "alias bomb"),
    ("recursive.yaml", "id: x\nmeta: &a [*a]\n", "recursive alias"),
    ("bad.yaml", "id: [unclosed\n", "not valid"),
    ("list.yaml", "- a\n- b\n", "expected a mapping"),
    ("huge_int.json", '{"id": "x", "request": "r", "meta": {"n": ' + "9" * 5000 + "}}", "not valid JSON"),
])
def test_bad_files_are_spec_errors_naming_the_file(tmp_path, name, content, needle):
    p = tmp_path / name
    p.write_bytes(content) if isinstance(content, bytes) else p.write_text(content)
    with pytest.raises(SpecError) as e: load_spec(p)
    assert str(p) in str(e.value) and needle in str(e.value), str(e.value)[:300]
    assert e.value.source == str(p)

def test_folder_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="is a folder"): load_spec(tmp_path / ".")

def test_load_specs_reports_and_continues(tmp_path):
    save_spec(TaskSpec.model_validate(GOOD), tmp_path / "a.json")
    (tmp_path / "b.yaml").write_text(bomb())
    (tmp_path / "c.json").write_text("[" * 10000)
    save_spec(TaskSpec.model_validate({**GOOD, "id": "t2"}), tmp_path / "d.yaml")
    (tmp_path / "notes.txt").write_text("ignored")
    with pytest.raises(SpecError, match="b.yaml"): load_specs(tmp_path)
    specs = load_specs(tmp_path, errors="collect")
    assert [s.id for s in specs] == ["t1", "t2"] and isinstance(specs, list)
    assert [Path(e.source).name for e in specs.errors] == ["b.yaml", "c.json"]
    assert load_specs(tmp_path / ".", errors="collect").errors  # same folder, written differently
    with pytest.raises(ValueError, match="errors must be"): load_specs(tmp_path, errors="ignore")

def test_yaml_bomb_is_bounded_fast():
    import time
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match="alias bomb"): safe_yaml_load(bomb(levels=12), "x.yaml")  # 10**12 values if expanded
    assert time.perf_counter() - t0 < 2
    assert safe_yaml_load("a: &x {k: [1, 2]}\nb: *x\nc: *x\n") == {"a": {"k": [1, 2]}, "b": {"k": [1, 2]}, "c": {"k": [1, 2]}}
    assert safe_yaml_load("") is None

def test_examples_still_load_and_round_trip():
    for s in load_specs(ROOT / "data" / "examples"):
        assert TaskSpec.from_json(s.to_json()) == s

def test_tool_call_parse_is_bounded():
    deep = '{"a": ' * 5000
    c = ToolCall.parse("x", "t", deep)
    assert c.arguments == deep                                  # kept as text, no RecursionError
    assert ToolCall.parse("x", "t", '{"a": [1, {"b": 2}]}').arguments == {"a": [1, {"b": 2}]}
    m = Message.from_openai({"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "t", "arguments": "[" * 3000}}]})
    assert isinstance(m.tool_calls[0].arguments, str)

def test_json_safe_makes_anything_saveable():
    x = {"a": float("nan"), "b": "\ud800", "c": {1, 2}, 5: 10 ** 500, "d": [{"e": 1}] * 3}
    v, probs = json_safe(x)
    assert len(probs) == 5 and json.loads(json.dumps(v)) == v
    args, problem = safe_arguments(x)
    assert problem and isinstance(args, str)
    t = Trajectory(spec_id="s", messages=[Message(role="assistant", tool_calls=[ToolCall(id="1", name="t", arguments=args)])])
    assert Trajectory.from_json(t.to_json()) == t

def test_spec_trajectory_grade_round_trips():
    "TaskSpec (with its derived footprint), Trajectory and Grade survive JSON unchanged."
    from coworkenv.core import Grade
    from coworkenv.env import CoworkEnv
    from coworkenv.agents import OracleAgent, run_episode
    for s in load_specs(ROOT / "data" / "examples"):
        env = CoworkEnv(s)
        assert TaskSpec.from_json(env.spec.to_json()) == env.spec
        t = run_episode(env, OracleAgent(s))
        assert Trajectory.from_json(t.to_json()) == t and Grade.from_json(t.grade.to_json()) == t.grade

def test_lone_surrogates_in_a_spec_are_refused(tmp_path):
    "A spec whose text would make every trajectory unsaveable is refused at load, naming the file."
    p = tmp_path / "s.json"; p.write_text(json.dumps({**GOOD, "request": "Email Ana \ud800"}))
    with pytest.raises(SpecError, match="lone surrogate") as e: load_spec(p)
    assert str(p) in str(e.value)
    assert load_spec("id: t\nrequest: due 2026-03-02\nmeta: {d: 2026-03-02}\n").meta["d"]  # YAML dates still load
