"""Readable explanations of a tensor's memory layout: ``explain`` and ``layout``.

``explain(x)`` returns plain text: shape, dtype, strides (elements and bytes),
offsets, the formats ``x`` satisfies by torch's rules and NumPy's flags,
density, overlap, and for common ops whether each accepts ``x``, why not,
and the pylayout call that fixes it.  ``layout(x)`` wraps the same text with
a small grid of each element's memory order; in a notebook it renders as
HTML coloured by address.

Metadata comes from ``pylayout.from_dlpack`` (zero-copy, any device); when a
producer refuses DLPack (torch meta tensors, NumPy byte-swapped arrays...)
the shape and strides are read from the object itself and the same rules are
applied in pure Python.  Nothing here reads or writes tensor memory.
"""
from __future__ import annotations

import html as _html
import math
import sys as _sys

__all__ = ["explain", "layout"]

_REAL_FOR_COMPLEX = ("float16", "float32", "float64")
_OVERLAP_ENUM_LIMIT = 1 << 17   # exact overlap check by enumerating addresses up to this many
GRID_MAX = 16                   # layout() shows at most GRID_MAX x GRID_MAX elements of a single panel,
PANEL_CELLS_MAX = 8             # PANEL_CELLS_MAX x PANEL_CELLS_MAX of each panel when there are several,
PANEL_COLS_MAX = 6              # PANEL_COLS_MAX panels side by side (dim -3)
PANEL_ROWS_MAX = 4              # and PANEL_ROWS_MAX rows of panels (dim -4)

OK, NO, NA = "\u2713", "\u2717", "\u00b7"
RIGHT, DOWN = "\u2192", "\u2193"


# ------------------------------------------------------------------ metadata

class _Meta:
    """What explain() knows about a tensor, in elements."""

    kind = "dlpack"            # "torch" | "numpy" | "dlpack"
    typename = ""
    shape: tuple = ()
    strides: tuple | None = ()  # elements; None if not whole elements
    byte_strides: tuple = ()
    dtype = "?"
    itemsize = 1
    device = (1, 0)
    byte_offset = 0
    storage_offset = None      # torch only (elements)
    address = None             # first element's address (data + byte_offset)
    readonly = False
    tensor = None              # a pylayout.Tensor, when DLPack import worked
    obj = None                 # the object explained
    source = "pylayout.from_dlpack"
    notes: list

    def __init__(self):
        self.notes = []

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def device_name(self):
        if self.tensor is not None:
            name = self.tensor.device_name
        else:
            name = "cpu" if self.device[0] == 1 else f"device type {self.device[0]}"
        return name if self.device[0] == 1 else f"{name}:{self.device[1]}"

    @property
    def on_cpu(self):
        return self.device[0] in (1, 3, 11, 13)


_SIZE1_FIX = "pytorch#169780 (December 2025; torch 2.11 has it)"
_size1_answer: list[bool] = []


def _torch_skips_size1():
    """Whether the installed torch's view_as_complex ignores the stride of a
    size-1 dim, as torch releases with pytorch#169780 do; True without torch.
    Asked of torch itself once per process, on a 2-element tensor: a version
    number would have to know which release took the fix."""
    torch = _sys.modules.get("torch")
    if torch is None:
        return True
    if not _size1_answer:
        try:
            torch.view_as_complex(torch.zeros(2).as_strided((1, 2), (1, 1)))
            _size1_answer.append(True)
        except RuntimeError:
            _size1_answer.append(False)
    return _size1_answer[0]


def _is_torch(x):
    torch = _sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_numpy(x):
    np = _sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def _from_pylayout_tensor(m, t):
    m.tensor = t
    m.shape = tuple(t.shape)
    m.strides = tuple(t.strides)
    m.dtype = t.dtype
    m.itemsize = t.itemsize
    m.device = tuple(t.device)
    m.byte_offset = t.byte_offset
    m.address = t.data_ptr + t.byte_offset
    m.readonly = t.readonly


