"""Peak memory and speed of `coworkenv sft` on the longest rows of a curated dataset, per config setting.

  .venv/bin/python benchmarks/sft_memory.py --data experiments/results/sft_gains/curated_s1 [--rows 4] [--steps 1]
        [--config experiments/configs/sft_default.yaml] [--setting gradient_checkpointing=true] [--setting max_length=4096]
        [--json benchmarks/results/sft_memory.json]

Takes the `--rows` × `--steps` longest rows of the curated dataset (by the token lengths curation saved in rows.csv)
and trains the config's model on them for `--steps` optimizer steps (`--rows` rows accumulated at batch 1, no
checkpoint), once with
the config as it is and once per `--setting KEY=VALUE` (YAML values; several KEY=VALUE pairs joined by commas make
one setting), each in a fresh subprocess: its peak resident memory (ru_maxrss: model load included) is the figure.
Prints peak GB, seconds, trained tokens and tokens/s per setting. The peak of one step is set by its longest row;
with `--steps` > 1 the resident memory is also sampled every 5 s, and the largest sample of the first and of the last
step-sized stretch of the run show whether memory creeps from step to step (the first 24-step SFT without activation
checkpointing crept past 24 GB and was killed, where one step peaks at ~12 GB).
"""
import argparse, json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_setting(text:str) -> dict:
    "'a=1,b=true' -> {'a': 1, 'b': True} (values read as YAML)."
    out = {}
    for part in filter(None, text.split(',')):
        k, sep, v = part.partition('=')
        if not sep or not k.strip(): raise SystemExit(f"--setting wants KEY=VALUE[,KEY=VALUE...], got {text!r}")
        out[k.strip()] = yaml.safe_load(v)
    return out


def longest_rows(data:Path, n:int, dest:Path) -> list[int]:
    "Write the `n` longest rows of a curated folder to `dest` (JSONL); their token lengths."
    import pandas as pd
    rows = pd.read_csv(data / 'rows.csv')
    if 'tokens' not in rows: raise SystemExit(f"{data}/rows.csv has no token lengths (curate with the base tokenizer)")
    lines = (data / 'train.jsonl').read_text().splitlines()
    if len(lines) != len(rows): raise SystemExit(f"{data}: train.jsonl has {len(lines)} rows, rows.csv {len(rows)}")
    top = rows.tokens.sort_values(ascending=False).index[:n]
    dest.write_text(''.join(lines[i] + "\n" for i in top))
    return [int(rows.tokens[i]) for i in top]


def rss_gb() -> float:
    "This process's resident memory now (Linux /proc), in GB."
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith('VmRSS:'): return int(line.split()[1]) / 2**20
    return float('nan')


def worker(a):
    "One training in this process; prints a JSON line with the figures."
    import threading
    from coworkenv.sft import train_sft
    t0 = time.time()
    samples, stop = [], threading.Event()
    def sample():
        while not stop.wait(5): samples.append((round(time.time() - t0, 1), round(rss_gb(), 2)))
    threading.Thread(target=sample, daemon=True).start()
    cfg = yaml.safe_load(Path(a.config).read_text())
    cfg.update(dataset=a.data_file, output_dir=a.out, max_steps=a.steps, num_train_epochs=1, gradient_accumulation_steps=a.rows,
               per_device_train_batch_size=1, save_steps=10**6, resume=False, progress=False, **json.loads(a.setting_json))
    t_train = time.time() - t0
    m = train_sft(cfg).metrics
    stop.set()
    train = [r for t, r in samples if t >= t_train]
    k = max(1, len(train) // a.steps)  # samples per step, roughly
    print(json.dumps(dict(tokens=m['num_tokens'], train_runtime=m['train_runtime'], total_wall_s=round(time.time() - t0, 1),
                          peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
                          rss_first_step_gb=max(train[:k], default=None), rss_last_step_gb=max(train[-k:], default=None),
                          rss_samples=samples)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--data', required=True, help="a curated folder (train.jsonl and rows.csv with token lengths)")
    ap.add_argument('--config', default=str(ROOT / 'experiments/configs/sft_default.yaml'), help="the SFT config YAML")
    ap.add_argument('--rows', type=int, default=4, help="rows per optimizer step (accumulated at batch 1)")
    ap.add_argument('--steps', type=int, default=1, help="optimizer steps (the rows × steps longest rows are used)")
    ap.add_argument('--setting', action='append', default=[], help="KEY=VALUE[,KEY=VALUE] config overrides (repeatable)")
    ap.add_argument('--no-baseline', action='store_true', help="skip the run with the config as it is")
    ap.add_argument('--json', help="also write the figures here")
    ap.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    ap.add_argument('--data-file', help=argparse.SUPPRESS); ap.add_argument('--out', help=argparse.SUPPRESS)
    ap.add_argument('--setting-json', default='{}', help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker: return worker(a)
    settings = ([{}] if not a.no_baseline else []) + [parse_setting(s) for s in a.setting]
    if not settings: ap.error("nothing to run: give --setting or drop --no-baseline")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        data_file = Path(tmp) / 'longest.jsonl'
        lengths = longest_rows(Path(a.data), a.rows * a.steps, data_file)
        print(f"{len(lengths)} longest rows of {a.data}: {lengths} tokens; {a.steps} step(s) of {a.rows}; config {a.config}", flush=True)
        for i, s in enumerate(settings):
            cmd = [sys.executable, __file__, '--worker', '--config', a.config, '--rows', str(a.rows), '--steps', str(a.steps), '--data', a.data,
                   '--data-file', str(data_file), '--out', str(Path(tmp) / f'run{i}'), '--setting-json', json.dumps(s)]
            p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, 'TQDM_DISABLE': '1'})
            label = ', '.join(f"{k}={v}" for k, v in s.items()) or 'config as it is'
            if p.returncode != 0:
                print(f"{label}: failed (exit {p.returncode}; -9 is the kernel's out-of-memory kill)\n{p.stderr[-1500:]}", flush=True)
                results.append(dict(setting=s, label=label, failed=p.returncode)); continue
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r.update(setting=s, label=label, tokens_per_s=round(r['tokens'] / r['train_runtime'], 1))
            results.append(r)
            creep = (f"; resident memory over the first / last step {r['rss_first_step_gb']} / {r['rss_last_step_gb']} GB"
                     if a.steps > 1 else '')
            print(f"{label}: peak {r['peak_rss_gb']:.1f} GB, {r['train_runtime']:.0f} s for {r['tokens']:,} tokens "
                  f"({r['tokens_per_s']} tokens/s){creep}", flush=True)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(dict(data=a.data, config=a.config, rows=a.rows, steps=a.steps, lengths=lengths, runs=results,
                                                cpu_count=os.cpu_count()), indent=1) + "\n")


if __name__ == '__main__':
    sys.exit(main())
