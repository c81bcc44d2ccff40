"""The child-side helpers of the gather tests (test_strided_gather.py,
test_group_gather.py): random sources off their cache lines, and a check of
one strided view copied by pylayout against NumPy's own copy.

COMMON is Python source prepended to a test's CHECKS, which run in a child
per SIMD path (_simd_children.run_child) with `pl` and `oracle` defined."""

COMMON = r"""
import numpy as np

SENT = 0xA5

def source(n, dtype, seed, off):
    # random bytes (NaN payloads included, compared as bytes), starting off
    # bytes past a cache line
    rng = np.random.default_rng(seed)
    raw = np.frombuffer(bytearray(rng.bytes(n * np.dtype(dtype).itemsize + 64 + off)), np.uint8)
    lo = (-raw.ctypes.data) % 64 + off
    return raw[lo:lo + n * np.dtype(dtype).itemsize].view(dtype)

def as_bytes(x):
    if oracle == "torch":
        x = x.numpy()
    return np.ascontiguousarray(x).view(np.uint8).tobytes()

def check(view):
    # view: a NumPy strided view; checked as itself or as a torch tensor
    want = np.ascontiguousarray(view)
    src = view if oracle == "numpy" else torch.from_numpy(view)
    got = pl.contiguous(src)
    assert type(got) is type(src), type(got)
    assert as_bytes(got) == want.tobytes(), ("contiguous", view.shape, view.strides, view.dtype)
    for dst_off in (0, 5 * view.dtype.itemsize, 1):
        raw = np.full(want.nbytes + dst_off + 128, SENT, np.uint8)
        lo = (-raw.ctypes.data) % 64 + dst_off
        if dst_off % view.dtype.itemsize == 0:
            region = raw[lo:lo + want.nbytes].view(view.dtype).reshape(view.shape)
            pl.copy_into(region if oracle == "numpy" else torch.from_numpy(region), src)
        elif oracle == "torch" or view.dtype.itemsize == 1:
            continue  # torch has no misaligned tensors; uint8 has no misalignment
        else:  # NumPy arrays off their element alignment
            region = np.ndarray(view.shape, view.dtype, raw.data, offset=lo)
            pl.copy_into(region, src)
        assert raw[lo:lo + want.nbytes].tobytes() == want.tobytes(), ("copy_into", view.shape, view.strides, dst_off)
        assert not np.any(raw[:lo] != SENT) and not np.any(raw[lo + want.nbytes:] != SENT), "guard bytes written"
"""
