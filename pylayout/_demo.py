"""python -m pylayout demo: the five layout bugs pylayout exists to end.

Each story shows what goes wrong, then pylayout's fix, on built-in tensors:
torch's and NumPy's where they are installed, pylayout's own tensors
(``pylayout.empty``, read and written through ``memoryview`` and ``ctypes`` as
a C kernel would) where they are not.  It ends with a speed table; story 3
quotes the same measurement.
"""
from __future__ import annotations

import array
import ctypes
import itertools
import warnings
from typing import Any, Callable

import pylayout as pl

from ._bench import best_time

np: Any
torch: Any
try:
    import numpy as np
except ImportError:  # pragma: no cover - exercised by tests that hide NumPy
    np = None
try:
    import torch
except ImportError:  # pragma: no cover - exercised by tests that hide torch
    torch = None

REPEAT = 5           # timings: best of this many runs (after a warm-up) ...
MIN_TIME = 0.2       # ... and of at least this many seconds


def title(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 72 - len(text)))


def attempt(label: str, fn: Callable[[], object]) -> None:
    """Print what fn() returns, or the exception it raises."""
    try:
        print(f"  {label}: {fn()}")
    except Exception as e:
        print(f"  {label}: {type(e).__name__}: {str(e).splitlines()[0]}")


def kernel_reads(ptr: int, n: int) -> list[float]:
    """What a C kernel that assumes row-major float32 sees: the first `n` floats at `ptr`, in address order."""
    return [round(v, 3) for v in (ctypes.c_float * n).from_address(ptr)]


def fill(t: pl.Tensor, value: Callable[..., float]) -> pl.Tensor:
    """Write value(*index) into every element of a pylayout tensor, through its buffer (any strides)."""
    view: Any = memoryview(t)   # typeshed's memoryview takes ints only; float32 items take floats
    for index in itertools.product(*map(range, t.shape)):
        view[index] = value(*index)
    return t


def values(t: pl.Tensor) -> Any:
    """A pylayout tensor's elements in logical (row-major index) order, as nested lists."""
    return memoryview(t).tolist()


def ptr(t: pl.Tensor) -> int:
    return t.data_ptr + t.byte_offset


# ------------------------------------------------------------------ stories


def story_exchange() -> None:
    title("DLPack exchange: zero-copy, strides preserved")
    t = pl.empty((2, 3, 4), "float32", format="fortran")
    print(f"  pylayout alone: {t}")
    print(f"    is_contiguous: C={pl.is_contiguous(t)}, fortran={pl.is_contiguous(t, 'fortran')}; "
          f"memoryview strides (bytes) {memoryview(t).strides}")
    if np is not None:
        a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::2, 1:].transpose(2, 0, 1)
        t = pl.from_dlpack(a)
        print(f"  numpy view  shape={a.shape} byte strides={a.strides}")
        print(f"  pylayout    {t}")
        b = np.from_dlpack(t)
        b[0, 0, 0] = -1.0
        print(f"  numpy -> pylayout -> numpy shares memory: {b.ctypes.data == a.ctypes.data and a[0, 0, 0] == -1.0}")
    if torch is not None:
        x = torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1)[:, 1:]
        y = torch.from_dlpack(pl.from_dlpack(x))
        print(f"  torch -> pylayout -> torch: same data_ptr={y.data_ptr() == x.data_ptr()}, "
              f"strides {x.stride()} kept={y.stride() == x.stride()}")
        z = torch.tensor([1 + 2j], dtype=torch.complex64).conj()
        print("  torch's C exchange API hands over a conjugate-bit tensor's raw memory (1+2j for 1-2j);")
        attempt("pylayout.from_dlpack(z.conj()) refuses instead", lambda: pl.from_dlpack(z))
    if np is None and torch is None:
        s = pl.from_dlpack(t)
        print(f"  pylayout -> pylayout: same memory={s.data_ptr == t.data_ptr}, strides kept={s.strides == t.strides}")


def story_1() -> None:
    title("Story 1: a custom operator gets a non-contiguous input")
    if np is not None:
        a: Any = np.arange(12, dtype=np.float32).reshape(3, 4).T
        want = a.ravel()[:4].tolist()
        reads = lambda arr: kernel_reads(arr.ctypes.data, 4)  # noqa: E731
    else:
        # pylayout alone: a (4, 3) tensor whose memory is column-major, as a transpose hands it over
        a = fill(pl.empty((4, 3), "float32", order=(1, 0)), lambda i, j: 4.0 * j + i)
        want = [v for row in values(a) for v in row][:4]
        reads = lambda t: kernel_reads(ptr(t), 4)  # noqa: E731
    print(f"  kernel assumes row-major; its input, a transpose, should start {want}")
    print(f"  kernel reads (as is): {reads(a)}   <- wrong elements")
    fixed = pl.require(a, "contiguous")
    print(f"  kernel reads after pylayout.require(a): {reads(fixed)}")
    print(f"  already contiguous -> same object, no copy: {pl.contiguous(fixed) is fixed}")

    @pl.requires(x="contiguous", mode="warn")
    def op(x: Any) -> list[float]:
        return reads(x)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        op(a)
    print(f"  @pylayout.requires(x='contiguous', mode='warn') says: {caught[0].message}")


