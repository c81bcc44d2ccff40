"""The boundary between Python objects and C memory (docs/reliability.md,
"The Python boundary").  One test per case of the review that found
ordinary Python making pylayout touch freed memory; each failed or crashed
before the four rules were enforced:

  1. operands first, then memory;
  2. a result that aliases a torch tensor's memory is a torch view of it;
  3. a write into torch memory bumps its version counter;
  4. every size computed from user numbers is overflow-checked.

Cases that crashed run in a child process (`in_child`), so a regression fails
the test instead of killing the run.
"""
from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import pytest

import pylayout as pl
from pylayout import _core

import _producers as P

CHILD_TIMEOUT = 300


def in_child(code: str) -> str:
    """Runs `code` in a fresh interpreter that imports pylayout from where this
    one does; fails the test on a crash, a hang or a non-zero exit, and
    returns what the child printed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    src = "import sys, gc\nimport pylayout as pl\n" + textwrap.dedent(code)
    try:
        proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=CHILD_TIMEOUT,
                              env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child hung (killed after {CHILD_TIMEOUT} s)")
    assert proc.returncode == 0, (f"the child died with status {proc.returncode} "
                                  f"(negative: killed by signal {-proc.returncode})\n"
                                  f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc.stdout




# ------------------------------------------------- rule 1: operands, then memory

# A torch.Tensor subclass whose is_neg() and is_conj() (run by pylayout's
# torch guard; is_conj for complex tensors only, once phase 2 has read their
# dtype) swap VICTIM's 64 MiB storage for REPLACEMENT: torch's DLPack export
# shares the TensorImpl, so a pointer read before the guard ran points at
# unmapped memory.  VICTIM is the operand itself, or (copy_into,
# pack_complex) the operand whose pointer was read first.  Evil.on names the
# one method that fires (None: the first asked).
_EVIL_SUBCLASS = """
import torch
class Evil(torch.Tensor):
    armed = True
    on = None
    @staticmethod
    def fire(which):
        if Evil.armed and Evil.on in (None, which):
            Evil.armed = False
            torch.Tensor.set_(VICTIM, REPLACEMENT)
    def is_conj(self):
        Evil.fire("is_conj")
        return torch.Tensor.is_conj(self)
    def is_neg(self):
        Evil.fire("is_neg")
        return torch.Tensor.is_neg(self)
"""


@pytest.mark.parametrize("op", ["contiguous", "to_order", "pack_complex", "copy_into", "contiguous complex",
                                "copy_into complex"])
def test_subclass_guard_frees_storage(torch, op):
    """The guards run before any pointer is read: the operation uses the
    memory each tensor has once every guard is done.  A complex tensor is
    asked its conjugate bit after phase 2 read its dtype (is_conj alone
    fires there): every operand's memory is then read again."""
    out = in_child(_EVIL_SUBCLASS + f"""
REPLACEMENT = torch.arange(12.0).reshape(3, 4)
op = {op!r}
if op == "contiguous complex":
    Evil.on = "is_conj"
    REPLACEMENT = REPLACEMENT.to(torch.complex64).t()  # not contiguous: pylayout must read it
    x = VICTIM = torch.randn(2048, 4096, dtype=torch.complex64).t().as_subclass(Evil)  # 64 MiB
    y = pl.contiguous(x)
    assert torch.equal(y, REPLACEMENT), y
elif op == "copy_into complex":
    Evil.on = "is_conj"
    REPLACEMENT = torch.zeros(2048, 4096, dtype=torch.complex64)  # dst's shape, in other memory
    VICTIM = dst = torch.zeros(2048, 4096, dtype=torch.complex64)
    src = torch.ones(2048, 4096, dtype=torch.complex64).t().contiguous().t().as_subclass(Evil)
    assert pl.copy_into(dst, src) is dst
    assert bool((REPLACEMENT == 1).all()), "the copy went to the memory dst had before src.is_conj freed it"
elif op in ("contiguous", "to_order"):
    x = VICTIM = torch.randn(4096, 4096).t().as_subclass(Evil)     # 64 MiB, needs a copy
    y = pl.contiguous(x) if op == "contiguous" else pl.to_order(x, (0, 1))
    assert torch.equal(y, REPLACEMENT), y
elif op == "pack_complex":
    VICTIM = re = torch.randn(4096, 4096)
    im = torch.ones(4096, 4096).as_subclass(Evil)
    try:
        pl.pack_complex(re, im)
        raise SystemExit("packed the memory re had before the guard freed it")
    except ValueError as e:               # re is now 3x4: a shape mismatch
        assert "size" in str(e), e
else:
    VICTIM = dst = torch.zeros(4096, 4096)
    src = torch.ones(4096, 4096).as_subclass(Evil)
    try:
        pl.copy_into(dst, src)
    except ValueError as e:               # dst is now 3x4: a shape mismatch, nothing written
        assert "shape" in str(e), e
    assert torch.equal(REPLACEMENT, torch.arange(12.0).reshape(3, 4))
assert not Evil.armed, "the guard did not run"
print("ok")
""")
    assert out.strip().endswith("ok")


