"""Benchmark `coworkenv sft` (train_sft) against a plain TRL SFTTrainer script on the same data and settings.

  .venv/bin/python benchmarks/sft.py [--model tiny|smollm2|PATH] [--steps 6] [--batch 1] [--max-length 2048]
                                     [--specs 8] [--repeats 2] [--threads N] [--heads auto] [--no-plain]

Builds one curated dataset (synthesize -> oracle rollouts -> curate), then trains the same model for the same
number of steps twice per repeat, interleaved in alternating order (plain, ours, ours, plain, ...), each in a fresh subprocess so peak
memory (max RSS) is measured per run. Both runs use identical SFTConfig settings: assistant-only loss, full
fine-tune, bf16 only if the hardware has it, no checkpoints inside the timed window except ours' regular
`save_steps` (set beyond the run, so neither saves mid-run). Prints training tokens/s (TRL's `num_tokens` / the
trainer's `train_runtime`), the ratio ours/plain (target >= 0.95) and peak memory.
CPU time is also reported: wall-clock figures on a shared machine are noisy.
`--heads logits,trained --no-plain` compares our LM-head losses instead (`loss_head`: the full logits vs the
trained positions only), one `ours` run per head per repeat.
"""
import argparse, json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def settings(a, out):
    return dict(max_steps=a.steps, per_device_train_batch_size=a.batch, learning_rate=1e-4, max_length=a.max_length,
                warmup_steps=0, seed=0, logging_steps=1, save_steps=10**6, assistant_only_loss=True, output_dir=str(out))


