"""Benchmark synthesis + validation on one core and print the figures.

  .venv/bin/python benchmarks/synthesis.py [--n 1000] [--max-rounds 3] [--mutations 100] [--families a,b] [--no-pin]

Generates N procedural specs spread round-robin over every registered workflow family (easy/medium/hard in
turn), validates each one fully (all six stages), repairs the failures (bounded rounds) and quarantines what
never passes, then prints:
  - validated specs per second on one core (generation + full validation + repair), by wall clock and by CPU time
    (CPU time is what the process itself used, so it does not depend on what else the machine is running);
  - the split between generation and validation, and the mean number of episodes per spec;
  - the pass rate without repair, the repaired and quarantined counts with their finding codes;
  - the near-duplicate rate of the valid specs (coworkenv.synthesis.near_duplicate_rate);
  - pass rates per family (and per difficulty);
  - request diversity: distinct request templates per family after masking names, e-mails, ids, numbers, dates and
    amounts (coworkenv.synthesis.request_diversity; target >= 12 per family);
  - optionally (--mutations K): the validator's mutation report on K of the valid specs.
"""
import argparse, collections, os, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pin_one_core():
    "Run on one core (the figure is per core); returns the core or None where affinity is not supported."
    try:
        core = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {core})
        return core
    except (AttributeError, OSError): return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=1000, help="number of specs (slots) to generate and validate")
    ap.add_argument('--max-rounds', type=int, default=3, help="repair rounds per slot")
    ap.add_argument('--families', default=None, help="comma-separated family names (default: all registered)")
    ap.add_argument('--seed', type=int, default=0, help="first seed of every family")
    ap.add_argument('--mutations', type=int, default=0, help="run the mutation report on this many valid specs")
    ap.add_argument('--quarantine', default=None, help="quarantine folder (default: a temporary folder)")
    ap.add_argument('--no-pin', action='store_true', help="do not pin the process to one core")
    a = ap.parse_args(argv)

    core = None if a.no_pin else pin_one_core()
    import pandas as pd
    from coworkenv.synthesis import DIVERSITY_TARGET, ProceduralGenerator, make_slots, near_duplicate_rate, request_diversity
    from coworkenv.validation import run_pipeline, mutation_report, Runs
    pd.set_option('display.width', 200); pd.set_option('display.max_colwidth', 80)

    fams = a.families.split(',') if a.families else None
    gen = ProceduralGenerator()
    slots = make_slots(fams, a.n, a.seed)
    n_fam = len({s.family for s in slots})
    print(f"{a.n} slots over {n_fam} families, {'pinned to core ' + str(core) if core is not None else 'not pinned'}")

    # warm-up (imports, tool schemas, first-call caches): one slot per family, not timed
    from coworkenv.validation import validate
    for s in make_slots(fams, n_fam, a.seed + 10_000): validate(gen.generate(s.family, s.seed, s.difficulty))

    # generation alone (for the split)
    c0 = time.process_time()
    generated = [gen.generate(s.family, s.seed, s.difficulty) for s in slots]
    gen_cpu = time.process_time() - c0

    # count episodes: wrap Runs.play
    episodes = [0]
    play = Runs.play
    def counting(self, *args, **kw):
        episodes[0] += 1
        return play(self, *args, **kw)
    Runs.play = counting

    qdir = a.quarantine or tempfile.mkdtemp(prefix='coworkenv-quarantine-')
    w0, c0 = time.perf_counter(), time.process_time()
    pr = run_pipeline(gen, fams, n=a.n, seed=a.seed, max_rounds=a.max_rounds, quarantine_dir=qdir, progress=False)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    Runs.play = play
    df = pr.df

    print("\n== throughput (generation + full validation + repair, one core) ==")
    print(f"specs/s: {a.n / wall:.1f} by wall clock ({wall:.1f} s), {a.n / cpu:.1f} by CPU time ({cpu:.1f} s)")
    print(f"per spec: generation {1000 * gen_cpu / a.n:.2f} ms CPU, validation (+repair) {1000 * (cpu - gen_cpu) / a.n:.2f} ms CPU; "
          f"{episodes[0] / a.n:.1f} episodes per spec (determinism replays included)")

    print("\n== outcome ==")
    first, final = df.passed_first.mean(), df.passed.mean()
    repaired = df[df.passed & ~df.passed_first]
    quarantined = df[~df.passed]
    print(f"valid without repair: {first:.2%} ({int(df.passed_first.sum())}/{a.n}); after repair: {final:.2%}")
    print(f"repaired: {len(repaired)}; quarantined: {len(quarantined)} (files in {qdir})")
    if len(df[~df.passed_first]):
        print("first-attempt failures by finding code:",
              dict(collections.Counter(c for cs in df[~df.passed_first].codes for c in cs.split())))
        print(df[~df.passed_first][['id', 'first_failed_stage', 'codes', 'rounds', 'passed', 'final_codes']].to_string(index=False))
    print(f"near-duplicate rate of the valid specs: {near_duplicate_rate(pr.specs):.3f}")

    print("\n== per family ==")
    fam = df.groupby('family').agg(slots=('id', 'size'), valid_first=('passed_first', 'mean'), valid_final=('passed', 'mean'),
                                   mean_ms=('seconds', lambda s: 1000 * s.mean())).round(3)
    print(fam.to_string())
    print("\n== per difficulty ==")
    print(df.groupby('difficulty').agg(slots=('id', 'size'), valid_first=('passed_first', 'mean'),
                                       mean_ms=('seconds', lambda s: 1000 * s.mean())).round(3).to_string())

    print(f"\n== request diversity of the generated specs (distinct templates per family after masking; target >= {DIVERSITY_TARGET}) ==")
    dv = request_diversity(generated)
    print(dv.to_string())
    print(f"families meeting the target: {int(dv.meets_target.sum())}/{len(dv)}; "
          f"below: {', '.join(dv.index[~dv.meets_target]) or 'none'}")

    if a.mutations:
        step = max(1, len(pr.specs) // a.mutations)
        sample = pr.specs[::step][:a.mutations]
        w0 = time.perf_counter()
        mr = mutation_report(sample, seed=a.seed)
        print(f"\n== mutation report on {len(sample)} valid specs ({mr.applied.iloc[-1]} corrupted specs, {time.perf_counter() - w0:.1f} s) ==")
        print(mr.drop(columns=['missed']).to_string(index=False))
        missed = mr[(mr.kind != 'ALL') & (mr.missed != '')]
        if len(missed): print("missed:", dict(zip(missed.kind, missed.missed)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