def _metadata(x):
    import pylayout

    m = _Meta()
    m.obj = x
    m.typename = f"{type(x).__module__}.{type(x).__qualname__}"
    if _is_torch(x):
        import torch

        m.kind = "torch"
        m.typename = "torch.Tensor"
        if x.layout != torch.strided:
            raise _NotStrided(f"a {x.layout} tensor has no strides: only torch.strided tensors have a memory layout")
        proxy = x.detach()
        if x.requires_grad:
            m.notes.append("requires grad: DLPack export needs x.detach(); pylayout's torch conversions keep the graph")
        if x.is_conj():
            proxy = proxy.conj()     # same memory and strides, bit cleared
            m.notes.append("conjugate bit set: memory holds unconjugated values; x.resolve_conj() before DLPack export")
        if x.is_neg():
            proxy = proxy._neg_view()
            m.notes.append("negative bit set: memory holds un-negated values; x.resolve_neg() before DLPack export")
        m.storage_offset = x.storage_offset()
        try:
            _from_pylayout_tensor(m, pylayout.from_dlpack(proxy))
            return m
        except Exception as e:  # meta tensors, exotic dtypes: read torch's own metadata
            m.source = f"torch (DLPack refused: {_first_line(e)})"
        m.shape = tuple(x.shape)
        m.strides = tuple(x.stride())
        m.itemsize = x.element_size()
        m.byte_strides = tuple(s * m.itemsize for s in m.strides)
        m.dtype = str(x.dtype).replace("torch.", "")
        m.device = (-1, x.device.index or 0)
        m.device_label = str(x.device)
        try:
            m.address = x.data_ptr() if x.device.type != "meta" else None
        except Exception:
            m.address = None
        return m
    if _is_numpy(x):
        m.kind = "numpy"
        m.typename = "numpy.ndarray"
        try:
            _from_pylayout_tensor(m, pylayout.from_dlpack(x))
            return m
        except Exception as e:
            m.source = f"numpy (DLPack refused: {_first_line(e)})"
        m.shape = tuple(x.shape)
        m.itemsize = x.itemsize
        m.byte_strides = tuple(x.strides)
        m.strides = tuple(s // x.itemsize for s in x.strides) if x.itemsize and all(
            s % x.itemsize == 0 for s in x.strides) else None
        m.dtype = str(x.dtype)
        m.address = x.__array_interface__["data"][0]
        m.readonly = not x.flags.writeable
        return m
    _from_pylayout_tensor(m, pylayout.from_dlpack(x))   # raises for non-producers
    return m


class _NotStrided(Exception):
    pass


def _first_line(e):
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


# ------------------------------------------------------------- the rules
# Every layout rule is pylayout's C core's: on the imported tensor, or (for a
# torch tensor DLPack cannot export, such as a meta tensor) on the torch
# tensor itself, which the core reads from its sizes and strides.  An array
# whose strides are not whole elements has no answer.


def _subject(m):
    return m.tensor if m.tensor is not None else (m.obj if m.kind == "torch" else None)


def _query(m, fmt):
    import pylayout

    x = _subject(m)
    return x is not None and pylayout.is_contiguous(x, fmt)


def _suggest(m):
    import pylayout

    x = _subject(m)
    return pylayout.suggest_format(x) if x is not None else "contiguous"


def _dense(m):
    import pylayout

    x = _subject(m)
    return x is not None and pylayout.is_dense(x)


def _overlap(shape, strides):
    """(verdict, reason): verdict is True, False or None (not determined)."""
    if any(s == 0 for s in shape):
        return False, "empty"
    for d, (s, st) in enumerate(zip(shape, strides)):
        if s > 1 and st == 0:
            return True, f"dim {d} (size {s}) has stride 0: its {s} elements share one address (broadcast/expand)"
    dims = sorted((abs(st), s, d) for d, (s, st) in enumerate(zip(shape, strides)) if s > 1)
    reach = 0
    for ast, s, _d in dims:
        if ast <= reach:
            break
        reach += (s - 1) * ast
    else:
        return False, ""
    for i, (sa, na, da) in enumerate(dims):
        for sb, nb, db in dims[i + 1:]:
            g = math.gcd(sa, sb)
            if sb // g < na and sa // g < nb:   # sb/g steps of dim a land where sa/g steps of dim b do
                return True, (f"strides interleave: {sb // g} steps along dim {da} (stride {strides[da]}) reach the "
                              f"same address as {sa // g} steps along dim {db} (stride {strides[db]})")
    numel = 1
    for s in shape:
        numel *= s
    if numel > _OVERLAP_ENUM_LIMIT:
        return None, "strides interleave; too many elements to check every address"
    seen = {0}
    for ast, s, _d in dims:
        seen = {a + i * ast for a in seen for i in range(s)}
    if len(seen) < numel:
        a, b = dims[0][2], dims[1][2] if len(dims) > 1 else dims[0][2]
        return True, (f"strides interleave: {numel} elements on {len(seen)} addresses "
                      f"(e.g. dim {a} stride {strides[a]} vs dim {b} stride {strides[b]})")
    return False, "strides interleave but no two elements share an address"


