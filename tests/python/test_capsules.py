"""DLPack capsules both ways, copy/device/stream arguments, and a ctypes producer.

The ctypes producer (_producers.py) builds DLManagedTensor(Versioned) structs
by hand, with deleters that count their calls and a capsule destructor that
runs the deleter only for an unconsumed capsule.  With it the tests check
ownership (deleter exactly once: consumed or not, legacy or versioned, on error
paths, on another thread), unsupported versions, non-CPU devices, NULL strides,
byte_offset and malformed tensors.
"""
from __future__ import annotations

import ctypes
import gc
import threading

import pytest

import pylayout as pl
import _producers as P


def _versioned_flags(capsule) -> int:
    ptr = P.capsule_pointer(capsule, b"dltensor_versioned")
    return P.DLManagedTensorVersioned.from_address(ptr).flags


class _CapsuleHolder:
    """Hands a prepared capsule to NumPy / torch, which only accept producers."""

    def __init__(self, capsule, device=(1, 0)):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kw):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


# ------------------------------------------------------------ capsule kinds


def test_export_capsule_names(np):
    t = pl.from_dlpack(np.arange(6.0))
    assert P.capsule_name(t.__dlpack__()) == "dltensor"
    assert P.capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert P.capsule_name(t.__dlpack__(max_version=(1, 3))) == "dltensor_versioned"
    assert P.capsule_name(t.__dlpack__(max_version=(2, 0))) == "dltensor_versioned"
    assert P.capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert t.__dlpack_device__() == (1, 0)
    cap = t.__dlpack__(max_version=(1, 0))
    ptr = P.capsule_pointer(cap, b"dltensor_versioned")
    m = P.DLManagedTensorVersioned.from_address(ptr)
    assert (m.version.major, m.version.minor) == tuple(pl.DLPACK_VERSION)
    assert m.version.major == 1
    assert m.dl_tensor.data == t.data_ptr and m.dl_tensor.ndim == 1 and m.flags == 0


def test_import_torch_legacy_capsule(torch):
    x = torch.arange(12, dtype=torch.int64).reshape(3, 4).t()
    cap = torch.utils.dlpack.to_dlpack(x)
    assert P.capsule_name(cap) == "dltensor"
    t = pl.from_dlpack(cap)
    assert P.capsule_name(cap) == "used_dltensor"
    assert t.shape == (4, 3) and t.strides == (1, 4) and t.data_ptr == x.data_ptr()
    y = torch.from_dlpack(t)
    y[1, 2] = -5
    assert x[1, 2].item() == -5
    with pytest.raises(ValueError, match="consumed"):
        pl.from_dlpack(cap)


def test_import_numpy_versioned_capsule(np):
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)[:, ::2]
    cap = a.__dlpack__(max_version=(1, 0))
    assert P.capsule_name(cap) == "dltensor_versioned"
    t = pl.from_dlpack(cap)
    assert P.capsule_name(cap) == "used_dltensor_versioned"
    assert t.shape == a.shape and t.strides == (12, 8, 1) and t.data_ptr == a.ctypes.data
    b = np.from_dlpack(t)
    b[1, 1, 3] = 999
    assert a[1, 1, 3] == 999
    with pytest.raises(ValueError, match="consumed"):
        pl.from_dlpack(cap)


def test_pylayout_capsules_consumed_by_torch_and_numpy(torch, np):
    a = np.arange(6.0).reshape(2, 3)
    t = pl.from_dlpack(a)
    for cap in (t.__dlpack__(), t.__dlpack__(max_version=(1, 0))):
        y = torch.from_dlpack(cap)
        assert y.data_ptr() == a.ctypes.data
        assert P.capsule_name(cap).startswith("used_")
    b = np.from_dlpack(_CapsuleHolder(t.__dlpack__(max_version=(1, 0))))
    assert b.ctypes.data == a.ctypes.data


def test_consumed_pylayout_capsule_reused(np):
    t = pl.from_dlpack(np.zeros(3))
    for cap in (t.__dlpack__(), t.__dlpack__(max_version=(1, 0))):
        pl.from_dlpack(cap)
        with pytest.raises(ValueError, match="already consumed"):
            pl.from_dlpack(cap)


