"benchmarks/rl_step.py --quick: every setup (TRL's own tool loop, our two adapters) trains timed GRPO steps and reports sane figures."
import json, os, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUPS = ('trl-tools', 'ours-environment', 'ours-rollout')
KEYS = ('s_per_step_median', 's_per_step_mean', 'cpu_s_per_step_mean', 'rollouts_per_s', 'gen_tokens_per_step',
        's_per_gen_token', 'rollout_s_per_step', 'gen_share', 'env_share', 'other_share', 'steps')


# four tiny-model GRPO trainings (a discarded warm-up, then the three setups): about 30 s on 2 CPU cores
def test_rl_step_quick(tmp_path):
    pytest.importorskip("trl")
    out = tmp_path / 'rl_step.json'
    env = dict(os.environ, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1', TOKENIZERS_PARALLELISM='false',
               TRL_EXPERIMENTAL_SILENCE='1')
    p = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'rl_step.py'), '--quick', '--json', str(out)],
                       capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(out.read_text())
    assert {'args', 'model_path', 'setups', 'comparison', 'arg_differences', 'prompt_tokens', 'spec_ids'} <= set(res)
    assert res['args']['quick'] and res['arg_differences'] == {}  # the same GRPO settings everywhere
    assert set(res['setups']) == set(SETUPS) and set(res['comparison']) == {'ours-environment', 'ours-rollout'}
    for name, r in res['setups'].items():
        assert set(KEYS) <= set(r), name
        assert r['timed_steps'] == res['args']['steps'] and len(r['steps']) == res['args']['steps'] + res['args']['warmup']
        assert all(s['wall_s'] > 0 and s['rollout_s'] > 0 and s['gen_s'] > 0 and s['rollouts'] > 0 for s in r['steps']), name
        assert 0 < r['s_per_step_median'] and 0 < r['s_per_step_mean'] and r['rollouts_per_s'] > 0
        assert r['rollouts_per_step'] == res['args']['batch']
        assert 0 < r['gen_tokens_per_step'] <= res['args']['batch'] * res['args']['max_completion_length']
        assert r['s_per_gen_token'] > 0 and r['gen_tokens_per_s'] > 0
        for k in ('gen_share', 'env_share', 'other_share', 'rollout_share_of_step'): assert 0 <= r[k] <= 1, (name, k, r[k])
        assert r['env_s_per_step'] > 0  # the environments were reset and graded, and timed
        assert abs(r['gen_share'] + r['env_share'] + r['other_share'] - 1) < 1e-6
    for name, c in res['comparison'].items():
        assert c['s_per_step_median'] > 0 and c['s_per_gen_token'] > 0, name
    # the printed table: a header, then one row per setup with the same median s/step as the JSON
    lines = p.stdout.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith('setup') and 's/step med' in l)
    rows = {l.split()[0]: l.split() for l in lines[head + 1:head + 1 + len(SETUPS)]}
    assert set(rows) == set(SETUPS), p.stdout
    for name, cells in rows.items():
        assert float(cells[1]) == pytest.approx(res['setups'][name]['s_per_step_median'], abs=0.01)
    assert 'per generated token' in p.stdout and 'different tasks' in p.stdout
