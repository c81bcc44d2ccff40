"""pylayout.Tensor as a Python object: attributes, repr, buffer protocol, empty(), errors.

The buffer protocol is checked against NumPy's own getbuffer on the same
memory, flag combination by flag combination, through PyObject_GetBuffer
called with ctypes.
"""
from __future__ import annotations

import ctypes
import gc
import re

import pytest

import pylayout as pl
import _producers as P


class Py_buffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
        ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
        ("internal", ctypes.c_void_p),
    ]


_GetBuffer = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(Py_buffer), ctypes.c_int)(
    ("PyObject_GetBuffer", ctypes.pythonapi))
_ReleaseBuffer = ctypes.PYFUNCTYPE(None, ctypes.POINTER(Py_buffer))(("PyBuffer_Release", ctypes.pythonapi))

PyBUF_SIMPLE, PyBUF_WRITABLE, PyBUF_FORMAT, PyBUF_ND = 0, 0x1, 0x4, 0x8
PyBUF_STRIDES = 0x10 | PyBUF_ND
PyBUF_C_CONTIGUOUS = 0x20 | PyBUF_STRIDES
PyBUF_F_CONTIGUOUS = 0x40 | PyBUF_STRIDES
PyBUF_ANY_CONTIGUOUS = 0x80 | PyBUF_STRIDES
PyBUF_INDIRECT = 0x100 | PyBUF_STRIDES

FLAG_SETS = {
    "SIMPLE": PyBUF_SIMPLE,
    "WRITABLE": PyBUF_WRITABLE,
    "ND": PyBUF_ND,
    "ND|FORMAT": PyBUF_ND | PyBUF_FORMAT,
    "STRIDES": PyBUF_STRIDES,
    "RECORDS_RO": PyBUF_STRIDES | PyBUF_FORMAT,
    "RECORDS": PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE,
    "C_CONTIGUOUS": PyBUF_C_CONTIGUOUS,
    "F_CONTIGUOUS": PyBUF_F_CONTIGUOUS,
    "ANY_CONTIGUOUS": PyBUF_ANY_CONTIGUOUS,
    "FULL_RO": PyBUF_INDIRECT | PyBUF_FORMAT,
    "FULL": PyBUF_INDIRECT | PyBUF_FORMAT | PyBUF_WRITABLE,
    "CONTIG": PyBUF_ND | PyBUF_WRITABLE,
}

# NumPy spells int64 as the native 'l'; both mean an 8-byte signed integer here.
_SAME_FORMAT = {"l": "q", "L": "Q", "q": "q", "Q": "Q"}


def _get_buffer(obj, flags):
    """Everything PyObject_GetBuffer reports, or "refused".

    NumPy refuses an impossible contiguity request with ValueError, pylayout with
    BufferError (what PEP 3118 asks for): both count as "refused".  ndim is compared
    only when shape was requested (PyBUF_ND): without it NumPy reports 0, CPython's
    PyBuffer_FillInfo and pylayout 1 (see test_simple_buffer_consumers), and
    consumers must ignore it.
    """
    view = Py_buffer()
    try:
        _GetBuffer(obj, ctypes.byref(view), flags)
    except (BufferError, ValueError):
        return "refused"
    try:
        nd = view.ndim
        shape = tuple(view.shape[i] for i in range(nd)) if view.shape else None
        strides = tuple(view.strides[i] for i in range(nd)) if view.strides else None
        if nd == 0:  # pointers are meaningless at 0-d (see test_zero_d_buffer_has_null_shape_and_strides)
            shape = () if flags & PyBUF_ND else None
            strides = () if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else None
        fmt = view.format.decode() if view.format else None
        fmt = _SAME_FORMAT.get(fmt, fmt)
        return dict(buf=view.buf or 0, len=view.len, itemsize=view.itemsize, readonly=view.readonly,
                    ndim=nd if shape is not None else "n/a", format=fmt, shape=shape, strides=strides,
                    suboffsets=bool(view.suboffsets))
    finally:
        _ReleaseBuffer(ctypes.byref(view))


def _np_layouts(np):
    base = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    ro = base.copy()
    ro.flags.writeable = False
    return {
        "C": base,
        "F": np.asfortranarray(base),
        "transposed": base.transpose(1, 2, 0),
        "sliced": base[:, ::2, 1:],
        "reversed": base[::-1],
        "broadcast": np.broadcast_to(np.arange(4.0), (3, 4)),
        "0-d": np.array(2.5),
        "1-d": np.arange(5, dtype=np.int64),
        "size-0": np.empty((3, 0, 2), dtype=np.int16),
        "size-1 dims": base[:1, :, :1],
        "readonly": ro,
        "bool": np.array([True, False, True]),
        "complex": np.arange(6, dtype=np.complex128).reshape(2, 3).T,
        "uint8": np.arange(10, dtype=np.uint8)[::3],
        "float16": np.ones((2, 2), dtype=np.float16),
    }


