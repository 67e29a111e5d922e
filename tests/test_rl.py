"RL (12_rl): every configuration trains 2 GRPO steps with the tiny model; updates are real; a killed run resumes; bad configs fail early."
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from coworkenv.agents import OracleAgent, hf_message
from coworkenv.core import Message
from coworkenv.models import build_tiny_model
from coworkenv.rl import (RLConfigError, _grpo_args, end_token_id, load_rl_config, load_rl_specs, train_rl)
from coworkenv.synthesis import synthesize

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(max_steps=2, num_generations=2, per_device_train_batch_size=2, max_new_tokens=16, max_completion_length=192,
            turn_slack=2, progress=False, save_steps=1000)


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_model()


@pytest.fixture(scope="module")
def spec_dirs(tmp_path_factory):
    "Two spec folders: mixed (one multi-turn, one single-turn) for the rollout adapter, single-turn for the environment adapter."
    specs = synthesize(n=16, seed=0, progress=False)
    multi = next(s for s in specs if s.multi_turn); single = [s for s in specs if not s.multi_turn][:2]
    out = {}
    for name, group in (('mixed', [multi, single[0]]), ('single', single)):
        d = tmp_path_factory.mktemp(name)
        for s in group: (d / f"{s.id}.json").write_text(s.model_dump_json())
        out[name] = d
    return out


CONFIGS = [  # reward processing x credit assignment, plus the other reward, scaling and loss options
    dict(reward='score', credit='trajectory'),
    dict(reward='pass', credit='trajectory'),
    dict(reward='score', credit='turn'),
    dict(reward='pass', credit='turn'),
    dict(reward='strict', credit='trajectory', scale_rewards='batch', loss_type='grpo'),
    dict(reward='completion', credit='turn', scale_rewards='none', safety_penalty=0.5, loss_type='dr_grpo', gamma=0.5),
    dict(reward='progress', credit='trajectory'),
]


