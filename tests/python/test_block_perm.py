"""Batches of small blocks, each permuted the same way, bit-exact against NumPy and torch.

A batch of small matrices transposed ((N, 3, 3) rotation matrices by
(0, 2, 1), (N, 4, 4), (N, 8, 4)), 7 x 7 feature maps transposed
((16, 512, 7, 7) by (0, 1, 3, 2)), short rows reversed (x[:, ::-1] of an
(N, 8) array, BGR pixels as RGB), small images to channels_last: every
block is one run of bytes in both tensors, and the copy is a byte shuffle
of each (src/block_perm_x86.c, plan.c's pl_copy_blocks).  Checked on every
element size, blocks of 2 to 320 bytes (past the kernels' 256, where the
copy takes its other routes), batches around the kernels' superblocks,
inner dims flipped, sources and destinations off their cache lines and off
their element alignment, guard bytes around every destination, 1 and 2
threads, and 4 MiB batches that stream through a buffer.  Each SIMD path
runs in its own interpreter with PYLAYOUT_SIMD set; a path this CPU lacks
is skipped, and the child reports the path it ran.  Sources that end on the
last byte of their buffer are the C suite's (tests/c/check_copy.c, tcase
"blocks").
"""
from __future__ import annotations

import pytest

import pylayout as pl
from _gather_checks import COMMON
from _simd_children import ORACLES, PATHS, check_against

CHILD_TIMEOUT = 600

# Runs in the child with `pl` and `oracle` defined (and torch imported for it).
CHECKS = COMMON + r"""
SIDES = (1, 2, 3, 4, 5, 7, 8, 9, 16)

def check_view(view):
    # torch has no negative strides: those views are NumPy's alone
    if oracle == "torch" and any(s < 0 for s in view.strides):
        return 0
    check(view)
    return 1

def run():
    cases = 0
    for threads in (1, 2):
        pl.set_num_threads(threads)
        for dtype in (np.uint8, np.float16, np.float32, np.float64, np.complex128):
            isz = np.dtype(dtype).itemsize
            for m in SIDES:
                for n in SIDES:
                    if m * n < 2 or m * n * isz > 320:
                        continue
                    for N in ((1, 3, 7, 64, 85) if threads == 1 else (5, 86)):
                        for off in (0, isz, 16 + isz // 2):
                            if off % isz and oracle == "torch":
                                continue
                            a = source(N * m * n, dtype, N + m + n, off).reshape(N, n, m)
                            cases += check_view(a.transpose(0, 2, 1))          # matrices transposed
                            cases += check_view(a[:, ::-1].transpose(0, 2, 1))  # rotated by 90 degrees
                            cases += check_view(a[:, :, ::-1])                 # rows reversed
            # 3-D blocks in every dim order, and 7 x 7 feature maps
            b = source(67 * 24, dtype, 24, isz).reshape(67, 2, 3, 4)
            for perm in ((0, 1, 3, 2), (0, 2, 1, 3), (0, 2, 3, 1), (0, 3, 1, 2), (0, 3, 2, 1)):
                cases += check_view(b.transpose(perm))
                cases += check_view(b[:, :, ::-1].transpose(perm))
            f = source(4 * 16 * 49, dtype, 49, 16).reshape(4, 16, 7, 7)
            cases += check_view(f.transpose(0, 1, 3, 2))
            # 4 MiB and more: streamed through a buffer, the threads splitting the batch
            for m, n in ((3, 3), (4, 4), (7, 7)):
                if m * n * isz > 256:
                    continue
                N = (4 << 20) // (m * n * isz) + 5
                a = source(N * m * n, dtype, m, 16 if threads == 1 else 0).reshape(N, n, m)
                cases += check_view(a.transpose(0, 2, 1))
    print("simd=" + pl.info()["simd"], "cases", cases)

run()
"""


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("path", PATHS)
def test_block_permutes_match_numpy_and_torch(path, oracle, request):
    check_against(CHECKS, path, oracle, CHILD_TIMEOUT, request)


def test_batches_of_small_matrices(np, torch):
    """The everyday cases on torch tensors and NumPy arrays: rotation matrices and 4 x 4
    transforms transposed, 7 x 7 feature maps transposed, small images to channels_last;
    results of the caller's type, equal to torch's and NumPy's own copies, and copy_into
    bumping the destination's version counter."""
    gen = torch.Generator().manual_seed(16)
    for threads in (1, 2):
        before = pl.get_num_threads()
        pl.set_num_threads(threads)
        for x in (torch.randn(100000, 3, 3, generator=gen), torch.randn(4096, 4, 4, generator=gen, dtype=torch.float64),
                  torch.randn(16, 512, 7, 7, generator=gen), torch.randint(0, 256, (70000, 8, 4), generator=gen,
                                                                            dtype=torch.uint8)):
            view = x.transpose(-1, -2)
            got = pl.contiguous(view)
            assert type(got) is torch.Tensor and got.is_contiguous() and torch.equal(got, view.contiguous())
            out = torch.empty(view.shape, dtype=view.dtype)
            v0 = out._version
            assert pl.copy_into(out, view) is out and torch.equal(out, view) and out._version > v0
            a = view.numpy()
            got_a = pl.contiguous(a)
            assert type(got_a) is np.ndarray and np.array_equal(got_a, np.ascontiguousarray(a))
        img = torch.randint(0, 256, (512, 3, 4, 4), generator=gen, dtype=torch.uint8)
        got = pl.contiguous(img, "channels_last")
        assert got.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(got, img) and got.stride() == img.contiguous(memory_format=torch.channels_last).stride()
        pl.set_num_threads(before)


def test_groups_across_a_short_dim(np, torch):
    """Groups packed in both tensors transposed across a short dim, which copy as rows of groups
    (plan.c's pl_short_side_rows) or through planes: 7 x 7 feature maps to (N, H, C, W), point
    triples regrouped, against torch's and NumPy's own copies at 1 and 2 threads."""
    gen = torch.Generator().manual_seed(17)
    for threads in (1, 2):
        before = pl.get_num_threads()
        pl.set_num_threads(threads)
        for dt in (torch.uint8, torch.float16, torch.float32, torch.float64):
            for shape, perm in (((16, 512, 7, 7), (0, 2, 1, 3)), ((16, 512, 7, 7), (2, 0, 1, 3)),
                                ((4096, 64, 3, 3), (0, 2, 1, 3)), ((4096, 3, 64, 3), (0, 2, 1, 3)),
                                ((2, 1000, 15, 6), (0, 2, 1, 3)), ((30000, 2, 3), (1, 0, 2))):
                x = (torch.rand(shape, generator=gen) * 255).to(dt).permute(perm)
                got = pl.contiguous(x)
                assert got.is_contiguous() and torch.equal(got, x.contiguous()), (dt, shape, perm)
                a = x.numpy()
                out = np.full(a.size + 7, 7, a.dtype)[3:3 + a.size].reshape(a.shape)
                assert pl.copy_into(out, a) is out and np.array_equal(out, np.ascontiguousarray(a))
        pl.set_num_threads(before)
