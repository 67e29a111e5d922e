"""SFT gains: base SmolLM2-135M vs PocketWorker-135M on environments it never saw (resumable).

  .venv/bin/python experiments/sft_gains.py                  # the real run (hours on 2 CPU cores; resumable)
  .venv/bin/python experiments/sft_gains.py --quick --out /tmp/sft_gains_quick   # the same path, tiny model, ~2 min
  .venv/bin/python experiments/sft_gains.py --report          # only rebuild the tables from what is saved
  .venv/bin/python experiments/sft_gains.py --readme          # ... and write the table into README.md
  .venv/bin/python experiments/sft_gains.py --variant lora --sft experiments/configs/sft_lora.yaml --seeds 0 \
        --eval-splits test_families -k 1                       # another recipe beside the default one (a probe)

Stages, each skipped when its output is already saved (so an interrupted run continues where it stopped):
  1. split: `split_specs` on the split config (held-out families + held-out seeds of training families; the
     contamination check fails the run), every spec validated; specs saved under OUT/specs/<split>/.
  2. teach: the oracle on the valid training specs, into an append-only trajectory store (OUT/store).
  3. for each training seed s: curate (tool-list variation seeded by s) -> OUT/curated_s<s>; SFT (the config,
     `seed=s`; TRL checkpoints, resumed) -> OUT/sft_s<s> (OUT/sft_<variant>_s<s> for `--variant`). Models are not
     kept in git. A LoRA run's adapter/ (~20 MB, gitignored; `git add -f` it while its evaluation is unfinished)
     rebuilds the identical model. A full fine-tune whose evaluation is unfinished is trained again in the next
     session; its weights' fingerprint (weights.sha256) decides whether the saved episodes still belong to it
     (identical weights: the evaluation goes on; different, e.g. another CPU's numerics: they move to eval/stale/).
  4. evaluate base and each PocketWorker on the held-out specs, k trials -> OUT/eval/<agent>.csv (one file per agent;
     only the specs it does not hold yet, so `--eval-splits` can add one split per session).
  (--next-action N) teacher-forced next-action accuracy of base and each seed's model on the oracle's trajectories of N
     specs per split (training specs included: is a slip already there on the data it was trained on?) -> OUT/next_action/.
  5. report: OUT/results.csv (every trial), OUT/gains.csv / gains.md (the paper's table: per split, base vs each seed
     and the seed mean, with 95% bootstrap CIs over tasks and paired deltas), OUT/gains.json, OUT/fig_gains.html.
"""
import argparse, json, re, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT_DEFAULT = ROOT / "experiments" / "results" / "sft_gains"
README_BEGIN, README_END = "<!-- sft_gains:begin -->", "<!-- sft_gains:end -->"

QUICK = dict(split=dict(test_families=['offboarding', 'vendor_payment'],
                        train_families=['access_request', 'expense_reimbursement', 'meeting_scheduling', 'new_hire_onboarding'],
                        train_seeds=2, test_seeds=1, test_family_seeds=2, difficulty='easy'),
             sft=dict(max_steps=3, per_device_train_batch_size=1, learning_rate=1e-3, max_length=2048, save_steps=1000),
             max_new_tokens=16)


def log(msg): print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def stage_split(out:Path, split_cfg):
    "Split, validate, save; reload when saved."
    from coworkenv.core import load_spec
    from coworkenv.evaluate import split_specs
    from coworkenv.validation import validate
    done = out / "specs" / "DONE"
    names = ('train', 'test_families', 'test_seeds')
    if done.is_file():
        return {n: [load_spec(p) for p in sorted((out / "specs" / n).glob("*.json"))] for n in names}
    sp = split_specs(split_cfg)
    sp.contamination.to_csv(out / "contamination.csv", index=False)
    valid = {}
    for n in names:
        specs = sp[n]
        res = [validate(s) for s in specs]
        valid[n] = [s for s, r in zip(specs, res) if r.passed]
        (out / "specs" / n).mkdir(parents=True, exist_ok=True)
        for s in valid[n]:
            (out / "specs" / n / f"{s.id}.json").write_text(json.dumps(s.model_dump(mode='json'), indent=1, ensure_ascii=False) + "\n")
        log(f"  {n}: {len(valid[n])}/{len(specs)} valid")
    done.write_text("ok\n")
    return valid


