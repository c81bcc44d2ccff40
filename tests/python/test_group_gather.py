"""Group gathers and scatters: x[..., :c] of groups of C > c elements, bit-exact against NumPy and torch.

An RGBA image without its alpha (img[..., :3]), the xyz of (N, 4) points,
x[:, 1:7] of (N, 8): a dense dst filled from groups of c elements with gaps
between them in src.  Groups of up to 32 bytes take the shuffle kernels of
src/group_gather_x86.c; groups of 2, 4 or 8 bytes, which the copy sees as
single elements at a step that is no multiple of their size, too.  The
inverse, copy_into(rgba[..., :3], rgb) or a plane into one channel, takes
its AVX-512 scatters, which must leave every byte between the groups as it
was: each scatter's whole buffer is compared with NumPy's assignment.  So
must the masked moves between groups at the same step on both sides
(one RGBA image's RGB into another's, rgba2[..., :3] = rgba[..., :3]), and
the copies between groups at different steps (an RGB image's channel into
an RGBA one's), gathered into a buffer and scattered from there.  Groups
with gaps into planes (rgba[..., :3].permute(2, 0, 1), the DataLoader
direction) gather into a buffer, then unzip.  Groups packed in both, in the
opposite order in src (np.fliplr of an HWC image: the gather at step -g),
have their own kernels; torch, which has no negative strides, is the oracle
through torch.flip.  Checked
at 1 and 2 threads, with sources and destinations off their cache lines and
off their element alignment, lengths around the kernels' vector periods,
rows that fuse and rows that do not (crops), and guard bytes around every
destination that must stay untouched.  Each SIMD path runs in its own
interpreter with PYLAYOUT_SIMD set; a path this CPU lacks is skipped, and
the child reports the path it ran.  Sources that end on the last byte of
their buffer are the C suite's (tests/c/check_copy.c, tcase "groups").
"""
from __future__ import annotations

import pytest

import pylayout as pl
from _gather_checks import COMMON
from _simd_children import ORACLES, PATHS, check_against

CHILD_TIMEOUT = 600

