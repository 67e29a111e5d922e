"""Greedy episodes from a demonstration prefix: what a policy does from the state the oracle reaches with `m` of its
tool-calling turns left (the start states of an RL run with `demo_turns_left: m`, see nbs/12_rl.ipynb).

Held-out evaluation (`coworkenv eval`, `rl_dynamics.py`) starts every episode from the first turn; this script asks the
narrower question a reverse-curriculum RL run trains on: from those start states, does the policy finish the task
without breaking anything? Each episode runs the same token loop as training (`run_token_episodes`), greedily, with the
spec's turn cap lowered to its reference plan + `--turn-slack` as in training.

    python experiments/demo_prefix_eval.py --model runs/pipeline_sft12/final --specs DIR --label start --out OUT.csv
    python experiments/demo_prefix_eval.py --model RUN/final --specs DIR --label after --out OUT.csv   # appends

One row per (label, spec): the prefix's turns and completion, then the episode's completion, score, safety, `progress`
reward (score when it completed more than the prefix, else 0), the policy's tool calls and failures, turns and end.
A label already in OUT is skipped (rerun-safe); the table of every label is printed at the end.
"""
from __future__ import annotations
import argparse, json, os, sys, time
from pathlib import Path

import pandas as pd

from coworkenv.core import load_spec
from coworkenv.env import CoworkEnv
from coworkenv.rl import _capped, episode_record, hf_generator, run_token_episodes

COLUMNS = ['label', 'spec_id', 'turns_left', 'prefix_turns', 'prefix_completion', 'completion', 'score', 'safety',
           'progress', 'tool_calls', 'tool_failures', 'turns', 'end_reason', 'events', 'wall_s']


def prefix_episodes(model_dir, # a model folder
                    specs:list, # the specs (one greedy episode each)
                    turns_left:int=1, turn_slack:int|None=3, max_new_tokens:int=256,
                    max_completion_length:int=1536, label:str='model') -> pd.DataFrame:
    "One greedy episode per spec from its oracle prefix, as rows of `COLUMNS`."
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    gen = hf_generator(model, tok, max_new_tokens, temperature=0.0, seed=0)
    envs = [CoworkEnv(_capped(s, turn_slack)) for s in specs]
    window = getattr(model.config, 'max_position_embeddings', None) or 8192
    t0 = time.time()
    with torch.no_grad():
        eps = run_token_episodes(envs, tok, gen, max_new_tokens, max_completion_length, window, seeds=[0] * len(envs),
                                 demo_turns_left=turns_left)
    wall = round(time.time() - t0, 1)
    rows = []
    for e in eps:
        r, g = episode_record(e, reward='progress'), e.env.grade()
        rows.append(dict(label=label, spec_id=r['spec_id'], turns_left=turns_left, prefix_turns=r['prefix_turns'],
                         prefix_completion=round(r['prefix_completion'], 4), completion=round(g.completion, 4),
                         score=round(g.score, 4), safety=g.safety, progress=r['reward'], tool_calls=r['tool_calls'],
                         tool_failures=r['tool_failures'], turns=r['turns'], end_reason=r['end_reason'],
                         events=json.dumps(r['events']), wall_s=wall))
    return pd.DataFrame(rows, columns=COLUMNS)


def summary(df:pd.DataFrame) -> pd.DataFrame:
    "Per label: episodes, mean completion gained over the prefix, mean score, safety and progress, tool failures."
    d = df.assign(gain=df.completion - df.prefix_completion, safe=df.safety >= 1)
    return d.groupby('label', sort=False).agg(episodes=('spec_id', 'size'), completion_gain=('gain', 'mean'),
                                              finished=('completion', lambda c: float((c >= 1).mean())),
                                              score=('score', 'mean'), safe=('safe', 'mean'), progress=('progress', 'mean'),
                                              tool_calls=('tool_calls', 'mean'), tool_failures=('tool_failures', 'sum')).round(3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--model', required=True, help="a model folder")
    ap.add_argument('--specs', required=True, help="a folder of spec JSON (or one spec file)")
    ap.add_argument('--out', required=True, help="the CSV to append to")
    ap.add_argument('--label', required=True, help="this model's name in OUT (a label already there is skipped)")
    ap.add_argument('--turns-left', type=int, default=1, help="the oracle's tool-calling turns left to the policy")
    ap.add_argument('--turn-slack', type=int, default=3, help="turn cap: the reference plan's length + this")
    a = ap.parse_args(argv)
    p, out = Path(a.specs), Path(a.out)
    files = sorted(p.glob('*.json')) if p.is_dir() else [p]
    if not files: sys.exit(f"no spec JSON in {p}")
    old = pd.read_csv(out) if out.is_file() else pd.DataFrame(columns=COLUMNS)
    if a.label in set(old.label):
        print(f"{a.label}: already in {out}, skipped")
    else:
        df = prefix_episodes(a.model, [load_spec(f) for f in files], a.turns_left, a.turn_slack, label=a.label)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix('.tmp')
        pd.concat([old, df], ignore_index=True).to_csv(tmp, index=False); os.replace(tmp, out)
        old = pd.read_csv(out)
    print(old[['label', 'spec_id', 'prefix_turns', 'prefix_completion', 'completion', 'score', 'safety', 'tool_calls',
               'tool_failures', 'turns', 'end_reason']].to_string(index=False))
    print(summary(old).to_string())
    return 0


if __name__ == '__main__':
    sys.exit(main())
