"""The copy engine against torch and NumPy, bit for bit, on generated layouts.

Every element size (1, 2, 4, 8, 16 bytes), layouts up to 6-D with size-0 and
size-1 dims, stepped slices, stride-0 (expanded) sources, negative strides
(NumPy), byte offsets, and sizes large enough for the parallel paths; each at
1 and 2 threads.  Memory is filled with random bits, so NaNs with payloads are
common; -0.0 and NaN payloads are also planted explicitly.  Results must be
byte-identical to the peers' and laid out exactly as theirs.
"""
from __future__ import annotations

import inspect
import os
import random
import subprocess
import sys

import pytest

import pylayout as pl
from _simd_children import PATHS, expected_path, run_child
from conftest import inverse_permutation, same_bits, torch_layouts

torch = pytest.importorskip("torch", reason="torch is the oracle for layout conversions")
np = pytest.importorskip("numpy", reason="NumPy is the oracle for Fortran order and negative strides")

DTYPES = [torch.int8, torch.float16, torch.float32, torch.float64, torch.complex128]  # 1, 2, 4, 8, 16 bytes
THREADS = [1, 2]


@pytest.fixture(params=THREADS, ids=lambda n: f"{n}thr")
def threads(request):
    before = pl.get_num_threads()
    pl.set_num_threads(request.param)
    yield request.param
    pl.set_num_threads(before)


def randomize_storage(x, seed):
    """Fill x's whole storage with random bytes (NaN payloads included)."""
    storage = x.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),))
    g = torch.Generator().manual_seed(seed)
    raw.copy_(torch.randint(0, 256, raw.shape, dtype=torch.uint8, generator=g))


