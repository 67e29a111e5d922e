"""RL dynamics: GRPO from the SFT PocketWorker, reward processing × credit assignment × seeds, held-out before/after (resumable).

  .venv/bin/python experiments/rl_dynamics.py                  # the real run (many hours on 2 CPU cores; resumable)
  .venv/bin/python experiments/rl_dynamics.py --quick --out /tmp/rl_dynamics_quick   # the same path, tiny model, 2 GRPO steps per run, ~2-4 min
  .venv/bin/python experiments/rl_dynamics.py --report          # only rebuild the tables and figures from what is saved

Configurations: reward {score, pass} × credit {trajectory, turn} (`--rewards`, `--credits`), seeds 0 1 (`--seeds`), all
from the same start model (`--start`, default: sft_gains' PocketWorker seed 0) on the same training specs, with the
base config experiments/configs/rl_default.yaml (`--rl`).

Stages, each skipped when its output is already saved (so an interrupted run continues where it stopped):
  1. specs: the split sft_gains.py saved and validated (experiments/results/sft_gains/specs/, read only) when it exists,
     so RL trains on exactly the specs the SFT model was trained on and is evaluated on the same held-out tasks;
     otherwise `split_specs` on the split config, validated, saved under OUT/specs/<split>/ (as sft_gains does).
  2. evaluate the start model on the held-out specs (test_families + test_seeds), k trials -> OUT/eval/start.csv
     (`--start-eval CSV`: take a saved evaluation of that model instead, e.g. the one sft_gains.py wrote).
  3. for each seed, for each reward × credit (seed-major: a partial sweep has every configuration's first seed): GRPO
     (`train_rl`, TRL checkpoints resumed) on the training specs -> OUT/runs/<reward>_<credit>_s<seed>/ (log.csv: one
     row per step; rl_result.json; rl_config.yaml), then evaluate its final model on the held-out specs ->
     OUT/eval/<reward>_<credit>_s<seed>.csv (one file per run, written atomically); then the run's checkpoints
     are removed (final/ is kept; `--keep-checkpoints` keeps them).
  4. report: OUT/results.csv (every evaluated trial), OUT/dynamics.csv (every logged training step of every run),
     OUT/table.{csv,md} (per split × configuration: mean ± sd over seeds of mean score, multi-turn score and pass^k,
     each seed's paired Δ against the start model with its 95% bootstrap CI, and that Δ split into its completion and
     robustness parts: `task progress` says whether completion brought at least half of it on every seed), OUT/runs.{csv,md}
     (every run with its own CIs), OUT/summary.{md,json} (including whether any configuration beats SFT alone on held-out
     families, and whether that gain is task progress or robustness credit, e.g. from episodes that stop without acting),
     OUT/fig_curves.html (training curves, bands across seeds) and OUT/fig_heldout.html.

Options for a sweep sized to a small machine (all recorded in OUT/experiment.json, with each invocation's command line
under `invocations`; a rerun with other evaluation settings is refused, so one results folder never mixes two protocols):
  --set KEY=VALUE ...   override RL config fields for every run (e.g. learning_rate=2e-5 temperature=1.0 max_steps=12)
  --train-specs N       train every run on N training specs spread over the families (saved in OUT/train_specs/, so each
                        spec recurs in a run) and evaluate the start model and every run on them too (split `train`):
                        the greedy before/after on the very specs a run trained on says whether it learned anything
  --eval-turn-slack N   evaluate under a turn budget of the reference plan + N turns (as `coworkenv main --pipeline`),
                        so a model that loops ends early instead of running to the spec's 24-54 turns
  --eval-splits ...     which held-out splits to evaluate (default: test_families test_seeds)
A run whose final weights equal the start model's (e.g. pass × trajectory when no episode passed: every advantage 0) is
not evaluated again: the start model's episodes are copied under the run's name (greedy decoding of the same weights
gives the same episodes), and the log says so.
"""
import argparse, json, re, sys, time, warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))
import sft_gains  # noqa: E402  (its split and evaluation stages are reused as they are)

OUT_DEFAULT = ROOT / "experiments" / "results" / "rl_dynamics"
SFT_SPECS = ROOT / "experiments" / "results" / "sft_gains" / "specs"
SFT_START = ROOT / "experiments" / "results" / "sft_gains" / "sft_s0" / "final"
START = 'start'  # the evaluation label of the start model (SFT alone)
SPLITS = ('train', 'test_families', 'test_seeds')
CURVES = ('reward', 'cowork/score', 'cowork/pass_rate', 'frac_reward_zero_std')  # the training curves of fig_curves.html
RUN_RE = re.compile(r"^(?P<reward>[a-z]+)_(?P<credit>trajectory|turn)_s(?P<seed>\d+)$")

# the quick path: sft_gains' quick split, smaller (4 held-out tasks, multi-turn and general ones in both splits)
QUICK = dict(split=dict(sft_gains.QUICK['split'], train_families=['access_request', 'expense_reimbursement'], train_seeds=1,
                        test_family_seeds=1),
             rl=dict(max_steps=2, num_generations=2, per_device_train_batch_size=1, gradient_accumulation_steps=2,
                     max_new_tokens=16, max_completion_length=512, learning_rate=1e-3, save_steps=1000),
             max_new_tokens=16)


