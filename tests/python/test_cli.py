"""python -m pylayout demo / info / bench run and say what they should."""
import os
import subprocess
import sys

import pytest


def run(*args, env=None):
    proc = subprocess.run([sys.executable, "-m", "pylayout", *args], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_info_reports_build_and_peers():
    out = run("info")
    for key in ("version", "dlpack_version", "openmp", "simd", "num_threads", "numpy", "torch"):
        assert key in out


def test_demo_runs_with_torch_and_numpy():
    pytest.importorskip("torch", reason="the full demo needs torch")
    pytest.importorskip("numpy", reason="the full demo needs NumPy")
    out = run("demo")
    assert "skipped" not in out
    for claim in ("numpy -> pylayout -> numpy shares memory: True", "same data_ptr=True", "kept=True",
                  "kernel reads after pylayout.require(a): [0.0, 4.0, 8.0, 1.0]", "zero-copy=True",
                  "bit-equal=True", "same object: True", "channels_last'): matches = True",
                  "gradient correct=True", "LayoutError: argument 'out'"):
        assert claim in out, claim
    assert "equal=False" not in out
    assert "BufferError: the tensor has torch's conjugate bit set" in out


def test_demo_without_torch_runs_numpy_parts(tmp_path):
    pytest.importorskip("numpy", reason="the demo's fallback part needs NumPy")
    # Hide torch by shadowing it with a module that fails to import.
    (tmp_path / "torch.py").write_text("raise ImportError('hidden for this test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    out = run("demo", env=env)
    assert "skipped: story 2's torch part" in out


def test_bench_quick_runs():
    pytest.importorskip("torch", reason="the benchmark compares against torch")
    pytest.importorskip("numpy", reason="the benchmark compares against NumPy")
    out = run("bench", "--quick", "--only", "2-D transpose")
    assert "| 2-D transpose" in out and "memcpy" in out