def _flat_view_chunks(shape, strides):
    """torch's computeStride grouping: runs of dims that merge into one stride.

    Returns a list of (dims, numel) from innermost to outermost chunk.
    """
    nd = len(shape)
    chunks = []
    base = strides[-1]
    tn = 1
    end = nd - 1
    for d in range(nd - 1, -1, -1):
        tn *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tn * base):
            chunks.append((tuple(range(d, end + 1)), tn))
            if d > 0:
                base = strides[d - 1]
                tn = 1
                end = d - 1
    return chunks


def flat_view_ok(shape, strides):
    """Whether torch's x.view(-1) (and NumPy's reshape(-1, copy=False)) succeed."""
    if not shape or any(s == 0 for s in shape):
        return True, ""
    chunks = _flat_view_chunks(shape, strides)
    big = [c for c in chunks if c[1] > 1]
    if len(big) <= 1:
        return True, ""
    inner, outer = big[0], big[1]
    d_out, d_in = outer[0][-1], inner[0][0]
    need = inner[1] * strides[inner[0][-1]]
    return False, (f"dim {d_out} (size {shape[d_out]}, stride {strides[d_out]}) does not continue "
                   f"{_dims(inner[0])} (it would need stride {need}): the elements are not one evenly "
                   f"strided run, so no single stride describes them")


def _dims(ds):
    return f"dim {ds[0]}" if len(ds) == 1 else f"dims {ds[0]}..{ds[-1]}"


# ------------------------------------------------------------------ ops

def _vac_torch_reasons(m, legacy=False):
    """Why torch.view_as_complex refuses, in torch's check order; [] if it accepts."""
    reasons = []
    if m.dtype not in _REAL_FOR_COMPLEX:
        return [f"dtype {m.dtype} is not float16/float32/float64"]
    if m.ndim == 0:
        return ["a 0-d tensor has no last dim holding (real, imag)"]
    if m.shape[-1] != 2:
        return [f"last dim has size {m.shape[-1]}, needs 2 (real, imag)"]
    if m.strides[-1] != 1:
        reasons.append(f"last dim has stride {m.strides[-1]}, needs 1 (real and imag adjacent)")
    for d in range(m.ndim - 1):
        if m.strides[d] % 2 and (legacy or m.shape[d] != 1):
            reasons.append(f"dim {d} (size {m.shape[d]}) has stride {m.strides[d]}, not divisible by 2")
    if m.kind == "torch" and m.storage_offset is not None and m.storage_offset % 2:
        reasons.append(f"storage offset {m.storage_offset} is odd")
    if m.kind != "torch" and any(st < 0 for st in m.strides):
        reasons.insert(0, "negative strides: torch cannot import them (torch.from_dlpack refuses or crashes)")
    return reasons


def _pylayout_vac(m):
    """(viewable, message) from pylayout's own rule, on metadata only."""
    from . import _core

    if m.tensor is None:
        return None, "pylayout could not import this tensor"
    try:
        _core.view_as_complex(m.tensor, copy=False)
        return True, ""
    except Exception as e:
        return False, _first_line(e)


def _op_view_as_complex(m, name, out):
    exempt = _torch_skips_size1()
    reasons = _vac_torch_reasons(m, legacy=not exempt)
    if m.dtype.startswith("complex"):
        out.append((False, name, [f"already complex ({m.dtype})",
                                  "fix: nothing to do; pylayout.view_as_real(x) goes back to (real, imag)"]))
        return
    if reasons and (m.dtype not in _REAL_FOR_COMPLEX or m.ndim == 0 or m.shape[-1] != 2):
        fix = ("fix: convert first (x.float() in torch, a.astype(np.float32) in NumPy), then view"
               if m.dtype not in _REAL_FOR_COMPLEX else
               "fix: the last dim must hold (real, imag) pairs; for separate real and imaginary "
               "tensors use pylayout.pack_complex(re, im)")
        out.append((False, name, ["why: " + reasons[0], fix]))
        return
    viewable, msg = _pylayout_vac(m)
    if not reasons:
        lines = ["accepts: last dim (real, imag) has stride 1, other strides are even"]
        legacy = _vac_torch_reasons(m, legacy=True)
        if exempt and legacy:
            lines = [f"accepts, but torch releases before {_SIZE1_FIX} refused it: {legacy[0]}",
                     "   (a size-1 dim's stride never matters; older code paths and other libraries that "
                     "check strides still may refuse it)",
                     "fix for those: pylayout.view_as_complex(x) (zero-copy) or pylayout.canonicalize(x) "
                     "(rewrites size-1 strides)"]
        out.append((True, name, lines))
        return
    lines = ["why: " + r for r in reasons]
    if viewable:
        lines.append("the memory IS a valid interleaved complex array (size-1 and empty dims' strides never matter)")
        lines.append("fix: pylayout.view_as_complex(x) (zero-copy view)")
        if not exempt and any("size 1)" in r for r in reasons):
            lines.append("  or pylayout.canonicalize(x) first (rewrites size-1 strides), then torch.view_as_complex")
            lines.append(f"  (torch releases with {_SIZE1_FIX} ignore a size-1 dim's stride)")
    elif viewable is False:
        lines.append(f"no complex view of this memory exists ({msg})")
        lines.append("fix: pylayout.view_as_complex(x) (packs a copy when no view exists)")
    else:
        lines.append("fix: pylayout.view_as_complex(x) after making the tensor importable")
    out.append((False, name, lines))


