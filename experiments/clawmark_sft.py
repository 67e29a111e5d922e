"""ClawMark SFT-only extension: the base model vs the SFT PocketWorker on a ClawMark suite (resumable).

  .venv/bin/python experiments/clawmark_sft.py                     # our 6 example tasks (data/clawmark_examples), k=3
  .venv/bin/python experiments/clawmark_sft.py --suite ~/clawmark/tasks --out experiments/results/clawmark_sft_upstream
  .venv/bin/python experiments/clawmark_sft.py --quick --out /tmp/clawmark_sft_quick   # tiny random model, 2 tasks, k=1
  .venv/bin/python experiments/clawmark_sft.py --report            # only rebuild the tables and figure from what is saved
  .venv/bin/python experiments/clawmark_sft.py --replay-overflows  # re-run episodes an overflow cut short (saved before
                                                                   # every day was run after one), without the model

Agents (`--agent LABEL=hf:PATH`, repeatable; the first is the reference of the paired Δ): by default `base`, the prepared
SmolLM2-135M-Instruct, and `pocketworker`, sft_gains' seed-0 SFT model (experiments/results/sft_gains/sft_s0/final;
train it with `experiments/sft_gains.py --seeds 0 --stop-after sft`). Any agent `coworkenv eval` accepts works
(`openai:MODEL`, `oracle`, ...). The agents see ClawMark through our typed tools, text only (PDFs text-extracted);
inputs they cannot perceive and the checkers that depend on them come from `media_report`.

Every finished episode is appended to OUT/episodes.jsonl (a rerun skips them; a killed run loses at most the episodes in
flight) with its trajectory in OUT/trajectories/<agent>.jsonl. The report (OUT/results.csv, table.{csv,md},
stages.csv, summary.{md,json}, fig_scores.html) gives per agent: ClawMark's weighted score (avg@k per task, mean over
tasks, 95% bootstrap CI over tasks) over all checkers and over text-reachable checkers only, every checker of the task
counted (those of an aborted stage as failed), our pass and strict success, the mean score of each stage, tool calls
and errors per episode, and the paired Δ of each agent against the first.
"""
import argparse, json, re, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT_DEFAULT = ROOT / "experiments" / "results" / "clawmark_sft"
SUITE_DEFAULT = ROOT / "data" / "clawmark_examples"
PW_DEFAULT = ROOT / "experiments" / "results" / "sft_gains" / "sft_s0" / "final"
QUICK = dict(tasks=['finance_receipt_audit', 'research_reading_digest'], max_new_tokens=16, max_turns=2)
SCORES = {'score': 'score (upstream)', 'score_text': 'score, text-reachable checkers',
          'score_all': 'score, every checker', 'passed': 'pass', 'success': 'strict success'}


def log(msg): print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def weighted(results:list) -> float:
    "ClawMark's weighted pass fraction of checker results (`{'weight', 'passed'}`); 0 when there are none."
    w = sum(r['weight'] for r in results)
    return sum(r['weight'] for r in results if r['passed']) / w if w else 0.0


def episode_record(task, label:str, trial:int, traj, seconds:float) -> dict:
    """One episode's row: upstream's score; the score over the text-reachable checkers that ran; the score over every
    checker of the task (never-run ones failed); our pass/strict success; per-stage scores; every checker's result."""
    from coworkenv.clawmark import media_report
    cm = traj.info['clawmark']
    linked = {(c['stage'], c['id']) for c in media_report(task, ('text',))['checkers'] if c['media_linked']}
    ran = [dict(stage=s['id'], id=v['id'], weight=float(v['weight']), passed=bool(v['passed']),
                media_linked=(s['id'], v['id']) in linked) for s in cm['stages'] for v in s['verification']]
    g = traj.grade
    calls = [c for m in traj.messages if m.role == 'assistant' for c in (m.tool_calls or [])]
    tool_errors = sum(1 for m in traj.messages if m.role == 'tool' and '"error"' in str(m.content)[:200])
    return dict(agent=label, task_id=task.id, trial=trial, score=cm['score'], score_text=weighted([r for r in ran if not r['media_linked']]),
                score_all=cm['score_all_checkers'], passed=bool(g.passed), success=bool(g.success),
                stages={s['id']: s['verification_score'] for s in cm['stages']}, stages_run=cm['stages_run'],
                stages_total=cm['stages_total'], aborted=cm['aborted'], end_reason=traj.end_reason,
                errored=bool(traj.info.get('errored')), stage_error=traj.info.get('stage_error', ''), turns=traj.turns,
                tool_calls=len(calls), tool_errors=tool_errors, seconds=round(seconds, 1), checkers=ran)