class _FreesOnDlpack:
    """A plain producer whose __dlpack__ frees another operand's storage: a
    torch tensor's by set_() or resize_(), a NumPy array's by
    resize(refcheck=False), which reallocates it although pylayout holds its
    buffer or DLPack export; or ("writeable=False") makes that array read-only."""

    def __init__(self, inner, victim, how, torch=None):
        self.inner, self.victim, self.how, self.torch = inner, victim, how, torch

    def __dlpack__(self, **kw):
        if self.how == "set_":
            self.victim.set_(self.torch.zeros(0))
        elif self.how == "resize_":
            self.victim.resize_(2 * self.victim.numel())  # reallocates: the old storage is freed
        elif self.how == "refcheck=False":
            self.victim.resize((1 << 23,), refcheck=False)
        else:
            assert self.how == "writeable=False", self.how
            self.victim.flags.writeable = False
        return self.inner.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


@pytest.mark.parametrize("how", ["set_", "resize_"])
def test_copy_into_src_dlpack_frees_dst(torch, how):
    """copy_into reads dst's pointer after src's __dlpack__ has run."""
    out = in_child(f"""
import torch
sys.path.insert(0, {os.path.dirname(__file__)!r})
from test_boundary import _FreesOnDlpack
dst = torch.zeros(4096, 4096)                          # 64 MiB: freed means unmapped
src = _FreesOnDlpack(torch.ones(4096, 4096), dst, {how!r}, torch)
try:
    pl.copy_into(dst, src)
except ValueError as e:
    print("refused:", e)                               # dst changed shape: nothing written
print("ok")
""")
    assert out.strip().endswith("ok")


def test_pack_complex_im_dlpack_frees_re(torch):
    out = in_child(f"""
import torch
sys.path.insert(0, {os.path.dirname(__file__)!r})
from test_boundary import _FreesOnDlpack
re = torch.ones(4096, 4096)
im = _FreesOnDlpack(torch.ones(4096, 4096), re, "set_", torch)
try:
    pl.pack_complex(re, im)
    raise SystemExit("read the memory re had before im.__dlpack__ freed it")
except ValueError as e:                    # re is now empty: a shape mismatch
    assert "size" in str(e) or "dims" in str(e), e
print("ok")
""")
    assert out.strip().endswith("ok")


def test_pack_complex_reads_the_memory_after_the_dlpack_calls(torch):
    """Not only no crash: the values read are the ones re holds after
    im.__dlpack__ swapped its storage."""
    re = torch.zeros(8)
    im = _FreesOnDlpack(torch.full((8,), 2.0), re, "set_", torch)
    replacement = torch.full((8,), 5.0)

    def swap(**kw):
        re.set_(replacement)
        return torch.full((8,), 2.0).__dlpack__(**kw)

    im.__dlpack__ = swap  # instance attribute: type(im).__dlpack__ is what pylayout calls
    type(im).__dlpack__, old = (lambda self, **kw: swap(**kw)), type(im).__dlpack__
    try:
        z = pl.pack_complex(re, im)
    finally:
        type(im).__dlpack__ = old
    assert torch.equal(z, torch.complex(replacement, torch.full((8,), 2.0)))


@pytest.mark.parametrize("case, abi", [
    (case, abi) for case in ("copy_into dst", "copy_into dst with a size-1 dim", "pack_complex re")
    for abi in (True, False)] + [("contiguous numpy.empty", False)],
    ids=lambda v: {True: "numpy ABI", False: "buffer"}.get(v, v))
