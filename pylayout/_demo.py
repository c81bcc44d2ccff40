"""python -m pylayout demo: the five layout bugs pylayout exists to end.

Each story shows what the ecosystem does, then pylayout's fix, on built-in
tensors.  With torch missing, the NumPy parts run and the rest is listed as
skipped.  It ends with a short speed table measured on the spot.
"""
from __future__ import annotations

import pylayout as pl

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

skipped: list[str] = []


def title(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 72 - len(text)))


def attempt(label: str, fn) -> None:
    """Print what fn() returns, or the exception the ecosystem raises."""
    try:
        print(f"  {label}: {fn()}")
    except Exception as e:
        print(f"  {label}: {type(e).__name__}: {str(e).splitlines()[0]}")


def needs(*mods) -> bool:
    missing = [name for name, mod in zip(("torch", "numpy"), (torch, np)) if mod is None and name in mods]
    return not missing


def flat_kernel_np(a):
    """A 'C kernel' that assumes row-major memory: reads the buffer in address order."""
    return np.lib.stride_tricks.as_strided(a, (a.size,), (a.itemsize,))[:4].tolist()


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


def story_1() -> None:
    title("Story 1: a custom operator gets a non-contiguous input")
    if np is not None:
        a = np.arange(12, dtype=np.float32).reshape(3, 4).T
        print(f"  kernel assumes row-major; input a.T should start {a.ravel()[:4].tolist()}")
        print(f"  kernel reads (ecosystem): {flat_kernel_np(a)}   <- wrong elements")
        fixed = pl.require(a, "contiguous")
        print(f"  kernel reads after pylayout.require(a): {flat_kernel_np(fixed)}")
        c = np.ascontiguousarray(a)
        print(f"  already contiguous -> same object, no copy: {pl.contiguous(c) is c}")

        @pl.requires(x="contiguous", mode="warn")
        def op(x):
            return flat_kernel_np(x)

        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            op(a)
        print(f"  @pylayout.requires(x='contiguous', mode='warn') says: {caught[0].message}")
    else:
        skipped.append("story 1 (needs NumPy)")


def story_2() -> None:
    title("Story 2: view_as_complex after einops.rearrange")
    if not needs("torch"):
        skipped.append("story 2's torch part")
        if np is not None:
            x = np.random.rand(336, 2).astype(np.float32).reshape(336, 1, 2)
            print(f"  NumPy (336, 1, 2) -> pylayout.view_as_complex: {pl.view_as_complex(x).shape}")
        return
    x = torch.rand(336, 2, 1).transpose(1, 2).contiguous()
    print(f"  x: shape {tuple(x.shape)}, strides {x.stride()} (what einops 'b (complex c) -> b c complex' gives)")
    try:
        torch.view_as_complex(x)
        print(f"  torch {torch.__version__.split('+')[0]}: view_as_complex(x) works now (torch < 2.13 raised "
              "'Tensor must have a stride divisible by 2 for all but last dimension')")
    except RuntimeError as e:
        print(f"  torch.view_as_complex(x): RuntimeError: {e}")
    z = pl.view_as_complex(x)
    print(f"  pylayout.view_as_complex(x): {z.dtype}, shape {tuple(z.shape)}, zero-copy={z.data_ptr() == x.data_ptr()}")
    e = torch.empty_strided((0, 3, 2), (1, 3, 1))
    attempt("torch.view_as_complex(empty, odd strides)", lambda: torch.view_as_complex(e).shape)
    attempt("pylayout.view_as_complex(same)", lambda: tuple(pl.view_as_complex(e).shape))
    bad = torch.rand(3, 5, 2).as_strided((3, 2, 2), (10, 3, 1))
    attempt("no view exists (odd stride), copy=False", lambda: pl.view_as_complex(bad, copy=False))
    print(f"  ... copy=None packs instead: {pl.view_as_complex(bad).shape}")