# Runs in the child with `pl` and `oracle` defined (and torch imported for it).
CHECKS = COMMON + r"""
def check_scatter(n, C, cols, dtype, seed, off):
    # the inverse: a dense src into x[:, cols] of an (n, C) dst whose other
    # bytes, and the guard bytes around it, must keep their sentinel
    isz = np.dtype(dtype).itemsize
    raw = np.full(n * C * isz + 128 + off, SENT, np.uint8)
    lo = (-raw.ctypes.data) % 64 + off
    if lo % isz:
        if oracle == "torch":
            return 0  # torch has no misaligned tensors
        whole = np.ndarray((n, C), dtype, raw.data, offset=lo)
    else:
        whole = raw[lo:lo + n * C * isz].view(dtype).reshape(n, C)
    view = whole[:, cols]
    src = source(view.size, dtype, seed, 16).reshape(view.shape)
    want = raw.copy()
    np.ndarray((n, C), dtype, want.data, offset=lo)[:, cols] = src
    if oracle == "numpy":
        pl.copy_into(view, src)
    else:
        pl.copy_into(torch.from_numpy(view), torch.from_numpy(src))
    assert raw.tobytes() == want.tobytes(), ("scatter", n, C, cols, dtype, off)
    return 1

def check_move_view(a, idx):
    # a[idx] into the same view of another buffer: crops whose rows do not fuse
    out = np.full(a.nbytes, SENT, np.uint8).view(a.dtype).reshape(a.shape)
    want = out.copy()
    want[idx] = a[idx]
    if oracle == "numpy":
        pl.copy_into(out[idx], a[idx])
    else:
        pl.copy_into(torch.from_numpy(out)[idx], torch.from_numpy(a)[idx])
    assert out.tobytes() == want.tobytes(), ("move", a.shape, idx)

def check_move(n, C, cols, dtype, seed, soff, doff, Cd=None, dcols=None):
    # groups on both sides: x[:, cols] of an (n, C) src into y[:, dcols] (by
    # default the same view) of an (n, Cd) dst (Cd = C: the same step) whose
    # other bytes, and the guard bytes around it, must keep their sentinel
    isz = np.dtype(dtype).itemsize
    Cd = C if Cd is None else Cd
    dcols = cols if dcols is None else dcols
    s = source(n * C, dtype, seed, soff).reshape(n, C)[:, cols]
    raw = np.full(n * Cd * isz + 128 + doff, SENT, np.uint8)
    lo = (-raw.ctypes.data) % 64 + doff
    if (soff % isz or doff % isz) and oracle == "torch":
        return 0  # torch has no misaligned tensors
    view = np.ndarray((n, Cd), dtype, raw.data, offset=lo)[:, dcols]
    want = raw.copy()
    np.ndarray((n, Cd), dtype, want.data, offset=lo)[:, dcols] = s
    if oracle == "numpy":
        pl.copy_into(view, s)
    else:
        pl.copy_into(torch.from_numpy(view), torch.from_numpy(s))
    assert raw.tobytes() == want.tobytes(), ("move", n, C, cols, dtype, soff, doff)
    return 1

def check_flip(a, dims):
    # a flipped along dims (negative steps: NumPy's view), checked against
    # NumPy's own copy, or torch.flip of a's tensor (torch has no negative
    # strides); with torch, also copied into a torch tensor
    idx = tuple(slice(None, None, -1) if d in dims else slice(None) for d in range(a.ndim))
    view = a[idx]
    if oracle == "numpy":
        check(view)
        return 1
    want = torch.flip(torch.from_numpy(a), dims)
    got = pl.contiguous(view)
    assert got.tobytes() == want.numpy().tobytes(), ("flip", a.shape, dims)
    out = torch.full(want.shape, 0, dtype=want.dtype)
    assert pl.copy_into(out, view) is out
    assert torch.equal(out, want) or out.numpy().tobytes() == want.numpy().tobytes(), ("flip into", a.shape, dims)
    return 1

def check_rot(a, k, axes, planes=False):
    # np.rot90(a, k, axes) (negative strides for k = 1 and 2), or with
    # planes a flipped along axis 1 into (2, 0, 1) order (an HWC image's
    # ToTensor after a flip), checked against NumPy's own copy, or torch's
    # rot90 / flip of a's tensor
    view = a[:, ::-1].transpose(2, 0, 1) if planes else np.rot90(a, k, axes)
    if oracle == "numpy":
        check(view)
        return 1
    t = torch.from_numpy(a)
    want = torch.flip(t, (1,)).permute(2, 0, 1).contiguous() if planes else torch.rot90(t, k, axes)
    got = pl.contiguous(view)
    assert got.tobytes() == want.numpy().tobytes(), ("rot", a.shape, k, axes, planes)
    out = torch.full(want.shape, 0, dtype=want.dtype)
    assert pl.copy_into(out, view) is out
    assert out.numpy().tobytes() == want.numpy().tobytes(), ("rot into", a.shape, k, axes, planes)
    return 1

# (c, C): c elements of each group of C
GROUPS = [(3, 4), (2, 3), (3, 5), (3, 6), (3, 8), (6, 8), (5, 8), (4, 5), (7, 8), (3, 11), (5, 16), (8, 12),
          (2, 9), (3, 48)]
LENGTHS = [1, 2, 5, 21, 22, 43, 85, 86, 87, 171, 172, 257, 1031, 4099]

def run():
    cases = 0
    for threads in (1, 2):
        pl.set_num_threads(threads)
        for dtype in (np.uint8, np.int16, np.float32, np.float64):
            isz = np.dtype(dtype).itemsize
            for c, C in GROUPS:
                for n in (LENGTHS if threads == 1 else LENGTHS[::4]):
                    for off in ((0, 16, 2 * isz + isz // 2) if isz > 1 else (0, 7)):
                        if off % isz and oracle == "torch":
                            continue  # NumPy allows sources off their element alignment, torch not
                        s = source(n * C, dtype, n * 10 + C, off).reshape(n, C)
                        check(s[:, :c])
                        check(s[:, C - c:])  # the last element is the buffer's last
                        cases += 2
                        cases += check_scatter(n, C, slice(0, c), dtype, n + C, off)
                        cases += check_scatter(n, C, slice(C - c, C), dtype, n + C, off)
                        cases += check_scatter(n, C, 1 % C, dtype, n + C, off)  # one channel
                        for doff in (0, off + isz):
                            cases += check_move(n, C, slice(0, c), dtype, n + C, off, doff)
                            cases += check_move(n, C, slice(C - c, C), dtype, n + C, off, doff)
                        cases += check_move(n, C, 1 % C, dtype, n + C, off, off)  # one channel
                        # different steps: gathered into a buffer, then scattered
                        cases += check_move(n, C, slice(0, c), dtype, n + C, off, 0, C + 1)
                        cases += check_move(n, C + 2, slice(2, 2 + c), dtype, n + C, off, isz, C, slice(0, c))
                        cases += check_move(n, C, 0, dtype, n + C, off, off, 2 * C + 1)
                        cases += check_move(n, 2, 1, dtype, n + C, off, 0, C)  # x[:, 1::2] into y[:, ::C]
                # 2-D crops: rows that do not fuse; an image's rows
                a = source(37 * 90 * C, dtype, C, 16).reshape(37, 90, C)
                for idx in ((Ellipsis, slice(0, c)), (slice(3, -2), slice(5, -7), slice(C - c, C)),
                            (slice(None, None, 2), slice(1, None), slice(0, c))):
                    check(a[idx])
                    check_move_view(a, idx)
                    cases += 2
                # into planes: RGBA's RGB to CHW, the xyz of points transposed
                if 2 <= c <= 8:
                    for v in (a[:, :, :c].transpose(2, 0, 1), a[3:-2, 5:-7, C - c:].transpose(2, 0, 1),
                              source(1500 * C, dtype, C, 3 * isz).reshape(1500, C)[:, :c].T):
                        check(v)
                        cases += 1
            # groups in the opposite order (an HWC image flipped): groups of
            # 3 to 32 bytes take group_flip, longer ones their rows
            for c in (3, 5, 6, 7, 9, 12, 24):
                for n in (LENGTHS if threads == 1 else LENGTHS[::4]):
                    for off in (0, isz, 16 + isz // 2):
                        if off % isz and oracle == "torch":
                            continue
                        a = source(n * c, dtype, n + c, off).reshape(n, c)
                        cases += check_flip(a, (0,))
                a = source(37 * 90 * c, dtype, c, 16).reshape(37, 90, c)
                cases += check_flip(a, (1,)) + check_flip(a, (0, 1))
                if oracle == "numpy":  # crops: rows that do not fuse
                    check(a[3:-2, -6:4:-1])
                    check(a[::-2, ::-1])
                    cases += 2
            # rotations by 90 degrees: of matrices (a transpose whose src
            # steps back along the tiles' dim), of images' pixels (through
            # planes), and images flipped into planes (group_flip, unzipped)
            for rows, cols in ((5, 7), (33, 65), (300, 517)):
                m = source(rows * cols, dtype, rows, 16).reshape(rows, cols)
                for k in (1, 2, 3):
                    cases += check_rot(m, k, (0, 1))
            for c in (3, 4, 5):
                img = source(37 * 90 * c, dtype, c + 7, isz).reshape(37, 90, c)
                for k in (1, 3):
                    cases += check_rot(img, k, (0, 1))
                cases += check_rot(img, 0, None, planes=True)
            # 2 to 4 MiB of dst: the threads split the rows
            for c in (3, 6):
                n = ((4 << 20) // (isz * c) // 256 + 1) * 256
                a = source(n * c, dtype, c, 0).reshape(256, -1, c)
                cases += check_flip(a, (1,)) + check_flip(a, (0, 1))
                cases += check_rot(a, 1, (0, 1)) + check_rot(a, 0, None, planes=True)
            cases += check_rot(source(1 << 20, dtype, 5, 0).reshape(1024, -1), 1, (0, 1))
            for c, C in ((3, 4), (2, 3)):
                n = ((4 << 20) // (isz * c) // 256 + 1) * 256
                a = source(n * C, dtype, C, 0).reshape(-1, C)
                check(a[:, :c])
                check(a.reshape(256, -1, C)[::2, 1:, 1:1 + c])  # rows that do not fuse
                cases += 2 + check_scatter(n, C, slice(0, c), dtype, C, 0) + check_scatter(n, C, 0, dtype, C, 0)
                cases += check_move(n, C, slice(0, c), dtype, C, 16, 0) + check_move(n, C, 0, dtype, C, 0, 16)
    print("simd=" + pl.info()["simd"], "cases", cases)

run()
"""


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("path", PATHS)
def test_group_gathers_match_numpy_and_torch(path, oracle, request):
    check_against(CHECKS, path, oracle, CHILD_TIMEOUT, request)