def test_numpy_memory_freed_under_its_export(np, case, abi):
    """An exact ndarray's memory is checked after the last Python code has run
    (another operand's __dlpack__, or the numpy.empty that makes a small
    result): BufferError, nothing read or written.  Before, the first three
    died of SIGSEGV (16 MiB blocks, unmapped when freed) and contiguous()
    copied out of the freed 1 KB, where its own result had just been put.
    Whether pylayout read the array's fields through NumPy's C ABI or took
    its buffer (or, for the size-1 dim, its __dlpack__), phase 2 reads it
    again; contiguous() through the ABI calls no numpy.empty (it runs no
    Python at all: test_numpy_buffer.py), so that case is the buffer's."""
    out = in_child(f"""
import numpy as np
sys.path.insert(0, {os.path.dirname(__file__)!r})
from test_boundary import _FreesOnDlpack
case = {case!r}
pl._core._numpy_abi({abi!r})
if case.startswith("copy_into"):          # dst taken first, then src's __dlpack__ frees it
    shape = (1, 2048, 2048) if "size-1" in case else (2048, 2048)
    dst = np.zeros(shape, np.float32)
    call = lambda: pl.copy_into(dst, _FreesOnDlpack(np.ones(shape, np.float32), dst, "refcheck=False"))
elif case == "pack_complex re":
    re = np.ones((2048, 2048), np.float32)
    call = lambda: pl.pack_complex(re, _FreesOnDlpack(np.ones((2048, 2048), np.float32), re, "refcheck=False"))
else:
    a = np.asfortranarray(np.arange(256, dtype=np.float32).reshape(16, 16))
    real = np.empty
    def resizing_empty(shape, dtype, *order):
        a.resize((1 << 23,), refcheck=False)
        return real(shape, dtype, *order)
    np.empty = resizing_empty             # looked up on first use: the one pylayout calls
    call = lambda: pl.contiguous(a)
try:
    call()
    raise SystemExit("used the memory the array had before it was resized")
except BufferError as e:
    assert "changed while pylayout was taking the operands" in str(e), e
if case.startswith("copy_into"):
    assert dst.shape == (1 << 23,) and not dst[:16].any()   # the new memory: nothing written
print("ok")
""")
    assert out.strip().endswith("ok")


@pytest.mark.parametrize("abi", [True, False], ids=["numpy ABI", "buffer"])
def test_numpy_operand_cannot_be_resized_by_another_thread_during_the_copy(np, abi):
    """While a copy runs without the GIL, another thread's a.resize() (NumPy's
    default refcheck=True) must be refused, as NumPy refuses it under a
    buffer export: pylayout holds the array from taking it to releasing it.
    The test reaches copy_into_or_route with the array's only other
    reference on the caller's stack, where the public wrapper would add one.
    Before the ABI path held the array, the resize succeeded and the copy
    wrote into the freed 64 MiB (SIGSEGV)."""
    out = in_child(f"""
import threading
import numpy as np
pl._core._numpy_abi({abi!r})

class Starts:  # src: its __dlpack__ runs after dst was taken, and lets the other thread go
    def __init__(self, inner, event):
        self.inner, self.event = inner, event
    def __dlpack__(self, **kw):
        self.event.set()
        return self.inner.__dlpack__(**kw)
    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()

holder = [np.zeros((4096, 4096), np.float32)]
started, results = threading.Event(), []
def resize():
    started.wait()
    try:
        holder.pop().resize((16,))
        results.append("resized")
    except ValueError as e:
        results.append(str(e))
t = threading.Thread(target=resize)
t.start()
pl._core.copy_into_or_route(holder[0], Starts(np.ones((4096, 4096), np.float32).T, started))
t.join()
assert results and "cannot resize" in results[0], results
print("ok")
""")
    assert out.strip().endswith("ok")


@pytest.mark.parametrize("abi", [True, False], ids=["numpy ABI", "buffer"])
def test_numpy_dst_made_read_only_under_its_export_is_not_written(np, abi):
    """dst was writable when copy_into took it and read-only by the time it
    would be written (src's __dlpack__ set the flag): refused, not written."""
    pl._core._numpy_abi(abi)
    try:
        for shape in [(4, 4), (1, 4, 4)]:  # fields or buffer; fields or __dlpack__ (a size-1 dim)
            dst = np.zeros(shape, np.float32)
            with pytest.raises(BufferError, match="changed while pylayout was taking the operands"):
                pl.copy_into(dst, _FreesOnDlpack(np.ones(shape, np.float32), dst, "writeable=False"))
            assert not dst.any() and not dst.flags.writeable
    finally:
        pl._core._numpy_abi(True)