def story_2() -> None:
    title("Story 2: view_as_complex after einops.rearrange")
    if torch is not None:
        version = torch.__version__.split("+")[0]
        x = torch.rand(336, 2, 1).transpose(1, 2).contiguous()
        print(f"  x: shape {tuple(x.shape)}, strides {x.stride()} (what einops 'b (complex c) -> b c complex' gives)")
        try:
            torch.view_as_complex(x)
            print(f"  torch {version}: torch.view_as_complex(x) accepts it (torch before pytorch#169780 raised "
                  "'Tensor must have a stride divisible by 2 for all but last dimension')")
        except RuntimeError as e:
            print(f"  torch {version}: torch.view_as_complex(x): RuntimeError: {e}")
        z = pl.view_as_complex(x)
        print(f"  pylayout.view_as_complex(x): {z.dtype}, shape {tuple(z.shape)}, "
              f"zero-copy={z.data_ptr() == x.data_ptr()}, with any torch")
        empty = torch.empty_strided((0, 3, 2), (1, 3, 1))
        print(f"  a layout torch {version} still refuses: an empty tensor with odd strides")
        attempt("    torch.view_as_complex(empty, strides (1, 3, 1))", lambda: torch.view_as_complex(empty).shape)
        attempt("    pylayout.view_as_complex(same)", lambda: tuple(pl.view_as_complex(empty).shape))
        no_view(torch.rand(3, 5, 2).as_strided((3, 2, 2), (10, 3, 1)))
    if np is not None:
        r = np.arange(8, dtype=np.float32).reshape(4, 2)[::-1]
        z = pl.view_as_complex(r)
        print(f"  NumPy (4, 2) reversed, byte strides {r.strides} (torch.from_numpy refuses negative strides):")
        print(f"    pylayout.view_as_complex: {z.dtype}, {z.tolist()}, zero-copy={z.ctypes.data == r.ctypes.data}")
    if torch is None:
        # pylayout alone: the einops layout, built directly
        x = fill(pl.empty((336, 1, 2), "float32", order=(0, 2, 1)), lambda b, c, k: b + 0.5 * k)
        z = pl.view_as_complex(x)
        print(f"  pylayout alone: x shape {x.shape}, strides {x.strides} (the einops layout)")
        z1 = complex(*kernel_reads(ptr(z) + z.strides[0] * z.itemsize, 2))
        print(f"    pylayout.view_as_complex(x): {z.dtype}, shape {z.shape}, zero-copy={z.data_ptr == x.data_ptr}, "
              f"z[1, 0] = {z1}")
        no_view(pl.empty((3, 2), "float32", order=(1, 0)))    # real and imag parts 3 floats apart


def no_view(bad: Any) -> None:
    attempt("  no complex view exists (odd stride), copy=False", lambda: pl.view_as_complex(bad, copy=False))
    packed = pl.view_as_complex(bad)
    print(f"  ... copy=None packs instead: shape {tuple(packed.shape)}, {packed.dtype}")


def story_3() -> None:
    title("Story 3: layouts and speed")
    if torch is not None:
        x = torch.empty(8, 3, 32, 32).contiguous(memory_format=torch.channels_last)
        y = torch.empty(8, 1, 32, 32)
        print(f"  NHWC tensor strides={x.stride()}: is_contiguous -> {pl.is_contiguous(x)}, "
              f"channels_last -> {pl.is_contiguous(x, torch.channels_last)} (torch: "
              f"{x.is_contiguous()}, {x.is_contiguous(memory_format=torch.channels_last)})")
    else:
        x = pl.empty((8, 3, 32, 32), "float32", format="channels_last")
        y = pl.empty((8, 1, 32, 32), "float32")
        print(f"  pylayout.empty(..., format='channels_last') strides={x.strides}: is_contiguous -> "
              f"{pl.is_contiguous(x)}, channels_last -> {pl.is_contiguous(x, 'channels_last')}")
    print(f"  C == 1: both at once ({pl.is_contiguous(y)}, {pl.is_contiguous(y, 'channels_last')}); "
          f"suggest_format -> {pl.suggest_format(y)!r}, as torch resolves it")
    row = speed_rows()[0]
    line = f"  {row.name}, best of {REPEAT} on {threads()}: pylayout {row.ms('pylayout')}"
    for other in ("torch", "numpy", "memcpy"):
        if other in row.seconds:
            line += f", {other} {row.ms(other)}"
    print(line + " (the speed table's first row)")
    print(f"  result checked element by element against {row.oracle}: equal={row.equal}")
    a = row.converted
    print(f"  already channels_last -> same object: {pl.contiguous(a, 'channels_last') is a}")


