"""Shared fixtures for the pylayout Python tests.

torch and NumPy are the oracles.  Tests that need one take the `torch` or
`np` fixture, which skips (with a reason) when the library is missing, so a
missing oracle never shows up as a pass.

The layout generator `torch_layouts` builds seeded, reproducible strided
tensors: random shapes up to 6-D with size-0 and size-1 dims, permutations,
slices with steps (nonzero storage offsets), expands (stride 0), arbitrary
as_strided strides, channels_last / channels_last_3d tensors and the
ambiguous C == 1, H == W == 1 and N111 cases.
"""
from __future__ import annotations

import gc
import os
import random

import pytest

import _producers


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch", reason="torch is the oracle for this check and is not installed")


@pytest.fixture(scope="session")
def np():
    return pytest.importorskip("numpy", reason="NumPy is the oracle for this check and is not installed")


@pytest.fixture(autouse=True)
def _no_stray_deletes():
    """Every test: no deleter of a ctypes-produced tensor may run twice.

    A deleter held in a reference cycle runs only when the collector breaks the
    cycle, so collect before looking: a double delete must fail the test that
    caused it, not surface (or vanish) in a later one.  Only around tests that
    made or kept a Record: a collection costs ~0.2 s once torch.compile ran."""
    assert not _producers.STRAY_DELETES, (
        f"double deletes left over from an earlier test or fixture: {_producers.STRAY_DELETES}")
    made, live = _producers.made_count(), _producers.live_count()
    yield
    if live or _producers.live_count() or _producers.made_count() != made:
        gc.collect()
    stray = list(_producers.STRAY_DELETES)
    del _producers.STRAY_DELETES[:]
    assert not stray, f"DLPack deleters ran on already-deleted tensors (double delete): {stray}"


# Under AddressSanitizer (.ci/reliability.sh preloads it), freed memory sits
# in ASan's quarantine, so RSS grows by design; ASan checks memory itself there.
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
skip_rss_under_asan = pytest.mark.skipif(
    UNDER_ASAN, reason="RSS leak checks are meaningless under ASan's quarantine; the release-build run checks them")


# ------------------------------------------------------------- bit-exact comparison


def bits(x):
    """A torch tensor's bit patterns: a view of its memory as integers of the same
    width and shape (complex: with a trailing (re, im) dim).  torch refuses tensors
    with the conjugate or negative bit set, whose memory is not their value."""
    import torch

    if x.is_complex():
        x = torch.view_as_real(x)
    return x.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()])


def same_bits(a, b) -> bool:
    """Torch tensors with equal shapes, equal dtypes and identical bits element by
    element: unlike torch.equal, NaN payloads and -0.0 count."""
    import torch

    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


# ------------------------------------------------------------- memory