@pytest.mark.parametrize("where", ["empty_shape", "empty_order", "to_order"])
def test_index_that_clears_the_list(where):
    """Sequences are snapshotted before their items' __index__ runs (torch and
    NumPy crash here; pylayout does not)."""
    out = in_child(f"""
class ClearsList:                  # not an int: converting it calls __index__
    def __init__(self, value, owner):
        self.value, self.owner = value, owner
    def __index__(self):
        self.owner.clear(); gc.collect(); return self.value
where = {where!r}
for _ in range(50):
    lst = []
    lst.extend([ClearsList(2, lst), 3, 4, 5, 6, 7, 8, 9])
    if where == "empty_shape":
        t = pl.empty(lst)
        assert t.shape == (2, 3, 4, 5, 6, 7, 8, 9), t.shape
    elif where == "empty_order":
        order = []
        order.extend([ClearsList(1, order), 0])
        t = pl.empty((2, 3), order=order)
        assert t.strides == (1, 2), t.strides
    else:
        order = []
        order.extend([ClearsList(1, order), 0])
        t = pl.to_order(pl.empty((2, 3)), order)
        assert t.strides == (1, 2), t.strides
print("ok")
""")
    assert out.strip().endswith("ok")


# ---------------------------------------------------------- type confusion


def test_copied_exchange_api_falls_back_to_dlpack(np):
    """A class that copies pylayout.Tensor's exchange-API capsule is not a
    pylayout.Tensor: pylayout calls its __dlpack__ (as NumPy and torch do)."""
    out = in_child("""
import numpy as np
class Mimic:
    __dlpack_c_exchange_api__ = pl.Tensor.__dlpack_c_exchange_api__
    def __init__(self): self.a = np.arange(12.0).reshape(3, 4).T
    def __dlpack__(self, **kw): return self.a.__dlpack__(**kw)
    def __dlpack_device__(self): return self.a.__dlpack_device__()
m = Mimic()
assert pl.is_contiguous(m) is False and pl.is_contiguous(m, "F") is True
assert pl.from_dlpack(m).strides == (1, 4)
assert np.array_equal(np.from_dlpack(m), m.a)
try:
    import torch
    assert torch.equal(torch.from_dlpack(m), torch.from_numpy(m.a))
except ImportError:
    pass
print("ok")
""")
    assert out.strip().endswith("ok")


def test_exchange_api_type_checks_its_objects(np):
    """pylayout's own C exchange API, called with a foreign object, fails
    with TypeError instead of reading it as a pylayout.Tensor."""
    out = in_child(f"""
import ctypes, numpy as np
sys.path.insert(0, {os.path.dirname(__file__)!r})
import _producers as P
table = P.exchange_api_of(pl.Tensor)
dltensor_from_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(P.DLTensor))(
    table.dltensor_from_py_object_no_sync)
dl = P.DLTensor()
try:
    dltensor_from_py(np.zeros(3), ctypes.byref(dl))
    raise SystemExit("a foreign object was read as a pylayout.Tensor")
except TypeError as e:
    assert "pylayout.Tensor" in str(e), e
t = pl.from_dlpack(np.zeros((2, 3)))
assert dltensor_from_py(t, ctypes.byref(dl)) == 0 and dl.ndim == 2
print("ok")
""")
    assert out.strip().endswith("ok")


# ------------------------------------ rule 2: views of torch tensors are torch views

_VIEWS = {
    "view_as_real": lambda torch, pl: (torch.randn(64, 32, dtype=torch.complex64), pl.view_as_real),
    "view_as_complex": lambda torch, pl: (torch.randn(64, 32, 2), pl.view_as_complex),
    "canonicalize": lambda torch, pl: (torch.randn(64, 1, 32).transpose(1, 2)[:, :, :1], pl.canonicalize),
    "unpack_complex": lambda torch, pl: (torch.randn(64, 32, dtype=torch.complex64),
                                         lambda z: pl.unpack_complex(z, copy=False)[1]),
}