def story_4() -> None:
    title("Story 4: a kernel writes NHWC into an output torch thinks is NCHW")
    N, K, P, Q = 2, 3, 4, 5

    def reference(n: int, c: int, h: int, w: int) -> float:   # what the convolution computes
        return float(((n * K + c) * P + h) * Q + w)

    def nhwc_kernel(out_ptr: int) -> None:
        """Writes the result in NHWC order into raw memory, as the generated code did."""
        flat = (ctypes.c_float * (N * K * P * Q)).from_address(out_ptr)
        for i, (n, h, w, c) in enumerate(itertools.product(range(N), range(P), range(Q), range(K))):
            flat[i] = reference(n, c, h, w)

    want = [[[[reference(n, c, h, w) for w in range(Q)] for h in range(P)] for c in range(K)] for n in range(N)]
    if torch is not None:
        zeros, label = torch.zeros(N, K, P, Q), "torch.zeros(N, K, P, Q)"
        nhwc_kernel(zeros.data_ptr())
        matches = zeros.tolist() == want
        good = torch.from_dlpack(pl.empty((N, K, P, Q), "float32", format="channels_last"))
        nhwc_kernel(good.data_ptr())
        good_matches = good.tolist() == want
        fresh = lambda: torch.zeros(N, K, P, Q)  # noqa: E731
    else:
        zeros, label = pl.empty((N, K, P, Q), "float32"), "pylayout.empty((N, K, P, Q))"
        nhwc_kernel(ptr(zeros))
        matches = values(zeros) == want
        good = pl.empty((N, K, P, Q), "float32", format="channels_last")
        nhwc_kernel(ptr(good))
        good_matches = values(good) == want
        fresh = lambda: pl.empty((N, K, P, Q), "float32")  # noqa: E731
    def kernel_on(out: Any) -> Any:
        nhwc_kernel(out.data_ptr() if torch is not None else ptr(out))
        return out

    print(f"  {label} + NHWC kernel: matches the reference = {matches}")
    print(f"  pylayout.is_contiguous(out, 'channels_last') before the call: "
          f"{pl.is_contiguous(fresh(), 'channels_last')} <- the bug, caught up front")
    print(f"  output from pylayout.empty(format='channels_last'): matches = {good_matches}")
    guarded = pl.requires(out="channels_last", mode="raise")(kernel_on)
    attempt("@pylayout.requires(out='channels_last', mode='raise') on the wrapper", lambda: guarded(fresh()))


def story_5() -> None:
    title("Story 5: layout conversions that keep gradients")
    if torch is None:
        print("  autograd is torch's: install torch to see gradients flow through pylayout's conversions")
        return
    w = torch.randn(4, 3, 2, 2, requires_grad=True)
    attempt("w.__dlpack__() on a tensor that requires grad", lambda: w.__dlpack__())
    y = pl.contiguous(w, torch.channels_last)
    (y * y).sum().backward()
    print(f"  pylayout.contiguous(w, channels_last): grad_fn={type(y.grad_fn).__name__}, "
          f"gradient correct={torch.allclose(w.grad, 2 * w.detach())}")
    z = pl.view_as_complex(torch.randn(5, 2, requires_grad=True))
    print(f"  pylayout.view_as_complex keeps the graph too: requires_grad={z.requires_grad}")


# ------------------------------------------------------------------ speed


def threads() -> str:
    text = f"{pl.get_num_threads()} thread{'s' if pl.get_num_threads() != 1 else ''} (pylayout"
    if torch is not None:
        text += f"; torch {torch.get_num_threads()}"
    if np is not None:
        text += "; NumPy and memcpy 1"
    return text + ")"


class SpeedRow:
    """One conversion, timed once for every contestant installed: story 3 and the table print these numbers."""

    def __init__(self, name: str, nbytes: int, seconds: dict[str, float], converted: Any, oracle: str, equal: bool):
        self.name, self.nbytes, self.seconds = name, nbytes, seconds
        self.converted, self.oracle, self.equal = converted, oracle, equal

    def gbps(self, who: str) -> float:
        return self.nbytes / self.seconds[who] / 1e9

    def ms(self, who: str) -> str:
        return f"{1e3 * self.seconds[who]:.1f} ms ({self.gbps(who):.1f} GB/s)"