def saved_episodes(path:Path) -> list[dict]:
    "The episodes a run saved (a torn last line from a killed run is dropped)."
    if not path.is_file(): return []
    out = []
    for line in path.read_text().splitlines():
        try: out.append(json.loads(line))
        except json.JSONDecodeError: pass
    return out


def run_agent(out:Path, label:str, factory, tasks:list, k:int, max_turns:int, progress:bool=True) -> int:
    "Run one agent on every task × trial not saved yet (batched through `run_pool`); returns the episodes run."
    from tqdm.auto import tqdm
    from coworkenv.agents import batch_width, run_episode, run_pool
    from coworkenv.clawmark import ClawMarkEnv
    eps = out / "episodes.jsonl"
    saved = saved_episodes(eps)
    if saved or eps.exists():  # rewritten with the valid rows only: a torn last line would swallow the next row appended
        eps.with_suffix('.tmp').write_text(''.join(json.dumps(r) + "\n" for r in saved)); eps.with_suffix('.tmp').replace(eps)
    done = {(r['agent'], r['task_id'], r['trial']) for r in saved}
    jobs = [(t, i) for t in tasks for i in range(k) if (label, t.id, i) not in done]
    if not jobs: return 0
    agent = factory(jobs[0][0])
    shared = batch_width(agent) > 1 and all(factory(t) is agent for t, _ in jobs[1:2])  # one model batching every episode
    traj_file = out / "trajectories" / (re.sub(r"[^\w.=-]", "_", label) + ".jsonl")
    traj_file.parent.mkdir(parents=True, exist_ok=True)
    if traj_file.is_file() and traj_file.stat().st_size and not traj_file.read_bytes().endswith(b"\n"):
        with traj_file.open('a') as ft: ft.write("\n")  # a torn last trajectory stays on its own line
    t0 = {}
    def env(j):
        t0[j] = time.perf_counter()
        return ClawMarkEnv(jobs[j][0], seed=jobs[j][1], agent_media=('text',), max_turns_per_stage=max_turns)
    with tqdm(total=len(jobs), desc=label, unit="episode", disable=not progress) as bar, \
         eps.open('a') as f, traj_file.open('a') as ft:
        def on_done(j, traj):
            t, i = jobs[j]
            f.write(json.dumps(episode_record(t, label, i, traj, time.perf_counter() - t0[j])) + "\n"); f.flush()
            ft.write(traj.model_dump_json() + "\n"); ft.flush()
            bar.update(1)
        if shared: run_pool((env(j) for j in range(len(jobs))), agent, width=batch_width(agent), on_done=on_done)
        else:
            for j, (t, _) in enumerate(jobs):
                e = env(j)
                try: on_done(j, run_episode(e, factory(t)))
                finally: e.close()
    return len(jobs)


def replayed_agent(traj):
    """An agent that plays a saved trajectory's assistant messages again, in order; past them, a trajectory that ended
    with a full context window raises `ContextOverflow` again (its model would: the prompt only grows)."""
    from coworkenv.agents import Agent, AgentError, ContextOverflow, as_messages
    turns, full = [m for m in traj.messages if m.role == 'assistant'], traj.end_reason == 'context_overflow'
    class Replayed(Agent):
        name, model = traj.agent, traj.model
        def act(self, messages, tools=None):
            n = sum(m.role == 'assistant' for m in as_messages(messages))
            if n < len(turns): return turns[n]
            if full: raise ContextOverflow(f"{traj.agent} (replayed): the context window was full after {len(turns)} turns")
            raise AgentError(f"replay of {traj.spec_id}: the environment asked for turn {n + 1} of {len(turns)} recorded")
    return Replayed()


