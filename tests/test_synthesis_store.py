"""The synthesis output folder survives real crashes: a process killed with SIGKILL at several points (mid-generation,
between a spec's temporary file and its rename, half-way through a manifest line with invalid UTF-8) leaves a folder
that the next run resumes cleanly (no `.tmp` leftovers, no duplicate manifest lines, every slot filled once); and two
runs on one folder cannot both write it (an exclusive lock)."""
import json, os, signal, subprocess, sys, time, warnings
from pathlib import Path

import pytest

from coworkenv.synthesis import (SynthesisLocked, clean_tmp, family_names, folder_lock, make_slots, read_manifest,
                                 synthesize)

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

N = 6

# The child runs a real synthesis and stops dead (sleeps until killed) at the point `mode` names, after writing a
# marker file so that the parent knows it is there.
CHILD = r"""
import os, sys, time, json
from pathlib import Path
import coworkenv.synthesis as S
out, mode, n, marker = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
fam = S.family_names()[0]
def park():
    marker.write_text(str(os.getpid())); time.sleep(600)
calls = {"gen": 0, "replace": 0, "append": 0}
class Gen(S.ProceduralGenerator):
    def generate(self, *a, **kw):
        calls["gen"] += 1
        if mode == "generate" and calls["gen"] == 3: park()
        return super().generate(*a, **kw)
if mode == "replace":   # killed after the spec's temporary file is written, before its rename
    real = os.replace
    def replace(src, dst):
        calls["replace"] += 1
        if calls["replace"] == 3: park()
        return real(src, dst)
    S.os.replace = replace
if mode == "append":    # killed half-way through a manifest line, whose bytes are not valid UTF-8
    def append(self, rec):
        calls["append"] += 1
        with open(self.path, "ab") as f:
            if calls["append"] == 3:
                f.write(json.dumps(rec).encode()[:25] + b"\xff\xfe\x80"); f.flush(); park()
            f.write((json.dumps(rec) + "\n").encode())
    S._Manifest.append = append
S.synthesize([fam], n=n, generator=Gen(), out_dir=out, progress=False)
marker.write_text("finished")
"""


def start_child(out, mode, tmp_path, n=N):
    marker = tmp_path / f"marker-{mode}"
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(out), mode, str(n), str(marker)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not marker.exists():
        if p.poll() is not None: pytest.fail(f"child exited early: {p.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline: p.kill(); pytest.fail("child never reached the kill point")
        time.sleep(0.05)
    return p


def kill(p):
    os.kill(p.pid, signal.SIGKILL); p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL


def tmp_leftovers(out):
    return [str(t) for d in (out, out / "specs", out / "errors") if d.is_dir() for t in d.glob(".*.tmp*")]


def assert_resumes(out):
    "The next run fills every slot exactly once, from a clean folder."
    fam = family_names()[0]
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        specs = synthesize([fam], n=N, out_dir=out, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a repaired folder resumes without a warning
        assert len(synthesize([fam], n=N, out_dir=out, progress=False)) == N
    want = [s.id for s in make_slots([fam], N)]
    assert [s.id for s in specs] == want
    assert tmp_leftovers(out) == []
    assert sorted(p.stem for p in (out / "specs").glob("*.json")) == sorted(want)
    good = []
    for line in (out / "manifest.jsonl").read_bytes().split(b"\n"):
        try: good.append(json.loads(line.decode()))
        except (UnicodeDecodeError, ValueError): pass
    ok = [r["id"] for r in good if r["status"] == "ok"]
    assert sorted(ok) == sorted(want), "every slot has exactly one ok line"
    return specs


@pytest.mark.parametrize("mode", ["generate", "replace", "append"])
def test_sigkill_then_resume(mode, tmp_path):
    out = tmp_path / "out"
    kill(start_child(out, mode, tmp_path))
    if mode == "replace": assert tmp_leftovers(out), "the kill point leaves a temporary file behind"
    if mode == "append":
        raw = (out / "manifest.jsonl").read_bytes()
        assert not raw.endswith(b"\n") and b"\xff" in raw
        with pytest.warns(UserWarning, match="unreadable line"): entries = read_manifest(out)
        assert len(entries) == 2  # the two good lines are kept
    assert_resumes(out)


def test_second_run_on_a_locked_folder_fails_clearly(tmp_path):
    out = tmp_path / "out"
    p = start_child(out, "generate", tmp_path)  # holds the lock, parked in its third generation
    try:
        with pytest.raises(SynthesisLocked, match=rf"pid {p.pid}"):
            synthesize([family_names()[0]], n=N, out_dir=out, progress=False)
    finally: kill(p)
    assert_resumes(out)  # the operating system released the dead process's lock


def test_lock_is_exclusive_in_process_and_released(tmp_path):
    with folder_lock(tmp_path):
        with pytest.raises(SynthesisLocked): synthesize([family_names()[0]], n=1, out_dir=tmp_path, progress=False)
    assert len(synthesize([family_names()[0]], n=1, out_dir=tmp_path, progress=False)) == 1


def test_clean_tmp_and_undecodable_manifest(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / ".a.json.tmp123").write_text("x")
    (tmp_path / ".manifest.tmp9").mkdir()
    assert clean_tmp(tmp_path) == 2 and tmp_leftovers(tmp_path) == []
    (tmp_path / "manifest.jsonl").write_bytes(b'{"id": "a", "status": "ok"}\n\xff\xfe{"id": "b"\n[1]\n{"id": "c", "status": "error"}')
    with pytest.warns(UserWarning, match=r"skipped 2 unreadable line\(s\) \(line 2, 3\)"):
        assert sorted(read_manifest(tmp_path)) == ["a", "c"]


def test_output_path_is_a_file(tmp_path):
    f = tmp_path / "f"; f.write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        synthesize([family_names()[0]], n=1, out_dir=f, progress=False)
