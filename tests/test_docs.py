"""The docs site, checked offline, and the README kept consistent with the landing page.

The published site is built by `.github/workflows/docs.yml` with Quarto (`nbdev-docs`), which cannot be installed
on these machines (no Debian or npm package; PyPI's `quarto-cli` downloads it at build time). The tests check the
two stages of that build that run offline:

1. **nbdev's pre-render** (what `nbdev-proc-nbs` / `nbdev.serve.proc_nbs` does first in `nbdev-docs`): every
   notebook goes through nbdev's processors (front matter, `show_doc` for each exported symbol, hidden cells, ...).
   This *executes* every exported cell, every `show_doc` cell and every cell that contains an import, exactly as
   the docs build does. A cell that mixes an import with code using a value of an earlier (unexecuted) test cell,
   or a path such as `../data/...` that only works from `nbs/`, fails here. The processors run notebook by notebook
   (`nbdev.serve_drv.main`, what `proc_nbs` runs for each file) in two subprocesses (`COWORKENV_DOCS_WORKERS`), into pytest's temporary folder:
   the repository's `_proc/` is not touched and nothing a notebook defines leaks into this test process.
2. **HTML**: `smalldocs render` (pure Python, reads `_quarto.yml`; `pip install smalldocs`, part of the `dev`
   extra) renders the processed pages into a site, and every notebook must give its page. smalldocs does not read
   nbdev's `output-file:`, so pages are renamed to it (`00_core.ipynb` -> `core.ipynb`) as Quarto would name them.
   Skipped when smalldocs is not installed.

Run: `.venv/bin/python -m pytest tests/test_docs.py -q`.
"""
import contextlib, io, json, os, re, shutil, subprocess, sys, textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
NOTEBOOKS = sorted(NBS.glob("*.ipynb"))
TWO_COMMANDS = ["bash scripts/run.sh", "bash scripts/test.sh"]
WORKERS = int(os.environ.get("COWORKENV_DOCS_WORKERS", min(2, os.cpu_count() or 1)))  # pre-render processes

_PRERENDER = textwrap.dedent('''
    import json, sys, warnings
    from pathlib import Path
    from nbdev.processors import FilterDefaults
    import nbdev.serve_drv as drv
    out, dest, res = Path(sys.argv[1]), Path(sys.argv[2]), {}
    for p in map(Path, sys.argv[3:]):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try: drv.main((p, out / p.name, FilterDefaults)); err = None
            except BaseException as e: err = f"{type(e).__name__}: {e}"[-4000:]
        mixed = [str(x.message).split("---")[1].strip().splitlines()[0] for x in w
                 if str(x.message).startswith("Found cells containing imports")]
        res[p.name] = {"error": err, "mixed_import_cells": mixed}
    dest.write_text(json.dumps(res, indent=1))
''')