def test_wrong_capsule_name_is_type_error():
    rec = P.make_managed((2, 2))
    cap = rec.capsule(name=P.NAME_BOGUS)
    with pytest.raises(TypeError, match="not_a_dltensor"):
        pl.from_dlpack(cap)
    assert P.capsule_name(cap) == "not_a_dltensor"
    del cap
    gc.collect()
    assert rec.deleted == 0  # a capsule we do not recognise is not ours to free
    rec.managed.deleter(rec.address)
    assert rec.deleted == 1
    # another library's non-DLPack capsule
    with pytest.raises(TypeError):
        pl.from_dlpack(pl.Tensor.__dlpack_c_exchange_api__)


@pytest.mark.parametrize("obj", [object(), 3, "abc", [1, 2, 3], None, b"xx"])
def test_non_producer_is_type_error(obj):
    with pytest.raises(TypeError, match="__dlpack__"):
        pl.from_dlpack(obj)
    for f in (pl.is_contiguous, pl.suggest_format, pl.is_dense):
        with pytest.raises(TypeError, match="DLPack"):
            f(obj)


def test_dlpack_returning_non_capsule_is_type_error():
    class Bad:
        def __dlpack__(self, **kw):
            return 42

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(TypeError, match="PyCapsule"):
        pl.from_dlpack(Bad())


# ------------------------------------------------------------ read-only


def test_readonly_numpy(np):
    a = np.arange(6.0).reshape(2, 3)
    a.flags.writeable = False
    t = pl.from_dlpack(a)
    assert t.readonly is True
    assert "readonly" in repr(t)
    b = np.from_dlpack(t)  # versioned protocol carries READ_ONLY
    assert b.flags.writeable is False
    assert b.ctypes.data == a.ctypes.data
    assert _versioned_flags(t.__dlpack__(max_version=(1, 0))) & P.FLAG_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(max_version=(0, 9))
    # a read-only capsule from NumPy directly
    t2 = pl.from_dlpack(a.__dlpack__(max_version=(1, 0)))
    assert t2.readonly is True