def _op_flat_view(m, name, out):
    ok, why = flat_view_ok(m.shape, m.strides)
    if ok:
        if m.tensor is not None and not _query(m, "contiguous"):
            out.append((True, name, ["accepts a flat view, but x is not contiguous: other .view shapes may fail"]))
        else:
            out.append((True, name, ["accepts (contiguous: any .view of the same numel works)"
                                     if _query(m, "contiguous") else "accepts"]))
        return
    fix = "fix: pylayout.contiguous(x) then .view, or x.reshape(-1) (copies silently)"
    if not m.on_cpu:
        fix += "; pylayout copies need CPU memory"
    out.append((False, name, ["why: " + why, fix]))


def _op_channels_last(m, out):
    fmt = "channels_last" if m.ndim == 4 else "channels_last_3d"   # explain() asks only for 4-D and 5-D
    label = f"{fmt} kernel"
    if _query(m, fmt):
        extra = "" if _suggest(m) == fmt else (
            f" (ambiguous: also {_suggest(m)}; torch.suggest_memory_format picks {_suggest(m)})")
        out.append((True, label, [f"accepts: {fmt}-contiguous by torch's rules{extra}"]))
        return
    from . import _core

    want = _core.format_strides(m.shape, fmt)
    out.append((False, label, [f"why: strides {m.strides} are not {fmt}'s {want}",
                               f'fix: pylayout.contiguous(x, "{fmt}")']))


def _op_c_kernel(m, out):
    import pylayout

    label = "C kernel (contiguous)"
    if _query(m, "contiguous"):
        out.append((True, label, ["accepts: row-major, no gaps"]))
        return
    why = "why: not row-major contiguous"
    if _dense(m):
        why += " (dense, but dims are in another order)"
    fix = "fix: pylayout.contiguous(x)"
    if hasattr(pylayout, "require"):
        fix += ', or pylayout.require(x, "contiguous") at the kernel\'s entry'
    if not m.on_cpu:
        fix += "; pylayout copies need CPU memory"
    out.append((False, label, [why, fix]))


# ------------------------------------------------------------------ text

def _fmt_tuple(t):
    return "(" + ", ".join(str(v) for v in t) + ("," if len(t) == 1 else "") + ")"


def _alignment(addr):
    if not addr:
        return None
    a = 1
    while a < 64 and addr % (a * 2) == 0:
        a *= 2
    return a


def _kv(rows):
    w = max(len(k) for k, _ in rows)
    return [f"  {k.ljust(w)}  {v}" for k, v in rows]


