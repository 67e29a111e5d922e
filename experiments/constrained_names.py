"""Constrained tool calls: one model on the same specs without and with `HFAgent`'s tool-call constraints (resumable).

  .venv/bin/python experiments/constrained_names.py --model runs/pipeline/sft/final --specs runs/pipeline/specs/test_families
  .venv/bin/python experiments/constrained_names.py --report     # only rebuild the table from the saved episodes
  .venv/bin/python experiments/constrained_names.py --quick --out /tmp/cn_quick   # the same path, tiny model, seconds

A small SFT model calls tools it saw in training instead of the ones it was given (the 8-epoch PocketWorker's
held-out-family episodes: `helpdesk_read_messages`, `chat_send`, `contacts_list` where none was offered), with the
arguments of the tool it has in mind. Constrained decoding of the name (and of the argument keys) removes those
failures by construction; this experiment measures what that changes in the score.

Each mode (`free`: no constraint; `constrained`: `constrain_tool_names`; `constrained_keys`: names and
`constrain_argument_keys`) runs greedy episodes of the model on every spec × k trials, with the evaluation's turn budget
(the reference plan's length + `--turn-slack`), and appends each finished episode (the whole trajectory) to
OUT/episodes/<mode>.jsonl; a rerun runs only the missing ones. The report (OUT/table.md, table.csv, summary.json) gives
per mode the mean score and its parts, tool calls per episode, the share of failed calls and of each kind of failure (a
tool that was not offered, arguments that are not valid JSON or break the tool's schema, an error answer such as an id
that does not exist),
and the paired difference of each constrained mode − free with a 95% bootstrap CI over tasks.
"""
import argparse, json, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))
OUT_DEFAULT = ROOT / "experiments" / "results" / "constrained_names"
MODES = ('free', 'constrained', 'constrained_keys')  # no constraint; tool names; tool names and argument keys


def log(msg): print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_specs(folders:list, turn_slack:int|None) -> list:
    "Every spec JSON in `folders` (sorted by id), with the evaluation's turn budget."
    from coworkenv.core import load_spec
    from coworkenv.cli import turn_budget
    specs = []
    for f in folders:
        p = Path(f)
        files = sorted(p.glob('*.json')) if p.is_dir() else [p]
        if not files: raise FileNotFoundError(f"no spec JSON in {p}")
        specs += [load_spec(x) for x in files]
    specs = sorted(specs, key=lambda s: s.id)
    return [turn_budget(s, turn_slack) for s in specs] if turn_slack is not None else specs