def test_readonly_to_torch(torch, np):
    """torch has no read-only tensors: it may refuse a READ_ONLY capsule (BufferError) or
    import it (with a warning); if it imports it, it must be the same memory."""
    import warnings

    a = np.arange(4.0)
    a.flags.writeable = False
    t = pl.from_dlpack(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            y = torch.from_dlpack(t)
        except BufferError:
            return
    assert y.data_ptr() == a.ctypes.data


def test_ctypes_readonly_flag(np):
    rec = P.make_managed((3,), flags=P.FLAG_READ_ONLY)
    t = pl.from_dlpack(rec.capsule())
    assert t.readonly is True
    assert np.from_dlpack(t).flags.writeable is False
    with pytest.raises(BufferError):
        t.__dlpack__()
    del t
    gc.collect()
    assert rec.deleted == 1


# ------------------------------------------------------------ copy / device / stream


def test_dlpack_copy_true_false(np):
    a = np.arange(12.0).reshape(3, 4)
    for src in (a, a.T, a[:, ::2]):
        t = pl.from_dlpack(src)
        cap = t.__dlpack__(max_version=(1, 0), copy=True)
        assert _versioned_flags(cap) & P.FLAG_IS_COPIED
        c = np.from_dlpack(_CapsuleHolder(cap))
        assert c.ctypes.data != src.ctypes.data
        assert np.array_equal(c, src)
        c[...] = -1
        assert not (src == -1).any()
        cap = t.__dlpack__(max_version=(1, 0), copy=False)
        assert not _versioned_flags(cap) & P.FLAG_IS_COPIED
        d = np.from_dlpack(_CapsuleHolder(cap))
        assert d.ctypes.data == src.ctypes.data and d.strides == src.strides
        # legacy capsules with copy=True also copy (no flag to carry it)
        e = np.from_dlpack(_CapsuleHolder(t.__dlpack__(copy=True)))
        assert e.ctypes.data != src.ctypes.data and np.array_equal(e, src)


def test_dlpack_copy_of_readonly_is_writable(np):
    a = np.arange(4.0)
    a.flags.writeable = False
    t = pl.from_dlpack(a)
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    flags = _versioned_flags(cap)
    assert flags & P.FLAG_IS_COPIED
    assert not flags & P.FLAG_READ_ONLY, "a fresh copy belongs to the consumer and is writable"


def test_dlpack_dl_device_and_stream(np):
    t = pl.from_dlpack(np.zeros((2, 2)))
    assert P.capsule_name(t.__dlpack__(dl_device=(1, 0))) == "dltensor"
    assert P.capsule_name(t.__dlpack__(dl_device=(1, 0), max_version=(1, 0))) == "dltensor_versioned"
    for dev in ((2, 0), (1, 1), (10, 0)):
        with pytest.raises(BufferError):
            t.__dlpack__(dl_device=dev)
        with pytest.raises(BufferError):
            t.__dlpack__(dl_device=dev, max_version=(1, 0))
    t.__dlpack__(stream=None)
    for stream in (0, 1, -1):
        with pytest.raises(ValueError, match="stream"):
            t.__dlpack__(stream=stream)
    with pytest.raises(TypeError):
        t.__dlpack__((1, 0))  # keyword-only
    with pytest.raises(TypeError):
        t.__dlpack__(bogus=1)
    with pytest.raises(TypeError):
        t.__dlpack__(max_version="1.0")


def test_from_dlpack_copy(torch, np):
    a = np.arange(12.0).reshape(3, 4).T
    x = torch.arange(12.0).reshape(3, 4).t()
    for src, ptr in ((a, a.ctypes.data), (x, x.data_ptr()), (pl.from_dlpack(a), a.ctypes.data)):
        c = pl.from_dlpack(src, copy=True)
        assert c.data_ptr != ptr, type(src)
        assert c.readonly is False
        v = pl.from_dlpack(src, copy=False)
        assert v.data_ptr == ptr, type(src)
        n = pl.from_dlpack(src)
        assert n.data_ptr == ptr, type(src)
        cn = np.from_dlpack(c)
        assert np.array_equal(cn, a), type(src)
        cn[0, 0] = 1000
        assert a[0, 0] == 0 and x[0, 0].item() == 0
    # a legacy-only producer cannot be asked to copy: pylayout copies itself
    legacy = P.LegacyOnlyProducer(lambda: P.make_managed((3, 4), versioned=False))
    c = pl.from_dlpack(legacy, copy=True)
    assert legacy.calls == 1 and c.data_ptr != legacy.records[0].data_ptr
    assert bytes(memoryview(c).cast("B")) == legacy.records[0].read_bytes(0, 48)
    assert c.readonly is False
    v = pl.from_dlpack(legacy, copy=False)
    assert v.data_ptr == legacy.records[1].data_ptr
    del c, v
    legacy.capsules.clear()
    gc.collect()
    assert [r.deleted for r in legacy.records] == [1, 1]


def test_from_dlpack_copy_of_a_copy_copies_again(np):
    """copy=True must always copy.  A tensor whose producer set IS_COPIED is still an
    existing tensor: from_dlpack(t, copy=True) must not hand back t itself.

    Regression: mod_from_dlpack (src/_core_layout.c) used to skip the copy whenever the
    imported tensor carried IS_COPIED, and import_tensor returns a pylayout.Tensor
    unchanged, so
        t = pl.from_dlpack(np.zeros(3), copy=True)   # IS_COPIED (NumPy copied)
        pl.from_dlpack(t, copy=True) is t            # was True: aliased t
    """
    a = np.arange(6.0)
    t = pl.from_dlpack(a, copy=True)
    assert t.data_ptr != a.ctypes.data
    u = pl.from_dlpack(t, copy=True)
    assert u is not t
    assert u.data_ptr != t.data_ptr, "from_dlpack(copy=True) returned a view of its input"


def test_from_dlpack_device(np, torch):
    a = np.zeros(3)
    assert pl.from_dlpack(a, device=(1, 0)).data_ptr == a.ctypes.data
    assert pl.from_dlpack(a, device="cpu").data_ptr == a.ctypes.data
    assert pl.from_dlpack(a, device=a).data_ptr == a.ctypes.data  # anything with __dlpack_device__
    for dev in ((2, 0), (1, 3)):
        with pytest.raises(BufferError):
            pl.from_dlpack(a, device=dev)
        with pytest.raises(BufferError):
            pl.from_dlpack(torch.zeros(3), device=dev)
    for bad in ("cuda:0", (1,), 5):
        with pytest.raises(ValueError):
            pl.from_dlpack(a, device=bad)


# ------------------------------------------------------------ ctypes producer: ownership


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("order", ["tensor-first", "capsule-first"])
def test_deleter_once_consumed(versioned, order):
    rec = P.make_managed((4, 5), (5, 1), versioned=versioned)
    cap = rec.capsule()
    t = pl.from_dlpack(cap)
    assert t.data_ptr == rec.data_ptr and t.shape == (4, 5)
    assert P.capsule_name(cap) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    if order == "tensor-first":
        del t
        gc.collect()
        assert rec.deleted == 1
        del cap
    else:
        del cap
        gc.collect()
        assert rec.deleted == 0, "pylayout's tensor still owns the memory"
        del t
    gc.collect()
    assert rec.deleted == 1


@pytest.mark.parametrize("versioned", [True, False])
def test_deleter_once_never_consumed(versioned):
    rec = P.make_managed((3,), versioned=versioned)
    cap = rec.capsule()
    del cap
    gc.collect()
    assert rec.deleted == 1


@pytest.mark.parametrize("versioned", [True, False])
def test_deleter_once_through_views(torch, np, versioned):
    rec = P.make_managed((2, 3), versioned=versioned)
    t = pl.from_dlpack(rec.capsule())
    y = torch.from_dlpack(t)
    b = np.from_dlpack(t)
    c1 = t.__dlpack__(max_version=(1, 0))
    c2 = t.__dlpack__()  # never consumed
    t2 = pl.from_dlpack(c1)
    del t
    gc.collect()
    assert rec.deleted == 0
    assert y.data_ptr() == rec.data_ptr == b.ctypes.data == t2.data_ptr
    del y, b, c2
    gc.collect()
    assert rec.deleted == 0
    del t2, c1
    gc.collect()
    assert rec.deleted == 1


def test_deleter_on_another_thread():
    rec = P.make_managed((8,))
    box = [pl.from_dlpack(rec.capsule())]

    def drop():
        box.clear()
        gc.collect()

    th = threading.Thread(target=drop)
    th.start()
    th.join()
    gc.collect()
    assert rec.deleted == 1


def test_legacy_only_producer_fallback():
    for versioned in (False, True):
        prod = P.LegacyOnlyProducer(lambda: P.make_managed((2, 3), versioned=versioned))
        t = pl.from_dlpack(prod)
        assert prod.calls == 1  # the keyword call failed before the body ran; the retry worked
        assert t.shape == (2, 3) and t.data_ptr == prod.records[0].data_ptr
        assert pl.is_contiguous(prod) is True
        assert pl.suggest_format(prod) == "contiguous"
        assert prod.calls == 3
        del t
        prod.capsules.clear()
        gc.collect()
        assert [r.deleted for r in prod.records] == [1, 1, 1]


def test_recording_producer_gets_max_version_and_copy():
    prod = P.RecordingProducer(lambda kw: P.make_managed((4,)))
    t = pl.from_dlpack(prod)
    assert prod.calls[-1]["max_version"] == (1, 0)
    assert prod.calls[-1]["copy"] is None
    t2 = pl.from_dlpack(prod, copy=False)
    assert prod.calls[-1]["copy"] is False
    assert t2.data_ptr == prod.records[-1].data_ptr
    del t, t2
    gc.collect()
    assert all(r.deleted == 1 for r in prod.records)


def test_copy_true_producer_that_copies_is_not_copied_twice():
    # the producer honours copy=True and sets IS_COPIED: pylayout keeps its buffer
    prod = P.RecordingProducer(
        lambda kw: P.make_managed((4,), flags=P.FLAG_IS_COPIED if kw["copy"] else 0))
    t = pl.from_dlpack(prod, copy=True)
    assert prod.calls[-1]["copy"] is True
    assert t.data_ptr == prod.records[-1].data_ptr
    # a producer that ignores copy (no IS_COPIED): pylayout copies itself
    prod2 = P.RecordingProducer(lambda kw: P.make_managed((4,)))
    t2 = pl.from_dlpack(prod2, copy=True)
    assert t2.data_ptr != prod2.records[-1].data_ptr
    assert bytes(memoryview(t2).cast("B")) == prod2.records[-1].read_bytes(0, 16)
    del t, t2
    gc.collect()
    assert all(r.deleted == 1 for r in prod.records + prod2.records)


@pytest.mark.parametrize("version", [(2, 0), (0, 9), (3, 1)])
def test_unsupported_major_version(version):
    rec = P.make_managed((2, 2), version=version)
    cap = rec.capsule()
    with pytest.raises(BufferError, match="version"):
        pl.from_dlpack(cap)
    assert P.capsule_name(cap) == "dltensor_versioned"  # not consumed
    assert rec.deleted == 0
    del cap
    gc.collect()
    assert rec.deleted == 1
    # the same through a producer: the capsule dies inside from_dlpack
    prod = P.RecordingProducer(lambda kw: P.make_managed((2, 2), version=version))
    with pytest.raises(BufferError):
        pl.from_dlpack(prod)
    gc.collect()
    assert prod.records[0].deleted == 0 and P.capsule_name(prod.capsules[0]) == "dltensor_versioned"
    prod.capsules.clear()  # (the producer kept it: see _producers' note on ctypes callbacks)
    gc.collect()
    assert prod.records[0].deleted == 1


# ------------------------------------------------------------ ctypes producer: devices


@pytest.mark.parametrize("versioned", [True, False])
def test_cuda_capsule_metadata_only(np, versioned):
    # host memory labelled as CUDA, so a wrong read cannot crash the test
    rec = P.make_managed((2, 3, 4), (12, 1, 3), device=(P.kDLCUDA, 1), versioned=versioned)
    t = pl.from_dlpack(rec.capsule())
    assert t.device == (2, 1) and t.__dlpack_device__() == (2, 1)
    assert t.data_ptr == rec.data_ptr
    assert t.shape == (2, 3, 4) and t.strides == (12, 1, 3)
    assert pl.is_contiguous(t) is False
    assert pl.is_contiguous(t, "fortran") is False
    assert pl.is_dense(t) is True
    assert pl.suggest_format(t) == "contiguous"
    assert "device=(2, 1)" in repr(t)
    cap = t.__dlpack__(max_version=(1, 0), dl_device=(2, 1))  # re-export, zero-copy
    ptr = P.capsule_pointer(cap, b"dltensor_versioned")
    dl = P.DLManagedTensorVersioned.from_address(ptr).dl_tensor
    assert (dl.device.device_type, dl.device.device_id) == (2, 1) and dl.data == rec.data_ptr
    del cap
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError, match="device"):
        pl.from_dlpack(t, device="cpu")
    # memory operations refuse, naming the device
    host = np.zeros((2, 3, 4), dtype=np.float32)
    ops = {
        "contiguous": lambda: pl.contiguous(t),
        "contiguous fortran": lambda: pl.contiguous(t, "fortran"),
        "to_order": lambda: pl.to_order(t, (2, 1, 0)),
        "copy_into dst": lambda: pl.copy_into(t, host),
        "copy_into src": lambda: pl.copy_into(host, t),
        "memoryview": lambda: memoryview(t),
        "from_dlpack copy": lambda: pl.from_dlpack(t, copy=True),
        "__dlpack__ copy": lambda: t.__dlpack__(max_version=(1, 0), copy=True),
    }
    for name, op in ops.items():
        with pytest.raises(BufferError, match="device"):
            op()
            raise AssertionError(name)
    del t
    gc.collect()
    assert rec.deleted == 1