@pytest.mark.parametrize("conf", CONFIGS, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_every_configuration_trains(tiny, spec_dirs, tmp_path, conf):
    "The real generator (HFAgent on the trainer's weights), the real environments, 2 GRPO steps, the log written."
    r = train_rl(dict(model=str(tiny), specs=str(spec_dirs['mixed']), output_dir=str(tmp_path / 'run'), **TINY, **conf))
    assert r.metrics['steps'] == 2 and (r.model_dir / 'model.safetensors').is_file()
    log = pd.read_csv(r.log_csv)
    assert list(log.step) == [1, 2]
    for col in ('reward', 'reward_std', 'frac_reward_zero_std', 'cowork/pass_rate', 'cowork/tool_calls', 'cowork/turns',
                'cowork/tool_failure_rate', 'entropy', 'completions/mean_length', 'wall_s'):
        assert col in log and log[col].notna().all(), col
    saved = yaml.safe_load((tmp_path / 'run' / 'rl_config.yaml').read_text())
    assert all(saved[k] == v for k, v in conf.items())
    # every training episode's record, with the step it trained: the log's per-step means are theirs
    eps = pd.read_json(tmp_path / 'run' / 'episodes.jsonl', lines=True)
    assert list(eps.step) == [1, 1, 2, 2] and list(eps.generation) == [0, 0, 1, 1]
    assert {'spec_id', 'reward', 'score', 'completion', 'safety_violated', 'tool_calls', 'events', 'weights'} <= set(eps.columns)
    by_step = eps.groupby('step')
    assert by_step.reward.mean().round(6).tolist() == log.reward.round(6).tolist()
    assert by_step.completion.mean().round(6).tolist() == log['cowork/completion'].round(6).tolist()
    assert by_step.events.apply(lambda e: sum(map(len, e)) / len(e)).round(6).tolist() == log['cowork/check_events'].round(6).tolist()


def test_lora_run_keeps_its_adapter(tiny, spec_dirs, tmp_path):
    "A LoRA policy is merged into final/ and its adapter kept; without final/, a rerun rebuilds it identically, untrained."
    conf = dict(model=str(tiny), specs=str(spec_dirs['single']), output_dir=str(tmp_path / 'lora'), lora=dict(r=4, alpha=8),
                **TINY | dict(max_steps=1))
    r = train_rl(conf)
    from safetensors import safe_open
    with safe_open(str(r.model_dir / 'model.safetensors'), 'pt') as f:
        assert not [k for k in f.keys() if 'lora' in k]
        merged = {k: f.get_tensor(k) for k in f.keys()}
    assert (r.output_dir / 'adapter' / 'adapter_model.safetensors').is_file()
    import shutil
    for p in [r.model_dir, *r.output_dir.glob('checkpoint-*')]: shutil.rmtree(p)
    r2 = train_rl(conf)
    assert r2.metrics == r.metrics
    with safe_open(str(r2.model_dir / 'model.safetensors'), 'pt') as f:
        assert set(f.keys()) == set(merged) and all(f.get_tensor(k).equal(v) for k, v in merged.items())


def test_environment_adapter_trains(tiny, spec_dirs, tmp_path):
    r = train_rl(dict(model=str(tiny), specs=str(spec_dirs['single']), output_dir=str(tmp_path / 'env'), adapter='environment',
                      **TINY | dict(max_completion_length=128)))
    log = pd.read_csv(r.log_csv)
    assert r.metrics['adapter'] == 'environment' and list(log.step) == [1, 2] and 'cowork/score' in log
    with pytest.raises(RLConfigError, match='cannot run multi-turn specs'):
        train_rl(dict(model=str(tiny), specs=str(spec_dirs['mixed']), output_dir=str(tmp_path / 'env2'), adapter='environment', **TINY))


def _message_ids(tok, msg):
    base = [{'role': 'system', 'content': 'x'}, {'role': 'user', 'content': 'x'}]
    p = tok.apply_chat_template(base, tokenize=True, add_generation_prompt=True, return_dict=False)
    ids = tok.apply_chat_template(base + [hf_message(msg)], tokenize=True, return_dict=False)[len(p):]
    return ids[:ids.index(end_token_id(tok))]


def _half_oracle(trainer):
    tok = trainer.processing_class
    return lambda rows, budgets, envs: [_message_ids(tok, OracleAgent(e.spec).act(e.messages, e.tools) if e.seed % 2 == 0
                                                     else Message(role='assistant', content='Done.')) for e in envs]


@pytest.mark.parametrize("credit", ['trajectory', 'turn'])
def test_updates_are_real(tiny, spec_dirs, tmp_path, credit):
    "With rewards that differ within groups (half the episodes play the oracle), the weights move and the log says why."
    import torch
    from transformers import AutoModelForCausalLM
    r = train_rl(dict(model=str(tiny), specs=str(spec_dirs['single']), output_dir=str(tmp_path / credit), credit=credit,
                      learning_rate=1e-3, **TINY | dict(max_new_tokens=2048, max_completion_length=6000)), generator=_half_oracle)
    log = pd.read_csv(r.log_csv)
    assert (log.reward_std > 0).all() and (log.grad_norm > 0).all() and (log['cowork/pass_rate'] == 0.5).all()
    before = AutoModelForCausalLM.from_pretrained(tiny).state_dict()
    after = AutoModelForCausalLM.from_pretrained(r.model_dir).state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_killed_run_resumes(tiny, spec_dirs, tmp_path):
    "SIGKILL after the second checkpoint; the same command continues from it: 4 steps in all, each logged once."
    cfg = tmp_path / 'rl.yaml'
    cfg.write_text(yaml.safe_dump(dict(model=str(tiny), specs=str(spec_dirs['mixed']), output_dir=str(tmp_path / 'run'),
                                       **TINY | dict(max_steps=4, save_steps=1, save_total_limit=None))))
    cmd = [str(ROOT / '.venv/bin/coworkenv') if (ROOT / '.venv/bin/coworkenv').exists() else 'coworkenv', 'rl', '--config', str(cfg)]
    env = dict(os.environ, TRL_EXPERIMENTAL_SILENCE='1')
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    t0 = time.time()
    while not (tmp_path / 'run' / 'checkpoint-2' / 'trainer_state.json').is_file():
        assert p.poll() is None, "the run ended before it could be killed"
        assert time.time() - t0 < 300, "no checkpoint-2 after 300 s"
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL); p.wait()
    assert not (tmp_path / 'run' / 'rl_result.json').exists()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads((tmp_path / 'run' / 'rl_result.json').read_text())['metrics']
    assert res['steps'] == 4 and res['resumed_from'] and 'checkpoint-' in res['resumed_from']
    log = pd.read_csv(tmp_path / 'run' / 'log.csv')
    assert sorted(log.step) == [1, 2, 3, 4]
    # the episode log holds each step's group once (a killed segment's unfinished steps are dropped), and the resumed
    # segment goes on counting generations, so it samples with new seeds instead of step 1's again
    eps = pd.read_json(tmp_path / 'run' / 'episodes.jsonl', lines=True)
    assert list(eps.step) == [1, 1, 2, 2, 3, 3, 4, 4] and list(eps.generation) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_bad_configs_fail_before_training(tiny, spec_dirs, tmp_path):
    cfg = tmp_path / 'bad.yaml'
    cfg.write_text(yaml.safe_dump(dict(model=str(tiny), specs=str(spec_dirs['mixed']), output_dir=str(tmp_path / 'o'), reward='vibes')))
    from coworkenv.cli import main
    assert main(['rl', '--config', str(cfg)]) == 2
    with pytest.raises(RLConfigError, match='could not be loaded'):
        train_rl(dict(model=str(tmp_path / 'no-model'), specs=str(spec_dirs['mixed']), output_dir=str(tmp_path / 'o2'), **TINY))
    with pytest.raises(RLConfigError, match='no specs to train on'):
        (tmp_path / 'empty').mkdir(); load_rl_specs(str(tmp_path / 'empty'))
    (tmp_path / 'broken').mkdir(); (tmp_path / 'broken' / 'x.json').write_text('{"id": ')
    with pytest.raises(RLConfigError, match='not a valid spec'):
        load_rl_specs(str(tmp_path / 'broken'))
    assert not (tmp_path / 'o').exists()  # nothing was written for the failed configs