def test_rgba_to_rgb_and_point_xyz(np, torch):
    """The cases users write: RGBA without alpha, BGRA's BGR, the xyz of xyzw points."""
    g = torch.Generator().manual_seed(31)
    rgba = torch.randint(0, 256, (480, 640, 4), dtype=torch.uint8, generator=g)
    pts = torch.randn(100_003, 4, generator=g)
    for x in (rgba[..., :3], rgba[..., 1:], rgba[..., :2], rgba[10:-10, 20:-20, :3], pts[:, :3],
              pts.double()[:, :3], pts.to(torch.bfloat16)[:, :3], pts.half()[:, 1:],
              rgba[..., :3].permute(2, 0, 1), pts[:, :3].T):
        got = pl.contiguous(x)
        assert isinstance(got, torch.Tensor) and got.is_contiguous()
        assert torch.equal(got, x.contiguous())
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        assert pl.copy_into(out, x) is out
        assert torch.equal(out, x.contiguous())
        a = x.numpy() if x.dtype != torch.bfloat16 else None
        if a is not None:
            assert np.array_equal(pl.contiguous(a), np.ascontiguousarray(a))


def test_rgb_into_rgba_and_plane_into_channel(torch):
    """The inverse users write: RGB into an RGBA buffer, a plane into one channel; alpha untouched."""
    g = torch.Generator().manual_seed(32)
    rgba = torch.randint(0, 256, (480, 640, 4), dtype=torch.uint8, generator=g)
    rgb = torch.randint(0, 256, (480, 640, 3), dtype=torch.uint8, generator=g)
    plane = torch.randint(0, 256, (480, 640), dtype=torch.uint8, generator=g)
    want = rgba.clone()
    want[..., :3] = rgb
    want[..., 3] = plane
    version = rgba._version
    pl.copy_into(rgba[..., :3], rgb)
    pl.copy_into(rgba[..., 3], plane)
    assert torch.equal(rgba, want)
    assert rgba._version > version  # the writes are seen by autograd's checks
    pts, xyz = torch.randn(100_003, 4, generator=g), torch.randn(100_003, 3, generator=g)
    want = pts.clone()
    want[:, :3] = xyz
    pl.copy_into(pts[:, :3], xyz)
    assert torch.equal(pts, want)