def test_cuda_capsule_np_asarray_raises(np):
    """np.asarray(t) on a CUDA tensor must raise, not build a 0-d object array.

    Regression: NumPy swallows the BufferError from Tensor_getbuffer and falls back
    to wrapping the Tensor as a Python object, so this used to give
        np.asarray(cuda_tensor) -> array(<pylayout.Tensor ...>, dtype=object), shape ()
    silently.  pylayout.Tensor must refuse (e.g. from __array__) with a BufferError
    naming the device.
    """
    rec = P.make_managed((2, 3), device=(P.kDLCUDA, 0))
    t = pl.from_dlpack(rec.capsule())
    with pytest.raises(BufferError, match="device"):
        r = np.asarray(t)
        raise AssertionError(f"np.asarray returned {r.dtype} array of shape {r.shape}")


def test_host_like_devices_allow_memory_ops(np):
    for dev in (P.kDLCUDAHost, 11, 13):  # CUDAHost, ROCMHost, CUDAManaged: host-addressable
        rec = P.make_managed((2, 3), device=(dev, 0))
        t = pl.from_dlpack(rec.capsule())
        assert memoryview(t).shape == (2, 3)
        assert pl.contiguous(t, "fortran").strides == (1, 2)


# ------------------------------------------------------------ ctypes producer: odd but valid


