"""ctypes-only DLPack producers for the pylayout tests.

Nothing here uses pylayout, NumPy or torch: the structures below are built
from the DLPack ABI as documented (DLTensor 48 bytes, DLManagedTensor 64,
DLManagedTensorVersioned 80 on x86-64), so the tests exercise pylayout
against an independent producer whose every field they control.

    rec = make_managed((2, 3), versioned=True)   # a Record: the struct + its memory
    cap = rec.capsule()                           # PyCapsule "dltensor_versioned"
    t = pylayout.from_dlpack(cap)                 # consumer takes ownership
    del t; gc.collect(); assert rec.deleted == 1  # deleter ran exactly once

Each Record counts the calls of its deleter (a ctypes CFUNCTYPE).  The
capsules get a capsule destructor (also ctypes) that calls the deleter only
if the capsule still carries its unconsumed name, as the DLPack spec says.
Deleter calls on unknown / already deleted structures are recorded in
STRAY_DELETES, which tests check is empty.
"""
from __future__ import annotations

import ctypes
import sys

# ------------------------------------------------------------------ ABI

kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 4, 5, 6

FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Exchange API (DLPack 1.3 C exchange API), for reading other libraries' tables.
ALLOCATOR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p)
FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)))
TO_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned), ctypes.POINTER(ctypes.c_void_p))
DLTENSOR_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
CURRENT_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


class DLPackExchangeAPIHeader(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p)]


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


def _check_abi() -> None:
    assert ctypes.sizeof(DLTensor) == 48 and DLTensor.byte_offset.offset == 40
    assert DLTensor.device.offset == 8 and DLTensor.ndim.offset == 16 and DLTensor.dtype.offset == 20
    assert DLTensor.shape.offset == 24 and DLTensor.strides.offset == 32
    assert ctypes.sizeof(DLManagedTensor) == 64
    assert ctypes.sizeof(DLManagedTensorVersioned) == 80
    assert DLManagedTensorVersioned.flags.offset == 24 and DLManagedTensorVersioned.dl_tensor.offset == 32


_check_abi()

# ---------------------------------------------------------- Python C API

_api = ctypes.pythonapi
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, CAPSULE_DESTRUCTOR]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]

# Capsule names must outlive every capsule: module-level buffers.
NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
NAME_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")
NAME_USED_LEGACY = ctypes.create_string_buffer(b"used_dltensor")
NAME_BOGUS = ctypes.create_string_buffer(b"not_a_dltensor")


def capsule_name(capsule) -> str | None:
    name = _api.PyCapsule_GetName(capsule)
    return None if name is None else name.decode()


# ------------------------------------------------------------ records

# address of a managed struct -> Record, while its deleter has not run
_LIVE: dict[int, "Record"] = {}
# (address, kind) of every deleter call that hit no live record: double deletes
STRAY_DELETES: list[tuple[int, str]] = []
# capsule destructor calls that found the capsule unconsumed (deleter called)
DESTRUCTOR_CALLS: list[int] = []


def _on_delete(addr: int, kind: str) -> None:
    rec = _LIVE.pop(addr, None)
    if rec is None:
        STRAY_DELETES.append((addr, kind))
        return
    rec.deleted += 1


@DELETER
def _legacy_deleter(addr):
    _on_delete(addr, "legacy")


@DELETER
def _versioned_deleter(addr):
    _on_delete(addr, "versioned")


@CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule_addr):
    # The capsule is being destroyed: run the deleter only if nobody consumed it.
    for name, struct_type in ((NAME_VERSIONED, DLManagedTensorVersioned), (NAME_LEGACY, DLManagedTensor)):
        if _api.PyCapsule_IsValid(capsule_addr, name.value):
            ptr = _api.PyCapsule_GetPointer(capsule_addr, name.value)
            m = struct_type.from_address(ptr)
            DESTRUCTOR_CALLS.append(ptr)
            if m.deleter:
                m.deleter(ptr)
            return