def _explain_meta(m):
    rows = [("shape", _fmt_tuple(m.shape) + f"  ({m.ndim}-D, {m.numel} element{'s' if m.numel != 1 else ''})"),
            ("dtype", f"{m.dtype} ({m.itemsize} byte{'s' if m.itemsize != 1 else ''} each)"),
            ("device", getattr(m, "device_label", None) or m.device_name)]
    if m.strides is None:
        rows.append(("strides", f"{_fmt_tuple(m.byte_strides)} bytes: not whole elements"))
        lines = [f"pylayout.explain: {m.typename}"] + _kv(rows)
        lines.append("  no element-stride layout: DLPack, torch and pylayout need strides that are "
                     "multiples of the itemsize; np.ascontiguousarray(a) gives a usable copy")
        return "\n".join(lines)
    byte_strides = tuple(s * m.itemsize for s in m.strides)
    rows.append(("strides", f"{_fmt_tuple(m.strides)} elements"))
    rows.append(("byte strides", _fmt_tuple(byte_strides)))
    if m.storage_offset is not None:
        rows.append(("storage offset", f"{m.storage_offset} elements ({m.storage_offset * m.itemsize} bytes) "
                                       "into its storage"))
    if m.tensor is not None:
        rows.append(("byte offset", f"{m.byte_offset} (DLPack byte_offset)"))
    if m.address is not None:
        rows.append(("address", f"{m.address:#x} ({_alignment(m.address)}-byte aligned)"
                     if m.address else "0x0 (no data)"))
    if m.readonly:
        rows.append(("read-only", "yes"))

    torch_fmts = []
    for fmt, rank in (("contiguous", None), ("channels_last", 4), ("channels_last_3d", 5)):
        if rank is not None and m.ndim != rank:
            torch_fmts.append(f"{NA} {fmt} ({rank}-D only)")
        else:
            torch_fmts.append(f"{OK if _query(m, fmt) else NO} {fmt}")
    rows.append(("torch formats", "  ".join(torch_fmts)))
    c_flag, f_flag = _query(m, "contiguous"), _query(m, "fortran")
    rows.append(("numpy flags", f"C {OK if c_flag else NO}  F {OK if f_flag else NO}"
                 + ("  (both: size-1 or empty dims make the order ambiguous)" if c_flag and f_flag and m.ndim > 1
                    else "")))
    rows.append(("suggest_format", _suggest(m)))
    both = [f for f in ("contiguous", "channels_last", "channels_last_3d") if _query(m, f)]
    if len(both) > 1:
        rows.append(("ambiguous", f"both {' and '.join(both)} hold: size-1 dims are ignored by torch's rules"))

    dense = _dense(m)
    extent = _extent(m.shape, m.strides)
    if dense:
        rows.append(("dense", f"yes: {m.numel} elements fill {m.numel * m.itemsize} bytes with no gaps"))
    else:
        why = ""
        if any(st < 0 for s, st in zip(m.shape, m.strides) if s > 1):
            why = " (negative strides)"
        rows.append(("dense", f"no{why}: {m.numel} elements span {extent * m.itemsize} bytes"))
    ov, why = _overlap(m.shape, m.strides)
    if ov is None:
        rows.append(("overlapping", f"maybe: {why}"))
    elif ov:
        rows.append(("overlapping", f"YES: {why}; writes through x race or clobber"))
    else:
        rows.append(("overlapping", "no" + (f" ({why})" if why and why != "empty" else "")))
    neg = [d for d, st in enumerate(m.strides) if st < 0 and m.shape[d] > 1]
    if neg:
        rows.append(("negative strides", f"dims {neg}: fine for NumPy and pylayout; never hand them to torch "
                                         "(pylayout.contiguous(x) first)"))
    if m.source != "pylayout.from_dlpack":
        rows.append(("metadata from", m.source))
    for note in m.notes:
        rows.append(("note", note))

    # Only the ops that apply to x: view_as_complex to a real tensor whose last dim could hold
    # (real, imag) pairs, channels_last kernels to 4-D and 5-D tensors.
    ops = []
    vac = "torch.view_as_complex"
    flat = {"torch": "x.view(-1)", "numpy": "a.reshape(-1, copy=False)"}.get(m.kind, "x.view(-1) in torch")
    if m.ndim and m.shape[-1] == 2 and not m.dtype.startswith("complex"):
        _op_view_as_complex(m, vac, ops)
    _op_flat_view(m, flat, ops)
    if m.ndim in (4, 5):
        _op_channels_last(m, ops)
    _op_c_kernel(m, ops)

    lines = [f"pylayout.explain: {m.typename}"] + _kv(rows) + ["ops"]
    w = max(len(name) for _, name, _ in ops)
    for ok, name, details in ops:
        mark = NA if ok is None else (OK if ok else NO)
        lines.append(f"  {mark} {name.ljust(w)}  {details[0]}")
        for d in details[1:]:
            lines.append(f"    {' ' * w}  {d}")
    return "\n".join(lines)


def _extent(shape, strides):
    """Elements between the lowest and highest address, inclusive."""
    if any(s == 0 for s in shape):
        return 0
    lo = sum((s - 1) * st for s, st in zip(shape, strides) if st < 0)
    hi = sum((s - 1) * st for s, st in zip(shape, strides) if st > 0)
    return hi - lo + 1