@pytest.mark.parametrize("name", sorted(_VIEWS))
@pytest.mark.parametrize("how", ["resize_", "set_", "out="])
def test_torch_view_survives_its_base_losing_storage(torch, name, how):
    """The view keeps torch's storage alive and shares the version counter,
    so it reads the values it had after x.resize_(), x.set_() or an op
    with out=x drops x's memory (before: a dangling tensor over the freed
    buffer, which the next allocation reused)."""
    out = in_child(f"""
import torch
name, how = {name!r}, {how!r}
import warnings
warnings.simplefilter("ignore")   # torch's deprecation of resizing out=
# (pylayout's view, torch's own view of the same memory)
x, fn, ref = {{
    "view_as_real": lambda: (torch.randn(64, 32, dtype=torch.complex64), pl.view_as_real, torch.view_as_real),
    "view_as_complex": lambda: (torch.randn(64, 32, 2), pl.view_as_complex, torch.view_as_complex),
    "canonicalize": lambda: (torch.randn(64, 1, 32).transpose(1, 2)[:, :, :1], pl.canonicalize, lambda x: x[:]),
    "unpack_complex": lambda: (torch.randn(64, 32, dtype=torch.complex64),
                               lambda z: pl.unpack_complex(z, copy=False)[1], lambda z: z.imag),
}}[name]()
v, r = fn(x), ref(x)
assert v._base is not None, "not a torch view"
assert v._version == x._version
expected = v.clone()
if how == "resize_":
    x.resize_(1 << 22)
elif how == "set_":
    x.set_(torch.zeros(7, dtype=x.dtype))
else:
    torch.add(torch.ones(1 << 20, dtype=x.dtype), 1, out=x)
junk = [torch.full((64, 64, 2), 123.0) for _ in range(20)]   # would reuse a freed buffer
assert torch.equal(v, r), "pylayout's view and torch's own view of x disagree"
if how != "out=":                  # out= writes new values into x's (resized) storage
    assert torch.equal(v, expected), "the view changed"
print("ok")
""")
    assert out.strip().endswith("ok")


@pytest.mark.parametrize("kind", ["pylayout", "numpy", "torch"])
def test_view_loops_neither_grow_nor_recurse(kind):
    """t = pl.canonicalize(t) 300,000 times, and view_as_real /
    view_as_complex alternately, then dropping the last view on a thread
    with a 1 MiB stack: each view holds the memory's owner, not its parent."""
    if kind in ("numpy", "torch"):
        pytest.importorskip(kind, reason=f"{kind} is installed in CI")
    out = in_child(f"""
import threading, resource
kind = {kind!r}
def make(shape, complex_=False):
    if kind == "torch":
        import torch
        return torch.zeros(shape, dtype=torch.complex64 if complex_ else torch.float32)
    import numpy as np
    a = np.zeros(shape, np.complex64 if complex_ else np.float32)
    return pl.from_dlpack(a) if kind == "pylayout" else a
def run():
    t = make((4, 2, 1)).transpose(0, 2, 1) if kind == "numpy" else make((4, 2, 1))
    if kind == "pylayout":
        t = pl.from_dlpack(__import__("numpy").zeros((4, 2, 1), "float32").transpose(0, 2, 1))
    elif kind == "torch":
        t = t.transpose(1, 2)
    for i in range(1000):
        t = pl.canonicalize(t)
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for i in range(300000):
        t = pl.canonicalize(t)
    z = make((8,), complex_=True)
    # torch chains its own dtype-changing views (torch.view_as_complex(
    # torch.view_as_real(z)) 150,000 times overflows this stack with torch
    # alone), and pylayout's torch results are torch views (rule 2).
    for i in range(150000 if kind != "torch" else 0):
        z = pl.view_as_complex(pl.view_as_real(z))
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - r0
    del t, z
    gc.collect()
    print("grown KiB", grown)
    assert grown < 16 * 1024, f"{{grown}} KiB grown: views chain"
threading.stack_size(1 << 20)
th = threading.Thread(target=run)
th.start(); th.join()
print("ok")
""")
    assert out.strip().endswith("ok"), out


# ------------------------------------------- rule 3: writes bump torch's version


def test_copy_into_saved_tensor_makes_backward_raise(torch):
    """As torch's own w.copy_() does: backward refuses a saved tensor that
    was modified, instead of silently computing a wrong gradient."""
    x = torch.randn(4, 4, requires_grad=True)
    w = torch.randn(4, 4)
    y = (x * w).sum()  # saves w
    v0 = w._version
    pl.copy_into(w, torch.zeros(4, 4))
    assert w._version > v0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_pack_complex_out_bumps_version(torch):
    x = torch.randn(4, requires_grad=True)
    out = torch.zeros(4, dtype=torch.complex64)
    y = (x * out.real).sum()  # saves out.real, a view of out
    pl.pack_complex(torch.ones(4), torch.ones(4), out=out)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


# ------------------------------------------------------ rule 4: sizes checked


def test_buffer_stride_overflow_is_refused():
    """A size-1 dim with stride 2^61 (float64): its byte stride overflows
    int64, so memoryview refuses instead of reporting a wrapped stride."""
    rec = P.make_managed((1, 3), (1 << 61, 1), dtype=(P.kDLFloat, 64, 1))
    t = pl.from_dlpack(rec.capsule())
    assert t.strides == (1 << 61, 1)
    with pytest.raises(BufferError, match="too big for the buffer protocol"):
        memoryview(t)
    del t
    gc.collect()
    assert rec.deleted == 1