@pytest.fixture(scope="module")
def prerendered(tmp_path_factory):
    "Run nbdev's docs processors on every notebook (one subprocess, from the repository root) into a temporary folder."
    out = tmp_path_factory.mktemp("proc")
    script = out / "prerender.py"
    script.write_text(_PRERENDER)
    n = max(1, min(WORKERS, len(NOTEBOOKS)))
    procs = [subprocess.Popen([sys.executable, str(script), str(out), str(out / f"results{k}.json"),
                               *map(str, NOTEBOOKS[k::n])], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for k in range(n)]
    res = {}
    for k, p in enumerate(procs):
        log = p.communicate(timeout=900)[0]
        f = out / f"results{k}.json"
        assert f.exists(), f"the pre-render crashed:\n{log[-4000:]}"
        res |= json.loads(f.read_text())
    return out, res


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_prerenders(nb, prerendered):
    "Each notebook goes through nbdev's docs processors, and no cell mixes imports with other code."
    out, res = prerendered
    r = res[nb.name]
    assert r["error"] is None, f"{nb.name} fails nbdev's docs pre-render:\n{r['error']}"
    assert (out / nb.name).exists()
    assert not r["mixed_import_cells"], (f"{nb.name}: cells mixing imports with other code (the docs build executes "
                                         f"them; put imports in their own cell): {r['mixed_import_cells']}")


def _output_name(nb:Path) -> str:
    "The page name Quarto gives a processed notebook: its `output-file` front matter, else its own name."
    first = json.loads(nb.read_text())["cells"][0]
    m = re.search(r"^output-file:\s*(\S+)", "".join(first["source"]), re.M)
    return Path(m.group(1)).stem if m else nb.stem


def _site_project(proc:Path, dest:Path, names:list) -> list:
    "A smalldocs project from processed notebooks: renamed pages, `_quarto.yml`, `styles.css`, nbdev.yml, sidebar.yml."
    from nbdev.config import get_config
    from nbdev.quarto import _nbdev_yml
    pages = []
    for n in names:
        page = _output_name(proc / n)
        shutil.copy(proc / n, dest / f"{page}.ipynb"); pages.append(page)
    for f in ["_quarto.yml", "styles.css", "architecture.qmd"]: shutil.copy(NBS / f, dest / f)
    (dest.parent / "docs").mkdir(exist_ok=True)   # architecture.qmd includes ../docs/ARCHITECTURE.md
    shutil.copy(ROOT / "docs" / "ARCHITECTURE.md", dest.parent / "docs" / "ARCHITECTURE.md")
    cfg = get_config(ROOT)
    vals = {k: cfg[k] for k in ["title", "description", "branch", "git_url", "doc_host", "doc_baseurl"]}
    (dest / "nbdev.yml").write_text(_nbdev_yml.format(**vals, doc_path="_site"))
    (dest / "sidebar.yml").write_text(yaml.dump({"website": {"sidebar": {"contents": [f"{p}.ipynb" for p in pages]}}}))
    return pages


def test_html_site(prerendered, tmp_path):
    "Every pre-rendered page becomes an HTML page of the site (smalldocs stands in for Quarto offline)."
    pytest.importorskip("smalldocs")
    proc, res = prerendered
    ok = sorted((n for n, r in res.items() if r["error"] is None), key=lambda n: (n != "index.ipynb", n))  # sidebar order
    assert "index.ipynb" in ok and "00_core.ipynb" in ok, res
    tmp_path = tmp_path / "site"; tmp_path.mkdir()
    pages = _site_project(proc, tmp_path, ok)
    exe = Path(sys.executable).with_name("smalldocs")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "import sys; from smalldocs.cli import main; sys.exit(main())"]
    r = subprocess.run(cmd + ["render", "--quiet", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    site = tmp_path / "_site"
    missing = [p for p in pages if not (site / f"{p}.html").exists()]
    assert not missing, f"pages not rendered: {missing}"
    core = (site / "core.html").read_text()
    assert "data_path" in core and "TaskSpec" in core     # the API reference of exported symbols is on the page
    assert "The two commands" in (site / "index.html").read_text()
    arch = (site / "architecture.html").read_text()       # the project's own architecture page, from docs/ARCHITECTURE.md
    assert "Data flow" in arch and "Conventions" in arch


def _commands(text:str, heading:str="## The two commands") -> list:
    "The bash commands in the fenced blocks of the section under `heading` (up to the next `## `)."
    sec = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return [l.strip() for b in re.findall(r"```bash\n(.*?)```", sec, re.S) for l in b.splitlines() if l.strip()]


def test_readme_and_index_agree_on_the_two_commands():
    "README.md and the landing page (nbs/index.ipynb) show the same two commands, and both scripts exist."
    readme = (ROOT / "README.md").read_text()
    index = "\n\n".join("".join(c["source"]) for c in json.loads((NBS / "index.ipynb").read_text())["cells"]
                        if c["cell_type"] == "markdown")
    assert _commands(readme) == TWO_COMMANDS, _commands(readme)
    assert _commands(index) == TWO_COMMANDS, _commands(index)
    for c in TWO_COMMANDS: assert (ROOT / c.split()[-1]).is_file(), c


def test_commands_parser_reads_sections():
    "The drift check itself can fail: a changed command or a missing section is seen."
    text = "# x\n## The two commands\n```bash\nbash scripts/run.sh\n```\n```bash\nbash scripts/tests.sh\n```\n## Next\n```bash\nls\n```"
    assert _commands(text) == ["bash scripts/run.sh", "bash scripts/tests.sh"] != TWO_COMMANDS
    with pytest.raises(IndexError): _commands("# no such section")


def test_readme_links_the_docs_site():
    "README links the published site (built by the docs workflow) and no longer points outside the repository."
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"^\*\*Docs:\*\* \[[^\]]+\]\(https://[^)]+\.github\.io/[^)]*\)", readme, re.M), "no Docs link in README.md"
    assert "../shared" not in readme


def test_docs_workflow():
    "The GitHub Actions workflow installs the project and Quarto, runs nbdev-docs and deploys to GitHub Pages."
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "docs.yml").read_text())
    steps = [s for job in wf["jobs"].values() for s in job.get("steps", [])]
    uses = " ".join(s.get("uses", "") for s in steps)
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "quarto-dev/quarto-actions/setup" in uses and "actions/deploy-pages" in uses
    assert "pip install" in runs and "nbdev-docs" in runs


def test_quarto_project():
    "`nbs/_quarto.yml` is a website whose css exists and whose metadata files nbdev generates."
    q = yaml.safe_load((NBS / "_quarto.yml").read_text())
    assert q["project"]["type"] == "website"
    assert (NBS / q["format"]["html"]["css"]).exists()
    assert set(q["metadata-files"]) == {"nbdev.yml", "sidebar.yml"}


def test_play_prints_what_the_notebook_shows():
    "`coworkenv play` prints the transcript and grade lines that `Trajectory._repr_markdown_` renders (one renderer)."
    from coworkenv.agents import OracleAgent, run_episode
    from coworkenv.cli import main
    from coworkenv.core import data_path, grade_lines, load_spec, message_line
    from coworkenv.env import CoworkEnv
    path = data_path("examples", "expense_approval.json")
    t = run_episode(CoworkEnv(load_spec(path), seed=0), OracleAgent(load_spec(path)))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf): assert main(["play", str(path), "--agent", "oracle"]) == 0
    out = buf.getvalue()
    md = t._repr_markdown_()
    for m in t.messages[1:]: assert message_line(m) in out and message_line(m) in md
    for l in grade_lines(t.grade)[1:]: assert l in out
    assert grade_lines(t.grade, end=t.end_reason)[0] in out


def test_data_path_from_any_folder(tmp_path):
    "Shipped data is found whatever the working directory (the docs build runs at the root, tests in nbs/)."
    code = "from coworkenv.core import data_path; print(data_path('examples', 'expense_approval.json'))"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == ROOT / "data" / "examples" / "expense_approval.json"
    r = subprocess.run([sys.executable, "-c", code.replace("expense_approval", "no_such")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "DataNotFound: no shipped data at examples/no_such.json" in r.stderr
