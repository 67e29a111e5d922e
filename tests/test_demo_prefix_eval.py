"The demonstration-prefix evaluation script (experiments/demo_prefix_eval.py): tiny model, real specs, rerun and summary."
import sys
from pathlib import Path

import pandas as pd

from coworkenv.models import build_tiny_model
from coworkenv.synthesis import ProceduralGenerator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import demo_prefix_eval as dpe  # noqa: E402


def test_episodes_start_from_the_oracle_prefix_and_rerun_skips(tmp_path, capsys):
    g = ProceduralGenerator()
    specs = tmp_path / "specs"; specs.mkdir()
    for fam in ("credential_rotation", "job_maintenance"):
        s = g.generate(fam, 0, "easy")
        (specs / f"{s.id}.json").write_text(s.model_dump_json())
    out, tiny = tmp_path / "prefix.csv", str(build_tiny_model())
    args = ["--model", tiny, "--specs", str(specs), "--out", str(out), "--label", "tiny"]
    assert dpe.main(args) == 0
    df = pd.read_csv(out)
    assert list(df.columns) == dpe.COLUMNS and len(df) == 2 and set(df.label) == {"tiny"}
    assert (df.prefix_turns > 0).all() and (df.prefix_completion > 0).all() and (df.prefix_completion < 1).all()
    assert (df.turns >= 1).all() and (df.tool_calls == 0).all()  # the random tiny model writes no tool call
    assert (df.progress == 0).all() and (df.completion == df.prefix_completion).all()  # nothing beyond the prefix
    capsys.readouterr()
    assert dpe.main(args) == 0  # the same label again: skipped, nothing appended
    assert "already in" in capsys.readouterr().out and len(pd.read_csv(out)) == 2
    s = dpe.summary(pd.concat([df, df.assign(label="done", completion=1.0, progress=1.0)]))
    assert list(s.index) == ["tiny", "done"] and s.loc["tiny", "completion_gain"] == 0 and s.loc["done", "finished"] == 1.0
