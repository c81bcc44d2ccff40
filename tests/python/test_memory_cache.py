"""The output reuse cache: released outputs of 32 MiB and more are kept
(lazily freed) for the next allocation of the same size, up to a limit.

The default limit is derived from the smallest of physical memory, the
cgroup's memory limit and the address space RLIMIT_AS leaves; those tests
run in child processes (the limits are per process), with a timeout.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import pylayout as pl
from conftest import UNDER_ASAN

MIB = 1 << 20
needs_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux (RLIMIT_AS, /proc)")


@pytest.fixture
def cache():
    before = pl.cache_info()["limit"]
    pl.set_cache_limit(0)  # whatever earlier tests left in the cache goes
    pl.set_cache_limit(512 * MIB)
    yield
    pl.set_cache_limit(0)
    assert pl.cache_info()["held"] == 0
    pl.set_cache_limit(before)


def run_child(code: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "PYLAYOUT_CACHE_LIMIT"}
    full.update(env or {})
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True,
                              text=True, timeout=120, **kw)
    except subprocess.TimeoutExpired:
        pytest.fail("the child process hung (killed after 120 s)")
    assert proc.returncode == 0, f"child exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_info_and_limit_roundtrip(cache):
    assert pl.cache_info() == {"limit": 512 * MIB, "held": 0}
    pl.set_cache_limit(3 * MIB)
    assert pl.cache_info()["limit"] == 3 * MIB
    with pytest.raises(ValueError, match=">= 0"):
        pl.set_cache_limit(-1)
    assert pl.cache_info()["limit"] == 3 * MIB
    for bad in ("1", 1.5, None):
        with pytest.raises(TypeError):
            pl.set_cache_limit(bad)


def test_released_output_is_reused_and_results_stay_right(cache, torch):
    x = torch.randn(8, 64, 160, 128)  # 40 MiB
    y = pl.contiguous(x, torch.channels_last)
    assert torch.equal(y, x) and y.is_contiguous(memory_format=torch.channels_last)
    assert pl.cache_info()["held"] == 0
    del y  # torch calls pylayout's deleter: the block goes to the cache
    assert pl.cache_info()["held"] == 40 * MIB
    x2 = torch.randn(8, 64, 160, 128)
    y2 = pl.contiguous(x2, torch.channels_last)  # takes the block
    assert pl.cache_info()["held"] == 0
    assert torch.equal(y2, x2)
    # a live output is never handed out again: a second one gets other memory
    y3 = pl.contiguous(x, torch.channels_last)
    assert y3.data_ptr() != y2.data_ptr()
    assert torch.equal(y2, x2) and torch.equal(y3, x)
    del y2, y3
    assert pl.cache_info()["held"] == 80 * MIB


def test_small_outputs_and_zero_limit_keep_nothing(cache, np):
    a = np.ones((1024, 1024), np.float32).T  # 4 MiB: malloc's, not cached
    b = pl.contiguous(a)
    assert np.array_equal(b, a)
    del b
    assert pl.cache_info()["held"] == 0
    pl.set_cache_limit(0)
    big = np.ones((4096, 2560), np.float32).T  # 40 MiB
    c = pl.contiguous(big)
    assert np.array_equal(c, big)
    del c
    assert pl.cache_info()["held"] == 0


def test_limit_from_environment():
    code = "import pylayout as pl; print(pl.cache_info()['limit'])"
    for value, want in (("12345", 12345), ("0", 0), ("512M", 512 * MIB), ("1GiB", 1024 * MIB), (" 3K ", 3072)):
        proc = run_child(code, env={"PYLAYOUT_CACHE_LIMIT": value})
        assert int(proc.stdout) == want, value
        assert "pylayout: warning" not in proc.stderr


@pytest.mark.parametrize("value", ["1e9", "junk", "-5", "1.5G", "12 bytes"])
def test_malformed_limit_warns_once_and_keeps_the_default(value):
    """PYLAYOUT_CACHE_LIMIT=1e9 and other malformed values are reported once
    (naming the variable and the accepted forms), then ignored."""
    code = """
    import pylayout as pl
    for _ in range(3):
        limit = pl.cache_info()["limit"]
    print(limit)
    """
    default = int(run_child(code).stdout)
    proc = run_child(code, env={"PYLAYOUT_CACHE_LIMIT": value})
    assert int(proc.stdout) == default
    assert proc.stderr.count(f"pylayout: warning: PYLAYOUT_CACHE_LIMIT='{value}' is not a byte count") == 1, \
        proc.stderr
    assert "e.g. 536870912 or 512M" in proc.stderr


# ------------------------------------------------ limits other allocators need

CACHE_UNDER_RLIMIT_AS = """
    import resource
    import numpy as np, pylayout as pl
    MIB = 1 << 20
    # the inputs and pylayout's threads first: both count in VmSize when the
    # limit is set.  Each thread's stack takes 8 MiB of address space, so the
    # team is kept to 4 threads (on 16 cores it took the room NumPy needed)
    # and started by a 24 MiB copy (under 32 MiB: malloc's, never cached).
    pl.set_num_threads(min(4, pl.get_num_threads()))
    xs = [np.ones((n, MIB // 4), np.float32) for n in (128, 112, 96)]
    warm = pl.contiguous(np.ones((2048, 3072), np.float32).T)
    del warm
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + 1024 * MIB, resource.RLIM_INFINITY))
    for x in xs:                                        # outputs of 128, 112 and 96 MiB, each dropped
        y = pl.contiguous(x.T)
        assert y[5, 7] == x[7, 5] and y.flags.c_contiguous
        del y
    info = pl.cache_info()
    print("held", info["held"] // MIB, "limit", info["limit"] // MIB)
    big = np.empty(768 * MIB, np.uint8)                 # address space only, never touched
    print("numpy allocation ok")
"""


@needs_linux
def test_cache_leaves_room_under_rlimit_as():
    """Every pylayout result dropped, under RLIMIT_AS = VmSize + 1 GiB: the
    cache keeps at most an eighth of the address space left, so NumPy can
    still allocate 768 MiB (with the old fixed limit it held 336 MiB and
    NumPy raised MemoryError).  The limit is set once pylayout's threads
    exist, and they are 4: on 16 cores their stacks took the room NumPy
    needed (the cache's share is what this checks)."""
    pytest.importorskip("numpy", reason="the child allocates with NumPy")
    proc = run_child(CACHE_UNDER_RLIMIT_AS)
    assert "numpy allocation ok" in proc.stdout, proc.stdout
    held, limit = (int(v) for v in proc.stdout.split()[1:4:2])
    assert held <= limit <= 1024 // 8, proc.stdout


FAILED_ALLOCATION_RELEASES = """
    import resource
    import numpy as np, pylayout as pl
    MIB = 1 << 20
    pl.set_cache_limit(1024 * MIB)                      # the user's own, generous limit
    x96 = np.ones((96, MIB // 4), np.float32)
    x24 = np.ones((24, MIB // 4), np.float32)           # below 32 MiB: malloc's
    x64 = np.ones((64, MIB // 4), np.float32)
    for _ in range(2):
        a, b = pl.contiguous(x96.T), pl.contiguous(x96.T)
        del a, b
    assert pl.cache_info()["held"] == 192 * MIB
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + 16 * MIB, resource.RLIM_INFINITY))
    y = pl.contiguous(x{size}.T)                        # fits only once the cache lets go
    assert y[3, 5] == x{size}[5, 3]
    print("converted; held", pl.cache_info()["held"] // MIB)
"""


@needs_linux
@pytest.mark.parametrize("size", [24, 64], ids=["malloc-path", "mmap-path"])
def test_failed_allocation_releases_the_cache(size):
    """An allocation that fails releases the cache and is tried again, for
    outputs from malloc (< 32 MiB) as for pylayout's own mappings."""
    pytest.importorskip("numpy", reason="the child converts NumPy arrays")
    proc = run_child(FAILED_ALLOCATION_RELEASES.format(size=size))
    assert "converted; held 0" in proc.stdout, proc.stdout


def _own_memory_cgroup():
    """(directory, limit file) of this process's memory cgroup, or None."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            return "/sys/fs/cgroup" + path, "memory.max"
        if "memory" in controllers.split(","):
            return "/sys/fs/cgroup/memory" + path, "memory.limit_in_bytes"
    return None


@needs_linux
@pytest.mark.skipif(UNDER_ASAN, reason="ASan builds start with the cache off: there is no default to derive")
def test_default_limit_follows_the_cgroup_memory_limit(tmp_path):
    """In a cgroup (a container) with a 2 GiB memory limit the default is an
    eighth of that, not of the machine's RAM.  Needs a writable memory
    cgroup (root, cgroup v1, or v2 with the memory controller delegated)."""
    found = _own_memory_cgroup()
    if found is None:
        pytest.skip("no memory cgroup found in /proc/self/cgroup")
    base, knob = found
    group = os.path.join(base, f"pylayout-test-{os.getpid()}")
    try:
        os.mkdir(group)
    except OSError as e:
        pytest.skip(f"cannot create a memory cgroup here ({e.strerror}): the test needs a writable cgroup tree")
    try:
        try:
            with open(os.path.join(group, knob), "w") as f:
                f.write(str(2 << 30))
        except OSError as e:
            pytest.skip(f"cannot set {knob} in a new cgroup ({e.strerror})")

        def enter():
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

        code = "import pylayout as pl; print(pl.cache_info()['limit'])"
        assert int(run_child(code, preexec_fn=enter).stdout) == (2 << 30) // 8
    finally:
        os.rmdir(group)