# ------------------------------------------------------------ attributes / repr


def test_attributes_are_read_only(np):
    t = pl.from_dlpack(np.zeros((2, 3)))
    for name in ("shape", "strides", "dtype", "device", "ndim", "itemsize", "nbytes", "data_ptr",
                 "byte_offset", "readonly"):
        with pytest.raises(AttributeError):
            setattr(t, name, 1)


def test_cannot_construct_directly():
    """A Tensor exists only over memory someone handed over: no constructor
    (Py_TPFLAGS_DISALLOW_INSTANTIATION, as CPython's own such types), and the
    type's doc says where Tensors come from."""
    for make in (lambda: pl.Tensor(), lambda: pl.Tensor.__new__(pl.Tensor), lambda: object.__new__(pl.Tensor)):
        with pytest.raises(TypeError, match="cannot create|not safe"):
            make()
    assert "pylayout.from_dlpack" in pl.Tensor.__doc__
    with pytest.raises(TypeError):  # immutable: nobody rebinds what other libraries read from C
        pl.Tensor.__dlpack__ = None


def test_dtype_names_and_itemsize(torch):
    for name, size in [("bool", 1), ("int8", 1), ("int16", 2), ("int32", 4), ("int64", 8), ("uint8", 1),
                       ("uint16", 2), ("uint32", 4), ("uint64", 8), ("float16", 2), ("bfloat16", 2),
                       ("float32", 4), ("float64", 8), ("complex64", 8), ("complex128", 16)]:
        x = torch.zeros(3, dtype=getattr(torch, name))
        t = pl.from_dlpack(x)
        assert t.dtype == name and t.itemsize == size and t.nbytes == 3 * size
        e = pl.empty((3,), name)
        assert e.dtype == name and e.itemsize == size
        e2 = pl.empty((3,), getattr(torch, name))
        assert e2.dtype == name


def test_repr_is_readable(np, torch):
    cases = [
        (np.zeros((2, 3), np.float32), "shape=(2, 3)", "strides=(3, 1)", "dtype='float32'", "contiguous"),
        (np.zeros((2, 3), np.float32).T, "shape=(3, 2)", "strides=(1, 3)", "dtype='float32'", "fortran"),
        (torch.zeros(2, 3, 4, 5).contiguous(memory_format=torch.channels_last), "shape=(2, 3, 4, 5)",
         "strides=(60, 1, 15, 3)", "channels_last", "float32"),
        (torch.zeros(3, 1).expand(3, 4), "strides=(1, 0)", "strided", "float32", "device=(1, 0)"),
        (np.array(1, np.int8), "shape=()", "strides=()", "dtype='int8'", "pylayout.Tensor("),
    ]
    for x, *needles in cases:
        r = repr(pl.from_dlpack(x))
        for n in needles:
            assert n in r, (r, n)
        assert len(r) < 200
        assert re.fullmatch(r"pylayout\.Tensor\(.*\)", r)
    r = repr(pl.from_dlpack(P.make_managed((2,), byte_offset=4).capsule()))
    assert "byte_offset" in r
    gc.collect()


# ------------------------------------------------------------ buffer protocol


def test_buffer_protocol_matches_numpy(np):
    mismatches = []
    for name, a in _np_layouts(np).items():
        t = pl.from_dlpack(a)
        for fname, flags in FLAG_SETS.items():
            want = _get_buffer(a, flags)
            got = _get_buffer(t, flags)
            if isinstance(want, dict) and isinstance(got, dict) and a.size == 0:
                for d in (want, got):  # any pointer and any strides will do for empty buffers,
                    d["buf"] = 0       # but both must hand out strides, or neither
                    d["strides"] = d["strides"] is not None
            if want != got:
                mismatches.append((name, fname, "numpy", want, "pylayout", got))
    assert not mismatches, "\n".join(map(str, mismatches[:10]))


