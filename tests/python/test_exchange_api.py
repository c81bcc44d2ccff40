"""The DLPack C exchange API (DLPack 1.3): pylayout's own table, and pylayout using torch's.

pylayout.Tensor.__dlpack_c_exchange_api__ is a PyCapsule "dlpack_exchange_api"
holding a DLPackExchangeAPI.  The tests read it with ctypes and call each
function pointer (PYFUNCTYPE prototypes: they need the GIL and report errors
as Python exceptions).  torch.Tensor has one too; pylayout must use it instead
of torch's Python-level __dlpack__.
"""
from __future__ import annotations

import ctypes
import gc
import sys

import pytest

import pylayout as pl
from pylayout import _core
import _producers as P

PP_MANAGED = ctypes.POINTER(ctypes.POINTER(P.DLManagedTensorVersioned))
FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, PP_MANAGED)
TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
DLTENSOR_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(P.DLTensor))
CURRENT_STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                   ctypes.POINTER(ctypes.c_void_p))
SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
ALLOCATOR = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(P.DLTensor), PP_MANAGED, ctypes.c_void_p,
                              SET_ERROR)
VDELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_Py_DecRef = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("Py_DecRef", ctypes.pythonapi))


class Api:
    """Callable view of a DLPackExchangeAPI table."""

    def __init__(self, tp):
        self.table = P.exchange_api_of(tp)
        assert self.table is not None, f"{tp} has no __dlpack_c_exchange_api__"
        t = self.table
        self.from_py = FROM_PY(t.managed_tensor_from_py_object_no_sync)
        self.to_py_raw = TO_PY(t.managed_tensor_to_py_object_no_sync)
        self.dltensor_from_py = DLTENSOR_FROM_PY(t.dltensor_from_py_object_no_sync)
        self.current_stream = CURRENT_STREAM(t.current_work_stream)
        self.allocator = ALLOCATOR(t.managed_tensor_allocator)

    def managed(self, obj):
        out = ctypes.POINTER(P.DLManagedTensorVersioned)()
        assert self.from_py(obj, ctypes.byref(out)) == 0
        return out

    def to_py(self, managed_ptr):
        out = ctypes.c_void_p()
        assert self.to_py_raw(ctypes.cast(managed_ptr, ctypes.c_void_p), ctypes.byref(out)) == 0
        obj = ctypes.cast(out, ctypes.py_object).value  # our own reference
        _Py_DecRef(out)  # drop the new reference the API returned
        return obj

    def dltensor(self, obj):
        dl = P.DLTensor()
        assert self.dltensor_from_py(obj, ctypes.byref(dl)) == 0
        return dl


def _delete(managed_ptr):
    m = managed_ptr.contents
    VDELETER(ctypes.cast(m.deleter, ctypes.c_void_p).value)(ctypes.cast(managed_ptr, ctypes.c_void_p))


def _shape(dl):
    return tuple(dl.shape[i] for i in range(dl.ndim))


def _strides(dl):
    return tuple(dl.strides[i] for i in range(dl.ndim))


@pytest.fixture(scope="module")
def pl_api():
    return Api(pl.Tensor)


# ------------------------------------------------------------ pylayout's table


def test_capsule_and_header():
    cap = pl.Tensor.__dlpack_c_exchange_api__
    assert type(cap).__name__ == "PyCapsule"
    assert P.capsule_name(cap) == "dlpack_exchange_api"
    api = P.exchange_api_of(pl.Tensor)
    assert api.header.version.major == 1
    assert (api.header.version.major, api.header.version.minor) == tuple(pl.DLPACK_VERSION)
    for name, _ in P.DLPackExchangeAPI._fields_[1:]:
        assert getattr(api, name), f"{name} is NULL"
    # looked up on the type, as consumers do
    t = pl.empty((2,))
    assert type(t).__dlpack_c_exchange_api__ is cap


def test_dltensor_from_py(pl_api, np):
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4).transpose(2, 0, 1)[1:]
    t = pl.from_dlpack(a)
    dl = pl_api.dltensor(t)
    assert _shape(dl) == t.shape == (3, 2, 3)
    assert _strides(dl) == t.strides == (1, 12, 4)
    assert dl.data == t.data_ptr == a.ctypes.data
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (P.kDLInt, 16, 1)
    assert (dl.device.device_type, dl.device.device_id) == (1, 0)
    assert dl.byte_offset == 0 and dl.ndim == 3