def test_broadcast_nbytes_past_2_63():
    """A broadcast view of 2^65 bytes: nbytes is exact (torch says the same),
    and a buffer export that cannot describe it is refused (NumPy: "array is
    too big")."""
    rec = P.make_managed((1 << 61, 2), (0, 0), dtype=(P.kDLFloat, 64, 1))
    t = pl.from_dlpack(rec.capsule())
    assert t.nbytes == (1 << 62) * 8
    with pytest.raises(BufferError, match="too big"):
        memoryview(t)
    del t
    gc.collect()
    assert rec.deleted == 1


# ------------------------------------------------------------- forward-mode AD


def _jvp_cases(torch):
    import pylayout.torch as plt
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    t = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    return [
        ("pl.contiguous(x.T)", lambda a: pl.contiguous(a.permute(3, 2, 1, 0)),
         lambda a: a.permute(3, 2, 1, 0).contiguous(), x, t),
        ("pl.contiguous channels_last", lambda a: pl.contiguous(a, "channels_last"),
         lambda a: a.contiguous(memory_format=torch.channels_last), x, t),
        ("pl.to_order", lambda a: pl.to_order(a, (2, 0, 3, 1)),
         lambda a: a.permute(2, 0, 3, 1).contiguous().permute(1, 3, 0, 2), x, t),
        ("pl.pack_complex", lambda a: pl.pack_complex(a, 2 * a),
         lambda a: torch.complex(a, 2 * a), x, t),
        ("pl.unpack_complex", lambda a: pl.unpack_complex(pl.pack_complex(a, a))[1],
         lambda a: a, x, t),
        ("plt.contiguous", lambda a: plt.contiguous(a.transpose(1, 2)),
         lambda a: a.transpose(1, 2).contiguous(), x, t),
        ("pl.view_as_real", lambda a: pl.view_as_real(pl.view_as_complex(a[..., :2].contiguous())),
         lambda a: a[..., :2].contiguous(), x, t),
    ]


def test_forward_mode_torch_func_jvp(torch):
    for name, fn, ref, x, t in _jvp_cases(torch):
        out, tangent = torch.func.jvp(fn, (x,), (t,))
        rout, rtangent = torch.func.jvp(ref, (x,), (t,))
        assert torch.equal(out, rout), name
        assert tangent is not None and torch.equal(tangent, rtangent), f"{name}: tangent lost"


def test_forward_mode_dual_tensors(torch):
    import torch.autograd.forward_ad as fwAD
    for name, fn, ref, x, t in _jvp_cases(torch):
        with fwAD.dual_level():
            out = fwAD.unpack_dual(fn(fwAD.make_dual(x, t)))
            rout = fwAD.unpack_dual(ref(fwAD.make_dual(x, t)))
        assert torch.equal(out.primal, rout.primal), name
        assert out.tangent is not None and torch.equal(out.tangent, rout.tangent), f"{name}: tangent lost"


def test_writes_refuse_tangents(torch):
    import torch.autograd.forward_ad as fwAD
    x, t = torch.randn(3, 4), torch.randn(3, 4)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, t)
        with pytest.raises(TypeError, match="tangent"):
            pl.copy_into(torch.zeros(3, 4), dual)
        with pytest.raises(TypeError, match="tangent"):
            pl.pack_complex(dual, dual, out=torch.zeros(3, 4, dtype=torch.complex64))


# ---------------------------------------------------------- producer protocol


class _MaxVersionOnly:
    """A producer whose __dlpack__ knows max_version but not copy."""

    def __init__(self, np, a):
        self.a = a
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None):
        self.calls.append(max_version)
        return self.a.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_retry_keeps_max_version(np):
    """from_dlpack(x, copy=False): the retry without copy= keeps max_version,
    so the versioned capsule and its read-only flag travel."""
    a = np.arange(6.0)
    a.flags.writeable = False
    p = _MaxVersionOnly(np, a)
    t = pl.from_dlpack(p, copy=False)
    assert t.readonly, "the read-only flag was lost (a legacy capsule)"
    assert p.calls == [(1, 0)]