def test_simple_buffer_consumers(np):
    """Consumers that ask for PyBUF_SIMPLE (a flat byte buffer) work on C-contiguous tensors.

    Regression: for a request without PyBUF_ND, Tensor_getbuffer (src/_core_tensor.c) used
    to leave view->ndim at the tensor's rank (shape NULL), where CPython's
    PyBuffer_FillInfo reports 1 and NumPy 0.  hashlib (and others) reject ndim > 1, so
        hashlib.sha1(pylayout.from_dlpack(np.zeros((3, 4))))
    raised "BufferError: Buffer must be single dimension", while the NumPy array
    itself hashes fine.
    """
    import hashlib

    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = pl.from_dlpack(a)
    assert bytes(t) == a.tobytes()
    assert hashlib.sha1(t).digest() == hashlib.sha1(a.tobytes()).digest()
    # bytes() asks for a strided buffer and copies it out in C order, as for NumPy
    assert bytes(pl.from_dlpack(a.T)) == bytes(a.T) == a.T.tobytes()
    with pytest.raises(BufferError):
        hashlib.sha1(pl.from_dlpack(a.T))  # PyBUF_SIMPLE needs a C-contiguous buffer
    with pytest.raises(ValueError, match="not C-contiguous"):
        hashlib.sha1(a.T)  # NumPy refuses it too (with ValueError)
    assert bytes(pl.from_dlpack(np.zeros((0, 3)))) == b""


def test_zero_d_buffer_has_null_shape_and_strides(np):
    """Python docs (Py_buffer.ndim): "If it is 0, ... shape, strides and suboffsets MUST be NULL."

    Regression: for a 0-d tensor Tensor_getbuffer (src/_core_tensor.c) used to hand out
    non-NULL shape/strides pointers (NumPy gives NULL).
    """
    t = pl.from_dlpack(np.array(2.5))
    view = Py_buffer()
    _GetBuffer(t, ctypes.byref(view), PyBUF_INDIRECT | PyBUF_FORMAT)
    try:
        assert view.ndim == 0 and view.len == 8
        assert not view.shape and not view.strides, "0-d buffer with non-NULL shape/strides"
    finally:
        _ReleaseBuffer(ctypes.byref(view))
    assert memoryview(t).tolist() == 2.5


def test_memoryview_and_asarray(np):
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4).transpose(2, 0, 1)[1:]
    t = pl.from_dlpack(a)
    m = memoryview(t)
    assert m.shape == a.shape and m.strides == a.strides and m.format == "d" and m.itemsize == 8
    assert m.readonly is False and m.nbytes == a.nbytes
    assert m.tobytes() == a.tobytes()
    b = np.asarray(t)
    assert b.ctypes.data == a.ctypes.data and b.strides == a.strides
    b[0, 0, 0] = -1
    assert a[0, 0, 0] == -1
    m.release()