def worker(a):
    "Run one training in this process; print a JSON line with the figures."
    import torch
    if a.threads: torch.set_num_threads(a.threads)
    out = Path(a.out)
    cpu0, t0 = time.process_time(), time.time()
    if a.worker == 'ours':
        from coworkenv.sft import train_sft
        r = train_sft(dict(settings(a, out), model=a.model_path, dataset=a.data, progress=False, resume=False,
                           loss_head=a.head))
        m = r.metrics
        runtime, tokens = m['train_runtime'], m['num_tokens']
    else:  # the plain TRL script a user would write
        from datasets import load_from_disk
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import SFTConfig, SFTTrainer
        from coworkenv.sft import bf16_supported
        s = settings(a, out)
        tok = AutoTokenizer.from_pretrained(a.model_path)
        model = AutoModelForCausalLM.from_pretrained(a.model_path, dtype='float32')
        args = SFTConfig(**s, bf16=bf16_supported(), report_to=[], disable_tqdm=True,
                         use_cpu=not torch.cuda.is_available(), lr_scheduler_type='cosine')
        trainer = SFTTrainer(model=model, args=args, train_dataset=load_from_disk(str(Path(a.data) / 'dataset')),
                             processing_class=tok)
        res = trainer.train()
        trainer.save_model(str(out / 'final'))
        runtime = res.metrics['train_runtime']
        tokens = next(h['num_tokens'] for h in reversed(trainer.state.log_history) if 'num_tokens' in h)
    print(json.dumps(dict(kind=a.worker if a.worker == 'plain' else f'ours:{a.head}', tokens=tokens, train_runtime=runtime, tokens_per_s=tokens / runtime,
                          total_wall_s=time.time() - t0, cpu_s=time.process_time() - cpu0,
                          peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))


def model_path(name):
    from coworkenv.models import build_tiny_model, prepare_base_model
    if name == 'tiny': return str(build_tiny_model())
    if name == 'smollm2': return str(prepare_base_model('smollm2'))
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--model', default='tiny'); ap.add_argument('--steps', type=int, default=6)
    ap.add_argument('--batch', type=int, default=1); ap.add_argument('--max-length', type=int, default=2048)
    ap.add_argument('--specs', type=int, default=8); ap.add_argument('--repeats', type=int, default=2)
    ap.add_argument('--threads', type=int, default=0, help='torch threads per run (0: torch default)')
    ap.add_argument('--heads', default='auto', help="comma-separated loss_head values, one 'ours' run each (auto, logits, trained, fused)")
    ap.add_argument('--no-plain', action='store_true', help='skip the plain TRL runs (compare --heads only)')
    ap.add_argument('--worker', choices=['ours', 'plain'], help=argparse.SUPPRESS)
    ap.add_argument('--head', default='auto', help=argparse.SUPPRESS)
    ap.add_argument('--model-path', help=argparse.SUPPRESS); ap.add_argument('--data', help=argparse.SUPPRESS)
    ap.add_argument('--out', help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker: return worker(a)
    import warnings; warnings.filterwarnings('ignore')
    from coworkenv.agents import OracleAgent
    from coworkenv.curation import curate
    from coworkenv.rollout import rollout
    from coworkenv.synthesis import synthesize
    work = Path(tempfile.mkdtemp(prefix='bench-sft-'))
    mp = model_path(a.model)
    recs = rollout(synthesize(n=a.specs, seed=0, progress=False), OracleAgent, k=1, progress=False)
    cur = curate(recs, tokenizer=mp, out=work / 'curated', max_result_chars=600, n_distractors=2)
    t = cur.card['tokens']
    print(f"model {a.model} ({mp}); {cur.card['rows']} rows, tokens median {t['median']:.0f} max {t['max']}; "
          f"{a.steps} steps, batch {a.batch}, max_length {a.max_length}, threads {a.threads or 'default'}")
    runs, heads = [], a.heads.split(',')
    kinds = ([] if a.no_plain else ['plain']) + [f'ours:{h}' for h in heads]
    for i in range(a.repeats):
        for kind in (kinds if i % 2 == 0 else kinds[::-1]):  # alternate: no order bias
            wk, _, head = kind.partition(':')
            cmd = [sys.executable, __file__, '--worker', wk, '--head', head or 'auto', '--model-path', mp,
                   '--data', str(work / 'curated'), '--out', str(work / f'{wk}-{head}-{i}'), '--steps', str(a.steps),
                   '--batch', str(a.batch), '--max-length', str(a.max_length), '--threads', str(a.threads)]
            p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, TOKENIZERS_PARALLELISM='false'))
            line = [l for l in p.stdout.splitlines() if l.startswith('{')]
            if p.returncode or not line: sys.exit(f"{kind} run failed:\n{p.stderr[-3000:]}")
            r = json.loads(line[-1]); runs.append(r)
            print(f"  {kind:12s} run {i}: {r['tokens']:.0f} tokens in {r['train_runtime']:.1f}s = {r['tokens_per_s']:.0f} tokens/s; "
                  f"cpu {r['cpu_s']:.1f}s; peak RSS {r['peak_rss_mb']:.0f} MB")
    import statistics as st
    tps = {k: st.median(r['tokens_per_s'] for r in runs if r['kind'] == k) for k in kinds}
    mem = {k: max(r['peak_rss_mb'] for r in runs if r['kind'] == k) for k in kinds}
    cps = {k: st.median(r['tokens'] / r['cpu_s'] for r in runs if r['kind'] == k) for k in kinds}
    print()
    for k in kinds:
        name = 'plain TRL SFTTrainer' if k == 'plain' else f"coworkenv train_sft (loss_head {k.split(':')[1]})"
        print(f"{name}: {tps[k]:.0f} tokens/s (median), peak {mem[k]:.0f} MB")
    base = 'plain' if 'plain' in kinds else kinds[0]
    for k in kinds:
        if k != base:
            print(f"ratio {k}/{base}: {tps[k] / tps[base]:.3f} by wall clock" + (" (target >= 0.95)" if base == 'plain' else "")
                  + f"; {cps[k] / cps[base]:.3f} by process CPU time (tokens per CPU-second, whole process incl. loading: "
                  f"{base} {cps[base]:.0f}, {k} {cps[k]:.0f})")


if __name__ == '__main__':
    main()