def stage_curate(out:Path, seed:int, recs, split_cfg, base) -> Path:
    "Curate the teacher's trajectories with this seed's tool-list variation into OUT/curated_s<seed> (skipped when saved)."
    from coworkenv.cli import held_out
    from coworkenv.curation import curate
    cur_dir = out / f"curated_s{seed}"
    if not (cur_dir / "train.jsonl").is_file():
        held, _ = held_out(recs, split_cfg)
        cur = curate(held, tokenizer=base, out=cur_dir, seed=seed)
        log(f"  curated seed {seed}: {cur.card['rows']} rows")
    return cur_dir


def stage_sft(out:Path, seed:int, recs, split_cfg, base, sft_cfg:dict, quick:bool, tag:str=''):
    "Curate with this seed's tool-list variation, then SFT with this seed into OUT/sft_<tag>s<seed> (resumed from its last checkpoint)."
    from coworkenv.sft import train_sft
    cur_dir = stage_curate(out, seed, recs, split_cfg, base)
    r = train_sft(sft_cfg, model=str(base), dataset=str(cur_dir), output_dir=str(out / f"sft_{tag}s{seed}"), seed=seed,
                  progress=not quick, **(QUICK['sft'] if quick else {}))
    log(f"  SFT seed {seed}: {r.metrics.get('steps')} steps, final loss {r.metrics.get('final_loss')}, "
        f"{r.metrics.get('wall_s')} s")
    check_fingerprint(out, f"pocketworker_{tag}s{seed}", r.model_dir)
    return r.model_dir


def weights_fingerprint(model_dir) -> str:
    "sha256 over the model's tensors (names, dtypes, shapes, bytes) in name order: equal only for identical weights."
    import hashlib, torch
    from safetensors import safe_open
    h = hashlib.sha256()
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(f), framework='pt') as st:
            for name in sorted(st.keys()):
                t = st.get_tensor(name).contiguous()
                h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
                h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())  # raw bytes (bf16 has no numpy dtype)
    return h.hexdigest()


def check_fingerprint(out:Path, label:str, model_dir):
    """A full fine-tune's model is not kept in git, so a later session that goes on with its evaluation trains it again.
    The weights' fingerprint is saved beside the run (weights.sha256); when a retrained model differs from the one
    whose episodes are saved, those episodes are moved to eval/stale/ (kept, not reported) and the evaluation restarts."""
    run = Path(model_dir).parent
    f, fp = run / "weights.sha256", weights_fingerprint(model_dir)
    if f.is_file() and f.read_text().strip() != fp:
        stale = out / "eval" / "stale"
        saved = [p for p in (out / "eval" / f"{label}.csv", out / "eval" / f"{label}.partial.jsonl") if p.is_file()]
        if saved:
            stale.mkdir(parents=True, exist_ok=True)
            for p in saved: p.replace(stale / f"{p.stem.split('.')[0]}-{f.read_text().strip()[:12]}{''.join(p.suffixes)}")
            log(f"  {label}: the retrained model differs from the evaluated one (weights {fp[:12]} != {f.read_text().strip()[:12]}): "
                f"its {len(saved)} saved evaluation file(s) moved to {stale}, evaluation restarts")
    f.write_text(fp + "\n")


def missing_specs(out:Path, label:str, specs:list) -> list:
    "The specs that `label`'s saved evaluation (eval/<label>.csv) does not hold yet."
    import pandas as pd
    f = out / "eval" / f"{label}.csv"
    have = set(pd.read_csv(f, usecols=['spec_id']).spec_id) if f.is_file() else set()
    return [s for s in specs if s.id not in have]