def log(msg): print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_name(reward:str, credit:str, seed:int) -> str: return f"{reward}_{credit}_s{seed}"


def config_label(reward:str, credit:str) -> str: return f"{reward} × {credit}"


def stage_specs(out:Path, split_cfg, saved:Path=SFT_SPECS):
    "The split's validated specs: sft_gains' saved folder when complete (read only), else split + validate into OUT/specs."
    if (saved / "DONE").is_file() and all((saved / n).is_dir() for n in SPLITS):
        from coworkenv.core import load_spec
        return saved, {n: [load_spec(p) for p in sorted((saved / n).glob("*.json"))] for n in SPLITS}
    return out / "specs", sft_gains.stage_split(out, split_cfg)


def stage_train(out:Path, rl_cfg, start, train_dir:Path, reward:str, credit:str, seed:int, overrides:dict, quick:bool):
    "GRPO for one configuration and seed on the specs in `train_dir` (`train_rl` skips a finished run and resumes from the last checkpoint)."
    from coworkenv.rl import train_rl
    name = run_name(reward, credit, seed)
    r = train_rl(rl_cfg, model=str(start), specs=str(train_dir), output_dir=str(out / "runs" / name),
                 reward=reward, credit=credit, seed=seed, **({'progress': False} if quick else {}), **overrides)
    m = r.metrics
    log(f"  GRPO {name}: {m.get('steps')} steps in {m.get('wall_s')} s, reward {m.get('first_reward')} -> {m.get('last_reward')}")
    return r.model_dir


def reuse_start_eval(out:Path, saved, test:list, k:int) -> int:
    """Take a saved evaluation of the start model (e.g. sft_gains' `eval/pocketworker_ep8_s1.csv`) as OUT/eval/start.csv
    instead of evaluating it again: greedy evaluation of the same weights on the same specs gives the same episodes, and
    on 2 CPU cores that is an hour saved. Only its rows of the held-out tasks are kept, relabelled `start`; refused
    (ValueError, nothing written) unless it is one agent's evaluation holding trials 0..k-1 of every held-out task.
    Returns the episodes kept. The caller vouches that it evaluated the same model (the path is recorded)."""
    import pandas as pd
    saved = Path(saved)
    if not saved.is_file(): raise ValueError(f"--start-eval: no evaluation file at {saved}")
    df = pd.read_csv(saved, keep_default_na=False)
    need = {'spec_id', 'trial', 'agent', 'score'} - set(df.columns)
    if need: raise ValueError(f"--start-eval: {saved} is not an evaluation CSV (no column {', '.join(sorted(need))})")
    if df.agent.nunique() != 1: raise ValueError(f"--start-eval: {saved} holds {df.agent.nunique()} agents "
                                                 f"({', '.join(map(str, df.agent.unique()))}); one agent's evaluation is needed")
    ids = {s.id for s in test}
    df = df[df.spec_id.isin(ids) & df.trial.astype(int).lt(k)]
    have = set(zip(df.spec_id, df.trial.astype(int)))
    gap = sorted((i, t) for i in ids for t in range(k) if (i, t) not in have)
    if gap: raise ValueError(f"--start-eval: {saved} lacks {len(gap)} of the {len(ids) * k} held-out episodes "
                             f"(k={k}), e.g. {', '.join(f'{i} trial {t}' for i, t in gap[:4])}")
    f = out / "eval" / f"{START}.csv"
    f.parent.mkdir(parents=True, exist_ok=True)
    df.assign(agent=START).to_csv(f.with_suffix('.tmp'), index=False); f.with_suffix('.tmp').replace(f)
    return len(df)


def drop_checkpoints(run_dir:Path) -> list:
    "Remove a finished run's TRL checkpoints (model + optimiser state; only needed to resume training), keep `final/`."
    import shutil
    if not ((run_dir / "rl_result.json").is_file() and (run_dir / "final" / "config.json").is_file()): return []
    gone = sorted(p for p in run_dir.glob("checkpoint-*") if p.is_dir())
    for p in gone: shutil.rmtree(p)
    return gone


def weights_equal(a, b) -> bool:
    """Whether two saved models hold the same tensors (names, dtypes, shapes, values: `sft_gains.weights_fingerprint`);
    a folder without weights equals nothing. A GRPO run whose every advantage was 0 ends with its start model's weights."""
    if not any(Path(a).glob("*.safetensors")): return False
    return sft_gains.weights_fingerprint(a) == sft_gains.weights_fingerprint(b)


def copy_start_eval(out:Path, name:str) -> int:
    "OUT/eval/<name>.csv: the start model's evaluation relabelled (for a run that did not change the weights); episodes copied."
    import pandas as pd
    df = pd.read_csv(out / "eval" / f"{START}.csv", keep_default_na=False).assign(agent=name)
    f = out / "eval" / f"{name}.csv"
    df.to_csv(f.with_suffix('.tmp'), index=False); f.with_suffix('.tmp').replace(f)
    return len(df)


