"""SFT overfit probe: can the SFT pipeline teach SmolLM2-135M the next actions of a handful of demonstrations at all?

The SFT-gains experiment's PocketWorker completes nothing, and teacher-forced next-action accuracy
(`sft_gains.py --next-action`) shows it picks the oracle's exact next action on ~10% of turns even on the specs it was
trained on. Two explanations predict different things here: if training on those few rows for many epochs drives their
teacher-forced accuracy near 100%, the pipeline (template, assistant-only mask, generation) is sound and the full run
simply trains too little; if it stays low after the loss has gone to ~0, something between training and inference is
broken. This trains on N curated rows for E epochs (one row per step) and measures the accuracy on exactly those rows
as trained (the row's messages and tool list) before (the experiment's model) and after.

  .venv/bin/python experiments/sft_overfit_probe.py                     # 4 rows of curated_s1, 8 epochs (~10 min bf16)
  .venv/bin/python experiments/sft_overfit_probe.py --quick --out /tmp/probe   # the tiny model (tests)

Results: OUT/probe.json (settings, loss, accuracies), OUT/next_action_<model>.csv, OUT/loss.csv. Models are not kept.
"""
import argparse, json, shutil, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "experiments" / "results" / "sft_gains"


def row_trajectory(row:dict, spec_id:str):
    "A curated row (messages + tools, as trained) as a `Trajectory`, so `next_action_accuracy` can replay it."
    from coworkenv.agents import as_messages, as_tools
    from coworkenv.core import Trajectory
    return Trajectory(spec_id=spec_id, messages=as_messages(row['messages']), tools=as_tools(row['tools']))


def pick_rows(curated:Path, n:int) -> list[tuple[str, dict]]:
    "The first row of each of the first `n` workflow families (rows.csv order), with its spec id."
    import pandas as pd
    rows = [json.loads(line) for line in (curated / "train.jsonl").read_text().splitlines() if line.strip()]
    meta = pd.read_csv(curated / "rows.csv")
    if len(meta) != len(rows): raise ValueError(f"{curated}: rows.csv has {len(meta)} rows, train.jsonl {len(rows)}")
    first = meta.reset_index().groupby('workflow', sort=False).first().head(n)
    return [(r.spec_id, rows[r['index']]) for _, r in first.iterrows()]


def accuracy(model, trajs, name:str, max_new_tokens:int, out:Path):
    from coworkenv.agents import HFAgent
    from coworkenv.evaluate import next_action_accuracy, next_action_summary
    df = next_action_accuracy(HFAgent(str(model), max_new_tokens=max_new_tokens, name=name), trajs)
    df.to_csv(out / f"next_action_{name}.csv", index=False)
    s = next_action_summary(df, by=['agent']).iloc[0]
    return {k: (float(v) if k not in ('trajectories', 'turns', 'errors') else int(v)) for k, v in s.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--curated', default=str(RESULTS / "curated_s1"), help="a curated dataset folder (default: the experiment's seed 1)")
    ap.add_argument('--before', default=str(RESULTS / "sft_s1" / "final"), help="the model trained on the whole set, measured first ('' to skip)")
    ap.add_argument('--rows', type=int, default=4, help="rows trained on, one per family (default 4)")
    ap.add_argument('--epochs', type=int, default=8, help="epochs over those rows, one row per optimizer step (default 8)")
    ap.add_argument('--lr', type=float, default=1e-4, help="learning rate (default 1e-4, the experiment's)")
    ap.add_argument('--max-new-tokens', type=int, default=256)
    ap.add_argument('--out', default=str(RESULTS / "overfit_probe"))
    ap.add_argument('--quick', action='store_true', help="the tiny model and the quick run's data given with --curated")
    a = ap.parse_args(argv)
    from datasets import load_from_disk
    from coworkenv.models import build_tiny_model, prepare_base_model
    from coworkenv.sft import train_sft
    out, cur = Path(a.out), Path(a.curated)
    out.mkdir(parents=True, exist_ok=True)
    picked = pick_rows(cur, a.rows)
    idx = [json.loads(line) for line in (cur / "train.jsonl").read_text().splitlines() if line.strip()]
    keep = [idx.index(r) for _, r in picked]
    data = out / "data"
    shutil.rmtree(data, ignore_errors=True)
    load_from_disk(str(cur / "dataset")).select(keep).save_to_disk(str(data / "dataset"))
    trajs = [row_trajectory(r, s) for s, r in picked]
    res = dict(rows=[s for s, _ in picked], epochs=a.epochs, lr=a.lr, turns=sum(m.role == 'assistant' for t in trajs for m in t.messages))
    if a.before and (Path(a.before) / "config.json").is_file():
        res['before'] = accuracy(a.before, trajs, 'before', a.max_new_tokens, out)
        print(f"before (the experiment's model): {res['before']}", flush=True)
    base = build_tiny_model() if a.quick else prepare_base_model('smollm2')
    t0 = time.time()
    r = train_sft(str(ROOT / "experiments/configs/sft_default.yaml"), model=str(base), dataset=str(data),
                  output_dir=str(out / "sft"), num_train_epochs=a.epochs, gradient_accumulation_steps=1,
                  learning_rate=a.lr, save_steps=10_000, resume=False, seed=0, **(dict(max_length=2048) if a.quick else {}))
    res['sft'] = {k: r.metrics.get(k) for k in ('steps', 'final_loss', 'wall_s', 'bf16')} | {'train_s': round(time.time() - t0, 1)}
    shutil.copy(r.loss_csv, out / "loss.csv")
    res['after'] = accuracy(r.model_dir, trajs, 'after', a.max_new_tokens, out)
    print(f"after {a.epochs} epochs on {len(picked)} rows: {res['after']}", flush=True)
    (out / "probe.json").write_text(json.dumps(res, indent=1) + "\n")
    shutil.rmtree(out / "sft"); shutil.rmtree(data)  # models and the data copy are not kept
    return 0


if __name__ == "__main__":
    sys.exit(main())
