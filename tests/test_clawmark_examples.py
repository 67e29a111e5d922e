"""Static checks of the original ClawMark-format example tasks in data/clawmark_examples/: each task.py loads the way
ClawMark's loader loads it (plain module, standard-library imports only), carries the full METADATA, contiguous
async stages, a RUBRIC of async checkers with docstrings, its bootstrap assets and inject files, and a SOLUTION
(CoworkEnv's oracle actions) that uses only the agent tools of the declared environments with known arguments;
and the set as a whole covers the features its README promises. Running the stages and the oracle end to end
needs the ClawMark environment and is tested with it."""
import ast, importlib.util, inspect, re, sys, uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "data" / "clawmark_examples"
TASK_DIRS = sorted(p.parent for p in ROOT.glob("*/task.py"))
BOOTSTRAP = ["IDENTITY.md", "SOUL.md", "AGENTS.md", "TOOLS.md", "USER.md"]
METADATA_KEYS = {"id", "name", "category", "environments", "env_config", "timeout_seconds", "difficulty",
                 "mm_level", "role", "tags"}
ENVIRONMENTS = {"filesystem", "email", "notion", "google_sheets", "calendar"}

# agent tool -> (required arguments, optional arguments, environment that must be declared or None)
TOOLS = {
    "files_list": (set(), {"path", "recursive"}, None),
    "files_read": ({"path"}, set(), None),
    "files_write": ({"path", "content"}, set(), None),
    "files_append": ({"path", "content"}, set(), None),
    "mail_list": ({"address"}, set(), None),
    "mail_read": ({"address", "message_id"}, set(), None),
    "mail_send": ({"from_address", "to", "subject", "body"}, {"cc", "bcc"}, None),
    "mail_reply": ({"address", "message_id", "body"}, {"cc"}, None),
    "db_list": (set(), set(), "notion"),
    "db_query": ({"database"}, {"where"}, "notion"),
    "db_create_row": ({"database", "properties"}, set(), "notion"),
    "db_update_row": ({"database", "row", "properties"}, set(), "notion"),
    "sheets_list": (set(), set(), "google_sheets"),
    "sheets_read": ({"spreadsheet"}, {"range"}, "google_sheets"),
    "sheets_write": ({"spreadsheet", "range", "values"}, set(), "google_sheets"),
    "sheets_append": ({"spreadsheet", "range", "rows"}, set(), "google_sheets"),
    "calendar_list": (set(), {"calendar", "start", "end"}, "calendar"),
    "calendar_create": ({"calendar", "summary", "start", "end"}, {"description", "location"}, "calendar"),
    "calendar_update": ({"calendar", "event"}, {"summary", "start", "end", "description", "location"}, "calendar"),
    "calendar_delete": ({"calendar", "event"}, set(), "calendar"),
}