def test_managed_from_py_and_deleter(pl_api, np):
    rec = P.make_managed((3, 4), (1, 3), byte_offset=8)
    t = pl.from_dlpack(rec.capsule())
    m = pl_api.managed(t)
    mt = m.contents
    assert mt.version.major == 1
    assert mt.flags == 0
    dl = mt.dl_tensor
    assert _shape(dl) == (3, 4) and _strides(dl) == (1, 3)
    assert dl.data == rec.data_ptr and dl.byte_offset == 8
    del t
    gc.collect()
    assert rec.deleted == 0, "the exported managed tensor still holds the memory"
    _delete(m)
    gc.collect()
    assert rec.deleted == 1


def test_managed_from_py_readonly_flag(pl_api, np):
    a = np.zeros(3)
    a.flags.writeable = False
    m = pl_api.managed(pl.from_dlpack(a))
    assert m.contents.flags & P.FLAG_READ_ONLY
    _delete(m)


def test_managed_from_py_rejects_other_objects(pl_api, np):
    out = ctypes.POINTER(P.DLManagedTensorVersioned)()
    with pytest.raises(TypeError, match="pylayout.Tensor"):
        pl_api.from_py(np.zeros(3), ctypes.byref(out))


def test_managed_to_py(pl_api, np):
    a = np.arange(6.0).reshape(2, 3)
    t = pl.from_dlpack(a)
    m = pl_api.managed(t)
    t2 = pl_api.to_py(m)  # takes ownership of m
    assert type(t2) is pl.Tensor and t2 is not t
    assert t2.shape == (2, 3) and t2.data_ptr == a.ctypes.data
    rc = sys.getrefcount(t2)
    assert rc == 2, f"managed_tensor_to_py_object_no_sync returned {rc - 1} references, not 1"
    # a ctypes-produced managed tensor: the deleter runs once, when the object dies
    rec = P.make_managed((5,))
    obj = pl_api.to_py(ctypes.pointer(rec.managed))
    assert obj.data_ptr == rec.data_ptr
    assert rec.deleted == 0
    del obj
    gc.collect()
    assert rec.deleted == 1


def test_managed_to_py_unsupported_version(pl_api):
    rec = P.make_managed((5,), version=(2, 0))
    out = ctypes.c_void_p()
    with pytest.raises(BufferError):
        pl_api.to_py_raw(ctypes.cast(ctypes.pointer(rec.managed), ctypes.c_void_p), ctypes.byref(out))
    # The DLPack exchange API says the callee owns the tensor (it deletes on failure)
    assert rec.deleted == 1


def test_allocator(pl_api):
    errors = []

    @SET_ERROR
    def set_error(ctx, kind, msg):
        errors.append((kind.decode(), msg.decode()))

    shape = (ctypes.c_int64 * 3)(2, 3, 4)
    proto = P.DLTensor(data=None, device=P.DLDevice(1, 0), ndim=3, dtype=P.DLDataType(P.kDLFloat, 64, 1),
                       shape=ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)))
    out = ctypes.POINTER(P.DLManagedTensorVersioned)()
    assert pl_api.allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error) == 0
    dl = out.contents.dl_tensor
    assert _shape(dl) == (2, 3, 4) and _strides(dl) == (12, 4, 1) and dl.data
    assert dl.data % 64 == 0
    ctypes.memset(dl.data, 0x5A, 2 * 3 * 4 * 8)  # the memory is ours to write
    _delete(out)
    assert not errors
    proto.device = P.DLDevice(P.kDLCUDA, 0)
    assert pl_api.allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error) == -1
    assert errors and errors[0][0] == "BufferError"


def test_allocator_without_the_gil(pl_api):
    """Regression: the allocator ran PyErr_Fetch, which crashes without a
    thread state; the exchange API lets a consumer call it with no GIL held
    (a CFUNCTYPE call through ctypes releases it)."""
    errors = []

    @SET_ERROR
    def set_error(ctx, kind, msg):
        errors.append((kind.decode(), msg.decode()))

    no_gil = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(P.DLTensor), PP_MANAGED, ctypes.c_void_p,
                              SET_ERROR)(pl_api.table.managed_tensor_allocator)
    shape = (ctypes.c_int64 * 2)(5, 7)
    proto = P.DLTensor(data=None, device=P.DLDevice(1, 0), ndim=2, dtype=P.DLDataType(P.kDLFloat, 32, 1),
                       shape=ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)))
    out = ctypes.POINTER(P.DLManagedTensorVersioned)()
    assert no_gil(ctypes.byref(proto), ctypes.byref(out), None, set_error) == 0
    assert _shape(out.contents.dl_tensor) == (5, 7)
    _delete(out)
    assert not errors