def large_layouts(rng, dtype, n):
    """Layouts of 0.3-2 MB, past the parallel threshold (128 KiB)."""
    out = []
    for i in range(n):
        ndim = rng.randint(2, 6)
        target = rng.randint(80_000, 500_000)
        side = max(2, round(target ** (1 / ndim)))
        shape = [max(1, side + rng.randint(-side // 3, side // 3)) for _ in range(ndim)]
        x = torch.empty(shape, dtype=dtype).permute(*rng.sample(range(ndim), ndim))
        if rng.random() < 0.3:  # a stepped slice on a random dim
            d = rng.randrange(ndim)
            x = x.narrow(d, 0, x.shape[d]).__getitem__((slice(None),) * d + (slice(None, None, 2),))
        if rng.random() < 0.2:  # a broadcast dim
            d = rng.randrange(ndim)
            x = x.narrow(d, 0, 1).expand(*[s if k != d else 3 for k, s in enumerate(x.shape)])
        out.append((f"large#{i} shape={tuple(x.shape)} strides={x.stride()}", x))
    return out


def cases(dtype, seed):
    rng = random.Random(seed)
    layouts = torch_layouts(torch, 360, seed=seed, dtype=dtype) + large_layouts(rng, dtype, 12)
    for i, (desc, x) in enumerate(layouts):
        randomize_storage(x, seed * 1000 + i)
        yield desc, x


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_contiguous_formats_match_torch(dtype, threads):
    checked = {"contiguous": 0, "channels_last": 0, "channels_last_3d": 0}
    for desc, x in cases(dtype, seed=101 + DTYPES.index(dtype)):
        for name, fmt in (("contiguous", torch.contiguous_format), ("channels_last", torch.channels_last),
                          ("channels_last_3d", torch.channels_last_3d)):
            if name != "contiguous" and x.dim() != (4 if name == "channels_last" else 5):
                with pytest.raises(ValueError):
                    pl.contiguous(x, fmt)
                continue
            ours, ref = pl.contiguous(x, fmt), x.contiguous(memory_format=fmt)
            assert isinstance(ours, torch.Tensor), desc
            assert same_bits(ours, ref), f"{desc} -> {name}: values differ"
            assert ours.is_contiguous(memory_format=fmt), f"{desc} -> {name}: torch disagrees on the layout"
            if ref is x:
                assert ours is x, f"{desc}: already {name}, yet copied"
            elif x.numel():
                assert ours.stride() == ref.stride(), f"{desc} -> {name}: {ours.stride()} != {ref.stride()}"
            checked[name] += 1
    assert checked["contiguous"] >= 370 and checked["channels_last"] >= 20 and checked["channels_last_3d"] >= 10, checked


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_to_order_and_fortran_match_torch(dtype, threads):
    rng = random.Random(7)
    for desc, x in cases(dtype, seed=202 + DTYPES.index(dtype)):
        order = rng.sample(range(x.dim()), x.dim())
        ours = pl.to_order(x, order)
        ref = x.permute(order).contiguous().permute(inverse_permutation(order))
        assert same_bits(ours, ref), f"{desc} order {order}: values differ"
        if x.numel() and ours is not x:
            assert ours.stride() == ref.stride(), f"{desc} order {order}: {ours.stride()} != {ref.stride()}"
        fortran = pl.contiguous(x, "fortran")
        assert same_bits(fortran, x), f"{desc} -> fortran: values differ"
        rev = list(range(x.dim() - 1, -1, -1))
        assert pl.is_contiguous(fortran, "fortran"), desc
        if x.numel() and x.dtype != torch.complex128:  # NumPy's F flag as a second oracle
            assert fortran.numpy().flags.f_contiguous, desc
        assert fortran is x or not x.numel() or fortran.stride() == x.permute(rev).contiguous().permute(rev).stride()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_copy_into_any_destination_matches_torch(dtype, threads):
    rng = random.Random(11)
    for desc, x in cases(dtype, seed=303 + DTYPES.index(dtype)):
        # a dense destination in a random dim order, sometimes sliced (gaps between rows)
        order = rng.sample(range(x.dim()), x.dim())
        shape = [x.shape[d] for d in order]
        step = 2 if (x.dim() and rng.random() < 0.3) else 1
        big = torch.empty(shape[:-1] + [shape[-1] * step] if x.dim() else [], dtype=dtype)
        dst = (big[..., ::step] if x.dim() else big).permute(inverse_permutation(order))
        randomize_storage(dst, 5)
        sentinel = big.reshape(-1).view(torch.uint8).clone() if big.numel() else None
        ref = dst.clone()
        ref.copy_(x)
        assert pl.copy_into(dst, x) is dst
        assert same_bits(dst, ref), f"{desc} into strides {dst.stride()}: values differ"
        if step == 2 and x.numel():  # the gaps were not written
            gaps = big.reshape(-1).view(torch.uint8).reshape(-1, big.element_size() * 2)[:, big.element_size():]
            assert torch.equal(gaps, sentinel.reshape(-1, big.element_size() * 2)[:, big.element_size():]), desc


def test_signed_zeros_and_nan_payloads_survive(threads):
    payloads = np.array([0x7FC00001, 0xFFC12345, 0x7F800001, 0x80000000, 0x00000000, 0x00000001], dtype=np.uint32)
    for dtype, raw in ((np.float32, payloads),
                       (np.float64, (payloads.astype(np.uint64) << np.uint64(32)) | np.uint64(0x1234)),
                       (np.float16, (payloads & 0xFFFF).astype(np.uint16) | np.uint16(0x7C01))):
        a = np.resize(raw, 6 * 64 * 64).view(dtype).reshape(6, 64, 64)
        for view in (a.transpose(2, 0, 1), a[:, ::-1, ::2], a.T):
            ours = pl.contiguous(view)
            assert ours.tobytes() == np.ascontiguousarray(view).tobytes()
            fort = pl.contiguous(view, "fortran")
            assert fort.tobytes(order="A") == np.asfortranarray(view).tobytes(order="A")


def numpy_layouts(rng, n):
    """NumPy views of random bytes: negative strides, steps, transposes, broadcasts."""
    dtypes = [np.uint8, np.int16, np.float32, np.float64, np.complex128]  # 1, 2, 4, 8, 16 bytes
    gen = np.random.default_rng(0)
    for i in range(n):
        dtype = np.dtype(dtypes[i % len(dtypes)])
        ndim = rng.randint(0, 5)
        shape = [rng.choice([0, 1, 2, 3, 5, 8, 13]) for _ in range(ndim)]
        room = [2 * s + 1 for s in shape]  # enough for steps of +-2
        a = np.frombuffer(gen.bytes(int(np.prod(room)) * dtype.itemsize), dtype).reshape(room)
        if ndim:
            a = a[tuple(slice(None, None, rng.choice([1, 2, -1, -2])) for _ in range(ndim))]
            perm = rng.sample(range(ndim), ndim)
            a = a.transpose(perm)[tuple(slice(0, shape[p]) for p in perm)]
            if a.size and rng.random() < 0.25:  # a broadcast (stride-0) dim
                d = rng.randrange(ndim)
                a = np.broadcast_to(a[tuple(slice(0, 1) if k == d else slice(None) for k in range(ndim))],
                                    a.shape[:d] + (4,) + a.shape[d + 1:])
        yield f"np#{i} {a.dtype} shape={a.shape} strides={a.strides}", a


def test_numpy_layouts_match_numpy(threads):
    rng = random.Random(17)
    count = 0
    for desc, a in numpy_layouts(rng, 1500):
        c = pl.contiguous(a)
        assert isinstance(c, np.ndarray), desc
        assert c.tobytes() == np.ascontiguousarray(a).tobytes(), desc
        assert c.flags.c_contiguous, desc
        f = pl.contiguous(a, "fortran")
        assert f.flags.f_contiguous and f.tobytes(order="A") == np.asfortranarray(a).tobytes(order="A"), desc
        if a.ndim and a.size and 0 not in a.strides:  # a writable destination with negative strides
            dst = np.zeros_like(a)[::-1]
            pl.copy_into(dst, a)
            assert dst.tobytes() == np.ascontiguousarray(a).tobytes(), desc
        count += 1
    assert count == 1500


def test_byte_offsets_are_honoured(threads):
    """The imaginary part of a complex array is a DLPack tensor with a nonzero
    byte_offset (NumPy and torch always export 0, so produce it here)."""
    from pylayout import _core

    rng = np.random.default_rng(3)
    for shape in [(7,), (64, 33), (16, 9, 5), (300, 400)]:
        z = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        for view in (z, z.T, z[..., ::2]):
            re_t, im_t = _core.unpack_complex(view, copy=False)
            assert im_t.byte_offset == 4 and re_t.byte_offset == 0
            out = pl.contiguous(im_t)
            assert np.asarray(out).tobytes() == np.ascontiguousarray(view.imag).tobytes()
            assert np.from_dlpack(im_t).tobytes() == view.imag.tobytes()


SENT = 0xA5


def into_guarded(src, want, dst_off, what):
    """copy_into a buffer of sentinel bytes, dst starting dst_off bytes past a
    cache line: the result must be want's bytes, and nothing outside it written."""
    raw = np.full(want.nbytes + 192, SENT, np.uint8)
    lo = (-raw.ctypes.data) % 64 + dst_off
    dst = raw[lo:lo + want.nbytes].view(want.dtype).reshape(want.shape)
    pl.copy_into(dst, src)
    assert dst.tobytes() == want.tobytes(), what
    assert (raw[:lo] == SENT).all() and (raw[lo + want.nbytes:] == SENT).all(), ("guards written",) + what


def check_permuted(a, perm, dst_offs, what):
    """a.transpose(perm) made contiguous by pylayout from a torch tensor, and
    copied into guarded buffers dst_offs bytes past a line: NumPy's bytes
    and torch's own .contiguous() ones.  Returns the number of copies."""
    import torch
    view = a.transpose(perm)
    want = np.ascontiguousarray(view)
    t = torch.from_numpy(a).permute(perm)
    assert pl.contiguous(t).numpy().tobytes() == want.tobytes() == t.contiguous().numpy().tobytes(), what
    for dst_off in dst_offs:
        into_guarded(view, want, dst_off, what + ("copy_into", dst_off))
    return len(dst_offs)


# into_guarded and check_permuted in the SIMD children too (_check_in_simd_child puts these before their code)
GUARDED_INTO = (f"import numpy as np\nimport pylayout as pl\nSENT = {SENT}\n" + inspect.getsource(into_guarded) +
                inspect.getsource(check_permuted))


# Short rows (PL_ROWS units, plan.c): up to 64 bytes copied with inline
# moves of 16, 8, 4 or 1 bytes, the last overlapping the one before; rows of
# 64-512 bytes in units of at most 16 KiB prefetch the src rows of a later
# unit (past the tensor's end for the last ones).
# The attention-head permute (B,H,S,D) -> (B,S,H,D) and its inverse, every
# element size, row widths that end on each move size, src and dst off
# their cache lines, sizes below and above the parallel threshold.
SMALL_ROWS = [(np.uint8, d) for d in (1, 3, 5, 16, 17, 64, 100, 255, 512, 513)] + \
    [(np.float16, d) for d in (1, 7, 64, 96, 256)] + [(np.float32, d) for d in (1, 3, 12, 48, 64, 100, 128)] + \
    [(np.float64, d) for d in (1, 2, 33, 64)] + [(np.complex128, d) for d in (1, 4, 32)]


@pytest.mark.parametrize("dtype, d", SMALL_ROWS, ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_small_rows_match_numpy(threads, dtype, d):
    rng = np.random.default_rng(d)
    isz = np.dtype(dtype).itemsize
    for heads, nbytes in ((3, 4000), (16, 1_500_000)):
        seq = max(2, nbytes // (2 * heads * d * isz))
        shape = (2, heads, seq, d)
        n = int(np.prod(shape))
        for src_off in (0, 1):  # elements: src off its lines too
            flat = rng.integers(0, 256, (n + 1) * isz, dtype=np.uint8).view(dtype)
            a = flat[src_off:src_off + n].reshape(shape)
            for perm in ((0, 2, 1, 3), (2, 1, 0, 3)):
                view = a.transpose(perm)
                want = np.ascontiguousarray(view)
                got = pl.contiguous(torch.from_numpy(a).permute(perm))
                assert got.numpy().tobytes() == want.tobytes(), ("contiguous", shape, perm)
                for dst_off in (0, isz, 60 // isz * isz):  # bytes past a line
                    into_guarded(view, want, dst_off, ("copy_into", shape, perm, dst_off))


# Row copies of 40 MB, past this machine's 32 MiB L3 (plan.c's
# pl_rows_stream): streamed where the rows are whole lines on lines or long,
# cached otherwise.  An identity copy, every other row, rows of 256 and 1040
# bytes, dst on a line and 16 bytes past it.
@pytest.mark.parametrize("cols, step", [(40 << 20 >> 2, 1), (64, 1), (64, 2), (260, 1)])
def test_rows_past_l3_match_numpy(threads, cols, step):
    rows = (40 << 20) // (4 * cols)
    base = np.random.default_rng(cols + step).standard_normal((rows * step, cols), dtype=np.float32)
    view = base[::step]
    want = np.ascontiguousarray(view)
    got = pl.contiguous(torch.from_numpy(base)[::step])
    assert got.numpy().tobytes() == want.tobytes()
    for dst_off in (0, 16):
        into_guarded(view, want, dst_off, ("copy_into", cols, step, dst_off))


# A source broadcast along the last dim, x[..., :1].expand(shape) (plan.c's
# pl_fill_row): every element size, rows of 1-17 elements and past the
# 64-byte pattern with ragged ends, small and over the parallel threshold;
# against NumPy's broadcast_to and torch's own .contiguous(), dst on and off
# its lines.
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64, np.complex128],
                         ids=lambda d: d.__name__)
def test_broadcast_rows_match_numpy(threads, dtype):
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    isz = np.dtype(dtype).itemsize
    for rows, cols in ((7, 1), (7, 3), (5, 17), (9, 64 // isz + 3), (3000, 1000)):
        col = rng.integers(0, 256, rows * isz, dtype=np.uint8).view(dtype).reshape(rows, 1)
        view = np.broadcast_to(col, (rows, cols))
        want = np.ascontiguousarray(view)
        t = torch.from_numpy(col).expand(rows, cols)
        assert pl.contiguous(t).numpy().tobytes() == want.tobytes() == t.contiguous().numpy().tobytes()
        for dst_off in (0, 3 * isz):
            into_guarded(view, want, dst_off, ("copy_into", cols, dst_off))


# A flipped innermost dim (NumPy's a[:, ::-1], np.fliplr, an NCHW batch
# flipped horizontally, an HWC image's BGR pixels as RGB: plan.c's reverse
# kernels), every element size, rows
# each side of a 32-byte step, small and over the parallel threshold, src
# and dst off their lines, and the flip on dst's side instead.  NumPy is the
# oracle: torch has no negative strides.
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64, np.complex128],
                         ids=lambda d: d.__name__)
def test_flipped_rows_match_numpy(threads, dtype):
    rng = np.random.default_rng(np.dtype(dtype).itemsize + 40)
    isz = np.dtype(dtype).itemsize
    for shape in ((5, 1), (5, 31 // isz + 1), (7, 64 // isz + 5), (3, 1000), (16, 3, 64, 97), (2000, 700),
                  (37, 45, 3), (600, 800, 3), (9, 11, 4)):  # the last: images' pixels reversed (BGR as RGB)
        n = int(np.prod(shape))
        flat = rng.integers(0, 256, (n + 1) * isz, dtype=np.uint8).view(dtype)
        a = flat[1:n + 1].reshape(shape)
        view = a[..., ::-1]
        want = np.ascontiguousarray(view)
        assert pl.contiguous(view).tobytes() == want.tobytes(), shape
        for dst_off in (0, 3 * isz):
            into_guarded(view, want, dst_off, ("copy_into", shape, dst_off))
        out = np.zeros(shape, dtype)
        pl.copy_into(out[..., ::-1], a)
        assert out.tobytes() == want.tobytes(), ("dst flipped", shape)


# Element groups: a dst-innermost dim contiguous in both, of 2, 4, 8 or 16
# bytes, is copied as one element of that size (plan.c): (n,m,2) float32 by
# (1,0,2) is a 2-D transpose of 8-byte elements, through the tile kernels,
# streaming ones above 4 MiB.  Every group size from every element size,
# src one element off the group's alignment, dst off its lines by amounts
# that are and are not a multiple of the group, below and above the
# streaming threshold, 1 and 2 threads, in a child per PYLAYOUT_SIMD path.
GROUPS_CHILD = r"""
import numpy as np
import torch
import pylayout as pl

rng = np.random.default_rng(11)
checked = 0
groups = [(np.uint8, k) for k in (2, 4, 8, 16)] + [(np.float16, k) for k in (2, 4, 8)] + \
    [(np.float32, k) for k in (2, 4)] + [(np.float64, 2), (np.complex64, 2)]
for threads in (1, 2):
    pl.set_num_threads(threads)
    for dtype, k in groups:
        isz = np.dtype(dtype).itemsize
        for rows, cols in ((37, 29), (1100, 5_000_000 // (1100 * k * isz) + 3)):  # the second: 5 MB
            shape = (rows, cols, k)
            n = rows * cols * k
            for src_off in (0, 1):
                flat = rng.integers(0, 256, (n + 1) * isz, dtype=np.uint8).view(dtype)
                a = flat[src_off:src_off + n].reshape(shape)
                for perm in ((1, 0, 2),) if src_off else ((1, 0, 2), (0, 1, 2)):
                    view = a.transpose(perm)
                    want = np.ascontiguousarray(view)
                    got = pl.contiguous(torch.from_numpy(a).permute(perm))
                    assert got.numpy().tobytes() == want.tobytes(), ("contiguous", dtype, k, shape, perm)
                    for dst_off in (0, isz, 16, 60 // isz * isz):  # bytes past a line
                        into_guarded(view, want, dst_off, ("copy_into", dtype, k, shape, threads, dst_off))
                        checked += 1
print("simd=" + pl.info()["simd"], "checked", checked)
"""


def _check_in_simd_child(code: str, path: str, cases: int) -> None:
    """Runs `code` (with into_guarded) in a child under PYLAYOUT_SIMD=path,
    chosen at import: it must get that path, or the best this CPU has, and
    check `cases` copies."""
    out = run_child(GUARDED_INTO + code, path, "torch", 600)
    assert f"simd={expected_path(path)} " in out, out
    assert f"checked {cases}" in out, out


def test_a_simd_path_the_cpu_lacks_runs_its_best_one():
    """PYLAYOUT_SIMD caps the path: asked for one above the CPU (avx512 on an
    AVX2 machine), a child runs the best the CPU has, and every path at or
    below that runs as asked.  The *_on_every_simd_path tests skip the paths
    the CPU lacks on the strength of this."""
    code = 'print("simd=" + pl.info()["simd"] + " ")'
    for path in PATHS:
        env = dict(os.environ, PYLAYOUT_SIMD=path, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        proc = subprocess.run([sys.executable, "-c", "import pylayout as pl\n" + code], capture_output=True,
                              text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"simd={expected_path(path)} " in proc.stdout, (path, proc.stdout)


@pytest.mark.parametrize("path", PATHS)
def test_element_groups_on_every_simd_path(path):
    _check_in_simd_child(GROUPS_CHILD, path, 528)


# Transposes of groups (plan.c's pl_group_streams): a last dim contiguous in
# both, of 32 bytes or more and a multiple of 16, whose rows lie far apart in
# src, above a quarter of L3 a thread (at most 8 MiB a thread), is a
# transpose of those groups as elements, read in src order and written with
# streaming stores (the group_stream kernels); below it, row copies.  Groups
# of 32 to 256 bytes from every element size, the attention-head permute,
# 24-byte groups (which stay row copies), each just past 8 MiB on 1 thread
# and 16 MiB on 2 (so streamed on any CPU) and at 4.3 MB (row copies where
# L3 is 16 MiB or more), checked against NumPy and torch's own
# .contiguous(), dst on a line, 16 and 48 bytes past it, and past it by an
# amount no 16-byte store fits; every SIMD path.
WIDE_GROUPS_CHILD = r"""
import numpy as np
import torch
import pylayout as pl

rng = np.random.default_rng(17)
checked = 0
groups = [(np.uint8, 32), (np.uint8, 64), (np.float16, 24), (np.float32, 8), (np.float32, 16), (np.float32, 20),
          (np.float64, 32), (np.complex128, 2), (np.complex128, 5), (np.float32, 6)]
for threads in (1, 2):
    pl.set_num_threads(threads)
    cases = []
    for dtype, k in groups:
        isz = np.dtype(dtype).itemsize
        rows = 301
        for size in (8_400_000 * threads, 4_300_000):
            cols = size // (rows * k * isz) + 1
            cases.append((dtype, (rows, cols, k), (1, 0, 2), size > 4_300_000))
    cases += [(np.float32, (4 * threads, 12, 720, 64), (0, 2, 1, 3), True),
              (np.float16, (4 * threads, 12, 1440, 64), (0, 2, 1, 3), True),
              (np.float32, (2, 12, 720, 64), (0, 2, 1, 3), False)]
    for dtype, shape, perm, big in cases:
        isz = np.dtype(dtype).itemsize
        a = rng.integers(0, 256, int(np.prod(shape)) * isz, dtype=np.uint8).view(dtype).reshape(shape)
        view = a.transpose(perm)
        want = np.ascontiguousarray(view)
        t = torch.from_numpy(a).permute(perm)
        got = pl.contiguous(t)
        assert got.is_contiguous() and got.numpy().tobytes() == want.tobytes(), ("contiguous", dtype, shape)
        assert got.numpy().tobytes() == t.contiguous().numpy().tobytes(), ("torch", dtype, shape)
        for dst_off in (0, 16, 48, isz if isz % 16 else 8) if big else (0, 8):  # bytes past a line
            into_guarded(view, want, dst_off, ("copy_into", dtype, shape, threads, dst_off))
            checked += 1
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_group_transposes_on_every_simd_path(path):
    _check_in_simd_child(WIDE_GROUPS_CHILD, path, 140)


# Transposes of groups of 3 to 8 elements (plan.c's pl_plane_dims): an
# RGB image transposed, (H,W,3) by (1,0,2), in every dtype, and groups of
# 5-7; each unit unzipped into planes, the planes transposed, zipped again,
# or on AVX-512 and AVX2 groups of 3 of 1-4 bytes in registers (copy_x86.c's
# tile3 kernels; sides of 9 and 11 pixels are shorter than AVX-512's uint8
# blocks, 129 leaves a last unit 1 pixel wide), which there also take groups
# of 6 or 12 bytes as 3 wider elements (plan.c's pl_three_wider: 6 and 12
# uint8, 6 int16).  Against NumPy and torch,
# small and over 4 MiB, src off by an element, dst on and off its lines, 1
# and 2 threads, every SIMD path.
PLANE_GROUPS_CHILD = r"""
rng = np.random.default_rng(23)
checked = 0
for threads in (1, 2):
    pl.set_num_threads(threads)
    for dtype, k in ((np.uint8, 3), (np.float16, 3), (np.float32, 3), (np.float64, 3), (np.uint8, 7),
                     (np.float32, 5), (np.int16, 6), (np.uint8, 6), (np.uint8, 12)):
        isz = np.dtype(dtype).itemsize
        for h, w in ((37, 45), (9, 140), (129, 11), (1100, 4_400_000 // (1100 * k * isz) + 1)):
            numel = h * w * k
            flat = rng.integers(0, 256, (numel + 1) * isz, dtype=np.uint8).view(dtype)
            for src_off in (0, 1):
                a = flat[src_off:src_off + numel].reshape(h, w, k)
                checked += check_permuted(a, (1, 0, 2), (0, 3 * isz), (dtype, k, h, w, threads))
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_plane_group_transposes_on_every_simd_path(path):
    _check_in_simd_child(PLANE_GROUPS_CHILD, path, 288)


# uint8 images of 9-15 channels between NHWC and NCHW: more planes than the
# thin kernels take, fewer than a 16x16 block's rows (AVX-512's thin-side
# blocks, SSE2's and AVX2's in overlapping halves: copy_x86.c), both ways, under and over 4 MiB, dst on and off its
# lines, src off by a byte; against NumPy and torch, 1 and 2 threads, every
# SIMD path.
U8_CHANNELS_CHILD = r"""
rng = np.random.default_rng(19)
checked = 0
for threads in (1, 2):
    pl.set_num_threads(threads)
    for c in (9, 12, 13, 15):
        for n, hw in ((1, 37), (4, 300)):
            for src_off in (0, 1):
                numel = n * hw * hw * c
                flat = rng.integers(0, 256, numel + 1, dtype=np.uint8)
                for perm, shape in (((0, 3, 1, 2), (n, hw, hw, c)), ((0, 2, 3, 1), (n, c, hw, hw))):
                    a = flat[src_off:src_off + numel].reshape(shape)
                    checked += check_permuted(a, perm, (0, 5), (c, shape, perm, threads))
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_u8_9_to_15_channels_on_every_simd_path(path):
    _check_in_simd_child(U8_CHANNELS_CHILD, path, 128)


# A short dim (2-7 elements) contiguous in one tensor only, another dim
# contiguous in the other: NumPy's a.T of an (H,W,C) image, (C,H,W).T, and
# 4-D permutes that move channels to or from the middle.  Each unit's src
# rows are unzipped into planes, or src's planes read in place; each plane
# transposed; the planes zipped into dst rows, or written to dst's planes
# in place (plan.c's pl_plane_dims).  Small (stack buffers, in sub-blocks)
# and over 64 KiB (heap buffers, threads), src off by an element, dst on and
# off its lines; against NumPy and torch, 1 and 2 threads, every SIMD path.
SHORT_DIMS_CHILD = r"""
rng = np.random.default_rng(29)
checked = 0
cases = [(dtype, c) for dtype in (np.uint8, np.float16, np.float32, np.float64) for c in (2, 3, 4)]
cases += [(np.uint8, 5), (np.uint8, 8), (np.float16, 6), (np.float32, 5), (np.int16, 7)]
for threads in (1, 2):
    pl.set_num_threads(threads)
    for dtype, c in cases:
        isz = np.dtype(dtype).itemsize
        for h, w in ((37, 45), (300, 1_000_000 // (300 * c * isz) + 1)):
            flat = rng.integers(0, 256, (2 * h * w * c + 1) * isz, dtype=np.uint8).view(dtype)
            for src_off in (0, 1):
                for perm, shape in (((2, 1, 0), (h, w, c)), ((2, 1, 0), (c, h, w)), ((3, 0, 2, 1), (2, c, h, w)),
                                    ((0, 3, 2, 1), (2, h, w, c))):
                    a = flat[src_off:src_off + int(np.prod(shape))].reshape(shape)
                    checked += check_permuted(a, perm, (0, 3 * isz), (dtype, c, shape, perm, threads))
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_short_dim_planes_on_every_simd_path(path):
    _check_in_simd_child(SHORT_DIMS_CHILD, path, 1088)


# Groups packed in src into planes in dst (NumPy's a.T of an (H,W,C) image,
# and NHWC -> NWHC-like 4-D permutes) in registers: plan.c's tile_split, one
# transpose of an H x (W * C) matrix whose dst rows come C to a pixel
# (copy_x86.c; every element size on AVX-512, bytes in 64 x 64 blocks
# through an L1 buffer, 4 and 8 bytes on AVX2; the other paths and sizes
# through planes).  Units are 128 x 128 pixels, so 133
# leaves a last unit 5 rows tall (thinner than a block) and 129 one a pixel
# wide; the others end mid-block; a src whose rows are sliced (rows further
# apart than a row of pixels).  Against NumPy and torch, src off by an
# element, dst on and off its lines, 1 and 2 threads, every SIMD path.
SPLIT_CHILD = r"""
rng = np.random.default_rng(37)
checked = 0
cases = [(dtype, c) for dtype in (np.uint8, np.float16, np.float32, np.float64) for c in (2, 3)]
cases += [(np.uint8, 4), (np.uint8, 8), (np.float16, 5), (np.float32, 4), (np.int32, 6), (np.int16, 7)]
cases += [(np.float32, 7), (np.int32, 8), (np.float64, 4), (np.int64, 5), (np.float64, 7)]  # wider than 24 bytes
cases += [(np.float32, 12), (np.int32, 15)]  # more than 8 elements
for threads in (1, 2):
    pl.set_num_threads(threads)
    for dtype, c in cases:
        isz = np.dtype(dtype).itemsize
        for h, w in ((133, 129), (16, 17), (300, 41), (37, 300)):
            flat = rng.integers(0, 256, (h * (w + 5) * c + 1) * isz, dtype=np.uint8).view(dtype)
            for src_off in (0, 1):
                a = flat[src_off:src_off + h * w * c].reshape(h, w, c)
                checked += check_permuted(a, (2, 1, 0), (0, 3 * isz), (dtype, c, h, w, threads, src_off))
            sliced = flat[:h * (w + 5) * c].reshape(h, w + 5, c)[:, 2:w + 2]
            checked += check_permuted(sliced, (2, 1, 0), (0,), (dtype, c, h, w, threads, "sliced"))
            nhwc = flat[:2 * (h // 2) * w * c].reshape(2, h // 2, w, c)
            checked += check_permuted(nhwc, (0, 3, 2, 1), (0,), (dtype, c, h, w, threads, "4-D"))
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_transposes_into_planes_on_every_simd_path(path):
    _check_in_simd_child(SPLIT_CHILD, path, 1008)


# Their inverse: src in planes into groups packed in dst (NumPy's a.T of a
# (C,H,W) array, and NCHW -> NWHC-like 4-D permutes) in registers: plan.c's
# tile_zip, one transpose into dst rows of H * C elements whose src rows
# come C to a pixel, one from each plane (copy_x86.c; 4 and 8 bytes on
# AVX-512 and AVX2, groups under 64 bytes; the other paths and sizes, and
# groups of 2-3 whose dst rows lie a multiple of 4 KiB apart, through
# planes).  Units are 128 x 128 pixels, so 133 leaves a last unit 5 pixels
# a dst row (thinner than a block) and 129 one of one dst row; the others
# end mid-block; planes whose rows are sliced (further apart than a row);
# a 1 MiB copy of few units, cut into smaller ones at 2 threads.  Against
# NumPy and torch, src off by an element, dst on and off its lines, 1 and
# 2 threads, every SIMD path.
ZIP_CHILD = r"""
rng = np.random.default_rng(41)
checked = 0
cases = [(dtype, c) for dtype in (np.float32, np.float64, np.int32, np.uint8, np.float16) for c in (2, 3)]
cases += [(np.float32, 4), (np.float32, 5), (np.float32, 7), (np.int32, 8), (np.float64, 4), (np.int64, 6),
          (np.float64, 7), (np.float64, 8), (np.float32, 12), (np.int32, 15)]
for threads in (1, 2):
    pl.set_num_threads(threads)
    for dtype, c in cases:
        isz = np.dtype(dtype).itemsize
        for h, w in ((133, 129), (16, 17), (300, 41), (37, 300), (512 // c, 40)):
            flat = rng.integers(0, 256, (c * h * (w + 5) + 1) * isz, dtype=np.uint8).view(dtype)
            for src_off in (0, 1):
                a = flat[src_off:src_off + c * h * w].reshape(c, h, w)
                checked += check_permuted(a, (2, 1, 0), (0, 3 * isz), (dtype, c, h, w, threads, src_off))
            sliced = flat[:c * h * (w + 5)].reshape(c, h, w + 5)[:, :, 2:w + 2]
            checked += check_permuted(sliced, (2, 1, 0), (0,), (dtype, c, h, w, threads, "sliced"))
            nchw = flat[:2 * c * (h // 2) * w].reshape(2, c, h // 2, w)
            checked += check_permuted(nchw, (0, 3, 2, 1), (0,), (dtype, c, h, w, threads, "4-D"))
    big = rng.standard_normal(7 * 150 * 130).reshape(7, 150, 130)
    checked += check_permuted(big, (2, 1, 0), (0, 16), (threads, "1 MiB"))
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_transposes_out_of_planes_on_every_simd_path(path):
    _check_in_simd_child(ZIP_CHILD, path, 1204)


# The same transposes through planes past half of L3 (over 8 MiB, the most
# that threshold is: plan.c's pl_stream_min_wide_bytes), where each unit
# prefetches its dst rows and the next unit's src rows, that unit's rows
# past the tensor for the last units (plan.c's pl_run_planes): groups
# packed in both (an RGB image transposed), in src only (dst planes: in
# registers where the path has tile_split, every size), in dst only (src
# planes; the last two cases with dst rows whole lines apart, 32000 bytes,
# which stream on AVX-512 and AVX2: tile_zip_stream), and a 4-D permute;
# then groups packed in src into dst planes whose rows lie whole lines
# apart (976, 1000 and 992 elements: tile_split_stream, 4 and 8 bytes on
# AVX-512 and AVX2, 2 on AVX-512), their units of 32 rows ragged;
# ragged units, src off by an element, dst on and off its lines; against
# NumPy and torch, 1 and 2 threads, every SIMD path.
PLANES_AHEAD_CHILD = r"""
rng = np.random.default_rng(31)
checked = 0
big = 8 * 1024 * 1024 + 300_000
cases = []
for dtype, c, perm, shape, h in ((np.uint8, 3, (1, 0, 2), lambda h, w, c: (h, w, c), 1001),
                                 (np.float32, 3, (1, 0, 2), lambda h, w, c: (h, w, c), 1001),
                                 (np.float32, 4, (2, 1, 0), lambda h, w, c: (h, w, c), 1001),
                                 (np.uint8, 3, (2, 1, 0), lambda h, w, c: (h, w, c), 1001),
                                 (np.float16, 3, (2, 1, 0), lambda h, w, c: (h, w, c), 1001),
                                 (np.float32, 3, (2, 1, 0), lambda h, w, c: (c, h, w), 1001),
                                 (np.float16, 5, (0, 3, 2, 1), lambda h, w, c: (2, h, w, c), 1001),
                                 (np.float32, 8, (2, 1, 0), lambda h, w, c: (c, h - 1, w), 1001),
                                 (np.float64, 4, (2, 1, 0), lambda h, w, c: (c, h - 1, w), 1001),
                                 (np.float32, 6, (2, 1, 0), lambda h, w, c: (h, w, c), 976),
                                 (np.float64, 3, (2, 1, 0), lambda h, w, c: (h, w, c), 1000),
                                 (np.float16, 5, (2, 1, 0), lambda h, w, c: (h, w, c), 992)):
    isz = np.dtype(dtype).itemsize
    w = big // (h * c * isz * (2 if len(perm) == 4 else 1)) + 1
    cases.append((dtype, perm, shape(h, w, c)))
for threads in (1, 2):
    pl.set_num_threads(threads)
    for dtype, perm, shape in cases:
        isz = np.dtype(dtype).itemsize
        numel = int(np.prod(shape))
        assert numel * isz > 8 * 1024 * 1024, shape
        flat = rng.integers(0, 256, (numel + 1) * isz, dtype=np.uint8).view(dtype)
        for src_off in (0, 1):
            a = flat[src_off:src_off + numel].reshape(shape)
            checked += check_permuted(a, perm, (0, 3 * isz), (dtype, shape, perm, threads, src_off))
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_planes_past_half_of_l3_on_every_simd_path(path):
    _check_in_simd_child(PLANES_AHEAD_CHILD, path, 96)


# Streaming transposes thinner than an AVX-512 block along b: NHWC -> NCHW
# with fewer channels than the block's rows (9-31 float16, 9-15 float32,
# 5-7 float64) go to the AVX2 streaming tile (copy_x86.c), above 4 MiB,
# dst on and off its lines, 1 and 2 threads, every SIMD path.
THIN_B_CHILD = r"""
import numpy as np
import torch
import pylayout as pl

rng = np.random.default_rng(13)
checked = 0
for threads in (1, 2):
    pl.set_num_threads(threads)
    for dtype, channels in ((np.float16, (9, 17, 31)), (np.float32, (9, 15)), (np.float64, (5, 7)),
                            (np.uint8, (9, 24))):
        isz = np.dtype(dtype).itemsize
        for c in channels:
            hw = 4_400_000 // (c * isz) // 1024 + 1
            shape = (1, hw, 1024, c)  # planes a whole number of lines apart: the streaming tiles
            n = int(np.prod(shape))
            a = rng.integers(0, 256, n * isz, dtype=np.uint8).view(dtype).reshape(shape)
            view = a.transpose(0, 3, 1, 2)
            want = np.ascontiguousarray(view)
            got = pl.contiguous(torch.from_numpy(a).permute(0, 3, 1, 2))
            assert got.numpy().tobytes() == want.tobytes(), ("contiguous", dtype, c, threads)
            for dst_off in (0, isz):
                into_guarded(view, want, dst_off, ("copy_into", dtype, c, threads, dst_off))
                checked += 1
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_streamed_tiles_thinner_than_a_block(path):
    _check_in_simd_child(THIN_B_CHILD, path, 36)


# Float16 transposes above the 4 MiB streaming threshold whose dst rows are
# whole lines apart and that fit in half of L3: on AVX-512, 256-byte runs
# of four 32x32 blocks from src staged through an L1 buffer (copy_x86.c's
# pl_rstile2_avx512, plan.c's pl_stream_runs_max_bytes); on the other
# paths, and past half of L3, the line-at-a-time streaming tiles.  Units
# whose last rows make a shorter run (96, 64) or go to the line tile (32),
# ragged blocks of columns, dst rows a page apart, and one copy of 17 MiB
# (past the runs); src off its lines by an element, dst on a line and off
# it; torch's .contiguous() path and copy_into, 1 and 2 threads.
F16_RUNS_CHILD = r"""
import numpy as np
import torch
import pylayout as pl

rng = np.random.default_rng(56)
checked = 0
for threads in (1, 2):
    pl.set_num_threads(threads)
    for rows, cols in ((1120, 2000), (1056, 2100), (1088, 3900), (2048, 1100), (2080, 4300)):
        n = rows * cols
        for src_off in (0, 1):
            flat = rng.integers(0, 256, (n + 1) * 2, dtype=np.uint8).view(np.float16)
            a = flat[src_off:src_off + n].reshape(rows, cols)
            want = np.ascontiguousarray(a.T)
            got = pl.contiguous(torch.from_numpy(a).t())
            assert got.is_contiguous() and got.numpy().tobytes() == want.tobytes(), ("contiguous", rows, cols)
            for dst_off in (0, 2, 64):  # bytes past a line
                into_guarded(a.T, want, dst_off, ("copy_into", rows, cols, threads, src_off, dst_off))
                checked += 1
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_f16_streaming_runs_on_every_simd_path(path):
    _check_in_simd_child(F16_RUNS_CHILD, path, 60)


# The (27,28,28,28,28).permute(2,3,1,4,0) family above the 4 MiB streaming
# threshold: tiles of 27 x 28 (and ragged 26 x 27) elements built in an L1
# buffer, streamed out, each unit prefetching its src rows for the units
# after it (plan.c).  Every element size, src and dst off their cache lines,
# 1 and 2 threads, in a child per PYLAYOUT_SIMD path (chosen at import).
PERMUTE_5D_CHILD = r"""
import numpy as np
import torch
import pylayout as pl

rng = np.random.default_rng(5)
checked = 0
for threads in (1, 2):
    pl.set_num_threads(threads)
    for dtype in (np.uint8, np.float16, np.float32, np.float64, np.complex128):
        isz = np.dtype(dtype).itemsize
        for head, tail in ((27, 28), (26, 27)):
            mid = 4_300_000 // (head * 28 * 28 * tail * isz) + 1
            shape = (head, 28, mid, 28, tail)
            n = int(np.prod(shape))
            for src_off in (0, 1):  # elements: src off its lines too
                flat = rng.integers(0, 256, (n + 1) * isz, dtype=np.uint8).view(dtype)
                a = flat[src_off:src_off + n].reshape(shape)
                want = np.ascontiguousarray(a.transpose(2, 3, 1, 4, 0))
                got = pl.contiguous(torch.from_numpy(a).permute(2, 3, 1, 4, 0))
                assert got.is_contiguous() and tuple(got.shape) == want.shape
                assert got.numpy().tobytes() == want.tobytes(), ("contiguous", shape, dtype, threads)
                for dst_off in (0, isz, 60 // isz * isz):  # bytes past a line
                    into_guarded(a.transpose(2, 3, 1, 4, 0), want, dst_off, ("copy_into", shape, dtype, threads,
                                                                              dst_off))
                    checked += 1
print("simd=" + pl.info()["simd"], "checked", checked)
"""


@pytest.mark.parametrize("path", PATHS)
def test_permute_5d_streamed_tiles_on_every_simd_path(path):
    _check_in_simd_child(PERMUTE_5D_CHILD, path, 120)


# Views of one buffer whose spans interleave but whose elements do not (the
# C core's _pylayout_views_apart): copy_into copies them, as torch's copy_
# and np.copyto do; views that do share bytes are still refused, nothing
# written.  Against torch (the whole storage compared, the version counter
# bumped) and NumPy, 1 and 2 threads, up to 8 MB.
def test_interleaved_views_of_one_buffer(threads):
    g = torch.Generator().manual_seed(36)
    pairs = [  # (base, dst view, src view) as functions of the base
        (torch.randn(1000, 2, generator=g), lambda b: b[:, 1], lambda b: b[:, 0]),
        (torch.randn(1000, 2, generator=g), lambda b: b[:, 0], lambda b: b[:, 1]),
        (torch.randint(0, 256, (48, 64, 3), dtype=torch.uint8, generator=g), lambda b: b[..., 2], lambda b: b[..., 0]),
        (torch.randn(64, 33, generator=g).double(), lambda b: b[1::2], lambda b: b[0::2]),
        (torch.randn(5000, 4, generator=g), lambda b: b[:, 2:4], lambda b: b[:, 0:2]),
        (torch.randn(300, 200, generator=g, dtype=torch.complex64),
         lambda b: torch.view_as_real(b)[..., 1], lambda b: torch.view_as_real(b)[..., 0]),
        (torch.randn(1 << 20, 2, generator=g), lambda b: b[:, 1], lambda b: b[:, 0]),  # 8 MB: threads
        (torch.randint(0, 256, (1080, 1920, 4), dtype=torch.uint8, generator=g),
         lambda b: b[..., 3], lambda b: b[..., 1]),
    ]
    for base, dst_of, src_of in pairs:
        want = base.clone()
        dst_of(want).copy_(src_of(want))
        a = base.clone().numpy() if base.dtype != torch.complex64 else None
        version = base._version
        assert pl.copy_into(dst_of(base), src_of(base)) is not None
        assert torch.equal(base, want), (tuple(base.shape), base.dtype)
        assert base._version > version
        if a is not None:  # the same through NumPy's views
            an = torch.from_numpy(a)
            pl.copy_into(dst_of(an).numpy(), src_of(an).numpy())
            assert torch.equal(an, want)
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    before = x.copy()
    for dst, src in ((x[:, 1:3], x[:, 0:2]), (x[1:], x[:-1]), (x[:, 0], x[:, 0])):
        with pytest.raises(ValueError, match="overlaps"):
            pl.copy_into(dst, src)
        assert np.array_equal(x, before)
    y = np.arange(24, dtype=np.int16).reshape(4, 6)
    want = y.copy()
    np.copyto(want[1::2], want[0::2, ::-1])  # odd rows from even ones, flipped
    pl.copy_into(y[1::2], y[0::2, ::-1])
    assert np.array_equal(y, want)