def load_task(task_dir: Path):
    "Import task.py under a unique name, as ClawMark's loader does."
    spec = importlib.util.spec_from_file_location(f"clawmark_example_{uuid.uuid4().hex}", task_dir / "task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stage_functions(module):
    stages, i = [], 0
    while hasattr(module, f"stage{i}"):
        stages.append(getattr(module, f"stage{i}"))
        i += 1
    return stages


def test_enough_examples():
    assert len(TASK_DIRS) >= 6, TASK_DIRS


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=[p.name for p in TASK_DIRS])
def test_top_level_imports_are_stdlib(task_dir):
    tree = ast.parse((task_dir / "task.py").read_text())
    for node in tree.body:
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            assert name.split(".")[0] in sys.stdlib_module_names, f"{task_dir.name}: non-stdlib import {name}"


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=[p.name for p in TASK_DIRS])
def test_task_contract(task_dir):
    module = load_task(task_dir)
    meta = module.METADATA
    assert set(meta) == METADATA_KEYS and meta["id"] == task_dir.name
    assert set(meta["environments"]) <= ENVIRONMENTS and {"filesystem", "email"} <= set(meta["environments"])
    users = meta["env_config"]["email"]["users"]
    assert all(set(u) == {"email", "password"} for u in users.values())
    if "google_sheets" in meta["environments"]:
        assert meta["env_config"]["google_sheets"]["task_id"] == meta["id"]
    assert isinstance(module.PROMPT, str) and module.PROMPT.strip() and "\n" not in module.PROMPT

    stages = stage_functions(module)
    assert 2 <= len(stages) <= 3 and not hasattr(module, f"stage{len(stages) + 1}")
    assert all(inspect.iscoroutinefunction(f) for f in stages)

    stage_ids = {f"stage{i}" for i in range(len(stages))}
    assert set(module.RUBRIC) <= stage_ids | {"final"}
    entries = [e for key in module.RUBRIC for e in module.RUBRIC[key]]
    assert 6 <= len(entries) <= 15
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids))
    for key, rubric in module.RUBRIC.items():
        for entry in rubric:
            assert re.fullmatch(r"(S\d+|FINAL)_[a-z0-9_]+", entry["id"]), entry["id"]
            assert entry["id"].startswith("FINAL_" if key == "final" else f"S{key[5:]}_"), entry["id"]
            assert inspect.iscoroutinefunction(entry["checker"]) and entry["checker"].__doc__
            assert entry["weight"] in (1.0, 1.5, 2.0)


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=[p.name for p in TASK_DIRS])
def test_solution_uses_known_tools(task_dir):
    module = load_task(task_dir)
    environments = set(module.METADATA["environments"])
    assert set(module.SOLUTION) == {f"stage{i}" for i in range(len(stage_functions(module)))}
    for stage, steps in module.SOLUTION.items():
        assert steps and set(steps[-1]) == {"reply"} and steps[-1]["reply"].strip(), stage
        for step in steps[:-1]:
            assert set(step) == {"tool", "arguments"}, step
            required, optional, environment = TOOLS[step["tool"]]
            assert environment is None or environment in environments, step["tool"]
            assert required <= set(step["arguments"]) <= required | optional, step


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=[p.name for p in TASK_DIRS])
def test_assets(task_dir):
    assets = task_dir / "assets"
    assert all((assets / name).is_file() for name in BOOTSTRAP)
    assert any(p.is_file() for p in (assets / "input").rglob("*"))
    for path in task_dir.rglob("*"):
        if path.is_file() and path.name != "task.py":
            assert path.stat().st_size < 50_000, path
    source = (task_dir / "task.py").read_text()
    for stage, name in re.findall(r'"inject" / "(stage\d+)" / "([^"]+)"', source):
        assert (task_dir / "inject" / stage / name).is_file(), name


def test_set_covers_the_promised_features():
    "Every service, the media/office inputs, the pm-style output/ folder, sandbox exec in a stage, an rglob checker."
    sources = {p.name: (p / "task.py").read_text() for p in TASK_DIRS}
    envs = set().union(*(load_task(p).METADATA["environments"] for p in TASK_DIRS))
    assert envs == ENVIRONMENTS
    everything = "\n".join(sources.values())
    for needle in ("ctx.fs._sandbox.exec(", "ctx.workspace.rglob(", "import openpyxl", 'ctx.workspace / "output" /',
                   'ctx.workspace / "outputs" /', "update_values(", "update_db_row(", "add_database_row(",
                   "add_event(", "delete_event(", "find_events(", "upload_file("):
        assert needle in everything, needle
    suffixes = {p.suffix for d in TASK_DIRS for p in (d / "assets" / "input").rglob("*")}
    suffixes |= {p.suffix for d in TASK_DIRS for p in (d / "inject").rglob("*")}
    assert {".png", ".pdf", ".xlsx"} <= suffixes


def test_pdf_input_has_a_text_layer():
    pypdf = pytest.importorskip("pypdf")
    pdfs = [p for d in TASK_DIRS for p in (d / "assets" / "input").rglob("*.pdf")]
    assert pdfs
    for pdf in pdfs:
        assert len(pypdf.PdfReader(str(pdf)).pages[0].extract_text().strip()) > 100, pdf