def test_rgb_between_rgba_images_and_every_other_column(np, torch):
    """Groups on both sides: one RGBA image's RGB into another's, xyz between point
    clouds, x[:, ::2] into y[:, ::2]; the bytes between groups untouched."""
    g = torch.Generator().manual_seed(33)
    cases = [torch.randint(0, 256, (480, 640, 4), dtype=torch.uint8, generator=g)[..., :3],
             torch.randint(0, 256, (480, 640, 3), dtype=torch.uint8, generator=g)[..., 1],
             torch.randn(100_003, 4, generator=g)[:, :3], torch.randn(100_003, 4, generator=g).double()[:, :3],
             torch.randn(1000, 1000, generator=g)[:, ::2], torch.randn(5000, 8, generator=g).half()[:, 2:5]]
    for src in cases:
        dst_base = torch.randn(src._base.shape, generator=g).to(src.dtype) if src.is_floating_point() else \
            torch.randint(0, 256, src._base.shape, dtype=src.dtype, generator=g)
        dst = dst_base.as_strided(src.shape, src.stride(), src.storage_offset())
        check_into_view(np, torch, dst_base, dst, src)


def test_channels_between_rgb_and_rgba_images(np, torch):
    """Groups on both sides at different steps: an RGB image's channel into an RGBA one's and
    back, RGB into a 6-channel buffer, float16 every third element into every other."""
    g = torch.Generator().manual_seed(34)
    rgb = torch.randint(0, 256, (480, 640, 3), dtype=torch.uint8, generator=g)
    rgba = torch.randint(0, 256, (480, 640, 4), dtype=torch.uint8, generator=g)
    six = torch.randint(0, 256, (480, 640, 6), dtype=torch.uint8, generator=g)
    h3, h2 = torch.randn(3000, 3000, generator=g).half(), torch.randn(3000, 2000, generator=g).half()
    for dst_base, dst, src in ((rgba, rgba[..., 0], rgb[..., 0]), (rgb, rgb[..., 1], rgba[..., 1]),
                               (six, six[..., :3], rgba[..., :3]), (rgba, rgba[..., :3], six[..., 3:]),
                               (h2, h2[:, ::2], h3[:, ::3])):
        check_into_view(np, torch, dst_base, dst, src)


