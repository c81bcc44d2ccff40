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

Limitation: a ctypes callback cannot run while a Python exception is pending
(CPython turns the callback's normal return into SystemError, and a pure-Python
callback cannot PyErr_Fetch/PyErr_Restore around itself).  C destructors handle
that case; these cannot.  So the producers below keep every capsule they hand
out (`capsules`) and the tests drop them only after the consumer's call has
returned, never letting a ctypes destructor or deleter run on an error path.
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
# Function pointers stay c_void_p here; test_exchange_api.py casts them to prototypes.


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

# Private prototypes (never touch the shared ctypes.pythonapi attributes' argtypes).
_py = ctypes.pythonapi
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_PyCapsule_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, CAPSULE_DESTRUCTOR)(
    ("PyCapsule_New", _py))
_PyCapsule_GetName = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _py))
_PyCapsule_GetPointer_obj = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _py))
# Used inside the capsule destructor.  PYFUNCTYPE: they hold the GIL.
_PyCapsule_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_IsValid", _py))
_PyCapsule_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_GetPointer", _py))

# Capsule names must outlive every capsule: module-level buffers.
NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
NAME_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")
NAME_USED_LEGACY = ctypes.create_string_buffer(b"used_dltensor")
NAME_BOGUS = ctypes.create_string_buffer(b"not_a_dltensor")
_NAME_PTRS = ((ctypes.c_void_p(ctypes.addressof(NAME_VERSIONED)), "versioned"),
              (ctypes.c_void_p(ctypes.addressof(NAME_LEGACY)), "legacy"))


def capsule_name(capsule) -> str | None:
    name = _PyCapsule_GetName(capsule)
    return None if name is None else name.decode()


def capsule_pointer(capsule, name: bytes) -> int:
    """PyCapsule_GetPointer(capsule, name) as an int."""
    return _PyCapsule_GetPointer_obj(capsule, name)


# ------------------------------------------------------------ records

# address of a managed struct -> Record, while its deleter has not run
_LIVE: dict[int, "Record"] = {}
# how many Records were ever made
_MADE = 0
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
    cap = ctypes.c_void_p(capsule_addr)
    for name, kind in _NAME_PTRS:
        if _PyCapsule_IsValid(cap, name):
            ptr = _PyCapsule_GetPointer(cap, name)
            struct_type = DLManagedTensorVersioned if kind == "versioned" else DLManagedTensor
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
        global _MADE
        _MADE += 1
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
            strides=(ctypes.cast(self.strides_arr, ctypes.POINTER(ctypes.c_int64))
                     if self.strides_arr is not None else ctypes.POINTER(ctypes.c_int64)()),
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
        return _PyCapsule_New(self.address, ctypes.addressof(name), _capsule_destructor)

    def read_bytes(self, offset, n):
        return bytes(self.buffer[offset:offset + n])

    def write_bytes(self, offset, data: bytes):
        for i, b in enumerate(data):
            self.buffer[offset + i] = b


def make_managed(shape, strides=None, **kw) -> Record:
    return Record(shape, strides, **kw)


def live_count() -> int:
    return len(_LIVE)


def made_count() -> int:
    return _MADE


class _Producer:
    """Keeps every Record it exported and the capsule it handed out."""

    def __init__(self, factory, device=(kDLCPU, 0)):
        self.factory = factory
        self.device = device
        self.records: list[Record] = []
        self.capsules: list = []

    def _export(self, rec: Record):
        self.records.append(rec)
        cap = rec.capsule()
        self.capsules.append(cap)
        return cap

    def __dlpack_device__(self):
        return self.device


class LegacyOnlyProducer(_Producer):
    """A pre-1.0 producer: __dlpack__ takes no keyword arguments at all.

    `factory()` makes a new Record (legacy or versioned) for every call."""

    def __init__(self, factory, device=(kDLCPU, 0)):
        super().__init__(factory, device)
        self.calls = 0

    def __dlpack__(self):
        self.calls += 1
        return self._export(self.factory())


class RecordingProducer(_Producer):
    """A modern producer that records the keyword arguments it was called with."""

    def __init__(self, factory, device=(kDLCPU, 0)):
        super().__init__(factory, device)  # factory: kwargs -> Record
        self.calls: list[dict] = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kw = dict(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        self.calls.append(kw)
        return self._export(self.factory(kw))


class DLPackOnly:
    """Another producer's tensor seen only through its __dlpack__ (no buffer,
    no exchange API): the path pylayout takes for producers it does not know."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kw):
        return self.tensor.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def exchange_api_of(obj_or_type):
    """The DLPackExchangeAPI struct behind `type.__dlpack_c_exchange_api__` (a capsule), or None."""
    tp = obj_or_type if isinstance(obj_or_type, type) else type(obj_or_type)
    cap = getattr(tp, "__dlpack_c_exchange_api__", None)
    if cap is None:
        return None
    name = capsule_name(cap)
    if name != "dlpack_exchange_api":
        raise AssertionError(f"exchange API capsule is named {name!r}")
    ptr = capsule_pointer(cap, b"dlpack_exchange_api")
    return DLPackExchangeAPI.from_address(ptr)


def refcount(obj) -> int:
    return sys.getrefcount(obj) - 1