@pytest.mark.parametrize("name", ['rl_vllm_colocate.yaml', 'rl_vllm_server.yaml'])
def test_gpu_configs_are_valid(name):
    "The shipped vLLM configs validate and become TRL GRPOConfigs with vLLM on (they run only on GPUs)."
    cfg = load_rl_config(ROOT / 'experiments' / 'configs' / name)
    a = _grpo_args(cfg, bf16=False)
    assert a.use_vllm and a.vllm_mode == cfg.vllm.mode
    assert (cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps) % cfg.num_generations == 0


@pytest.mark.parametrize("name", ['rl_default.yaml', 'rl_cpu_short.yaml', 'rl_cpu_probe.yaml'])
def test_cpu_configs_are_valid(name):
    "The shipped CPU configs validate and become TRL GRPOConfigs whose groups fit the batch; the probe's settings are the ones its results name."
    cfg = load_rl_config(ROOT / 'experiments' / 'configs' / name)
    a = _grpo_args(cfg, bf16=False)
    assert not a.use_vllm and (cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps) % cfg.num_generations == 0
    if name == 'rl_cpu_probe.yaml':
        assert (cfg.learning_rate, cfg.temperature, cfg.max_steps, cfg.turn_slack, cfg.max_completion_length) == (2e-5, 1.0, 8, 3, 1536)


def test_reward_ends_average_a_quarter_of_the_steps():
    from coworkenv.rl import reward_ends
    none = dict(first_reward=None, last_reward=None, reward_window=0)
    assert reward_ends(pd.DataFrame({"reward": [0.0, 0.2, 1, 1, 1, 1, 0.6, 0.8]})) == dict(first_reward=0.1, last_reward=0.7, reward_window=2)
    assert reward_ends(pd.DataFrame({"reward": [0.3]})) == dict(first_reward=0.3, last_reward=0.3, reward_window=1)
    assert reward_ends(pd.DataFrame()) == none and reward_ends(pd.DataFrame({"reward": [float("nan")]})) == none