def test_producer_classes_are_not_kept_alive(np):
    """20,000 producer classes made at run time die when dropped (the cache
    holds no references)."""
    refs = []
    for i in range(20000):
        cls = type(f"Producer{i}", (), {
            "__init__": lambda self: setattr(self, "a", np.zeros((2, 3))),
            "__dlpack__": lambda self, **kw: self.a.__dlpack__(**kw),
            "__dlpack_device__": lambda self: self.a.__dlpack_device__(),
        })
        assert pl.is_contiguous(cls()) is True
        refs.append(weakref.ref(cls))
        del cls
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} producer classes kept alive"


def test_class_gaining_or_losing_the_protocol_is_noticed(np, torch):
    class Late:
        def __init__(self):
            self.a = np.zeros((2, 3))

    with pytest.raises(TypeError, match="DLPack producer"):
        pl.is_contiguous(Late())
    Late.__dlpack__ = lambda self, **kw: self.a.__dlpack__(**kw)
    Late.__dlpack_device__ = lambda self: self.a.__dlpack_device__()
    assert pl.is_contiguous(Late()) is True
    del Late.__dlpack__
    with pytest.raises(TypeError, match="DLPack producer"):
        pl.is_contiguous(Late())

    class Counting(torch.Tensor):
        calls = 0

        def __dlpack__(self, **kw):
            Counting.calls += 1
            return torch.Tensor.__dlpack__(self, **kw)

    x = torch.zeros(2, 3).as_subclass(Counting)
    pl.from_dlpack(x)
    assert Counting.calls == 0  # torch's exchange API, inherited
    Counting.__dlpack_c_exchange_api__ = None  # loses it
    pl.from_dlpack(x)
    assert Counting.calls == 1
    del Counting.__dlpack_c_exchange_api__  # gains it back
    pl.from_dlpack(x)
    assert Counting.calls == 1


def test_to_py_runs_the_deleter_when_the_module_is_gone():
    """The exchange API's managed_tensor_to_py_object_no_sync takes ownership:
    on every failure path, the deleter runs."""
    table = P.exchange_api_of(pl.Tensor)
    to_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))(
        table.managed_tensor_to_py_object_no_sync)
    rec = P.make_managed((2, 3))
    saved = sys.modules.pop("pylayout._core")
    try:
        out = ctypes.c_void_p()
        with pytest.raises(RuntimeError, match="not imported"):
            to_py(ctypes.addressof(rec.managed), ctypes.byref(out))
    finally:
        sys.modules["pylayout._core"] = saved
    assert rec.deleted == 1


def _flags_of_versioned(capsule) -> int:
    return P.DLManagedTensorVersioned.from_address(P.capsule_pointer(capsule, b"dltensor_versioned")).flags


def test_is_copied_is_per_import():
    """A tensor imported from a copy (IS_COPIED) re-exports zero-copy: its
    later exports, and those of its views, do not claim to be copies."""
    rec = P.make_managed((4, 2), flags=P.FLAG_IS_COPIED)
    t = pl.from_dlpack(rec.capsule())
    for x in (t, pl.view_as_complex(t), pl.canonicalize(t)):
        cap = x.__dlpack__(max_version=(1, 0))
        assert _flags_of_versioned(cap) & P.FLAG_IS_COPIED == 0, x
        del cap
    del t, x
    gc.collect()
    assert rec.deleted == 1


def test_legacy_capsules_import_writable(np):
    """The documented policy (README, "DLPack"): legacy capsules cannot say
    read-only and NumPy and torch export only writable memory through them,
    so pylayout imports them writable, as torch does, and copy_into writes."""
    a = np.zeros(4, np.float32)
    t = pl.from_dlpack(a.__dlpack__())  # no max_version: legacy
    assert not t.readonly
    pl.copy_into(t, np.ones(4, np.float32))
    assert a.tolist() == [1.0] * 4


# ----------------------------------------------------- refusals in pylayout's words


@pytest.mark.parametrize("make,words", [
    (lambda torch: torch.eye(3).to_sparse(), "layout torch.sparse_coo: call x.to_dense()"),
    (lambda torch: torch.eye(3).to_sparse_csr(), "layout torch.sparse_csr: call x.to_dense()"),
    (lambda torch: torch.eye(3).to_mkldnn(), "layout torch._mkldnn: call x.to_dense()"),
    (lambda torch: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), "nested tensor"),
])
def test_non_strided_tensors_are_refused_in_our_words(torch, make, words):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors' prototype warning
        x = make(torch)
    for fn in (pl.is_contiguous, pl.contiguous, lambda x: pl.copy_into(x, x), pl.from_dlpack):
        with pytest.raises(BufferError) as ei:
            fn(x)
        msg = str(ei.value)
        assert words in msg and "pylayout handles strided tensors" in msg, msg
        assert "Exception raised from" not in msg, "torch's C++ trace leaked into the message"