def replay_overflows(out:Path, suite) -> int:
    """Re-run, without the model, the saved episodes that a context overflow cut short (saved before `ClawMarkEnv`
    went on after an agent failure): their recorded turns are replayed in a fresh environment with the same seed, the
    replay must reproduce every recorded message (else `RuntimeError`, nothing written), then the model fails each
    remaining day as it would have, and every checker runs. Rows and trajectories are replaced in place (atomically);
    returns how many were replayed."""
    from coworkenv.agents import run_episode
    from coworkenv.clawmark import ClawMarkEnv, load_clawmark_tasks
    from coworkenv.core import Trajectory
    exp = json.loads((out / "experiment.json").read_text())
    tasks = {t.id: t for t in load_clawmark_tasks(suite)}
    eps = saved_episodes(out / "episodes.jsonl")
    cut = {(e['agent'], e['task_id'], e['trial']) for e in eps if e['end_reason'] == 'context_overflow' and e['stages_run'] < e['stages_total']}
    if not cut: return 0
    rows, files = {(e['agent'], e['task_id'], e['trial']): e for e in eps}, {}
    for f in sorted((out / "trajectories").glob("*.jsonl")):
        trajs = [Trajectory.model_validate_json(l) for l in f.read_text().splitlines() if l.strip()]
        for j, old in enumerate(trajs):
            key = (old.agent, old.spec_id, old.seed)  # trial i runs with seed i
            if key not in cut: continue
            env = ClawMarkEnv(tasks[old.spec_id], seed=old.seed, agent_media=('text',), max_turns_per_stage=exp['max_turns'])
            try: new = run_episode(env, replayed_agent(old))
            finally: env.close()
            same = [a.model_dump() == b.model_dump() for a, b in zip(old.messages, new.messages)]
            if len(new.messages) < len(old.messages) or not all(same):
                at = same.index(False) if not all(same) else len(new.messages)
                raise RuntimeError(f"replaying {key} does not reproduce the recorded episode (message {at} differs): nothing written")
            trajs[j] = new
            rows[key] = {**episode_record(tasks[old.spec_id], old.agent, old.seed, new, rows[key]['seconds']), 'replayed': True}
            cut.discard(key)
        files[f] = trajs
    if cut: raise RuntimeError(f"no saved trajectory for {sorted(cut)}: nothing written")
    for f, trajs in files.items():
        f.with_suffix('.tmp').write_text(''.join(t.model_dump_json() + "\n" for t in trajs)); f.with_suffix('.tmp').replace(f)
    e = out / "episodes.jsonl"
    e.with_suffix('.tmp').write_text(''.join(json.dumps(r) + "\n" for r in rows.values())); e.with_suffix('.tmp').replace(e)
    return sum(bool(r.get('replayed')) for r in rows.values())


def results_frame(out:Path):
    "Every saved episode as one row (stage scores as `stage:<id>` columns)."
    import pandas as pd
    eps = saved_episodes(out / "episodes.jsonl")
    if not eps: raise FileNotFoundError(f"no episodes saved in {out}/episodes.jsonl: run the experiment first")
    rows = [{**{k: v for k, v in e.items() if k not in ('stages', 'checkers')},
             **{f"stage:{s}": v for s, v in e['stages'].items()}} for e in eps]
    return pd.DataFrame(rows)


def _cell(values, n_boot:int, pct:bool=True) -> str:
    from coworkenv.evaluate import bootstrap_ci
    import numpy as np
    v = np.asarray(values, dtype=float)
    if not len(v): return '—'
    lo, hi = bootstrap_ci(v, n_boot)
    f = 100 if pct else 1
    return f"{f * v.mean():.1f} [{f * lo:.1f}, {f * hi:.1f}]"