def explain(x: object) -> str:
    """A readable, multi-line explanation of `x`'s memory layout.

    `x` is a torch tensor, NumPy array, pylayout.Tensor, DLPack capsule (it is
    consumed) or any ``__dlpack__`` producer, on any device: only metadata is
    read.  The text lists shape, dtype, strides in elements and bytes,
    offsets, the formats `x` satisfies (torch's rules, NumPy's C/F flags),
    density and overlap, then an "ops" section: for each op that applies to
    `x` (torch.view_as_complex when the last dim has size 2, a flat .view(-1),
    channels_last kernels for 4-D and 5-D tensors, C kernels wanting
    contiguous input), whether it accepts `x` (\u2713/\u2717), why not, and the
    pylayout call that fixes it.

    >>> import numpy as np, pylayout as pl
    >>> print(pl.explain(np.zeros((2, 3), dtype=np.float32).T))   # doctest: +ELLIPSIS
    pylayout.explain: numpy.ndarray
      shape           (3, 2)  (2-D, 6 elements)
    ...
      numpy flags     C \u2717  F \u2713
    ...
    """
    m = _safe_meta(x)
    return m if isinstance(m, str) else _explain_meta(m)


def _safe_meta(x):
    """_Meta for `x`, or a short text saying why no layout can be read."""
    try:
        return _metadata(x)
    except _NotStrided as e:
        return f"pylayout.explain: {type(x).__module__}.{type(x).__qualname__}\n  {e}"
    except Exception as e:
        return (f"pylayout.explain: {type(x).__module__}.{type(x).__qualname__}\n"
                f"  cannot read a layout: {type(e).__name__}: {_first_line(e)}")


# ------------------------------------------------------------------ layout()

class _Panel:
    """One 2-D slice of the picture: the elements x[lead..., i, j] for the shown i, j."""

    def __init__(self, label: str, offsets: list[list[int]], index: list[list[tuple[int, ...]]]):
        self.label, self.offsets, self.index = label, offsets, index


class _Axis:
    """A dim drawn along the picture: its number, size, shown size and stride."""

    def __init__(self, dim: int, size: int, stride: int, cap: int):
        self.dim, self.size, self.stride = dim, size, stride
        self.shown = min(size, cap)

    def label(self, arrow: str) -> str:
        text = f"dim {self.dim} {arrow} stride {self.stride}"
        if self.stride == 0 and self.size > 1:
            text += " (broadcast: every step is the same memory)"
        elif self.stride < 0:
            text += " (steps go down in memory)"
        if self.shown < self.size:
            text += f", first {self.shown} of {self.size}"
        return text


class _Picture:
    """Where each shown element lives: its offset, in elements, from the tensor's lowest address.

    The last two dims form each panel (rows, columns); for 3-D and higher the
    dim before them lays panels side by side, and for 4-D and higher the one
    before that stacks rows of panels.  Leading dims beyond four are shown at
    index 0.  Offsets count from the lowest address any element of the whole
    tensor has, so a panel's numbers and colours say where in memory it sits.
    """

    def __init__(self, shape: tuple[int, ...], strides: tuple[int, ...]):
        nd = len(shape)
        self.lo = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)
        self.span = sum((n - 1) * abs(st) for n, st in zip(shape, strides))
        n_panels = (shape[-3] if nd >= 3 else 1) * (shape[-4] if nd >= 4 else 1)
        cap = GRID_MAX if n_panels == 1 else PANEL_CELLS_MAX
        self.cols = _Axis(nd - 1, shape[-1], strides[-1], cap) if nd >= 1 else None
        self.rows = _Axis(nd - 2, shape[-2], strides[-2], cap) if nd >= 2 else None
        self.panel_cols = _Axis(nd - 3, shape[-3], strides[-3], PANEL_COLS_MAX) if nd >= 3 else None
        self.panel_rows = _Axis(nd - 4, shape[-4], strides[-4], PANEL_ROWS_MAX) if nd >= 4 else None
        self.lead = max(nd - 4, 0)
        self.ndim = nd
        self.grid: list[list[_Panel]] = []
        for pr in range(self.panel_rows.shown if self.panel_rows else 1):
            row = []
            for pc in range(self.panel_cols.shown if self.panel_cols else 1):
                row.append(self._panel(strides, pr, pc))
            self.grid.append(row)
        counts: dict[int, int] = {}
        for panel in self.panels():
            for line in panel.offsets:
                for off in line:
                    counts[off] = counts.get(off, 0) + 1
        self.shared = {off for off, k in counts.items() if k > 1}

    def panels(self) -> list[_Panel]:
        return [p for row in self.grid for p in row]

    def _panel(self, strides: tuple[int, ...], pr: int, pc: int) -> _Panel:
        outer = [0] * self.lead + ([pr] if self.panel_rows else []) + ([pc] if self.panel_cols else [])
        base = sum(i * st for i, st in zip(outer, strides)) - self.lo
        n_rows = self.rows.shown if self.rows else 1
        n_cols = self.cols.shown if self.cols else 1
        r_st = self.rows.stride if self.rows else 0
        c_st = self.cols.stride if self.cols else 0
        offsets = [[base + i * r_st + j * c_st for j in range(n_cols)] for i in range(n_rows)]
        inner = (lambda i, j: (i, j)) if self.rows else ((lambda i, j: (j,)) if self.cols else (lambda i, j: ()))
        index = [[tuple(outer) + inner(i, j) for j in range(n_cols)] for i in range(n_rows)]
        label = ""
        if self.ndim >= 3:
            label = "x[" + ", ".join([str(i) for i in outer] + [":", ":"]) + "]"
        return _Panel(label, offsets, index)

    def hue(self, off: int) -> int:
        """240 (blue) at the lowest address, 0 (red) at the highest."""
        return round(240 * (1 - off / self.span)) if self.span else 240

    def caption(self) -> str:
        if self.ndim == 0:
            return "0-d: one element"
        parts = []
        if self.lead:
            parts.append(f"{self.ndim}-D: dims 0..{self.lead - 1} at index 0")
        return "; ".join(parts)


