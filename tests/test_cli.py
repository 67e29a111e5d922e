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