def report(out:Path, n_boot:int=1000):
    "Tables, figure and summary from the saved episodes; returns `(table, stages, meta)`."
    import pandas as pd
    from coworkenv.cli import markdown_table
    from coworkenv.evaluate import bootstrap_ci
    df = results_frame(out)
    exp = json.loads((out / "experiment.json").read_text()) if (out / "experiment.json").is_file() else {}
    agents = [a for a in exp.get('agents', []) if a in set(df.agent)] + sorted(set(df.agent) - set(exp.get('agents', [])))
    ref = agents[0]
    per_task = df.groupby(['agent', 'task_id'])[list(SCORES)].mean()  # avg@k per task: the resampling unit is the task
    rows, meta_agents = [], {}
    for a in agents:
        t = per_task.loc[a]
        g = df[df.agent == a]
        row = dict(agent=a, tasks=len(t), k=int(g.trial.max()) + 1, episodes=len(g),
                   **{name: _cell(t[c], n_boot) for c, name in SCORES.items()},
                   **{'tool calls / episode': round(g.tool_calls.mean(), 1), 'tool errors / episode': round(g.tool_errors.mean(), 1),
                      'aborted': int(g.aborted.sum()), 'errored': int(g.errored.sum())})
        meta_agents[a] = {c: round(100 * float(t[c].mean()), 1) for c in SCORES}
        if a != ref:
            for c in ('score', 'score_text'):
                both = per_task[c].unstack(0)[[ref, a]].dropna()
                d = (both[a] - both[ref]).to_numpy()
                lo, hi = bootstrap_ci(d, n_boot)
                row[f"Δ {SCORES[c]}"] = f"{100 * d.mean():+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
                meta_agents[a][f"delta_{c}"] = dict(delta=round(100 * float(d.mean()), 1), lo=round(100 * lo, 1), hi=round(100 * hi, 1), tasks=len(d))
        rows.append(row)
    table = pd.DataFrame(rows).fillna('—')
    stage_cols = sorted([c for c in df if c.startswith('stage:')], key=lambda s: (s == 'stage:final', len(s), s))
    st = df.groupby(['agent', 'task_id'])[stage_cols].mean()
    stages = pd.DataFrame([dict(agent=a, **{c[6:]: _cell(st.loc[a][c].dropna(), n_boot) for c in stage_cols}) for a in agents])
    per_task_tbl = (100 * per_task[['score', 'score_text']]).round(1).unstack(0)
    per_task_tbl.columns = [f"{a} · {c}" for c, a in per_task_tbl.columns]
    df.to_csv(out / "results.csv", index=False)
    table.to_csv(out / "table.csv", index=False); (out / "table.md").write_text(markdown_table(table)); stages.to_csv(out / "stages.csv", index=False)
    per_task_tbl.to_csv(out / "per_task.csv")
    media = media_table(exp.get('suite'), df.task_id.unique())
    meta = dict(suite=exp.get('suite', ''), agents=agents, reference=ref, tasks=int(df.task_id.nunique()), episodes=len(df),
                k=exp.get('k'), max_new_tokens=exp.get('max_new_tokens'), max_turns_per_stage=exp.get('max_turns'),
                quick=bool(exp.get('quick')), scores=meta_agents, media_linked_weight_share=media)
    (out / "summary.json").write_text(json.dumps(meta, indent=1) + "\n")
    md = [f"# ClawMark SFT-only extension: {', '.join(agents)}", "",
          f"Suite: `{meta['suite']}` ({meta['tasks']} tasks), k={meta['k']}, {meta['episodes']} episodes; text-only agents "
          f"(max {meta['max_new_tokens']} new tokens per turn, {meta['max_turns_per_stage']} turns per stage). Cells: ×100, "
          "mean over tasks of avg@k [95% bootstrap CI over tasks]; Δ: paired against "
          f"`{ref}` on the same tasks.", "", markdown_table(table), "## Per stage", "", markdown_table(stages),
          "## Per task (×100: upstream score and text-reachable score)", "", markdown_table(per_task_tbl.reset_index()), ""]
    (out / "summary.md").write_text("\n".join(md))
    scores_figure(df, agents, n_boot).write_html(out / "fig_scores.html", include_plotlyjs="cdn", div_id="fig_scores")  # a fixed id: a rerun writes the same bytes
    return table, stages, meta