def _picture(m: _Meta) -> _Picture | None:
    if m.strides is None or m.numel == 0:
        return None
    return _Picture(tuple(m.shape), tuple(m.strides))


def _axis_html(axis: _Axis | None, arrow: str) -> str:
    return _html.escape(axis.label(arrow)) if axis else ""


class Layout:
    """A tensor's layout: explain() text plus a picture of where each element lives in memory.

    ``str()``/``repr()`` give plain text; notebooks render ``_repr_html_``.
    """

    def __init__(self, x: object) -> None:
        m = _safe_meta(x)
        self.meta: _Meta | None
        self.picture: _Picture | None
        if isinstance(m, str):
            self.meta, self.text, self.picture = None, m, None
        else:
            self.meta, self.text, self.picture = m, _explain_meta(m), _picture(m)

    def _text_picture(self) -> str:
        pic = self.picture
        if pic is None:
            return ""
        lines = ["memory offset of each element, in elements from the lowest address "
                 "(equal numbers share an address)" + (f": {pic.caption()}" if pic.caption() else "")]
        for axis, arrow in ((pic.panel_rows, "down the panels"), (pic.panel_cols, "across the panels"),
                            (pic.rows, "down"), (pic.cols, "across")):
            if axis is not None:
                lines.append(f"  {arrow}: {axis.label('->')}")
        w = max(len(str(off)) for p in pic.panels() for row in p.offsets for off in row)
        n_cols = len(pic.grid[0][0].offsets[0])
        w = max(w, len(str(n_cols - 1)))
        lw = len(str(len(pic.grid[0][0].offsets) - 1))
        for panel in pic.panels():
            if panel.label:
                lines.append(f"  {panel.label}")
            lines.append(" " * (lw + 3) + " ".join(str(j).rjust(w) for j in range(n_cols)))
            for i, row in enumerate(panel.offsets):
                lines.append(f"  {str(i).rjust(lw)} " + " ".join(str(off).rjust(w) for off in row))
        return "\n".join(lines)

    def __str__(self) -> str:
        g = self._text_picture()
        return self.text + ("\n" + g if g else "")

    __repr__ = __str__

    def _picture_html(self, legend: bool = True) -> str:
        """The picture alone (no text): a grid of panels, each cell numbered and coloured by its offset,
        and (`legend`) the colour scale below it."""
        pic = self.picture
        if pic is None:
            return ""
        esc = _html.escape
        cell = ("min-width:2.4em;height:1.6em;padding:0 3px;text-align:right;color:#000;"
                "border:1px solid #fff;")
        parts = ['<div style="margin-bottom:6px">']
        parts.append('<div style="margin-bottom:4px">each element: its offset in memory, in elements from the '
                     "lowest address; colour from blue (lowest) to red (highest); dashed cells share an address"
                     + (f"; {esc(pic.caption())}" if pic.caption() else "") + "</div>")
        parts.append('<table style="border-collapse:separate;border-spacing:6px 4px">')
        if pic.panel_cols is not None:
            parts.append(f'<tr><th></th><th colspan="{len(pic.grid[0])}" style="text-align:left;color:#444">'
                         f"{_axis_html(pic.panel_cols, RIGHT)}</th></tr>")
        for r, row in enumerate(pic.grid):
            parts.append("<tr>")
            if r == 0:
                label = _axis_html(pic.panel_rows, DOWN) if pic.panel_rows is not None else ""
                parts.append(f'<th rowspan="{len(pic.grid)}" style="vertical-align:top;text-align:left;'
                             f'color:#444;max-width:7em;font-weight:normal">{label}</th>')
            for c, panel in enumerate(row):
                # each panel's own axes are labelled once: columns on the first row, rows on the first column
                parts.append('<td style="vertical-align:top;padding:0">'
                             + self._panel_html(pic, panel, cell, col_label=r == 0, row_label=c == 0) + "</td>")
            parts.append("</tr>")
        parts.append("</table>")
        if legend:
            parts.append('<div style="display:flex;align-items:center;gap:6px;margin-top:2px">'
                         f"<span>0</span><span style=\"display:inline-block;width:16em;height:0.8em;"
                         "background:linear-gradient(to right,hsl(240,75%,72%),hsl(180,75%,72%),hsl(120,75%,72%),"
                         f'hsl(60,75%,72%),hsl(0,75%,72%))"></span><span>{pic.span} (highest address)</span></div>')
        parts.append("</div>")
        return "".join(parts)

    @staticmethod
    def _panel_html(pic: _Picture, panel: _Panel, cell: str, col_label: bool, row_label: bool) -> str:
        esc = _html.escape
        n_cols = len(panel.offsets[0])
        parts = ['<table style="border-collapse:collapse">']
        if panel.label:
            parts.append(f'<tr><th colspan="{n_cols + 1}" style="text-align:left;font-weight:normal;'
                         f'color:#444">{esc(panel.label)}</th></tr>')
        if pic.cols is not None and col_label:
            parts.append(f'<tr><th></th><th colspan="{n_cols}" style="text-align:left;font-weight:normal;'
                         f'color:#444">{_axis_html(pic.cols, RIGHT)}</th></tr>')
        for i, row in enumerate(panel.offsets):
            head = ""
            if i == 0 and (pic.rows is None or not row_label):
                head = f'<th rowspan="{len(panel.offsets)}"></th>'
            elif i == 0:
                head = (f'<th rowspan="{len(panel.offsets)}" style="vertical-align:top;text-align:left;'
                        f'font-weight:normal;color:#444;max-width:5.5em">{_axis_html(pic.rows, DOWN)}</th>')
            cells = []
            for j, off in enumerate(row):
                idx = ", ".join(str(k) for k in panel.index[i][j])
                border = "border:2px dashed #333;" if off in pic.shared else ""
                cells.append(f'<td title="x[{idx}]: offset {off}" style="{cell}{border}'
                             f'background:hsl({pic.hue(off)},75%,72%)">{off}</td>')
            parts.append(f"<tr>{head}{''.join(cells)}</tr>")
        parts.append("</table>")
        return "".join(parts)

    def _repr_html_(self) -> str:
        return ('<div style="font-family:monospace;font-size:12px">' + self._picture_html()
                + f'<pre style="margin:0">{_html.escape(self.text)}</pre></div>')


def layout(x: object) -> Layout:
    """The layout of `x` as an object that prints as text and renders as a picture.

    Each element is numbered with its offset in memory (in elements, from the
    lowest address the tensor touches) and, in a notebook, coloured from blue
    (lowest) to red (highest), with each dim's stride written on its axis: an
    NCHW tensor, its channels_last copy and a transposed view look different,
    and a broadcast (stride 0) dim repeats the same numbers.  The last two dims
    form a panel; for 3-D and more, panels for the dims before them sit side by
    side (dim -3) and in rows (dim -4).  Panels show at most 8x8 elements (16x16
    for a single panel).  ``print(pl.layout(x))`` gives explain(x) and the same
    numbers as text.

    >>> import numpy as np, pylayout as pl
    >>> print(pl.layout(np.zeros((2, 3)).T))   # doctest: +ELLIPSIS
    pylayout.explain: numpy.ndarray
    ...
    memory offset of each element, in elements from the lowest address (equal numbers share an address)
      down: dim 0 -> stride 1
      across: dim 1 -> stride 3
        0 1
      0 0 3
      1 1 4
      2 2 5
    """
    return Layout(x)