def story_3() -> None:
    title("Story 3: layouts and speed")
    if not needs("torch"):
        skipped.append("story 3 (torch)")
        return
    x = torch.empty(8, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    print(f"  NHWC tensor strides={x.stride()}: is_contiguous -> {pl.is_contiguous(x)}, "
          f"channels_last -> {pl.is_contiguous(x, torch.channels_last)} (torch: "
          f"{x.is_contiguous()}, {x.is_contiguous(memory_format=torch.channels_last)})")
    y = torch.empty(8, 1, 32, 32)
    print(f"  C == 1: both at once ({pl.is_contiguous(y)}, {pl.is_contiguous(y, 'channels_last')}); "
          f"suggest_format -> {pl.suggest_format(y)!r}, as torch resolves it")
    from ._bench import best_time

    x = torch.randn(32, 64, 56, 56)
    a, b = pl.contiguous(x, torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    ours = best_time(lambda: pl.contiguous(x, torch.channels_last), 3)
    theirs = best_time(lambda: x.contiguous(memory_format=torch.channels_last), 3)
    print(f"  NCHW -> channels_last {tuple(x.shape)}, best of 3: pylayout {1e3 * ours:.1f} ms, "
          f"torch {1e3 * theirs:.1f} ms, bit-equal={torch.equal(a, b)}")
    print(f"  already channels_last -> same object: {pl.contiguous(a, torch.channels_last) is a}")


def story_4() -> None:
    title("Story 4: a kernel writes NHWC into an output torch thinks is NCHW")
    if not needs("torch"):
        skipped.append("story 4 (torch)")
        return
    N, K, P, Q = 2, 3, 4, 5
    result = torch.arange(N * K * P * Q, dtype=torch.float32).reshape(N, K, P, Q)  # what the conv computes

    def nhwc_kernel(out):
        """Writes the result in NHWC order into out's memory, as the generated code did."""
        flat = out.as_strided((out.numel(),), (1,))
        flat.copy_(result.permute(0, 2, 3, 1).reshape(-1))
        return out

    out = nhwc_kernel(torch.zeros(N, K, P, Q))
    print(f"  torch.zeros(N, K, P, Q) + NHWC kernel: matches the reference = {torch.equal(out, result)}")
    print(f"  pylayout.is_contiguous(out, 'channels_last') before the call: "
          f"{pl.is_contiguous(torch.zeros(N, K, P, Q), 'channels_last')} <- the bug, caught up front")
    good = torch.from_dlpack(pl.empty((N, K, P, Q), "float32", format="channels_last"))
    print(f"  output from pylayout.empty(format='channels_last'): matches = {torch.equal(nhwc_kernel(good), result)}")
    guarded = pl.requires(out="channels_last", mode="raise")(lambda out: nhwc_kernel(out))
    attempt("@pylayout.requires(out='channels_last', mode='raise') on the wrapper",
            lambda: guarded(torch.zeros(N, K, P, Q)))


def story_5() -> None:
    title("Story 5: layout conversions that keep gradients")
    if not needs("torch"):
        skipped.append("story 5 (torch)")
        return
    w = torch.randn(4, 3, 2, 2, requires_grad=True)
    attempt("w.__dlpack__() on a tensor that requires grad", lambda: w.__dlpack__())
    y = pl.contiguous(w, torch.channels_last)
    (y * y).sum().backward()
    print(f"  pylayout.contiguous(w, channels_last): grad_fn={type(y.grad_fn).__name__}, "
          f"gradient correct={torch.allclose(w.grad, 2 * w.detach())}")
    z = pl.view_as_complex(torch.randn(5, 2, requires_grad=True))
    print(f"  pylayout.view_as_complex keeps the graph too: requires_grad={z.requires_grad}")


def speed_table() -> None:
    title("Speed (GB/s, this machine, now; full table: python -m pylayout bench)")
    if not needs("torch", "numpy"):
        skipped.append("speed table (torch and NumPy)")
        return
    from ._bench import best_time

    rows = [
        ("NCHW->channels_last (16,64,56,56) f32", torch.randn(16, 64, 56, 56),
         lambda x: pl.contiguous(x, torch.channels_last), lambda x: x.contiguous(memory_format=torch.channels_last),
         lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))),
        ("transpose 4096x4096 f32", torch.randn(4096, 4096).t(), pl.contiguous, lambda x: x.contiguous(),
         np.ascontiguousarray),
    ]
    print(f"  {'case':40} {'pylayout':>9} {'torch':>7} {'numpy':>7} {'memcpy':>7}")
    for name, x, ours, theirs, npy in rows:
        nbytes = x.numel() * x.element_size()
        a = x.numpy()
        src = np.ones(nbytes, np.uint8)  # written: an untouched source reads the zero page from cache
        dst = np.ones_like(src)
        g = [nbytes / best_time(fn, 3) / 1e9 for fn in
             (lambda: ours(x), lambda: theirs(x), lambda: npy(a), lambda: np.copyto(dst, src))]
        print(f"  {name:40} {g[0]:9.2f} {g[1]:7.2f} {g[2]:7.2f} {g[3]:7.2f}")


def run() -> int:
    print(f"pylayout {pl.__version__} (DLPack {'.'.join(map(str, pl.DLPACK_VERSION))}); "
          f"torch {torch.__version__ if torch else 'not installed'}, numpy {np.__version__ if np else 'not installed'}")
    for section in (story_exchange, story_1, story_2, story_3, story_4, story_5, speed_table):
        section()
    if skipped:
        print(f"\nskipped: {'; '.join(skipped)} (not installed)")
    return 0
