"""python -m pylayout demo: pylayout's main job on built-in example tensors.

Each section shows what the ecosystem does, then what pylayout does.  Runs
with NumPy alone, and adds the torch parts when torch is installed.
"""
from __future__ import annotations

import time

import pylayout as pl

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _title(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 70 - len(text)))


def _attempt(label: str, fn) -> None:
    try:
        result = fn()
        print(f"  {label}: {result}")
    except Exception as e:  # the demo shows the ecosystem's errors
        print(f"  {label}: {type(e).__name__}: {e}")


def demo_exchange() -> None:
    _title("DLPack round trips: zero-copy, strides preserved")
    if np is not None:
        a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::2, 1:].transpose(2, 0, 1)
        t = pl.from_dlpack(a)
        print(f"  numpy view        shape={a.shape} byte strides={a.strides}")
        print(f"  pylayout          {t}")
        b = np.from_dlpack(t)
        b[0, 0, 0] = -1.0
        print(f"  numpy -> pylayout -> numpy: same memory={b.ctypes.data == a.ctypes.data}, "
              f"write through the copy seen by the original={a[0, 0, 0] == -1.0}")
        r = np.ones(3)
        r.flags.writeable = False
        print(f"  read-only numpy array imports read-only: {pl.from_dlpack(r).readonly}")
    if torch is not None:
        x = torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1)[:, 1:]
        t = pl.from_dlpack(x)
        y = torch.from_dlpack(t)
        print(f"  torch -> pylayout -> torch: data_ptr equal={y.data_ptr() == x.data_ptr()}, "
              f"strides {x.stride()} -> {y.stride()}")
        z = torch.tensor([1 + 2j], dtype=torch.complex64).conj()
        print("  torch's C exchange API hands over conjugate-bit tensors with raw memory;")
        _attempt("  pylayout refuses instead of returning wrong values", lambda: pl.from_dlpack(z))


def demo_queries() -> None:
    _title("Layout queries with PyTorch's exact rules")
    if torch is None:
        a = np.empty((2, 3, 4, 5), dtype=np.float32).transpose(0, 2, 3, 1)
        print(f"  NHWC-ordered numpy array: suggest_format={pl.suggest_format(a)}, "
              f"contiguous={pl.is_contiguous(a)}")
        return
    x = torch.empty(8, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    print(f"  NHWC tensor (8, 3, 32, 32) strides={x.stride()}")
    for fmt in ("contiguous", "channels_last"):
        print(f"    is_contiguous({fmt!r}): pylayout={pl.is_contiguous(x, fmt)} "
              f"torch={x.is_contiguous(memory_format=getattr(torch, fmt if fmt != 'contiguous' else 'contiguous_format'))}")
    y = torch.empty(8, 1, 32, 32)
    print(f"  ambiguous C == 1 tensor strides={y.stride()}: contiguous and channels_last at once: "
          f"{pl.is_contiguous(y)}, {pl.is_contiguous(y, torch.channels_last)}; "
          f"suggest_format={pl.suggest_format(y)!r} (torch resolves ties to contiguous)")
    s = x[:, :, ::2]
    print(f"  strided NHWC slice: dense={pl.is_dense(s)}, suggest_format={pl.suggest_format(s)!r}")


def demo_convert() -> None:
    _title("Conversions: channels_last, Fortran, any dim order")
    if torch is not None:
        x = torch.randn(32, 64, 56, 56)
        t0 = time.perf_counter()
        y = pl.contiguous(x, torch.channels_last)
        t1 = time.perf_counter()
        ref = x.contiguous(memory_format=torch.channels_last)
        t2 = time.perf_counter()
        print(f"  NCHW -> channels_last {tuple(x.shape)} float32: pylayout {1e3 * (t1 - t0):.1f} ms, "
              f"torch {1e3 * (t2 - t1):.1f} ms, equal={torch.equal(y, ref)}, "
              f"torch says channels_last={y.is_contiguous(memory_format=torch.channels_last)}")
        print(f"  already channels_last -> returned as is: {pl.contiguous(y, torch.channels_last) is y}")
    if np is not None:
        a = np.arange(12.0).reshape(3, 4)
        f = pl.contiguous(a, "fortran")
        print(f"  numpy C -> Fortran: type={type(f).__name__}, F-contiguous={f.flags.f_contiguous}, "
              f"equal={bool((f == a).all())}")
        o = pl.to_order(np.zeros((2, 3, 4), dtype=np.int16), (2, 0, 1))
        print(f"  to_order((2, 0, 1)) on (2, 3, 4) int16: byte strides={o.strides}")


def run() -> int:
    print(f"pylayout {pl.__version__} (DLPack {'.'.join(map(str, pl.DLPACK_VERSION))})")
    skipped = [name for name, mod in (("torch", torch), ("numpy", np)) if mod is None]
    for section in (demo_exchange, demo_queries, demo_convert):
        section()
    if skipped:
        print(f"\n(skipped the parts that need {', '.join(skipped)}: not installed)")
    return 0