def test_current_work_stream(pl_api):
    out = ctypes.c_void_p(1234)
    assert pl_api.current_stream(1, 0, ctypes.byref(out)) == 0
    assert out.value is None


# ------------------------------------------------------------ torch's table


@pytest.fixture(scope="module")
def torch_api(torch):
    if P.exchange_api_of(torch.Tensor) is None:
        pytest.skip(f"torch {torch.__version__} has no __dlpack_c_exchange_api__")
    return Api(torch.Tensor)


def test_torch_has_exchange_api(torch, torch_api):
    assert torch_api.table.header.version.major == 1
    x = torch.zeros(2, 3).t()
    dl = torch_api.dltensor(x)
    assert _shape(dl) == (3, 2) and _strides(dl) == (1, 3)


def test_c_level_chain_torch_to_pylayout(torch, torch_api, pl_api):
    x = torch.arange(12.0).reshape(3, 4)[:, 1::2]
    m = torch_api.managed(x)
    t = pl_api.to_py(m)
    assert t.shape == (3, 2) and t.strides == (4, 2) and t.data_ptr == x.data_ptr()
    # and back, through torch's to_py
    m2 = pl_api.managed(t)
    y = torch_api.to_py(m2)
    assert isinstance(y, torch.Tensor) and y.data_ptr() == x.data_ptr() and y.stride() == (4, 2)
    y[0, 0] = -1
    assert x[0, 0].item() == -1


def test_from_dlpack_uses_torch_exchange_api_not_dunder(torch, monkeypatch):
    class NoDunder(torch.Tensor):
        def __dlpack__(self, *a, **k):
            raise AssertionError("pylayout called the Python-level __dlpack__")

    base = torch.arange(6.0).reshape(2, 3)
    sub = base.as_subclass(NoDunder)
    t = pl.from_dlpack(sub)
    assert t.data_ptr == base.data_ptr() and t.shape == (2, 3)
    assert pl.is_contiguous(sub) and pl.suggest_format(sub) == "contiguous"
    with pytest.raises(AssertionError):
        sub.__dlpack__()  # the override really is there
    # the same for plain torch.Tensor with __dlpack__ patched out
    monkeypatch.setattr(torch.Tensor, "__dlpack__", NoDunder.__dlpack__)
    x = torch.ones(4)
    assert pl.from_dlpack(x).data_ptr == x.data_ptr()
    assert pl.contiguous(torch.ones(3, 4).t()).is_contiguous()


def test_to_type(torch, np):
    t = pl.from_dlpack(np.arange(6.0).reshape(2, 3).T)
    y = _core._to_type(t, torch.Tensor)
    assert type(y) is torch.Tensor and y.stride() == (1, 3)
    assert _core._to_type(t, np.ndarray) is None  # NumPy has no exchange API
    assert _core._to_type(t, int) is None
    with pytest.raises(TypeError):
        _core._to_type(np.zeros(2), torch.Tensor)
    with pytest.raises(TypeError):
        _core._to_type(t, "torch.Tensor")


def test_conjugate_view_not_silently_unconjugated(torch, np):
    """A conj-bit tensor must not come through as its unconjugated memory.

    torch's __dlpack__ refuses it ("Can't export tensors with the conjugate bit set");
    pylayout goes through torch's C exchange API, which does no such check.

    Regression: import_tensor / peek_dltensor (src/_core_import.c), going through torch's
    exchange API, used to drop the conjugate bit:
        x = torch.tensor([1+2j, 3-4j]).conj()
        np.from_dlpack(pylayout.from_dlpack(x))   -> [1+2j, 3-4j]   (x is [1-2j, 3+4j])
        pylayout.contiguous(x[:, None].expand(2, 2).t())  -> unconjugated values
    Expected: BufferError (as torch.__dlpack__) or the conjugated values.
    """
    x = torch.tensor([1 + 2j, 3 - 4j]).conj()
    try:
        t = pl.from_dlpack(x)
    except BufferError:
        pass
    else:
        assert np.array_equal(np.from_dlpack(t), x.resolve_conj().numpy()), "conjugate bit dropped"
    v = x[:, None].expand(2, 2).t()
    try:
        c = pl.contiguous(v)
    except BufferError:
        return
    assert torch.equal(c, v.resolve_conj()), "pylayout.contiguous dropped the conjugate bit"


def test_torch_errors_through_exchange_api_are_python_exceptions(torch):
    s = torch.zeros(3).to_sparse()
    with pytest.raises(Exception) as ei:
        pl.from_dlpack(s)
    # torch's __dlpack__ raises BufferError here; the C API reports a RuntimeError
    assert isinstance(ei.value, (BufferError, RuntimeError, TypeError))