def suite_path(suite) -> Path:
    "A suite as experiment.json records it: one inside the project is kept relative to the project root."
    p = Path(suite)
    return p if p.is_absolute() else ROOT / p


def media_table(suite, task_ids) -> dict:
    "Per task: the share of checker weight a text-only agent may not reach (media-linked), from `media_report`."
    if not suite or not (path := suite_path(suite)).exists(): return {}
    from coworkenv.clawmark import load_clawmark_tasks, media_report
    tasks = [t for t in load_clawmark_tasks(path) if t.id in set(task_ids)]
    return {t.id: media_report(t, ('text',))['summary']['media_linked_weight_share'] for t in tasks}


def scores_figure(df, agents:list, n_boot:int=1000):
    "Mean score ×100 per agent: upstream score, text-reachable checkers, and each stage (95% CIs over tasks)."
    import plotly.graph_objects as go
    from coworkenv.evaluate import bootstrap_ci
    stage_cols = sorted([c for c in df if c.startswith('stage:')], key=lambda s: (s == 'stage:final', len(s), s))
    cols = [('score', 'score'), ('score_text', 'text-reachable')] + [(c, c[6:]) for c in stage_cols]
    import pandas as pd
    df = df.assign(**{c: pd.to_numeric(df[c], errors='coerce') for c, _ in cols})  # a stage that never ran: blank ('' when read with keep_default_na=False)
    fig = go.Figure()
    for a in agents:
        t = df[df.agent == a].groupby('task_id')[[c for c, _ in cols]].mean()
        ys, lo, hi = [], [], []
        for c, _ in cols:
            v = t[c].dropna().to_numpy()
            m = float(v.mean()) if len(v) else float('nan')
            l, h = bootstrap_ci(v, n_boot)
            ys.append(100 * m); lo.append(100 * (m - l)); hi.append(100 * (h - m))
        fig.add_trace(go.Bar(name=a, x=[n for _, n in cols], y=ys, error_y=dict(type='data', symmetric=False, array=hi, arrayminus=lo)))
    fig.update_layout(barmode='group', title='ClawMark: mean score ×100 per agent (95% bootstrap CI over tasks)',
                      yaxis_title='score ×100', yaxis_range=[0, 105], height=420, margin=dict(t=50, b=40))
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--suite', default=str(SUITE_DEFAULT), help="a ClawMark task folder or a folder of them (default: our examples)")
    ap.add_argument('--agent', action='append', default=None,
                    help="LABEL=hf:PATH (or any `coworkenv eval` agent), repeatable; the first is the Δ reference "
                         "(default: base=<prepared SmolLM2>, pocketworker=<sft_gains seed-0 model>)")
    ap.add_argument('-k', type=int, default=3, help="runs per task and agent (default: 3, upstream's avg@3)")
    ap.add_argument('--max-new-tokens', type=int, default=256, help="new tokens per model turn (default: 256)")
    ap.add_argument('--max-turns', type=int, default=30, help="assistant messages per stage (default: 30, as `clawmark run`)")
    ap.add_argument('--out', default=str(OUT_DEFAULT), help=f"results folder (default: {OUT_DEFAULT.relative_to(ROOT)})")
    ap.add_argument('--quick', action='store_true', help="the tiny random model as both agents, 2 tasks, k=1 (CI: the same code path)")
    ap.add_argument('--report', action='store_true', help="only rebuild the tables and figure from the saved episodes")
    ap.add_argument('--replay-overflows', action='store_true',
                    help="re-run saved episodes a context overflow cut short (before every day was run) by replaying their "
                         "turns, without the model, then report")
    ap.add_argument('--quiet', action='store_true', help="no progress bars")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if a.replay_overflows:
        exp = json.loads((out / "experiment.json").read_text()) if (out / "experiment.json").is_file() else {}
        log(f"replayed {replay_overflows(out, suite_path(exp.get('suite') or a.suite))} episode(s) cut short by a context overflow")
    elif not a.report:
        from coworkenv.clawmark import load_clawmark_tasks
        from coworkenv.evaluate import agent_factory
        tasks = list(load_clawmark_tasks(a.suite))
        if a.quick:
            from coworkenv.models import build_tiny_model
            tiny = build_tiny_model()
            tasks = [t for t in tasks if t.id in QUICK['tasks']] or tasks[:2]
            specs = a.agent or [f"base=hf:{tiny}", f"pocketworker=hf:{tiny}"]
            max_new, max_turns = QUICK['max_new_tokens'], QUICK['max_turns']
        else:
            if a.agent: specs = a.agent
            else:
                if not (PW_DEFAULT / "config.json").is_file():
                    ap.error(f"no PocketWorker model at {PW_DEFAULT}: train it with `experiments/sft_gains.py --seeds 0 "
                             "--stop-after sft`, or name the agents with --agent LABEL=hf:PATH")
                from coworkenv.models import prepare_base_model
                specs = [f"base=hf:{prepare_base_model('smollm2')}", f"pocketworker=hf:{PW_DEFAULT}"]
            max_new, max_turns = a.max_new_tokens, a.max_turns
        if not tasks: ap.error(f"no ClawMark tasks under {a.suite}")
        agents = [agent_factory(s, max_new_tokens=max_new) for s in specs]
        labels = [l for l, _ in agents]
        if len(set(labels)) != len(labels): ap.error(f"agent labels must differ: {labels} (use LABEL=...)")
        out.mkdir(parents=True, exist_ok=True)
        exp = dict(suite=str(Path(a.suite).resolve().relative_to(ROOT)) if Path(a.suite).resolve().is_relative_to(ROOT) else str(a.suite),
                   agents=labels, k=1 if a.quick else a.k, max_new_tokens=max_new, max_turns=max_turns, quick=a.quick,
                   tasks=[t.id for t in tasks], agent_specs=[s.replace(str(Path.home()), '~') for s in specs])
        prev = json.loads((out / "experiment.json").read_text()) if (out / "experiment.json").is_file() else None
        fixed = ('max_new_tokens', 'max_turns', 'quick')  # k may grow: trial i is seeded i, so more trials extend a run
        if prev and {f: prev.get(f) for f in fixed} != {f: exp[f] for f in fixed}:
            ap.error(f"{out} holds a run with other settings ({ {f: prev.get(f) for f in fixed} }); "
                     "use another --out or the same settings")
        if prev:
            exp['agents'] = list(dict.fromkeys(prev.get('agents', []) + labels))
            exp['k'] = max(exp['k'], prev.get('k') or 0)
            exp['tasks'] = list(dict.fromkeys(prev.get('tasks', []) + exp['tasks']))
        (out / "experiment.json").write_text(json.dumps(exp, indent=1) + "\n")
        for label, factory in agents:
            t0 = time.time()
            n = run_agent(out, label, factory, tasks, 1 if a.quick else a.k, max_turns, progress=not a.quiet)
            log(f"{label}: {n} episode(s) run in {time.time() - t0:.0f} s" if n else f"{label}: every episode already saved")
    table, stages, meta = report(out)
    import pandas as pd
    with pd.option_context('display.width', 250, 'display.max_columns', 20, 'display.max_colwidth', 36):
        print(table.to_string(index=False)); print(stages.to_string(index=False))
    print(f"wrote {out}/results.csv, table.{{csv,md}}, stages.csv, per_task.csv, summary.{{md,json}}, fig_scores.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