def test_functional_tensors_are_never_read(torch):
    """A functional tensor (torch's functionalization) keeps its values in its
    base: torch's export points at NULL plus its storage offset, so
    copy_into from torch._to_functional_tensor(x[1:]) read address 16 and
    died of SIGSEGV.  Every operation that reads or writes memory refuses it
    (copy_into, from_dlpack, the C core's conversions and packing), and
    pylayout.contiguous and pack_complex hand it to pylayout.torch, whose
    torch ops give the functional tensor torch's own result; a functional tensor leaked from
    torch.func.functionalize goes the same way."""
    out = in_child("""
import torch
from pylayout import _core
x = torch.randn(6, 5)
leaked = []
torch.func.functionalize(lambda t: leaked.append(t[2:]) or t * 1)(x)
cases = {"offset 5": torch._to_functional_tensor(x[1:]), "offset 0": torch._to_functional_tensor(x),
         "leaked from functionalize": leaked[0]}
def refused(fn):
    try:
        fn()
    except BufferError as e:
        assert "functional tensor" in str(e), e
        return True
    except TypeError as e:                # copy_into's words for any torch.func transform's tensor
        assert "torch.func transform" in str(e), e
        return True
    return False
for name, f in cases.items():
    plain = torch._from_functional_tensor(f)
    d = torch.zeros(f.shape)
    for what, fn in {"copy_into src": lambda: pl.copy_into(d, f), "copy_into dst": lambda: pl.copy_into(f, d),
                     "from_dlpack": lambda: pl.from_dlpack(f), "_core.pack_complex": lambda: _core.pack_complex(f, f),
                     "_core.to_order": lambda: _core.to_order(f, (1, 0)),
                     "_core.copy_core": lambda: _core.copy_core(d, f)}.items():
        assert refused(fn), (name, what)
    assert torch.equal(d, torch.zeros(f.shape)), name
    for y, want in ((pl.contiguous(f.t()), plain.t()), (pl.pack_complex(f, f), torch.complex(plain, plain))):
        assert torch._is_functional_tensor(y) and torch.equal(torch._from_functional_tensor(y), want), name
print("ok")
""")
    assert out.strip().endswith("ok")


def test_meta_tensors_answer_layout_queries(torch):
    """Metadata queries work on meta tensors, from sizes and strides, with
    exactly torch's answers; operations that move data refuse clearly."""
    cases = [
        torch.empty(2, 3, 4, 5, device="meta"),
        torch.empty(2, 3, 4, 5, device="meta").contiguous(memory_format=torch.channels_last),
        torch.empty(2, 3, 4, 5, 6, device="meta").contiguous(memory_format=torch.channels_last_3d),
        torch.empty(4, 6, device="meta").t(),
        torch.empty(4, 6, device="meta")[:, ::2],
    ]
    for x in cases:
        for fmt, tfmt in (("contiguous", torch.contiguous_format), ("channels_last", torch.channels_last),
                          ("channels_last_3d", torch.channels_last_3d)):
            assert pl.is_contiguous(x, fmt) == x.is_contiguous(memory_format=tfmt), (x.shape, x.stride(), fmt)
        assert pl.is_dense(x) == (x.stride() != () and not x.dim() == 2 or x.is_contiguous() or x.t().is_contiguous())
        assert "meta" in pl.explain(x)
    assert pl.suggest_format(cases[1]) == "channels_last"
    assert pl.suggest_format(cases[0]) == "contiguous"
    with pytest.raises(BufferError, match="meta device and has no memory"):
        _core.to_format(cases[3])  # the C core reads memory; pylayout.contiguous lets torch move it
    y = pl.contiguous(cases[3])
    assert y.device.type == "meta" and y.stride() == (4, 1)


def test_copy_into_refuses_other_dtypes(np, torch):
    """Never a silent reinterpretation (before: float32 1e-45 three times)."""
    dst = np.zeros(3, np.float32)
    with pytest.raises(TypeError, match="int32 but dst is float32"):
        pl.copy_into(dst, np.ones(3, np.int32))
    assert dst.tolist() == [0.0] * 3
    out = torch.zeros(3, dtype=torch.complex64)
    with pytest.raises(TypeError, match="float32 to pair with out's complex64"):
        pl.pack_complex(torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), out=out)
    assert not out.any()