def stage_eval(out:Path, label:str, path, test:list, k:int, max_new_tokens:int, quick:bool):
    """Evaluate one agent on the held-out specs its saved CSV does not hold yet (so a split evaluated in one session
    is kept, and another split is added to the same file later)."""
    import pandas as pd
    from coworkenv.evaluate import agent_factory, evaluate
    f = out / "eval" / f"{label}.csv"
    todo = missing_specs(out, label, test)
    saved = pd.read_csv(f) if f.is_file() else None
    if not todo: return saved
    t0 = time.time()
    part = f.with_suffix('.partial.jsonl')  # each finished episode: a killed evaluation continues where it stopped
    df = evaluate(todo, dict([agent_factory(f"{label}=hf:{path}", max_new_tokens=max_new_tokens)]), k=k, progress=not quick,
                  resume=part)
    if saved is not None: df = pd.concat([saved, df], ignore_index=True)
    f.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(f.with_suffix('.tmp'), index=False); f.with_suffix('.tmp').replace(f)  # atomic: a killed run leaves no half file
    part.unlink(missing_ok=True)
    log(f"  evaluated {label} on {len(todo)} more task(s): {len(df)} episodes in all, the new ones in {time.time() - t0:.0f} s, "
        f"mean score {100 * df.score.mean():.1f}")
    return df


def stage_inspect(out:Path, label:str, path, specs:list, max_new_tokens:int):
    "Save whole trajectories (trial 0) of `specs` for one agent, to read what the model does (resumable, one line per task)."
    from coworkenv.agents import run_episode
    from coworkenv.evaluate import agent_factory, make_env
    f = out / "trajectories" / f"{label}.jsonl"
    f.parent.mkdir(parents=True, exist_ok=True)
    done = []
    for line in (f.read_text().splitlines() if f.is_file() else []):
        try: done.append(json.loads(line))
        except json.JSONDecodeError: break  # a torn last line (killed mid-write): dropped, rewritten below
    f.write_text(''.join(json.dumps(t, ensure_ascii=False) + "\n" for t in done))
    _, factory = agent_factory(f"{label}=hf:{path}", max_new_tokens=max_new_tokens)
    seen = {t['spec_id'] for t in done}
    for spec in specs:
        if spec.id in seen: continue
        t = run_episode(make_env(spec, 0), factory(spec))
        with f.open('a') as fh: fh.write(json.dumps(t.model_dump(mode='json'), ensure_ascii=False) + "\n")
        log(f"  inspected {label} on {spec.id}: {t.turns} turns, {t.end_reason}, score {t.grade.score if t.grade else None}")


def spread(specs:list, n:int) -> list:
    "`n` specs taken round-robin over their workflow families (in spec-id order), so a small sample covers every family."
    by = {}
    for s in sorted(specs, key=lambda s: s.id): by.setdefault(s.workflow, []).append(s)
    queues, out = list(by.values()), []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n: out.append(q.pop(0))
    return out


def stage_next_action(out:Path, label:str, path, refs:list, max_new_tokens:int):
    """Teacher-forced next-action accuracy of one agent on the oracle's reference trajectories (`next_action_accuracy`):
    OUT/next_action/<label>.csv, one row per reference turn; skipped when saved for the same references."""
    import pandas as pd
    from coworkenv.agents import HFAgent
    from coworkenv.evaluate import next_action_accuracy
    f = out / "next_action" / f"{label}.csv"
    if f.is_file() and set(pd.read_csv(f, usecols=['spec_id']).spec_id) == {r.spec_id for r in refs}: return
    t0 = time.time()
    df = next_action_accuracy(HFAgent(str(path), max_new_tokens=max_new_tokens, name=label), refs)
    f.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(f.with_suffix('.tmp'), index=False); f.with_suffix('.tmp').replace(f)
    log(f"  next action {label}: {len(df)} turns of {len(refs)} references, exact {100 * df.exact.mean():.1f}%, "
        f"{time.time() - t0:.0f} s")