@pytest.mark.parametrize("versioned", [True, False])
def test_null_strides_made_explicit(np, versioned):
    rec = P.make_managed((2, 3, 4), None, versioned=versioned)
    t = pl.from_dlpack(rec.capsule())
    assert t.strides == (12, 4, 1)
    assert pl.is_contiguous(t)
    a = np.from_dlpack(t)
    assert a.strides == (48, 16, 4) and a.ctypes.data == rec.data_ptr
    # 0-d with NULL shape and strides
    rec0 = P.make_managed((), None, versioned=versioned)
    rec0.managed.dl_tensor.shape = ctypes.POINTER(ctypes.c_int64)()
    t0 = pl.from_dlpack(rec0.capsule())
    assert t0.shape == () and t0.strides == () and t0.nbytes == 4


def test_zero_size_with_null_data():
    rec = P.make_managed((3, 0), data=None)
    t = pl.from_dlpack(rec.capsule())
    assert t.shape == (3, 0) and t.nbytes == 0
    assert memoryview(t).nbytes == 0
    del t
    gc.collect()
    assert rec.deleted == 1


@pytest.mark.parametrize("versioned", [True, False])
def test_byte_offset_honoured(torch, np, versioned):
    # float32 (2, 3) transposed view starting 12 bytes into the buffer
    rec = P.make_managed((3, 2), (1, 3), byte_offset=12, versioned=versioned)
    t = pl.from_dlpack(rec.capsule())
    assert t.byte_offset == 12 and t.data_ptr == rec.data_ptr
    raw = np.frombuffer(rec.read_bytes(12, 24), dtype=np.float32).reshape(2, 3).T
    a = np.from_dlpack(t)
    assert a.ctypes.data == rec.data_ptr + 12
    assert np.array_equal(a, raw)
    assert np.array_equal(np.asarray(memoryview(t)), raw)
    assert np.array_equal(np.from_dlpack(pl.contiguous(t)), raw)
    assert np.array_equal(np.from_dlpack(pl.from_dlpack(t, copy=True)), raw)
    assert np.array_equal(np.from_dlpack(_CapsuleHolder(t.__dlpack__(max_version=(1, 0), copy=True))), raw)
    y = torch.from_dlpack(t)
    assert y.data_ptr() == rec.data_ptr + 12
    assert np.array_equal(y.numpy(), raw)
    # writes land at the offset
    a[2, 1] = 1.5
    assert np.frombuffer(rec.read_bytes(12 + 4 * 5, 4), dtype=np.float32)[0] == 1.5
    # re-export keeps data pointer and byte_offset
    cap = t.__dlpack__(max_version=(1, 0))
    ptr = P.capsule_pointer(cap, b"dltensor_versioned")
    dl = P.DLManagedTensorVersioned.from_address(ptr).dl_tensor
    assert dl.data == rec.data_ptr and dl.byte_offset == 12