def rss_bytes() -> int:
    """Resident set size of this process, from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def rss_growth(fn, n: int, warmup: int) -> int:
    """Bytes RSS grew by over n calls of fn, after warmup calls and a collection."""
    for _ in range(warmup):
        fn()
    gc.collect()
    before = rss_bytes()
    for _ in range(n):
        fn()
    gc.collect()
    return rss_bytes() - before


# ------------------------------------------------------------- layouts

_SIZES = [1, 1, 2, 2, 3, 3, 4, 5]


def _rand_shape(rng: random.Random, ndim: int, p_zero: float = 0.04):
    return [0 if rng.random() < p_zero else rng.choice(_SIZES) for _ in range(ndim)]


def _storage(torch, n, dtype):
    return torch.empty(max(n, 1), dtype=dtype)


def _random_slices(rng, x):
    idx = []
    for s in x.shape:
        if s == 0 or rng.random() < 0.5:
            idx.append(slice(None))
            continue
        start = rng.randrange(0, s)
        step = rng.choice([1, 1, 2, 3])
        stop = rng.randrange(start, s + 1)
        idx.append(slice(start, stop, step))
    return x[tuple(idx)]


def _random_expand(rng, x):
    shape = list(x.shape)
    changed = False
    for d, s in enumerate(shape):
        if s == 1 and rng.random() < 0.5:
            shape[d] = rng.choice([2, 3, 4])
            changed = True
    return x.expand(*shape) if changed else x


def _layout_random(torch, rng, dtype):
    ndim = rng.randint(0, 6)
    shape = _rand_shape(rng, ndim)
    # a larger parent so that slicing gives nonzero storage offsets
    parent = [s + rng.choice([0, 0, 1, 2]) for s in shape]
    x = torch.empty(parent, dtype=dtype)
    x = x[tuple(slice(p - s, p) for p, s in zip(parent, shape))] if ndim else x
    ops = []
    if ndim > 1 and rng.random() < 0.7:
        perm = list(range(ndim))
        rng.shuffle(perm)
        x = x.permute(*perm)
        ops.append(f"permute{tuple(perm)}")
    if ndim and rng.random() < 0.5:
        x = _random_slices(rng, x)
        ops.append("slice")
    if ndim and rng.random() < 0.3:
        x = _random_expand(rng, x)
        ops.append("expand")
    if ndim < 6 and rng.random() < 0.15:
        d = rng.randint(0, ndim)
        x = x.unsqueeze(d)
        if rng.random() < 0.5:
            shape = list(x.shape)
            shape[d] = rng.choice([2, 3])
            x = x.expand(*shape)
        ops.append("unsqueeze")
    return "random:" + "+".join(ops), x


def _layout_as_strided(torch, rng, dtype):
    ndim = rng.randint(1, 6)
    shape = _rand_shape(rng, ndim, p_zero=0.04)
    strides = [rng.choice([0, 1, 1, 2, 3, 4, 5, 6, 8, 12, 20, 24, 60]) for _ in range(ndim)]
    offset = rng.choice([0, 0, 1, 3])
    extent = offset + sum((s - 1) * st for s, st in zip(shape, strides) if s > 0) + 1
    base = _storage(torch, extent, dtype)
    return "as_strided", base.as_strided(shape, strides, offset)


def inverse_permutation(order):
    """inv with inv[order[i]] == i: x.permute(order).permute(inv) is x."""
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return inv


def dense_in_order(torch, shape, order, dtype=None):
    """A dense tensor of `shape` whose dims are laid out outermost-first in `order`."""
    return torch.empty([shape[d] for d in order], dtype=dtype).permute(inverse_permutation(order))


def _layout_channels_last(torch, rng, dtype):
    three = rng.random() < 0.4
    ndim = 5 if three else 4
    shape = _rand_shape(rng, ndim, p_zero=0.05)
    fmt = torch.channels_last_3d if three else torch.channels_last
    how = rng.choice(["empty", "contiguous", "order"])
    if how == "empty":
        x = torch.empty(shape, dtype=dtype, memory_format=fmt)
    elif how == "contiguous":
        x = torch.empty(shape, dtype=dtype).contiguous(memory_format=fmt)
    else:
        x = dense_in_order(torch, shape, [0, 2, 3, 4, 1] if three else [0, 2, 3, 1], dtype)
    ops = []
    if rng.random() < 0.4:
        x = _random_slices(rng, x)
        ops.append("slice")
    if rng.random() < 0.15:
        x = _random_expand(rng, x)
        ops.append("expand")
    return f"{'cl3d' if three else 'cl'}:{how}" + ("+" + "+".join(ops) if ops else ""), x


def _layout_ambiguous(torch, rng, dtype):
    three = rng.random() < 0.3
    ndim = 5 if three else 4
    n = rng.choice([1, 2, 3, 5])
    c = rng.choice([1, 2, 3])
    sp = [rng.choice([1, 2, 3]) for _ in range(ndim - 2)]
    kind = rng.choice(["C1", "HW1", "N111", "N111", "1C11"])
    if kind == "C1":
        shape = [n, 1] + sp
    elif kind == "HW1":
        shape = [n, c] + [1] * (ndim - 2)
    elif kind == "N111":
        shape = [n] + [1] * (ndim - 1)
    else:
        shape = [1, c] + [1] * (ndim - 2)
    how = rng.choice(["contiguous", "cl", "order", "strided"])
    if how == "contiguous":
        x = torch.empty(shape, dtype=dtype)
    elif how == "cl":
        fmt = torch.channels_last_3d if three else torch.channels_last
        x = torch.empty(shape, dtype=dtype, memory_format=fmt)
    elif how == "order":
        order = list(range(ndim))
        rng.shuffle(order)
        x = dense_in_order(torch, shape, order, dtype)
    else:
        # size-1 dims with arbitrary strides (what slicing a wider dim leaves behind)
        strides = [rng.choice([1, 2, 3, 4, 6, 12]) for _ in range(ndim)]
        extent = sum((s - 1) * st for s, st in zip(shape, strides)) + 1
        x = _storage(torch, extent, dtype).as_strided(shape, strides)
    return f"ambiguous:{kind}:{how}", x


_KINDS = [
    (_layout_random, 45),
    (_layout_as_strided, 20),
    (_layout_channels_last, 20),
    (_layout_ambiguous, 15),
]


def torch_layouts(torch, n: int, seed: int, dtype=None):
    """`n` (description, tensor) pairs, reproducible from `seed`."""
    dtype = torch.float32 if dtype is None else dtype
    rng = random.Random(seed)
    funcs = [f for f, _ in _KINDS]
    weights = [w for _, w in _KINDS]
    out = []
    for i in range(n):
        f = rng.choices(funcs, weights)[0]
        desc, x = f(torch, rng, dtype)
        out.append((f"#{i} {desc} shape={tuple(x.shape)} strides={x.stride()} off={x.storage_offset()}", x))
    return out
