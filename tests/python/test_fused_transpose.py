"""Transposes with short sides, read and written together with the dims that continue them.

np.asfortranarray of a (N, C, 7, 7) feature map, the reversed dims of a
(4096, 8, 8, 4) uint8 tensor, attention heads (B, H, S, 64) to (64, S, H, B):
the tiles of a plain transpose would read src rows of a few bytes each, or
write dst rows of a few bytes a page or more apart, and use a few bytes of
every cache line they touch.  Such a copy takes each short side together
with the dims that continue it in its own tensor, through two L1 buffers
(plan.c's pl_fused).  Checked bit-exact against NumPy's and torch's own
copies on every element size, every order of 4-D shapes with short dims,
reversals with flipped dims (NumPy's, src rows at negative steps), sources
and destinations off their cache lines and off their element alignment,
guard bytes around every destination, 1 and 2 threads, and 4-16 MiB copies
that the threads split and that stream.  Each SIMD path runs in its own
interpreter with PYLAYOUT_SIMD set; a path this CPU lacks is skipped, and
the child reports the path it ran.  Sources that end on the last byte of
their buffer are the C suite's (tests/c/check_copy.c, tcase "fused").
"""
from __future__ import annotations

import itertools

import pytest

import pylayout as pl
from _gather_checks import COMMON
from _simd_children import ORACLES, PATHS, check_against

CHILD_TIMEOUT = 600

# Runs in the child with `pl` and `oracle` defined (and torch imported for it).
CHECKS = COMMON + r"""
import itertools

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
            for k, shape in enumerate(((8, 16, 64, 8), (64, 8, 8, 4), (16, 40, 7, 7), (64, 8, 2, 2))):
                n = int(np.prod(shape))
                a = source(n, dtype, k, (k * isz) % 48).reshape(shape)
                perms = list(itertools.permutations(range(4))) if threads == 1 else [(3, 2, 1, 0), (3, 1, 0, 2)]
                for perm in perms:
                    cases += check_view(a.transpose(perm))
                cases += check_view(a[::-1, :, ::-1].transpose(3, 2, 1, 0))  # rows gathered backwards
            for shape, perm in (((40, 1024, 2, 2), (3, 2, 1, 0)), ((4, 6, 5, 7, 3), (4, 3, 2, 1, 0)),
                                ((64, 64, 16), (2, 1, 0)), ((300, 20, 2), (2, 1, 0)),
                                # the goal table's 5-D permute, small: src runs of
                                # 16 bytes or less fuse, longer ones into dst rows
                                # under a line keep the tiles
                                ((10, 12, 16, 8, 12), (2, 3, 1, 4, 0)), ((10, 12, 16, 8, 8), (2, 3, 1, 4, 0))):
                a = source(int(np.prod(shape)), dtype, 9, isz).reshape(shape)
                cases += check_view(a.transpose(perm))
            # 4-16 MiB: the threads split the units; past a quarter of the L3 dst streams
            for shape in ((256, 16, 256, 8), (65536, 8, 8, 4)):
                n = (4 << 20) // isz
                shape = (n // int(np.prod(shape[1:])),) + shape[1:]
                a = source(int(np.prod(shape)), dtype, 3, 16 if threads == 1 else 0).reshape(shape)
                cases += check_view(a.transpose(3, 2, 1, 0))
    print("simd=" + pl.info()["simd"], "cases", cases)

run()
"""


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("path", PATHS)
def test_fused_transposes_match_numpy_and_torch(path, oracle, request):
    check_against(CHECKS, path, oracle, CHILD_TIMEOUT, request)


def test_fortran_order_of_small_dims(np, torch):
    """The everyday cases: np.asfortranarray and torch's reversed permute of tensors whose
    innermost dims are short, feature maps to (W, H, C, N); results of the caller's type,
    equal to NumPy's and torch's own copies, and copy_into bumping the destination's version
    counter."""
    gen = torch.Generator().manual_seed(36)
    for threads in (1, 2):
        before = pl.get_num_threads()
        pl.set_num_threads(threads)
        for dt in (torch.uint8, torch.float16, torch.float32):
            for shape in ((4096, 8, 8, 4), (8, 16, 1024, 8), (16, 512, 7, 7), (32, 12, 128, 64)):
                x = (torch.rand(shape, generator=gen) * 255).to(dt)
                for perm in ((3, 2, 1, 0), (3, 1, 0, 2), (2, 3, 1, 0)):
                    view = x.permute(perm)
                    got = pl.contiguous(view)
                    assert type(got) is torch.Tensor and got.is_contiguous()
                    assert torch.equal(got, view.contiguous()), (dt, shape, perm)
                    out = torch.empty(view.shape, dtype=dt)
                    v0 = out._version
                    assert pl.copy_into(out, view) is out and torch.equal(out, view) and out._version > v0
                a = x.numpy()
                f = pl.contiguous(a, "fortran")
                assert type(f) is np.ndarray and f.flags.f_contiguous and np.array_equal(f, a)
                assert f.tobytes(order="A") == np.asfortranarray(a).tobytes(order="A")
        pl.set_num_threads(before)


def test_every_order_of_a_small_4d_tensor_matches_torch(np, torch):
    """Every dim order of a tensor with short dims, into a preallocated dst, against torch's
    copy_: the plain tiles, planes, blocks and fused transposes each take some of them."""
    gen = torch.Generator().manual_seed(37)
    for dt in (torch.uint8, torch.float16, torch.float32, torch.float64):
        x = (torch.rand(24, 9, 33, 4, generator=gen) * 255).to(dt)
        for perm in itertools.permutations(range(4)):
            view = x.permute(perm)
            out = torch.full(view.shape, 7, dtype=dt)
            pl.copy_into(out, view)
            assert torch.equal(out, view), (dt, perm)
