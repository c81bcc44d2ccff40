"""pylayout in processes it does not own (issue 13).

A torch training script with DataLoader workers, a notebook next to other
jobs, a container with limits: each scenario runs in a fresh child process
with a timeout, so a hang or an interpreter that dies fails the test instead
of the run.  docs/reliability.md lists the guarantees these check.

* fork after torch started OpenMP (DataLoader workers, plain os.fork)
* the thread-count precedence: pl.set_num_threads > PYLAYOUT_NUM_THREADS >
  the OpenMP setting in force (torch.set_num_threads) > cores
* thread counts larger than the machine under RLIMIT_AS: clamped, warned
  about once, never fatal
* the reuse cache under RLIMIT_AS, and malformed environment values
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import pylayout as pl

TIMEOUT = 120  # seconds for one child; a hang is what most of these catch

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
needs_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux (RLIMIT_AS, /proc)")


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def run_child(code: str, env: dict | None = None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter that imports pylayout as this one
    does; fails (rather than hangs) when it takes longer than `timeout`."""
    full_env = dict(os.environ)
    for var in ("PYLAYOUT_NUM_THREADS", "PYLAYOUT_CACHE_LIMIT", "OMP_NUM_THREADS"):
        full_env.pop(var, None)
    full_env.update(env or {})
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child process hung (killed after {timeout} s); its output so far:\n"
                    f"{e.stdout or ''}\n{e.stderr or ''}")


def ok_child(code: str, env: dict | None = None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    proc = run_child(code, env, timeout)
    assert proc.returncode == 0, f"child exited with {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


# ------------------------------------------------------- fork after torch

# torch's OpenMP pool exists before pylayout copies anything: pylayout shares
# torch's libgomp.so.1 (one copy per SONAME), so a forked child that opens a
# parallel region waits forever for workers that were not copied.
TORCH_FIRST = """
    import numpy as np
    import torch
    a = torch.randn(512, 512)
    for _ in range(3):
        (a @ a).add_(1)                                   # MKL / at::parallel_for: OpenMP regions
        torch.randn(64, 64, 64).permute(2, 0, 1).contiguous()
    import pylayout as pl                                 # imported after torch's pool started
"""


@needs_fork
def test_fork_after_torch_os_fork():
    """A plain os.fork() child that converts 4 MiB after the parent used
    torch (and never pylayout) finishes, single-threaded."""
    pytest.importorskip("torch", reason="the scenario is torch's OpenMP pool")
    pytest.importorskip("numpy", reason="the child converts a NumPy array")
    proc = ok_child(TORCH_FIRST + """
    import os, sys, time
    pid = os.fork()
    if pid == 0:
        x = np.arange(1024 * 1024, dtype=np.float32).reshape(1024, 1024).T
        y = pl.contiguous(x)
        ok = np.array_equal(y, x) and y.flags.c_contiguous
        os.write(1, f"child threads={pl.get_num_threads()} ok={ok}\\n".encode())
        os._exit(0 if ok else 3)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            sys.exit(os.waitstatus_to_exitcode(status))
        time.sleep(0.05)
    os.kill(pid, 9)
    print("the forked child hung in its first pylayout copy")
    sys.exit(2)
    """)
    assert "child threads=1 ok=True" in proc.stdout


DATALOADER = """
    from torch.utils.data import DataLoader, Dataset

    class Transposed(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            x = np.full((1024, 1024), i, np.float32) + np.arange(1024, dtype=np.float32)
            y = pl.contiguous(x.T)                        # 4 MiB: the parallel path
            return torch.from_numpy(np.ascontiguousarray(y)), i

    loader = DataLoader(Transposed(), batch_size=None, num_workers=2, multiprocessing_context="fork",
                        timeout=30)
    seen = 0
    for y, i in loader:
        want = (np.full((1024, 1024), i, np.float32) + np.arange(1024, dtype=np.float32)).T
        assert np.array_equal(y.numpy(), want), i
        seen += 1
    print("batches", seen)
"""


@needs_fork
@pytest.mark.slow
def test_dataloader_fork_workers_after_torch():
    """DataLoader(num_workers=2, multiprocessing_context="fork") whose
    __getitem__ calls pl.contiguous on 4 MiB, in a process that did torch
    matmul/contiguous work first: the workers must not hang ("DataLoader
    timed out")."""
    pytest.importorskip("torch", reason="the scenario is a torch DataLoader")
    pytest.importorskip("numpy", reason="the dataset builds NumPy arrays")
    proc = ok_child(TORCH_FIRST + DATALOADER)
    assert "batches 6" in proc.stdout