def parse_sets(items) -> dict:
    "`['learning_rate=2e-5', 'temperature=1.0']` -> `{'learning_rate': 2e-05, 'temperature': 1.0}` (values read as YAML)."
    import yaml
    out = {}
    for it in items or []:
        key, sep, val = it.partition('=')
        if not sep or not key.strip(): raise ValueError(f"--set: expected KEY=VALUE, got {it!r}")
        v = yaml.safe_load(val)
        if isinstance(v, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", v.strip()): v = float(v)  # YAML 1.1 reads 2e-5 as a string
        out[key.strip()] = v
    return out


def stage_train_specs(out:Path, train:list, n:int) -> Path:
    """OUT/train_specs/: `n` training specs spread over the families (`sft_gains.spread`), written once; an existing
    folder holding other specs is refused (the runs trained there would not be comparable)."""
    from coworkenv.cli import _save_specs
    d = out / "train_specs"
    pick = sft_gains.spread(train, n)
    have = sorted(p.stem for p in d.glob("*.json"))
    if have and have != sorted(s.id for s in pick):
        raise ValueError(f"{d} holds other training specs ({', '.join(have)}); use another --out for --train-specs {n}")
    if not have: _save_specs(pick, d)
    return d


EVAL_KEYS = ('start', 'k', 'max_new_tokens', 'eval_turn_slack', 'eval_splits', 'train_specs')  # what an evaluation depends on


def check_protocol(out:Path, new:dict) -> list:
    "The evaluation settings of `new` that differ from those OUT/experiment.json recorded (missing keys: the defaults)."
    f = out / "experiment.json"
    if not f.is_file(): return []
    old = json.loads(f.read_text())
    dflt = dict(eval_turn_slack=None, eval_splits=['test_families', 'test_seeds'], train_specs=None)
    return [f"{k}: {old.get(k, dflt.get(k))!r} before, {new.get(k)!r} now" for k in EVAL_KEYS
            if old.get(k, dflt.get(k)) != new.get(k) and not (k == 'start' and old.get('quick'))]


def _is_mt(df): return df.multi_turn.astype(str).str.lower().isin(('true', '1'))


def _runs(df) -> list[tuple]:
    "`(name, reward, credit, seed)` of every run evaluated in `df`, in sweep order (reward, credit, seed)."
    rs = [(a, m['reward'], m['credit'], int(m['seed'])) for a in df.agent.unique() if (m := RUN_RE.match(a))]
    return sorted(rs, key=lambda r: (r[1] != 'score', r[1], r[2] != 'trajectory', r[2], r[3]))


def _est(summary, agent, group, value, metric):
    "One estimate (×100) of `eval_summary`, NaN when that slice is empty."
    s = summary[(summary.agent == agent) & (summary.group == group) & (summary.value == value) & (summary.metric == metric)]
    return float(s.estimate.iloc[0]) if len(s) else float('nan')


def _delta(g, new, n_boot):
    "Paired Δ score (×100) of `new` against the start model on the same tasks, or None when `g` has no rows."
    from coworkenv.evaluate import paired_delta
    return paired_delta(g, START, new, 'score', n_boot=n_boot) if len(g) else None


def _dcell(d): return '—' if d is None else f"{d['delta']:+.1f} [{d['lo']:+.1f}, {d['hi']:+.1f}]"


def _dparts(g, new):
    """`(Δ from completion, Δ from robustness)` (×100): the change of the mean score of `new` against the start model in
    `g`, split along Claw-Eval's formula `safety × (0.8 completion + 0.2 robustness)` (before gate caps); NaNs without
    those columns. Robustness is paid in full to an episode that makes no tool call (0.2 of the score), so a policy can
    raise its score by doing less; the completion part cannot be raised that way."""
    if not {'completion', 'robustness', 'safety'} <= set(g.columns): return float('nan'), float('nan')
    part = lambda agent, col, w: (w * g[g.agent == agent].safety * g[g.agent == agent][col]).mean()
    return tuple(100 * (part(new, c, w) - part(START, c, w)) for c, w in (('completion', 0.8), ('robustness', 0.2)))


def progress_verdict(parts:list) -> str:
    """'yes' when every seed's score change comes mostly from task progress (its completion part positive and at least
    half of the two parts together), 'no' otherwise, '—' without the columns."""
    if not parts or any(c != c for c, _ in parts): return '—'
    return 'yes' if all(c > 0 and c >= 0.5 * (c + r) for c, r in parts) else 'no'


def _spread(vals, signed=False):
    "mean ± sd over seeds (sd only with 2+ seeds)."
    import numpy as np
    vals = [v for v in vals if v == v]
    if not vals: return '—'
    f = '{:+.1f}' if signed else '{:.1f}'
    return f.format(np.mean(vals)) + (f" ± {np.std(vals, ddof=1):.1f}" if len(vals) > 1 else '')


def verdict(ds:list) -> str:
    "From each seed's paired Δ (dicts of `paired_delta`): better/worse only when every seed's 95% CI excludes 0 that way."
    if not ds or any(d is None for d in ds): return '—'
    if all(d['lo'] > 0 for d in ds): return 'better'
    if all(d['hi'] < 0 for d in ds): return 'worse'
    return 'no clear difference'


def config_table(df, n_boot:int=1000):
    """Per split × configuration: the start model's row (95% CIs over tasks), then each configuration's mean ± sd over
    seeds of mean score, multi-turn score and pass^k, each seed's paired Δ against the start model (95% CI), and the
    verdict (`verdict`)."""
    import pandas as pd
    from coworkenv.evaluate import eval_summary, headline
    rows = []
    for split, g in df.groupby('split', sort=False):
        s = eval_summary(g, n_boot=n_boot)
        h = headline(s)
        mt = g[_is_mt(g)]
        base = dict(split=split, tasks=g.spec_id.nunique(), k=int(g.trial.max()) + 1)
        if START in h.index:
            rows.append(dict(base, config='start (SFT alone)', seeds='—', mean=h.loc[START, 'mean'],
                             **{'multi-turn': h.loc[START, 'multi-turn'], 'pass^k': h.loc[START, 'pass^k']}))
        runs = _runs(g)
        for (reward, credit) in dict.fromkeys((r[1], r[2]) for r in runs):
            rs = [r for r in runs if (r[1], r[2]) == (reward, credit)]
            est = lambda grp, val, met: [_est(s, r[0], grp, val, met) for r in rs]
            row = dict(base, config=config_label(reward, credit), seeds=' '.join(str(r[3]) for r in rs),
                       mean=_spread(est('overall', 'all', 'score')), **{'multi-turn': _spread(est('turns', 'multi-turn', 'score')),
                                                                         'pass^k': _spread(est('overall', 'all', 'pass^k'))})
            if START in h.index:
                dm, dt = [_delta(g, r[0], n_boot) for r in rs], [_delta(mt, r[0], n_boot) for r in rs]
                row['Δ mean (seeds)'] = _spread([d['delta'] for d in dm], signed=True)
                row['Δ mean per seed [95% CI]'] = '; '.join(f"s{r[3]} {_dcell(d)}" for r, d in zip(rs, dm))
                row['Δ multi-turn per seed [95% CI]'] = '; '.join(f"s{r[3]} {_dcell(d)}" for r, d in zip(rs, dt)) if len(mt) else '—'
                row['vs SFT alone'] = verdict(dm)
                parts = [_dparts(g, r[0]) for r in rs]
                row['Δ from completion / robustness (seeds)'] = (f"{_spread([c for c, _ in parts], signed=True)} / "
                                                                 f"{_spread([x for _, x in parts], signed=True)}")
                row['task progress'] = progress_verdict(parts)
            rows.append(row)
    return pd.DataFrame(rows).fillna('—')


def runs_table(df, n_boot:int=1000):
    "Per split: the start model and every run, headline cells with 95% CIs over tasks and paired Δs against the start."
    import pandas as pd
    from coworkenv.evaluate import eval_summary, headline
    rows = []
    for split, g in df.groupby('split', sort=False):
        h = headline(eval_summary(g, n_boot=n_boot))
        mt = g[_is_mt(g)]
        for agent in [START] * (START in h.index) + [r[0] for r in _runs(g)]:
            row = dict(split=split, run=agent, tasks=g.spec_id.nunique(), k=int(g.trial.max()) + 1, **h.loc[agent].to_dict())
            if agent != START and START in h.index:
                row['Δ mean'], row['Δ multi-turn'] = _dcell(_delta(g, agent, n_boot)), _dcell(_delta(mt, agent, n_boot))
            rows.append(row)
    return pd.DataFrame(rows).fillna('—')


def dynamics(out:Path):
    "Every run's `log.csv` in one frame, with run, config, reward, credit and seed columns first."
    import pandas as pd
    parts = []
    for f in sorted((out / "runs").glob("*/log.csv")):
        m = RUN_RE.match(f.parent.name)
        if not m: continue
        d = pd.read_csv(f)
        cols = dict(run=f.parent.name, config=config_label(m['reward'], m['credit']), reward_kind=m['reward'],
                    credit=m['credit'], seed=int(m['seed']))
        for i, (k, v) in enumerate(cols.items()): d.insert(i, k, v)
        parts.append(d)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def training_episodes(out:Path) -> list[dict]:
    "Every run's `episodes.jsonl` records, each with its run and its index in that log (a line torn by a kill is dropped)."
    from coworkenv.evaluate import _saved_rows
    return [dict(r, run=f.parent.name, episode=i) for f in sorted((out / "runs").glob("*/episodes.jsonl"))
            for i, r in enumerate(_saved_rows(f))]


EVENT_COLS = ['run', 'step', 'episode', 'spec_id', 'reward', 'turn', 'check_id', 'kind', 'passed', 'weight']


def episode_events(out:Path, specs_dir:Path|None=None):
    """Every check event of every training episode (each run's `episodes.jsonl`): one row per `(turn, check, passed)`
    with the run, step, the episode's index in its run's log and its reward, the check's kind (from the spec in
    `specs_dir`, default OUT/train_specs; '?' when the spec is not there) and weight. These events are what turn credit
    reads: with none, a turn-credit update is the trajectory one. Runs trained before the episode log existed have none."""
    import pandas as pd
    from coworkenv.core import load_spec
    specs_dir = Path(specs_dir) if specs_dir else out / "train_specs"
    kinds = {}
    for p in sorted(specs_dir.glob("*.json")) if specs_dir.is_dir() else []:
        s = load_spec(p); kinds[s.id] = {c.id: c.kind for c in s.checks}
    rows = [dict(run=r['run'], step=r['step'], episode=r['episode'], spec_id=r['spec_id'], reward=r['reward'], turn=turn,
                 check_id=cid, kind=kinds.get(r['spec_id'], {}).get(cid, '?'), passed=bool(passed),
                 weight=r.get('weights', {}).get(cid, 0.0))
            for r in training_episodes(out) for turn, cid, passed in r.get('events', [])]
    return pd.DataFrame(rows, columns=EVENT_COLS)


def episode_steps(out:Path, specs_dir:Path|None=None):
    """Per run and step, from `episodes.jsonl`: the spec(s) drawn, episodes, mean reward, score and completion (and the
    demonstration prefix's completion, for `demo_turns_left` runs), the share with a safety violation, tool calls per
    episode, and the check events per episode by what they did (a completion check met, a completion check undone, a
    safety or gate check violated, one restored): what each GRPO step could learn from."""
    import pandas as pd
    eps = training_episodes(out)
    if not eps: return pd.DataFrame()
    e = pd.DataFrame(eps)
    ev = episode_events(out, specs_dir)
    g = e.groupby(['run', 'step'])
    t = pd.DataFrame({'spec': g.spec_id.agg(lambda s: ', '.join(sorted(set(s)))), 'episodes': g.size(),
                      'reward': g.reward.mean(), 'score': g.score.mean(), 'completion': g.completion.mean(),
                      'safety violated': g.safety_violated.mean(), 'tool calls': g.tool_calls.mean()})
    if 'prefix_completion' in e:  # runs that started from a demonstration (`demo_turns_left`): what the prefix had done
        t.insert(4, 'prefix completion', g.prefix_completion.mean())
    guard = ev.kind.isin(['safety', 'gate'])  # checks that hold until broken; completion checks are met by acting
    what = {'met': ~guard & ev.passed, 'undone': ~guard & ~ev.passed, 'violated': guard & ~ev.passed, 'restored': guard & ev.passed}
    for name, m in what.items():
        n = ev[m].groupby(['run', 'step']).size()
        t[f'events: {name}'] = (n.reindex(t.index).fillna(0) / t.episodes).round(2)
    return t.reset_index()


def dynamics_summary(dyn, frac:float=0.25):
    """Per configuration: what the training curves did, as mean over seeds of the first vs the last `frac` of each run's
    logged steps (each step is one spec's group, so single steps are noisy): processed reward, episode score, pass rate,
    entropy; the mean fraction of zero-spread groups (no GRPO signal under trajectory credit) and wall time per run."""
    import numpy as np, pandas as pd
    if dyn is None or dyn.empty: return pd.DataFrame()
    rows = []
    for cfg, g in dyn.groupby('config', sort=False):
        def ends(col):
            if col not in g: return '—'
            first, last = [], []
            for _, r in g.groupby('run'):
                r = r.sort_values('step').dropna(subset=[col])
                if r.empty: continue
                n = max(1, int(len(r) * frac))
                first.append(r[col].iloc[:n].mean()); last.append(r[col].iloc[-n:].mean())
            return f"{np.mean(first):.3f} → {np.mean(last):.3f}" if first else '—'
        rows.append({'config': cfg, 'seeds': ' '.join(str(x) for x in sorted(g.seed.unique())), 'steps': int(g.step.max()),
                     'reward': ends('reward'), 'score': ends('cowork/score'), 'pass rate': ends('cowork/pass_rate'),
                     'entropy': ends('entropy'),
                     'zero-spread groups': f"{g.frac_reward_zero_std.mean():.2f}" if 'frac_reward_zero_std' in g else '—',
                     'wall s per run': f"{g.groupby('run').wall_s.max().mean():.0f}"})
    order = lambda c: (not c.startswith('score'), c.split(' × ')[0], c.split(' × ')[-1] != 'trajectory')
    return pd.DataFrame(rows).sort_values('config', key=lambda s: s.map(order)).reset_index(drop=True)


def curve_runs(out:Path) -> dict:
    "`{configuration label: [log.csv of each seed]}` for `rl_figure` (a band across seeds)."
    runs = {}
    for f in sorted((out / "runs").glob("*/log.csv"), key=lambda p: p.parent.name):
        if (m := RUN_RE.match(f.parent.name)): runs.setdefault(config_label(m['reward'], m['credit']), []).append(f)
    return dict(sorted(runs.items(), key=lambda kv: (not kv[0].startswith('score'), kv[0])))


def curves_figures(out:Path) -> dict:
    "`{metric: figure}` of the training curves (mean over seeds, min-max band) for `CURVES`."
    from coworkenv.rl import rl_figure
    runs = curve_runs(out)
    titles = {'reward': 'processed reward (score: 0..1; pass: 0/1)', 'cowork/score': 'episode score (comparable across rewards)',
              'cowork/pass_rate': 'pass rate of the training episodes', 'frac_reward_zero_std': 'fraction of groups with zero reward spread'}
    return {m: rl_figure(runs, m, title=f"GRPO training: {titles[m]}") for m in CURVES}


def heldout_figure(df):
    "Held-out mean score and multi-turn score (×100) per split, the start model and every run, with 95% bootstrap CIs over tasks."
    import plotly.graph_objects as go
    from coworkenv.evaluate import eval_summary
    fig = go.Figure()
    order = [START] + [r[0] for r in _runs(df)]
    for group, value in (('overall', 'all'), ('turns', 'multi-turn')):
        for split, g in df.groupby('split', sort=False):
            e = eval_summary(g)
            e = e[(e.group == group) & (e.value == value) & (e.metric == 'score')].set_index('agent').reindex(order).dropna(subset=['estimate'])
            if e.empty: continue
            fig.add_trace(go.Bar(name=f"{split} · {value}", x=list(e.index), y=list(e.estimate),
                                 error_y=dict(type='data', symmetric=False, array=list(e.hi - e.estimate),
                                              arrayminus=list(e.estimate - e.lo))))
    fig.update_layout(barmode='group', title='RL dynamics: held-out mean score ×100, start (SFT alone) and after each GRPO run (95% CI over tasks)',
                      yaxis_title='score ×100', yaxis_range=[0, 105], height=440, margin=dict(t=50, b=90))
    return fig


def summary_text(table, meta, dyn_table=None) -> str:
    "summary.md: what was run, the held-out table, a plain answer on held-out families, and what the training curves did."
    from coworkenv.cli import markdown_table
    lines = [f"# RL dynamics: {'QUICK RUN (tiny random model; the numbers say nothing about RL)' if meta.get('quick') else 'results'}", "",
             f"Start model: `{meta.get('start', '?')}`. {meta['episodes']} evaluation episodes on {meta['tasks']} tasks (splits: {', '.join(meta.get('splits', [])) or '?'}); runs evaluated: "
             f"{len(meta['runs_evaluated'])} ({', '.join(meta['runs_evaluated']) or 'none'}). Scores ×100; Δ: paired difference "
             "with the start model on the same tasks, 95% bootstrap CI over tasks; mean ± sd over seeds.", ""]
    lines += [f"**Held-out families: {meta['answer']}**", "", markdown_table(table)]
    if dyn_table is not None and len(dyn_table):
        lines += ["## Training dynamics", "", "Mean over seeds of the first vs the last quarter of each run's logged steps "
                  "(one spec's group per step: noisy); zero-spread groups: the mean fraction of groups whose episodes all "
                  "got the same reward.", "", markdown_table(dyn_table)]
    return "\n".join(lines)


def answer(table) -> tuple[str, list]:
    "Does any configuration beat SFT alone on held-out families (every seed's paired 95% CI of Δ mean score above 0)?"
    t = table[(table.split == 'test_families') & (table.config != 'start (SFT alone)')] if len(table) else table
    if t.empty: return "no configuration evaluated on held-out families yet.", []
    if 'vs SFT alone' not in t or (t['vs SFT alone'] == '—').all():
        return "the start model (SFT alone) is not evaluated on held-out families yet: no comparison.", []
    better = list(t[t['vs SFT alone'] == 'better'].config)
    worse = list(t[t['vs SFT alone'] == 'worse'].config)
    if better: s = f"{', '.join(better)} beat{'s' if len(better) == 1 else ''} SFT alone (every seed's paired 95% CI above 0)."
    else: s = "no configuration beats SFT alone (no configuration has every seed's paired 95% CI of Δ mean score above 0)."
    idle = list(t[(t['vs SFT alone'] == 'better') & (t.get('task progress', 'yes') == 'no')].config)
    if idle: s += (f" But the gain of {', '.join(idle)} is not task progress: on some seed less than half of it comes from "
                   "completion; the rest is robustness credit, which an episode that stops without a tool call gets in "
                   "full (0.2 of the score).")
    if worse: s += f" Worse than SFT alone on every seed: {', '.join(worse)}."
    return s, better


def report(out:Path):
    "Rebuild results.csv, dynamics.csv, table/runs/summary and the figures from the saved evaluations and training logs."
    import pandas as pd
    from coworkenv.cli import markdown_table
    files = sorted((out / "eval").glob("*.csv"))
    if not files: raise FileNotFoundError(f"no evaluations saved under {out / 'eval'} yet: run the experiment first")
    df = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    df.to_csv(out / "results.csv", index=False)
    dyn = dynamics(out)
    dyn.to_csv(out / "dynamics.csv", index=False)
    dyn_t = dynamics_summary(dyn)
    table, runs = config_table(df), runs_table(df)
    table.to_csv(out / "table.csv", index=False); (out / "table.md").write_text(markdown_table(table))
    runs.to_csv(out / "runs.csv", index=False); (out / "runs.md").write_text(markdown_table(runs))
    exp = json.loads((out / "experiment.json").read_text()) if (out / "experiment.json").is_file() else {}
    text, better = answer(table)
    rl = {p.parent.name: json.loads(p.read_text())['metrics'] for p in sorted((out / "runs").glob("*/rl_result.json"))}
    meta = dict(quick=exp.get('quick'), start=exp.get('start'), k=exp.get('k'), answer=text, beats_sft_on_test_families=better,
                runs_evaluated=[r[0] for r in _runs(df)], start_evaluated=START in set(df.agent), episodes=len(df), splits=list(df.split.unique()),
                tasks=int(df.spec_id.nunique()), training_steps_logged=len(dyn),
                rl={k: {f: v.get(f) for f in ('steps', 'wall_s', 'first_reward', 'last_reward', 'specs', 'resumed_from')} for k, v in rl.items()},
                table=table.to_dict(orient='records'), dynamics=dyn_t.to_dict(orient='records'))
    (out / "summary.json").write_text(json.dumps(meta, indent=1, default=str, ensure_ascii=False) + "\n")
    (out / "summary.md").write_text(summary_text(table, meta, dyn_t))
    figs = curves_figures(out) if len(dyn) else {}
    html = [f.to_html(full_html=False, include_plotlyjs='cdn' if i == 0 else False, div_id=f'fig_curves_{i}')  # fixed ids: a rerun writes the same bytes
            for i, f in enumerate(figs.values())]
    (out / "fig_curves.html").write_text("<html><body>\n" + "\n".join(html or ["<p>no training logged yet</p>"]) + "\n</body></html>\n")
    heldout_figure(df).write_html(out / "fig_heldout.html", include_plotlyjs='cdn', div_id='fig_heldout')  # a fixed id: a rerun writes the same bytes
    return table, runs, meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rl', default=str(ROOT / "experiments/configs/rl_default.yaml"), help="base RL config YAML (model, specs, output_dir, reward, credit and seed are set here)")
    ap.add_argument('--start', default=None, help=f"the model every run starts from (default: {SFT_START.relative_to(ROOT)}, the SFT PocketWorker)")
    ap.add_argument('--specs', default=str(SFT_SPECS), help=f"a saved split to reuse: a folder with DONE, train/, test_families/, test_seeds/ (default: {SFT_SPECS.relative_to(ROOT)}); "
                    "when it is missing the split config is split into OUT/specs")
    ap.add_argument('--split', default=str(ROOT / "experiments/configs/split_default.yaml"), help="split config YAML (used only when --specs has no saved split)")
    ap.add_argument('--rewards', nargs='+', default=['score', 'pass'], choices=['score', 'pass', 'strict', 'completion', 'progress'], help="reward processing (default: score pass)")
    ap.add_argument('--credits', nargs='+', default=['trajectory', 'turn'], choices=['trajectory', 'turn'], help="credit assignment (default: trajectory turn)")
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1], help="training seeds per configuration (default: 0 1)")
    ap.add_argument('--max-steps', type=int, default=None, help="override the config's max_steps (GRPO steps per run)")
    ap.add_argument('-k', type=int, default=3, help="trials per held-out task and model (default: 3)")
    ap.add_argument('--max-new-tokens', type=int, default=256, help="evaluation: new tokens per model turn (default: 256)")
    ap.add_argument('--out', default=str(OUT_DEFAULT), help=f"results folder (default: {OUT_DEFAULT.relative_to(ROOT)})")
    ap.add_argument('--quick', action='store_true', help="the tiny random model as start, a small split, 2 GRPO steps per run, k as given (CI: the same code path in minutes)")
    ap.add_argument('--report', action='store_true', help="only rebuild the tables and figures from the saved evaluations")
    ap.add_argument('--keep-checkpoints', action='store_true', help="keep each run's TRL checkpoints after it is evaluated "
                    "(default: removed then, ~1.6 GB each for SmolLM2-135M; the final model is always kept)")
    ap.add_argument('--start-eval', default=None, metavar='CSV', help="a saved evaluation of the start model (e.g. "
                    "experiments/results/sft_gains/eval/pocketworker_ep8_s1.csv with --start on that model) used instead of "
                    "evaluating it again; it must hold trials 0..k-1 of every held-out task")
    ap.add_argument('--set', nargs='+', default=[], metavar='KEY=VALUE', help="override RL config fields for every run, "
                    "e.g. --set learning_rate=2e-5 temperature=1.0 max_steps=12")
    ap.add_argument('--train-specs', type=int, default=None, metavar='N', help="train on N training specs spread over the "
                    "families, and evaluate every model on them too (split `train`): did the runs learn what they trained on?")
    ap.add_argument('--eval-turn-slack', type=int, default=None, metavar='N', help="evaluate under a turn budget of the "
                    "reference plan's length + N turns (default: the spec's own limit)")
    ap.add_argument('--eval-splits', nargs='+', default=['test_families', 'test_seeds'], choices=['test_families', 'test_seeds'],
                    help="held-out splits to evaluate (default: test_families test_seeds)")
    ap.add_argument('--stop-after', choices=['specs', 'start', 'train'], default=None,
                    help="stop after this stage: specs; start (its evaluation); train (every run trained, none evaluated)")
    a = ap.parse_args(argv)
    out = Path(a.out).expanduser().resolve()
    if a.report and not any((out / "eval").glob("*.csv")):
        ap.error(f"--report: no evaluations saved under {out / 'eval'} yet: run the experiment first")
    if not a.report:
        from coworkenv.evaluate import load_split_config
        warnings.filterwarnings('ignore', message='.*is_gradient_checkpointing.*')  # transformers' deprecation, once per step
        runs = [(r, c, s) for s in a.seeds for r in a.rewards for c in a.credits]  # seed-major: a partial sweep covers every configuration
        evaluated = lambda label: (out / "eval" / f"{label}.csv").is_file()
        trained = lambda n: (out / "runs" / n / "rl_result.json").is_file() and (out / "runs" / n / "final" / "config.json").is_file()
        needs_start = not evaluated(START) or any(not evaluated(run_name(*r)) and not trained(run_name(*r)) for r in runs)
        if a.start: start = Path(a.start).expanduser().resolve()
        elif a.quick:
            from coworkenv.models import build_tiny_model
            start = Path(build_tiny_model())
        else: start = SFT_START
        if needs_start and not (start / "config.json").is_file():  # before any work (the specs stage can take minutes)
            ap.error(f"the start model {start} is missing (no config.json): run experiments/sft_gains.py first "
                     "(its seed-0 PocketWorker is the default start), or pass --start MODEL_DIR")
        out.mkdir(parents=True, exist_ok=True)
        if a.quick:
            specs_dir, valid = stage_specs(out, load_split_config(QUICK['split']), saved=out / "specs")
            overrides, max_new = dict(QUICK['rl']), QUICK['max_new_tokens']
        else:
            log(f"1/3 specs: {'the saved split ' + a.specs if (Path(a.specs) / 'DONE').is_file() else 'split ' + Path(a.split).name}")
            specs_dir, valid = stage_specs(out, load_split_config(a.split), saved=Path(a.specs).expanduser().resolve())
            overrides, max_new = {}, a.max_new_tokens
        try: overrides.update(parse_sets(a.set))
        except ValueError as e: ap.error(str(e))
        if a.max_steps is not None: overrides['max_steps'] = a.max_steps
        test = [s for n in a.eval_splits for s in valid[n]]
        train_dir = specs_dir / "train"
        if a.train_specs is not None:
            if a.train_specs < 1: ap.error(f"--train-specs must be at least 1, got {a.train_specs}")
            try: train_dir = stage_train_specs(out, valid['train'], a.train_specs)
            except ValueError as e: ap.error(str(e))
            from coworkenv.core import load_spec
            test = [load_spec(p) for p in sorted(train_dir.glob("*.json"))] + test
        if a.eval_turn_slack is not None:
            from coworkenv.cli import turn_budget
            test = [turn_budget(s, a.eval_turn_slack) for s in test]
        log(f"  {len(valid['train'])} training specs{f' ({a.train_specs} trained on)' if a.train_specs else ''}, "
            f"{len(test)} evaluated tasks ({specs_dir})")
        if a.stop_after == 'specs': return 0
        exp = dict(quick=a.quick, start=str(start), rl=a.rl, overrides=overrides, rewards=a.rewards, credits=a.credits,
                   seeds=a.seeds, k=a.k, max_new_tokens=max_new, specs=str(specs_dir), start_eval=a.start_eval,
                   eval_turn_slack=a.eval_turn_slack, eval_splits=a.eval_splits, train_specs=a.train_specs)
        if (changed := check_protocol(out, exp)):
            ap.error(f"{out} holds an experiment evaluated otherwise ({'; '.join(changed)}): its evaluations would not "
                     "be comparable; use another --out")
        before = json.loads((out / "experiment.json").read_text()) if (out / "experiment.json").is_file() else {}
        exp['invocations'] = before.get('invocations', []) + [dict(  # the top-level keys are the last invocation's
            at=time.strftime('%Y-%m-%d %H:%M:%S'), argv=list(sys.argv[1:] if argv is None else argv))]
        (out / "experiment.json").write_text(json.dumps(exp, indent=1) + "\n")
        if a.start_eval and not evaluated(START):
            try: n = reuse_start_eval(out, Path(a.start_eval).expanduser(), test, a.k)
            except ValueError as e: ap.error(str(e))
            log(f"2/3 the start model's evaluation: {n} episodes taken from {a.start_eval}")
        else: log(f"2/3 {'the start model is evaluated' if evaluated(START) else 'evaluate the start model'} on {len(test)} tasks, k={a.k}")
        sft_gains.stage_eval(out, START, start, test, a.k, max_new, a.quick)
        if a.stop_after == 'start': return 0
        for i, (reward, credit, seed) in enumerate(runs, 1):
            name = run_name(reward, credit, seed)
            if evaluated(name): continue  # trained and evaluated before (its model need not be kept)
            log(f"3/3 run {i}/{len(runs)} {name}: GRPO" + ("" if a.stop_after == 'train' else ", evaluate"))
            model = stage_train(out, a.rl, start, train_dir, reward, credit, seed, overrides, a.quick)
            if a.stop_after == 'train': continue
            if weights_equal(model, start):
                log(f"  {name}: its final weights equal the start model's (no update): the start's "
                    f"{copy_start_eval(out, name)} episodes are its evaluation")
            else: sft_gains.stage_eval(out, name, model, test, a.k, max_new, a.quick)
            if not a.keep_checkpoints: drop_checkpoints(out / "runs" / name)
        if a.stop_after == 'train': return 0
    table, runs_t, meta = report(out)
    import pandas as pd
    with pd.option_context('display.width', 250, 'display.max_columns', 20, 'display.max_colwidth', 60):
        print(table.to_string(index=False))
        if meta['dynamics']: print(pd.DataFrame(meta['dynamics']).to_string(index=False))
    print(f"held-out families: {meta['answer']}")
    print(f"wrote {out}/table.{{csv,md}}, runs.{{csv,md}}, summary.{{md,json}}, results.csv, dynamics.csv, fig_curves.html, fig_heldout.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
