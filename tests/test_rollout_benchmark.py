"benchmarks/rollout.py on the tiny model: both modes run the same episodes, and k trials share their prompt's prefill."
import importlib.util, json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location('rollout_bench', ROOT / 'benchmarks' / 'rollout.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m


def test_rollout_benchmark_tiny(tmp_path, capsys):
    from coworkenv.models import build_tiny_model
    out = tmp_path / 'r.json'
    assert _bench().main(['--model', str(build_tiny_model()), '--specs', '2', '--trials', '2', '--batch', '4',
                          '--max-new-tokens', '4', '--max-turns', '1', '--threads', '1', '--json', str(out)]) == 0
    one, four = json.loads(out.read_text())['results']
    assert (one['batch'], four['batch'], one['episodes'], four['episodes']) == (1, 4, 4, 4)
    assert one['prompt_tokens'] == four['prompt_tokens'] > 0 and one['gen_tokens'] == four['gen_tokens'] > 0
    # the second trial of each spec starts from the first one's prefix: a stored cache at batch 1, a batch row at batch 4
    assert four['reused_tokens'] >= one['prompt_tokens'] // 2 - 2 and four['prefill_tokens'] < four['prompt_tokens']
    assert 'batch 4 vs batch 1' in capsys.readouterr().out