def saved(path:Path) -> list:
    "The episodes saved in a mode's JSONL (a torn last line from a killed run is dropped, and the file rewritten without it)."
    from coworkenv.evaluate import _saved_rows  # the evaluation's own reader of resumable JSONL
    rows = _saved_rows(path)
    if path.is_file(): path.write_text(''.join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return rows


def run_mode(out:Path, mode:str, model, specs:list, k:int, max_new_tokens:int, progress:bool=True) -> dict:
    "Run the missing (spec, trial) episodes of one mode; each is appended to OUT/episodes/<mode>.jsonl as it ends."
    from tqdm.auto import tqdm
    from coworkenv.agents import HFAgent, run_pool
    from coworkenv.evaluate import make_env
    f = out / "episodes" / f"{mode}.jsonl"
    f.parent.mkdir(parents=True, exist_ok=True)
    have = {(r['spec_id'], r['trial']) for r in saved(f)}
    todo = [(s, t) for s in specs for t in range(k) if (s.id, t) not in have]
    if not todo: return {}
    agent = HFAgent(str(model), max_new_tokens=max_new_tokens, name=mode, constrain_tool_names=(mode != 'free'),
                    constrain_argument_keys=(mode == 'constrained_keys'))
    t0 = time.time()
    with f.open('a') as fh, tqdm(total=len(todo), desc=mode, unit="episode", disable=not progress) as bar:
        def done(i, traj):
            fh.write(json.dumps(dict(spec_id=todo[i][0].id, trial=todo[i][1], trajectory=traj.model_dump(mode='json')),
                                ensure_ascii=False) + "\n"); fh.flush(); bar.update(1)
        run_pool((make_env(s, t) for s, t in todo), agent, on_done=done)
    log(f"  {mode}: {len(todo)} episode(s) in {time.time() - t0:.0f} s; constrained tokens {agent.stats['constrained_tokens']}, "
        f"of which the model's own choice was overridden {agent.stats['overridden_tokens']}")
    return dict(episodes=len(todo), wall_s=round(time.time() - t0, 1),
                **{k_: agent.stats[k_] for k_ in ('constrained_tokens', 'overridden_tokens', 'turns', 'generated_tokens')})


def call_stats(traj:dict) -> dict:
    """Tool calls of one trajectory: all; to a tool that was not offered; failed (`ToolDispatch.ok`); and, of the calls
    to offered tools, those whose arguments were not valid JSON, those whose arguments broke the tool's schema (status
    422: a required field missing, an unknown field) and those the tool answered with an error (e.g. a record id that
    does not exist)."""
    from coworkenv.core import ToolDispatch
    offered = {t['name'] for t in traj.get('tools') or []}
    ds = [ToolDispatch(**d) for d in traj.get('dispatches') or []]
    known = [d for d in ds if d.tool in offered]
    return dict(calls=len(ds), unknown_calls=len(ds) - len(known), failed_calls=sum(not d.ok for d in ds),
                malformed_calls=sum(isinstance(d.arguments, str) for d in known),
                invalid_args_calls=sum(d.status == 422 for d in known),
                error_answer_calls=sum(d.status < 400 and not d.ok for d in known))


def frame(out:Path):
    "One row per saved episode: `evaluate`'s columns plus the call counts of `call_stats`."
    import pandas as pd
    from coworkenv.core import Trajectory, load_spec
    from coworkenv.evaluate import _row
    rows = []
    specs = {}
    for mode in MODES:
        for r in saved(out / "episodes" / f"{mode}.jsonl"):
            t = Trajectory.model_validate(r['trajectory'])
            if r['spec_id'] not in specs: specs[r['spec_id']] = load_spec(out / "specs" / f"{r['spec_id']}.json")
            rows.append(_row(specs[r['spec_id']], mode, r['trial'], t) | call_stats(r['trajectory']))
    return pd.DataFrame(rows)


FAILURES = (('tool not offered', 'unknown_calls'), ('arguments not valid JSON', 'malformed_calls'),
            ('arguments break the schema', 'invalid_args_calls'),
            ('error answer', 'error_answer_calls'))

def table(df, n_boot:int=1000):
    "Per mode: mean score and its parts (×100), calls per episode, failed calls and their kinds (shares of all calls); Δ constrained − free."
    import pandas as pd
    from coworkenv.evaluate import bootstrap_ci, paired_delta
    out = []
    for mode in [m for m in MODES if m in set(df.agent)]:
        d = df[df.agent == mode]
        t = d.groupby('spec_id').score.mean()
        lo, hi = bootstrap_ci(t.values, n_boot=n_boot)
        calls = d.calls.sum()
        out.append({'mode': mode, 'tasks': d.spec_id.nunique(), 'episodes': len(d),
                    'mean score': f"{100 * t.mean():.1f} [{100 * lo:.1f}, {100 * hi:.1f}]",
                    'completion': round(100 * d.completion.mean(), 1), 'robustness': round(100 * d.robustness.mean(), 1),
                    'safety': round(100 * d.safety.mean(), 1), 'passed': int(d.passed.sum()), 'turns': round(d.turns.mean(), 1),
                    'calls / episode': round(calls / len(d), 1),
                    'failed calls': f"{100 * d.failed_calls.sum() / max(calls, 1):.1f}%",
                    **{f'failed: {why}': f"{100 * d[col].sum() / max(calls, 1):.1f}%" for why, col in FAILURES}})
    tab = pd.DataFrame(out)
    deltas = {m: paired_delta(df, 'free', m, n_boot=n_boot) for m in MODES[1:] if {'free', m} <= set(df.agent)}
    return tab, deltas


def report(out:Path) -> dict:
    from coworkenv.cli import markdown_table
    df = frame(out)
    if df.empty: raise SystemExit(f"{out}: no saved episodes")
    tab, deltas = table(df)
    df.to_csv(out / "results.csv", index=False)
    tab.to_csv(out / "table.csv", index=False)
    md = markdown_table(tab)
    for m, d in deltas.items():
        md += (f"\nΔ mean score, {m} − free: {d['delta']:+.1f} [{d['lo']:+.1f}, {d['hi']:+.1f}] "
               f"(paired bootstrap over {d['tasks']} tasks)\n")
    (out / "table.md").write_text(md)
    summary = dict(table=tab.to_dict('records'), deltas=deltas)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(md)
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', help="model folder (e.g. runs/pipeline/sft/final)")
    ap.add_argument('--specs', nargs='+', help="spec folders or files (e.g. runs/pipeline/specs/test_families)")
    ap.add_argument('-k', type=int, default=1, help="trials per spec (default: 1; greedy decoding)")
    ap.add_argument('--turn-slack', type=int, default=8, help="turn budget: reference plan length + this (default: 8, as the pipeline's evaluation)")
    ap.add_argument('--max-new-tokens', type=int, default=256, help="new tokens per turn (default: 256)")
    ap.add_argument('--modes', nargs='+', choices=MODES, default=list(MODES))
    ap.add_argument('--out', default=str(OUT_DEFAULT))
    ap.add_argument('--report', action='store_true', help="only rebuild the table from the saved episodes")
    ap.add_argument('--quick', action='store_true', help="the tiny random model on 2 example specs, 16 tokens a turn (CI)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if a.report: return report(out)
    if a.quick:
        from coworkenv.models import build_tiny_model
        a.model = a.model or build_tiny_model()
        from coworkenv.cli import DEFAULT_EXAMPLES
        a.specs = a.specs or [str(p) for p in sorted(Path(DEFAULT_EXAMPLES).glob("*.json"))[:2]]
        a.max_new_tokens = 16
    if not a.model or not a.specs: ap.error("--model and --specs are required (or --quick / --report)")
    if not (Path(a.model).expanduser() / 'config.json').is_file(): ap.error(f"--model {a.model}: not a model folder (no config.json)")
    specs = load_specs(a.specs, a.turn_slack)
    from sft_gains import weights_fingerprint
    meta = dict(model=str(a.model), weights_sha256=weights_fingerprint(a.model), specs=[s.id for s in specs], k=a.k,
                turn_slack=a.turn_slack, max_new_tokens=a.max_new_tokens)
    out.mkdir(parents=True, exist_ok=True)
    mf = out / "experiment.json"
    old = json.loads(mf.read_text()) if mf.is_file() else None
    if old and {x: old.get(x) for x in meta} != meta:
        diff = [x for x in meta if old.get(x) != meta[x]]
        raise SystemExit(f"{out} holds episodes of another setting ({', '.join(diff)} differ): use another --out")
    (out / "specs").mkdir(exist_ok=True)
    for s in specs: (out / "specs" / f"{s.id}.json").write_text(s.model_dump_json(indent=1) + "\n")
    runs = (old or {}).get('runs', [])
    for mode in a.modes:
        r = run_mode(out, mode, a.model, specs, a.k, a.max_new_tokens, progress=not a.quick)
        if r: runs.append(dict(mode=mode, argv=sys.argv[1:] if argv is None else argv, **r))
        mf.write_text(json.dumps(meta | dict(runs=runs), indent=1) + "\n")
    return report(out)


if __name__ == '__main__':
    main()