def test_array_protocol_dtype_and_copy(np):
    """Regression: __array__(dtype) passed copy to astype's `order` slot and
    always raised TypeError."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = pl.from_dlpack(a)
    view = t.__array__()
    assert np.shares_memory(view, a)
    for copy in (None, False, True):
        d = t.__array__(np.float64, copy=copy)
        assert d.dtype == np.float64 and np.array_equal(d, a) and not np.shares_memory(d, a)
    c = t.__array__(copy=True)
    assert c.dtype == a.dtype and np.array_equal(c, a) and not np.shares_memory(c, a)
    same = t.__array__(np.float32, copy=True)
    assert np.array_equal(same, a) and not np.shares_memory(same, a)
    assert np.shares_memory(t.__array__(np.float32), a)  # no copy asked, none needed

def test_buffer_readonly(np):
    a = np.arange(4.0)
    a.flags.writeable = False
    t = pl.from_dlpack(a)
    m = memoryview(t)
    assert m.readonly is True
    assert np.asarray(t).flags.writeable is False
    with pytest.raises(BufferError, match="read-only"):
        _GetBuffer(t, ctypes.byref(Py_buffer()), PyBUF_WRITABLE | PyBUF_STRIDES)
    with pytest.raises(TypeError):  # ctypes asks for a writable buffer
        (ctypes.c_char * 32).from_buffer(t)


def test_buffer_bfloat16_is_clear_error(torch):
    t = pl.from_dlpack(torch.zeros(3, dtype=torch.bfloat16))
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(t)


def test_np_asarray_bfloat16_raises(torch, np):
    """np.asarray of a tensor without a buffer format must raise, not wrap the object.

    Regression (same root cause as
    test_capsules.py::test_cuda_capsule_np_asarray_raises): NumPy swallows the
    BufferError from Tensor_getbuffer, and used to return a 0-d object array
    holding the Tensor.
    """
    t = pl.from_dlpack(torch.zeros(3, dtype=torch.bfloat16))
    with pytest.raises((BufferError, TypeError, ValueError)):
        r = np.asarray(t)
        raise AssertionError(f"np.asarray returned a {r.dtype} array of shape {r.shape}")


def test_buffer_keeps_tensor_alive(np):
    rec = P.make_managed((4,))
    t = pl.from_dlpack(rec.capsule())
    m = memoryview(t)
    del t
    gc.collect()
    assert rec.deleted == 0
    assert len(m.tobytes()) == 16
    m.release()
    del m
    gc.collect()
    assert rec.deleted == 1


# ------------------------------------------------------------ empty()


def test_empty_formats_match_torch(torch):
    shapes4 = [(2, 3, 4, 5), (1, 3, 1, 1), (2, 1, 3, 3), (0, 3, 2, 2), (3, 1, 1, 1)]
    shapes5 = [(2, 3, 2, 4, 5), (1, 1, 1, 1, 1), (2, 3, 0, 1, 2)]
    for shape in shapes4 + shapes5 + [(), (5,), (2, 3), (4, 0, 2)]:
        t = pl.empty(shape)
        assert t.strides == torch.empty(shape).stride() and t.dtype == "float32" and t.readonly is False
        assert t.data_ptr % 64 == 0
        f = pl.empty(shape, format="fortran")
        assert pl.is_contiguous(f, "fortran")
    for shape in shapes4:
        for fmt in ("channels_last", torch.channels_last):
            assert pl.empty(shape, "int8", format=fmt).strides == \
                torch.empty(shape, memory_format=torch.channels_last).stride()
    for shape in shapes5:
        assert pl.empty(shape, format="channels_last_3d").strides == \
            torch.empty(shape, memory_format=torch.channels_last_3d).stride()


def test_empty_order():
    t = pl.empty((2, 3, 4), "int16", order=(2, 0, 1))  # dim 2 outermost, dim 1 innermost
    assert t.strides == (3, 1, 6)
    assert pl.empty((2, 3, 4), order=(2, 1, 0)).strides == (1, 2, 6)


def test_empty_is_usable_memory(np):
    t = pl.empty((3, 4), "int32", format="fortran")
    a = np.from_dlpack(t)
    a[...] = np.arange(12).reshape(3, 4)
    assert np.array_equal(np.asarray(t), np.arange(12).reshape(3, 4))


# ------------------------------------------------------------ errors


def test_bad_arguments_are_value_errors(np):
    x = np.zeros((2, 3))
    for f in (lambda: pl.empty((2, 3), "float99"), lambda: pl.empty((2, 3), "complex256"),
              lambda: pl.empty((2, 3), format="nchw"), lambda: pl.empty((2, 3, 4), format="channels_last"),
              lambda: pl.empty((2, 3), format="contiguous", order=(0, 1)),
              lambda: pl.empty((2, 3), order=(0, 0)), lambda: pl.empty((2, 3), order=(0, 1, 2)),
              lambda: pl.empty((-1, 3)), lambda: pl.empty([1] * 65),
              lambda: pl.is_contiguous(x, "nchw"), lambda: pl.contiguous(x, "nchw"),
              lambda: pl.contiguous(x, "channels_last"), lambda: pl.to_order(x, (0, 0)),
              lambda: pl.to_order(x, (1,)), lambda: pl.set_num_threads(0), lambda: pl.set_num_threads(-4),
              lambda: pl.from_dlpack(x, device="gpu")):
        with pytest.raises(ValueError):
            f()


def test_bad_argument_types_are_type_errors(np):
    for f in (lambda: pl.empty(3), lambda: pl.empty(("a",)), lambda: pl.set_num_threads("4"),
              lambda: pl.from_dlpack(), lambda: pl.from_dlpack(np.zeros(2), True),
              lambda: pl.is_dense(1.5)):
        with pytest.raises(TypeError):
            f()


def test_unsupported_producer_data_is_buffer_error(np):
    # NumPy itself refuses these exports with BufferError; pylayout passes that on
    for a in (np.zeros(2, dtype=">f4"), np.zeros(2, dtype=np.longdouble), np.zeros(2, dtype=object)):
        with pytest.raises((BufferError, TypeError)):
            pl.from_dlpack(a)


# 3 threads on a 2-core machine warns once per process (test_shared_process.py checks that)
@pytest.mark.filterwarnings("ignore:pylayout.set_num_threads.*asks for more threads:RuntimeWarning")
def test_num_threads_roundtrip():
    n = pl.get_num_threads()
    assert n >= 1
    try:
        pl.set_num_threads(1)
        assert pl.get_num_threads() in (1, n)  # 1 without OpenMP always
        pl.set_num_threads(3)
        assert pl.get_num_threads() in (3, 1)
    finally:
        pl.set_num_threads(n)
    assert pl.get_num_threads() == n


def test_info():
    d = pl.info()
    assert d["dlpack_version"].startswith("1.") and d["version"] == pl.__version__
    assert isinstance(d["openmp"], bool) and d["num_threads"] >= 1
