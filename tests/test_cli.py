"The `coworkenv` command end to end (in-process, through `main(argv)`)."
import json
import pandas as pd
from coworkenv.cli import main

def test_main_job(tmp_path, capsys):
    assert main(["main", "--out", str(tmp_path), "-n", "16", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "valid: 16/16" in out
    res = pd.read_csv(tmp_path / "results.csv", keep_default_na=False)  # an agent is called "null"
    by = res.groupby("agent").passed.mean()
    assert by["oracle"] == 1.0 and by["null"] == 0.0 and by["shortcut"] == 0.0
    assert len(list((tmp_path / "specs").glob("*.json"))) == 16

def test_synth_then_validate(tmp_path, capsys):
    assert main(["synth", "--out", str(tmp_path), "-n", "8", "--quiet"]) == 0
    assert main(["synth", "--out", str(tmp_path), "-n", "10", "--quiet"]) == 0   # resumes: only 2 new slots
    lines = (tmp_path / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 10 and len({json.loads(l)["id"] for l in lines}) == 10
    assert main(["validate", str(tmp_path / "specs"), "--out", str(tmp_path / "report"), "--quiet"]) == 0
    assert "10/10 specs valid" in capsys.readouterr().out
    assert (tmp_path / "report" / "report.csv").exists()

def test_validate_reports_a_broken_spec(tmp_path, capsys):
    d = tmp_path / "specs"; d.mkdir()
    (d / "bad.json").write_text(json.dumps({"id": "bad", "request": "x", "tools": ["nope_tool"], "services": {"gmail": []}}))
    assert main(["validate", str(d), "--quiet"]) == 1
    assert "bad" in capsys.readouterr().out

def test_bad_input_is_a_clear_error(tmp_path, capsys):
    assert main(["show", str(tmp_path / "missing.json")]) == 2
    assert "error" in capsys.readouterr().err


# ---- bad input, empty sets, closed pipes: a clear message and an exit status, never a traceback ----------------

import subprocess, sys
import pytest
import coworkenv
from coworkenv.llm import default_policy, set_default_policy


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit): main(["--version"])
    out = capsys.readouterr().out.strip()
    from importlib.metadata import version
    assert out == f"coworkenv {version('coworkenv')}" == f"coworkenv {coworkenv.__version__}"


def test_help_lists_agent_names(capsys):
    for cmd in (["run", "--help"], ["play", "--help"]):
        with pytest.raises(SystemExit): main(cmd)
        out = capsys.readouterr().out
        assert all(n in out for n in ("oracle", "null", "shortcut")), cmd


@pytest.mark.parametrize("argv,needle", [
    (["tools", "--service", "nope"], "unknown service 'nope'"),
    (["show", "{tmp}"], "{tmp}"),                                      # a folder where a file is expected
    (["run", "--specs", "{tmp}/empty"], "no loadable spec files"),
    (["run", "--specs", "{tmp}/missing"], "missing"),
    (["run", "--agents", "oracle,robot"], "unknown agent(s) ['robot']"),
    (["validate", "{tmp}/empty"], "no spec files"),
    (["validate", "{tmp}/file.json"], "not a folder"),
    (["--llm-timeout", "-1", "tools"], "invalid LLM policy"),
    (["synth", "--out", "{tmp}/file.json", "-n", "1", "--quiet"], "file.json"),
])
def test_bad_input_messages(argv, needle, tmp_path, capsys):
    (tmp_path / "empty").mkdir(); (tmp_path / "file.json").write_text("{}")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle.replace("{tmp}", str(tmp_path)) in err and "Traceback" not in err and "error: 'score'" not in err


def test_k_zero_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as e: main(["run", "-k", "0"])
    assert e.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_synth_with_nothing_synthesized_fails(tmp_path, capsys):
    assert main(["synth", "--out", str(tmp_path), "-n", "0", "--quiet"]) == 1
    assert "no spec was synthesized" in capsys.readouterr().err


def test_llm_flags_set_the_default_policy(tmp_path):
    p0 = default_policy()
    try:
        assert main(["--llm-timeout", "12.5", "--llm-retries", "0", "tools", "--service", "gmail"]) == 0
        assert (default_policy().timeout, default_policy().max_retries) == (12.5, 0)
    finally: set_default_policy(**p0.model_dump())


def test_closed_pipe_no_traceback():
    "`coworkenv tools | head -1`: the reader closes the pipe early."
    p = subprocess.Popen([sys.executable, "-c", "import sys; from coworkenv.cli import main; sys.exit(main(['tools']))"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline(); p.stdout.close()
    err = p.stderr.read().decode(); p.wait(timeout=60)
    assert first.strip() and "Traceback" not in err and "BrokenPipeError" not in err and p.returncode in (0, 141)


def test_validate_reports_unloadable_specs_and_continues(tmp_path, capsys):
    (tmp_path / "bin.json").write_bytes(b"\x00\xff\xfe binary")
    (tmp_path / "deep.json").write_text('{"a":' + "[" * 5000 + "]" * 5000 + "}")
    (tmp_path / "torn.json").write_text('{"id": "x", ')
    rc = main(["validate", str(tmp_path), "--quiet"])
    out = capsys.readouterr()
    assert rc == 1 and "0/3 specs valid" in out.out and "Traceback" not in out.err
    assert all(n in out.out for n in ("bin", "deep", "torn"))


def test_main_tables_show_score_pass_and_success(tmp_path, capsys):
    assert main(["main", "--out", str(tmp_path), "-n", "4", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "success" in out and "success^k" in out and "pass" in out and "score" in out


def test_run_skips_unloadable_specs(tmp_path, capsys):
    import shutil
    from coworkenv.cli import DEFAULT_EXAMPLES
    good = sorted(DEFAULT_EXAMPLES.glob("*.json"))[0]
    shutil.copy(good, tmp_path / good.name)
    (tmp_path / "broken.json").write_bytes(b"\xff\xfe not a spec")
    assert main(["run", "--specs", str(tmp_path), "--agents", "oracle", "--quiet"]) == 0
    out = capsys.readouterr()
    assert "broken.json" in out.err and "skipping" in out.err and "success" in out.out