_ROWS: list[SpeedRow] = []


def _time(fns: dict[str, Callable[[], object]]) -> dict[str, float]:
    return {who: best_time(fn, REPEAT, MIN_TIME) for who, fn in fns.items()}


def _memcpy(nbytes: int) -> Callable[[], object]:
    src, dst = bytearray(b"\1") * nbytes, bytearray(b"\2") * nbytes   # written: no zero-page reads
    s, d = memoryview(src), memoryview(dst)

    def copy() -> None:
        d[:] = s
    return copy


def speed_rows() -> list[SpeedRow]:
    """Measured once per run (the first caller pays), best of REPEAT."""
    if _ROWS:
        return _ROWS
    shape = (16, 64, 56, 56)
    if torch is not None:
        x = torch.randn(*shape)
        nbytes = x.numel() * x.element_size()
        fns = {"pylayout": lambda: pl.contiguous(x, torch.channels_last),
               "torch": lambda: x.contiguous(memory_format=torch.channels_last)}
        if np is not None:
            a = x.numpy()
            fns["numpy"] = lambda: np.ascontiguousarray(a.transpose(0, 2, 3, 1))
        fns["memcpy"] = _memcpy(nbytes)
        ours = pl.contiguous(x, torch.channels_last)
        _ROWS.append(SpeedRow(f"NCHW->channels_last {shape} f32", nbytes, _time(fns), ours, "torch",
                              torch.equal(ours, x.contiguous(memory_format=torch.channels_last))))
        t = torch.randn(4096, 4096).t()
        fns = {"pylayout": lambda: pl.contiguous(t), "torch": lambda: t.contiguous()}
        if np is not None:
            b = t.numpy()
            fns["numpy"] = lambda: np.ascontiguousarray(b)
        fns["memcpy"] = _memcpy(t.numel() * 4)
        ours = pl.contiguous(t)
        _ROWS.append(SpeedRow("transpose 4096x4096 f32", t.numel() * 4, _time(fns), ours, "torch",
                              torch.equal(ours, t.contiguous())))
        return _ROWS
    # pylayout alone: against a plain memcpy of the same bytes; correctness through the buffers
    src = pl.empty(shape, "float32")
    n = 1
    for s in shape:
        n *= s
    nbytes = n * 4
    numbers = array.array("f", range(n))
    ctypes.memmove(ptr(src), numbers.buffer_info()[0], nbytes)   # values 0..n-1, every page written
    del numbers
    ours = pl.contiguous(src, "channels_last")
    probe = [(1, 2, 3, 4), (15, 63, 55, 55), (7, 0, 9, 31)]
    equal = all(memoryview(ours)[i] == memoryview(src)[i] for i in probe)
    # both into a preallocated output: memcpy has no allocating form to compare an allocation with
    dst = pl.empty(shape, "float32", format="channels_last")
    _ROWS.append(SpeedRow(f"NCHW->channels_last {shape} f32 (into)", nbytes,
                          _time({"pylayout": lambda: pl.copy_into(dst, src), "memcpy": _memcpy(nbytes)}),
                          ours, "its input", equal))
    return _ROWS


def speed_table() -> None:
    title("Speed (GB/s, this machine, now; full table: python -m pylayout bench)")
    rows = speed_rows()
    who = [w for w in ("pylayout", "torch", "numpy", "memcpy") if w in rows[0].seconds]
    print(f"  best of {REPEAT} runs each, {threads()}")
    width = max(len(row.name) for row in rows)
    print(f"  {'case':{width}} " + " ".join(f"{w:>9}" for w in who))
    for row in rows:
        print(f"  {row.name:{width}} " + " ".join(f"{row.gbps(w):9.2f}" for w in who))
    print("  memcpy: the same bytes copied contiguously (one thread), the bound a layout conversion aims at")


def run() -> int:
    print(f"pylayout {pl.__version__} (DLPack {'.'.join(map(str, pl.DLPACK_VERSION))}); "
          f"torch {torch.__version__ if torch else 'not installed'}, numpy {np.__version__ if np else 'not installed'}")
    if torch is None or np is None:
        missing = " and ".join(n for n, m in (("torch", torch), ("NumPy", np)) if m is None)
        print(f"without {missing}: pylayout's own tensors do their part")
    for section in (story_exchange, story_1, story_2, story_3, story_4, story_5, speed_table):
        section()
    return 0