def next_action_table(out:Path):
    "The teacher-forced summary per agent and split (`next_action_summary`) of every saved OUT/next_action/<agent>.csv."
    import pandas as pd
    from coworkenv.evaluate import next_action_summary
    df = pd.concat([pd.read_csv(f, keep_default_na=False) for f in sorted((out / "next_action").glob("*.csv"))], ignore_index=True)
    return next_action_summary(df).reset_index()


def inspect_table(out:Path):
    "One row per saved trajectory: tool calls, failed calls, distinct calls, repeated calls, the most repeated call, score."
    import pandas as pd
    from collections import Counter
    from coworkenv.core import ToolDispatch
    rows = []
    for f in sorted((out / "trajectories").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            try: t = json.loads(line)
            except json.JSONDecodeError: continue
            calls = [f"{d['tool']}({json.dumps(d['arguments'], sort_keys=True)[:60]})" for d in t['dispatches']]
            ok = [ToolDispatch(**d).ok for d in t['dispatches']]  # the project's one definition of a failed call
            top = Counter(calls).most_common(1)
            rows.append(dict(agent=f.stem, spec_id=t['spec_id'], turns=t['turns'], end_reason=t['end_reason'],
                             tool_calls=len(calls), failed=ok.count(False), distinct=len(set(calls)),
                             repeated=len(calls) - len(set(calls)), most_repeated=f"{top[0][0]} ×{top[0][1]}" if top else '',
                             score=(t.get('grade') or {}).get('score')))
    return pd.DataFrame(rows)


def gains_table(df, seeds:list, n_boot:int=1000):
    "The paper's table per split: base, each PocketWorker seed, and the mean over seeds (with the seeds' spread)."
    import numpy as np, pandas as pd
    from coworkenv.evaluate import eval_summary, headline, paired_delta
    rows = []
    for split, g in df.groupby('split', sort=False):
        h = headline(eval_summary(g, n_boot=n_boot))
        mt = g[g.multi_turn.astype(str).str.lower().isin(('true', '1'))]
        for agent in h.index:
            row = dict(split=split, agent=agent, tasks=g[g.agent == agent].spec_id.nunique(),
                       k=int(g[g.agent == agent].trial.nunique()), **h.loc[agent].to_dict())  # each agent's own trials (a probe may run k=1)
            if agent != 'base':
                d = paired_delta(g, 'base', agent, 'score', n_boot=n_boot)
                row['Δ mean'] = f"{d['delta']:+.1f} [{d['lo']:+.1f}, {d['hi']:+.1f}]"
                if len(mt):
                    dm = paired_delta(mt, 'base', agent, 'score', n_boot=n_boot)
                    row['Δ multi-turn'] = f"{dm['delta']:+.1f} [{dm['lo']:+.1f}, {dm['hi']:+.1f}]"
            rows.append(row)
        pws = [f"pocketworker_s{s}" for s in seeds if f"pocketworker_s{s}" in set(g.agent)]
        if len(pws) > 1:  # the mean over training seeds: mean ± standard deviation of the per-seed estimates
            est = lambda a, sub: 100 * sub[sub.agent == a].groupby('spec_id').score.mean().mean()
            cell = lambda vals: f"{np.mean(vals):.1f} ± {np.std(vals, ddof=1):.1f}" if len(vals) > 1 else '—'
            gen = g[~g.index.isin(mt.index)]
            base_m, base_mt = est('base', g), est('base', mt) if len(mt) else float('nan')
            rows.append(dict(split=split, agent=f"pocketworker (mean of {len(pws)} seeds)", tasks=g.spec_id.nunique(),
                             k=int(g[g.agent.isin(pws)].trial.nunique()), mean=cell([est(a, g) for a in pws]),
                             general=cell([est(a, gen) for a in pws]) if len(gen) else '—',
                             **{'multi-turn': cell([est(a, mt) for a in pws]) if len(mt) else '—'},
                             **{'Δ mean': cell([est(a, g) - base_m for a in pws]),
                                'Δ multi-turn': cell([est(a, mt) - base_mt for a in pws]) if len(mt) else '—'}))
    return pd.DataFrame(rows).fillna('—')


def gains_figure(df):
    "Mean score per split and agent (×100) with 95% bootstrap CIs over tasks."
    import plotly.graph_objects as go
    from coworkenv.evaluate import eval_summary
    fig = go.Figure()
    for what, value in (('overall', 'all'), ('turns', 'multi-turn')):
        for split, g in df.groupby('split', sort=False):
            e = eval_summary(g)
            e = e[(e.group == what) & (e.value == value) & (e.metric == 'score')]
            if e.empty: continue
            fig.add_trace(go.Bar(name=f"{split} · {value}", x=list(e.agent), y=list(e.estimate),
                                 error_y=dict(type='data', symmetric=False, array=list(e.hi - e.estimate),
                                              arrayminus=list(e.estimate - e.lo))))
    fig.update_layout(barmode='group', title='SFT gains: mean score ×100 on held-out environments (95% CI over tasks)',
                      yaxis_title='score ×100', yaxis_range=[0, 105], height=420, margin=dict(t=50, b=40))
    return fig


def saved_seeds(out:Path, df) -> list:
    "Every training seed with a saved SFT run (sft_s<seed>/sft_result.json) or a saved evaluation (pocketworker_s<seed>)."
    found = {int(m[1]) for a in df.agent.unique() if (m := re.fullmatch(r'pocketworker_s(\d+)', a))}
    found |= {int(d.parent.name[5:]) for d in out.glob("sft_s*/sft_result.json") if re.fullmatch(r'sft_s\d+', d.parent.name)}
    return sorted(found)


def report(out:Path, seeds:list|None=None):
    """Rebuild results.csv, gains.{csv,md,json} and the figure from the saved per-agent evaluations. `seeds` (default:
    every seed saved under `out`) are the training seeds the table averages and gains.json lists, so a run of one seed
    (`--seeds 1`) still reports the seeds saved before it."""
    import pandas as pd
    from coworkenv.cli import markdown_table
    files = sorted((out / "eval").glob("*.csv"))
    if not files: raise FileNotFoundError(f"no evaluations saved under {out / 'eval'} yet: run the experiment first")
    df = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    if seeds is None: seeds = saved_seeds(out, df)
    df.to_csv(out / "results.csv", index=False)
    table = gains_table(df, seeds)
    table.to_csv(out / "gains.csv", index=False)
    (out / "gains.md").write_text(markdown_table(table))
    meta = dict(agents=sorted(df.agent.unique()), seeds_evaluated=sorted(int(a.rsplit('s', 1)[1]) for a in df.agent.unique() if a.startswith('pocketworker_s')),
                variants=sorted(a for a in df.agent.unique() if re.fullmatch(r'pocketworker_\w+_s\d+', a)),
                episodes=len(df), tasks=int(df.spec_id.nunique()),
                sft={s: json.loads((out / f"sft_s{s}" / "sft_result.json").read_text())['metrics']
                     for s in seeds if (out / f"sft_s{s}" / "sft_result.json").is_file()},
                sft_variants={d.parent.name: json.loads(d.read_text())['metrics']
                              for d in sorted(out.glob("sft_*_s*/sft_result.json"))})
    (out / "gains.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    gains_figure(df).write_html(out / "fig_gains.html", include_plotlyjs='cdn', div_id='fig_gains')  # a fixed id: a rerun writes the same bytes
    if any((out / "trajectories").glob("*.jsonl")): inspect_table(out).to_csv(out / "inspect.csv", index=False)
    if any((out / "next_action").glob("*.csv")): next_action_table(out).to_csv(out / "next_action.csv", index=False)
    return table, meta


def precision_note(meta) -> str:
    "Which seeds trained in bf16 and which in fp32 (`bf16: auto` follows the hardware): a difference between seeds to know of."
    prec = {str(s): 'bf16' if m.get('bf16') else 'fp32' for s, m in sorted((meta.get('sft') or {}).items(), key=lambda kv: int(kv[0]))}
    if not prec: return ''
    return " SFT precision per seed: " + ", ".join(f"s{s} {p}" for s, p in prec.items()) + (
        " (`bf16: auto` follows the hardware: the seeds trained on different CPUs)." if len(set(prec.values())) > 1 else ".")


def write_readme(out:Path, table, meta, readme:Path=ROOT / "README.md"):
    "Replace the marked block of README.md with the table generated from the saved results."
    from coworkenv.cli import markdown_table
    text = readme.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise ValueError(f"{readme} has no {README_BEGIN} ... {README_END} block to fill")
    rel = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    seeds = meta['seeds_evaluated']
    note = (f"Generated by `python experiments/sft_gains.py --readme` from `{rel}/` ({meta['episodes']} episodes on "
            f"{meta['tasks']} held-out tasks; PocketWorker seeds evaluated so far: {seeds or 'none'}"
            f"{'; variants: ' + ', '.join(meta['variants']) if meta.get('variants') else ''}). Scores ×100, "
            f"95% bootstrap CIs over tasks; Δ: paired difference with the base model on the same tasks."
            f"{precision_note(meta)}\n\n")
    block = f"{README_BEGIN}\n{note}{markdown_table(table)}{README_END}"
    readme.write_text(re.sub(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), lambda m: block, text, flags=re.S))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--split', default=str(ROOT / "experiments/configs/split_default.yaml"), help="split config YAML")
    ap.add_argument('--sft', default=None, help="SFT config YAML (model, dataset and output_dir are set here; default: "
                    "experiments/configs/sft_default.yaml; with --quick, only when given, under the quick settings)")
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2], help="training seeds (default: 0 1 2)")
    ap.add_argument('-k', type=int, default=3, help="trials per held-out task and agent (default: 3)")
    ap.add_argument('--max-new-tokens', type=int, default=256, help="new tokens per model turn (default: 256)")
    ap.add_argument('--out', default=str(OUT_DEFAULT), help=f"results folder (default: {OUT_DEFAULT.relative_to(ROOT)})")
    ap.add_argument('--quick', action='store_true', help="the tiny random model, a small split, 3 SFT steps (CI: the same code path in minutes)")
    ap.add_argument('--report', action='store_true', help="only rebuild the tables and figure from the saved evaluations")
    ap.add_argument('--readme', action='store_true', help="also write the table into README.md's sft_gains block")
    ap.add_argument('--inspect', type=int, default=0, metavar='N', help="also save whole trajectories (trial 0) of the first N held-out-family tasks per agent under trajectories/, to read what the models do")
    ap.add_argument('--next-action', type=int, default=0, metavar='N', help="also measure teacher-forced next-action accuracy "
                    "(every turn of the oracle's trajectories on N specs per split, spread over families) for the base and each seed's model")
    ap.add_argument('--variant', default='', help="a name for another SFT recipe (e.g. `lora` with --sft sft_lora.yaml): "
                    "its models and agents are sft_<variant>_s<seed> and pocketworker_<variant>_s<seed>, beside the default ones")
    ap.add_argument('--eval-splits', nargs='+', choices=['test_families', 'test_seeds'], default=['test_families', 'test_seeds'],
                    help="the held-out splits the PocketWorker models are evaluated on (default: both; the base runs on both)")
    ap.add_argument('--stop-after', choices=['split', 'teach', 'curate', 'sft', 'eval'], default=None,
                    help="stop after this stage (for staged runs; 'curate': each seed's curated dataset, e.g. for benchmarks/sft_memory.py)")
    a = ap.parse_args(argv)
    if a.variant and not re.fullmatch(r'[a-z0-9]+', a.variant): ap.error(f"--variant must be lowercase letters and digits, got {a.variant!r}")
    tag = f"{a.variant}_" if a.variant else ''
    out = Path(a.out).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not a.report:
        import yaml
        from coworkenv.agents import OracleAgent
        from coworkenv.evaluate import load_split_config
        from coworkenv.rollout import rollout
        split_cfg = load_split_config(QUICK['split'] if a.quick else a.split)
        sft_path = a.sft or (None if a.quick else ROOT / "experiments/configs/sft_default.yaml")  # --quick: the quick settings alone
        sft_cfg = yaml.safe_load(Path(sft_path).read_text()) if sft_path else {}
        max_new = QUICK['max_new_tokens'] if a.quick else a.max_new_tokens
        log(f"1/4 split ({'quick' if a.quick else Path(a.split).name}): test families {split_cfg.test_families}")
        valid = stage_split(out, split_cfg)
        test = valid['test_families'] + valid['test_seeds']
        if a.stop_after == 'split': return 0
        log(f"2/4 teach: the oracle on {len(valid['train'])} training specs")
        recs = rollout(valid['train'], OracleAgent, k=1, store=out / "store", progress=False)
        if a.stop_after == 'teach': return 0
        if a.quick:
            from coworkenv.models import build_tiny_model
            base = build_tiny_model()
        else:
            from coworkenv.models import prepare_base_model
            base = prepare_base_model('smollm2')
        if a.stop_after == 'curate':
            for s in a.seeds: stage_curate(out, s, recs, split_cfg, base)
            return 0
        log(f"3/4 evaluate the base model on {len(test)} held-out tasks, k={a.k}")
        stage_eval(out, 'base', base, test, a.k, max_new, a.quick)
        pw_test = [t for n in a.eval_splits for t in valid[n]]
        for s in a.seeds:
            if not missing_specs(out, f"pocketworker_{tag}s{s}", pw_test): continue  # evaluated before (its model need not be kept)
            log(f"4/4 seed {s}{f' ({a.variant})' if a.variant else ''}: curate, SFT, evaluate on {len(pw_test)} tasks")
            model = stage_sft(out, s, recs, split_cfg, base, sft_cfg, a.quick, tag)
            if a.stop_after == 'sft': continue
            stage_eval(out, f"pocketworker_{tag}s{s}", model, pw_test, a.k, max_new, a.quick)
        if a.inspect:
            pick = valid['test_families'][:a.inspect]
            log(f"inspect: whole trajectories of {len(pick)} held-out-family task(s) per agent")
            stage_inspect(out, 'base', base, pick, max_new)
            for s in a.seeds:
                m = out / f"sft_{tag}s{s}" / "final"
                if not (m / "config.json").is_file() and (m.parent / "adapter" / "adapter_config.json").is_file():
                    from coworkenv.sft import merge_adapter
                    merge_adapter(str(base), m.parent / "adapter", m)  # a LoRA run keeps its adapter: the model is rebuilt
                if (m / "config.json").is_file(): stage_inspect(out, f"pocketworker_{tag}s{s}", m, pick, max_new)
                else: log(f"  pocketworker_{tag}s{s}: no model at {m} (full fine-tunes are not kept in git): not inspected")
        if a.next_action:
            refs = {n: spread(v, a.next_action) for n, v in valid.items()}
            log(f"next action: the oracle's trajectories on {sum(map(len, refs.values()))} specs as references")
            ref_recs = [r for n in refs for r in rollout(refs[n], OracleAgent, k=1, store=out / "store_reference", progress=False)
                        if n != 'train'] + [r for r in recs if r.spec_id in {s.id for s in refs['train']}]
            stage_next_action(out, 'base', base, ref_recs, max_new)
            for s in a.seeds:
                m = out / f"sft_{tag}s{s}" / "final"
                if (m / "config.json").is_file(): stage_next_action(out, f"pocketworker_{tag}s{s}", m, ref_recs, max_new)
                else: log(f"  pocketworker_{tag}s{s}: no model at {m}: next action not measured")
    table, meta = report(out)  # every seed saved so far, not only this run's --seeds
    import pandas as pd
    with pd.option_context('display.width', 250, 'display.max_columns', 20, 'display.max_colwidth', 40):
        print(table.to_string(index=False))
    print(f"wrote {out}/gains.{{csv,md,json}}, results.csv, fig_gains.html")
    if a.readme: write_readme(out, table, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