def test_flipped_and_rotated_images(np, torch):
    """The flips and rotations of augmentation code on NumPy images: np.fliplr, np.flipud,
    rotations by 90, 180 and 270 degrees, BGR as RGB flipped, a flipped image into CHW; against
    NumPy's copy and torch.flip / torch.rot90."""
    rng = np.random.default_rng(35)
    for img in (rng.integers(0, 256, (480, 640, 3), dtype=np.uint8), rng.integers(0, 256, (224, 224, 3), np.uint8),
                rng.standard_normal((96, 128, 3), dtype=np.float32),
                rng.standard_normal((60, 70, 3)).astype(np.float16), rng.integers(0, 256, (33, 47, 5), np.uint8)):
        t = torch.from_numpy(img)
        for threads in (1, 2):
            before = pl.get_num_threads()
            pl.set_num_threads(threads)
            for view, want in ((np.fliplr(img), torch.flip(t, (1,))), (np.flipud(img), torch.flip(t, (0,))),
                               (np.rot90(img, 2), torch.flip(t, (0, 1))), (np.rot90(img), torch.rot90(t)),
                               (np.rot90(img, -1), torch.rot90(t, -1)), (img[:, ::-1, ::-1], torch.flip(t, (1, 2))),
                               (img[:, ::-1].transpose(2, 0, 1), torch.flip(t, (1,)).permute(2, 0, 1))):
                got = pl.contiguous(view)
                assert type(got) is np.ndarray and got.flags.c_contiguous
                assert np.array_equal(got, np.ascontiguousarray(view)) and np.array_equal(got, want.numpy())
                out = torch.empty(want.shape, dtype=want.dtype)
                assert pl.copy_into(out, view) is out and torch.equal(out, want)
            m = torch.from_numpy(img[..., 0].copy())
            assert torch.equal(torch.from_numpy(pl.contiguous(np.rot90(m.numpy()))), torch.rot90(m))
            pl.set_num_threads(before)


def check_into_view(np, torch, dst_base, dst, src):
    """copy_into(dst, src) for dst a view of dst_base: torch's own copy_ the oracle, every byte of
    dst_base compared, the version counter bumped; then the same with NumPy arrays."""
    orig = dst_base.clone()
    want = dst_base.clone()
    want.as_strided(dst.shape, dst.stride(), dst.storage_offset()).copy_(src)
    version = dst_base._version
    assert pl.copy_into(dst, src) is dst
    assert torch.equal(dst_base, want), (dst.shape, dst.stride(), src.stride())
    assert dst_base._version > version  # the write is seen by autograd's checks
    b = orig.numpy()
    item = b.itemsize
    view = np.lib.stride_tricks.as_strided(b.reshape(-1)[dst.storage_offset():], dst.shape,
                                           [st * item for st in dst.stride()])
    pl.copy_into(view, src.numpy())
    assert np.array_equal(b, want.numpy())
