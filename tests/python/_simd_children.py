"""Runs a differential check script in a child process per SIMD path.

PYLAYOUT_SIMD is read once, when the kernel table is chosen, so each path
needs its own process.  The script gets `pl` (pylayout) and `oracle`
("numpy" or "torch", with torch imported for the latter) and prints
"simd=<path> " once done: expected_path says which path that must be.

A path this CPU lacks is skipped, saying so: its child would run the best
path the CPU has, which that path's own run already checks.  That a cap
above the CPU falls back to its best path is test_copy.py's
test_a_simd_path_the_cpu_lacks_runs_its_best_one."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

PATHS = ["scalar", "sse2", "avx2", "avx512"]
ORACLES = ["numpy", "torch"]


def run_child(checks: str, path: str, oracle: str, timeout: float) -> str:
    """stdout of `checks` run under PYLAYOUT_SIMD=path; fails the test if it
    exits non-zero or runs past `timeout` seconds, skips it if this CPU
    lacks `path` (skip_absent_path)."""
    skip_absent_path(path)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["PYLAYOUT_SIMD"] = path
    head = f"import pylayout as pl\noracle = {oracle!r}\n"
    if oracle == "torch":
        head += "import torch\n"
    try:
        proc = subprocess.run([sys.executable, "-c", head + textwrap.dedent(checks)], capture_output=True,
                              text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child hung (killed after {timeout} s)")
    assert proc.returncode == 0, (f"PYLAYOUT_SIMD={path} {oracle}: the child exited {proc.returncode}\n"
                                  f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc.stdout


def expected_path(path: str) -> str:
    """The path a child asked for `path` runs: that one, or the best this CPU has."""
    import pylayout as pl
    best = pl.info()["simd"]
    if best not in PATHS:
        return "scalar" if path == "scalar" else best
    return path if PATHS.index(path) <= PATHS.index(best) else best


def skip_absent_path(path: str) -> None:
    """Skips the calling test when this CPU lacks SIMD `path`: a child
    asked for it runs expected_path(path), whose own run covers it."""
    runs = expected_path(path)
    if runs != path:
        pytest.skip(f"this CPU has no {path} path; PYLAYOUT_SIMD={path} would run {runs}, which its own run checks")


def check_against(checks: str, path: str, oracle: str, timeout: float, request: pytest.FixtureRequest) -> str:
    """Runs `checks` in a child under PYLAYOUT_SIMD=path against `oracle`
    ("numpy" or "torch"; skipped, with the np and torch fixtures' reasons,
    where a library it needs is missing), asserts that the child ran the
    path expected_path gives, and returns its stdout."""
    request.getfixturevalue("np")
    if oracle == "torch":
        request.getfixturevalue("torch")
    out = run_child(checks, path, oracle, timeout)
    assert f"simd={expected_path(path)} " in out, out
    return out