# ------------------------------------------------------------ ctypes producer: malformed


def _malformed():
    return {
        "negative shape": dict(shape=(2, -1, 3), strides=(3, 3, 1)),
        "ndim 65": dict(shape=[1] * 65, strides=[1] * 65),
        "ndim -1": dict(shape=[2], strides=[1], ndim=-1),
        "NULL data, numel > 0": dict(shape=(2, 3), strides=(3, 1), data=None),
        "lanes 2": dict(shape=(4,), strides=(1,), dtype=(P.kDLFloat, 32, 2)),
        "4-bit ints": dict(shape=(4,), strides=(1,), dtype=(P.kDLInt, 4, 1)),
        "opaque handle": dict(shape=(4,), strides=(1,), dtype=(3, 64, 1)),
    }


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("case", list(_malformed()))
def test_malformed_is_buffer_error_and_deleter_once(case, versioned):
    kw = dict(_malformed()[case])
    shape, strides = kw.pop("shape"), kw.pop("strides")
    rec = P.make_managed(shape, strides, versioned=versioned, **kw)
    cap = rec.capsule()
    with pytest.raises(BufferError):
        pl.from_dlpack(cap)
    assert P.capsule_name(cap) in ("dltensor", "dltensor_versioned")  # not consumed
    assert rec.deleted == 0
    del cap
    gc.collect()
    assert rec.deleted == 1
    # the queries refuse it too, through a producer, and still free it once
    prod = P.RecordingProducer(lambda kw_: P.make_managed(shape, strides, versioned=versioned, **kw))
    with pytest.raises(BufferError):
        pl.from_dlpack(prod)
    with pytest.raises(BufferError):
        pl.is_contiguous(prod)
    gc.collect()
    assert [r.deleted for r in prod.records] == [0, 0]
    unconsumed = "dltensor_versioned" if versioned else "dltensor"
    assert [P.capsule_name(c) for c in prod.capsules] == [unconsumed] * 2
    prod.capsules.clear()
    gc.collect()
    assert [r.deleted for r in prod.records] == [1, 1]