def _itemsize(dtype) -> int:
    code, bits, lanes = dtype
    return max(1, (bits * lanes + 7) // 8)


class Record:
    """One producer-side managed tensor: the struct, its shape/strides arrays and memory."""

    def __init__(self, shape, strides=None, *, dtype=(kDLFloat, 32, 1), device=(kDLCPU, 0), byte_offset=0,
                 versioned=True, version=(1, 3), flags=0, data="alloc", ndim=None, fill=True):
        self.versioned = versioned
        self.deleted = 0
        self.shape_list = list(shape)
        ndim = len(self.shape_list) if ndim is None else ndim
        n = max(ndim, len(self.shape_list), 1)
        self.shape_arr = (ctypes.c_int64 * n)(*self.shape_list)
        if strides is None:
            self.strides_arr = None
            eff = []
            step = 1
            for s in reversed(self.shape_list):
                eff.append(step)
                step *= max(s, 1)
            eff.reverse()
        else:
            self.strides_arr = (ctypes.c_int64 * n)(*strides)
            eff = list(strides)
        self.effective_strides = eff
        self.itemsize = _itemsize(dtype)
        # bytes needed: byte_offset + (max reachable element + 1) * itemsize; negative strides not used here
        numel = 1
        for s in self.shape_list:
            numel *= max(s, 0)
        hi = 0
        if numel > 0:
            hi = sum((s - 1) * st for s, st in zip(self.shape_list, eff) if st > 0) + 1
        self.nbytes_alloc = byte_offset + max(hi, 1) * self.itemsize
        if data == "alloc":
            self.buffer = (ctypes.c_uint8 * self.nbytes_alloc)()
            if fill:
                for i in range(self.nbytes_alloc):
                    self.buffer[i] = i & 0xFF
            data_ptr = ctypes.addressof(self.buffer)
        elif data is None:
            self.buffer = None
            data_ptr = None
        else:
            self.buffer = None
            data_ptr = int(data)
        self.data_ptr = data_ptr
        dl = DLTensor(
            data=data_ptr,
            device=DLDevice(*device),
            ndim=ndim,
            dtype=DLDataType(*dtype),
            shape=ctypes.cast(self.shape_arr, ctypes.POINTER(ctypes.c_int64)),
            strides=(ctypes.cast(self.strides_arr, ctypes.POINTER(ctypes.c_int64)) if self.strides_arr is not None
                     else ctypes.POINTER(ctypes.c_int64)()),
            byte_offset=byte_offset,
        )
        if versioned:
            self.managed = DLManagedTensorVersioned(
                version=DLPackVersion(*version), manager_ctx=None, deleter=_versioned_deleter, flags=flags,
                dl_tensor=dl)
        else:
            self.managed = DLManagedTensor(dl_tensor=dl, manager_ctx=None, deleter=_legacy_deleter)
        self.address = ctypes.addressof(self.managed)
        # The producer keeps its own state alive until the deleter runs, even if
        # the test drops the Record: the registry holds it.
        _LIVE[self.address] = self

    @property
    def name(self):
        return NAME_VERSIONED if self.versioned else NAME_LEGACY

    def capsule(self, name=None):
        """A new PyCapsule owning this managed tensor (destructor in ctypes)."""
        name = self.name if name is None else name
        return _api.PyCapsule_New(self.address, ctypes.addressof(name), _capsule_destructor)

    def read_bytes(self, offset, n):
        return bytes(self.buffer[offset:offset + n])

    def write_bytes(self, offset, data: bytes):
        for i, b in enumerate(data):
            self.buffer[offset + i] = b


def make_managed(shape, strides=None, **kw) -> Record:
    return Record(shape, strides, **kw)


def live_count() -> int:
    return len(_LIVE)


class LegacyOnlyProducer:
    """A pre-1.0 producer: __dlpack__ takes no keyword arguments at all."""

    def __init__(self, record: Record, device=(kDLCPU, 0)):
        self.record = record
        self.device = device
        self.calls = 0

    def __dlpack__(self):
        self.calls += 1
        return self.record.capsule()

    def __dlpack_device__(self):
        return self.device


class RecordingProducer:
    """A modern producer that records the keyword arguments it was called with."""

    def __init__(self, factory, device=(kDLCPU, 0)):
        self.factory = factory  # kwargs -> Record
        self.device = device
        self.calls: list[dict] = []
        self.records: list[Record] = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kw = dict(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        self.calls.append(kw)
        rec = self.factory(kw)
        self.records.append(rec)
        return rec.capsule()

    def __dlpack_device__(self):
        return self.device


def exchange_api_of(obj_or_type):
    """The DLPackExchangeAPI struct behind `type.__dlpack_c_exchange_api__` (a capsule), or None."""
    tp = obj_or_type if isinstance(obj_or_type, type) else type(obj_or_type)
    cap = getattr(tp, "__dlpack_c_exchange_api__", None)
    if cap is None:
        return None
    name = capsule_name(cap)
    if name != "dlpack_exchange_api":
        raise AssertionError(f"exchange API capsule is named {name!r}")
    ptr = _api.PyCapsule_GetPointer(ctypes.c_void_p(id(cap)), b"dlpack_exchange_api")
    return DLPackExchangeAPI.from_address(ptr)


def refcount(obj) -> int:
    return sys.getrefcount(obj) - 1
