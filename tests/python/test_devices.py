"""Torch tensors on any device (docs: README, "Operator authors with CUDA tensors").

Off the CPU, pylayout decides the layout with its own C rules and torch
moves the bytes on the tensor's device.  These tests run every operation on
meta tensors, which take exactly the route CUDA tensors take, and compare
shapes, strides, dtypes and identity with the CPU path on generated layouts.
With a CUDA device present (never in CI), the same checks run on it too.

User stories 4 and 5 (docs/user-stories.md) happen on the GPU: their kernels
run here as torch code that reads and writes raw device memory, ignoring
strides as a CUTLASS kernel does, on the CPU and on CUDA.  The CUDA-only
checks at the end (inductor, no host synchronisation, torch's current
stream, DLPack exchange with torch and CuPy) need a GPU and say so when
skipped: CI has none, so they run on a lent GPU machine.
"""
from __future__ import annotations

import random
import warnings

import pytest

import pylayout as pl
from conftest import same_bits, torch_layouts

torch = pytest.importorskip("torch", reason="device routes are torch's (CI installs torch)")
import pylayout.torch as plt  # noqa: E402

import torch.nn.functional as F  # noqa: E402

CUDA = torch.cuda.is_available()
DEVICES = ["meta"] + (["cuda"] if CUDA else [])
NUMERIC = ["cpu"] + (["cuda"] if CUDA else [])   # devices whose values can be read back
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device: CI has none; run on a GPU machine")
N = 600


def on(device, x):
    """x's layout (shape, strides, storage offset) on `device`; values too off meta."""
    if device == "meta":
        n = x.untyped_storage().nbytes() // x.element_size()
        return torch.empty(n, dtype=x.dtype, device="meta").as_strided(x.shape, x.stride(), x.storage_offset())
    base = torch.empty(x.untyped_storage().nbytes() // x.element_size(), dtype=x.dtype)
    base.copy_(torch.as_strided(x, (base.numel(),), (1,), 0) if x.numel() else base)
    return base.to(device).as_strided(x.shape, x.stride(), x.storage_offset())


def same_result(cpu_in, cpu_out, dev_in, dev_out, where):
    assert dev_out.device == dev_in.device, where
    assert tuple(dev_out.shape) == tuple(cpu_out.shape), where
    assert dev_out.dtype == cpu_out.dtype, where
    assert dev_out.stride() == cpu_out.stride(), f"{where}: {dev_out.stride()} vs CPU {cpu_out.stride()}"
    assert (dev_out is dev_in) == (cpu_out is cpu_in), f"{where}: identity differs from the CPU path"
    if dev_in.device.type != "meta":   # bits: the generated tensors' memory is torch.empty's, NaNs too
        assert same_bits(dev_out.cpu(), cpu_out), where


FORMATS = ["contiguous", "fortran", "channels_last", "channels_last_3d"]


@pytest.mark.parametrize("device", DEVICES)
def test_conversions_match_the_cpu_path(device):
    seen = dict(identity=0, converted=0, refused=0)
    for where, x in torch_layouts(torch, N, seed=1717):
        d = on(device, x)
        for fmt in FORMATS:
            try:
                c = pl.contiguous(x, fmt)
            except ValueError:  # channels_last on the wrong rank: the same refusal
                with pytest.raises(ValueError):
                    pl.contiguous(d, fmt)
                seen["refused"] += 1
                continue
            r = pl.contiguous(d, fmt)
            same_result(x, c, d, r, f"{where} {fmt}")
            seen["identity" if r is d else "converted"] += 1
        order = list(range(x.dim()))
        random.Random(where).shuffle(order)
        same_result(x, pl.to_order(x, order), d, pl.to_order(d, order), f"{where} order {order}")
    assert min(seen.values()) > 50, seen


@pytest.mark.parametrize("device", DEVICES)
def test_views_match_the_cpu_path(device):
    checked = 0
    for where, x in torch_layouts(torch, N, seed=2323):
        d = on(device, x)
        c, r = pl.canonicalize(x), pl.canonicalize(d)
        assert r.stride() == c.stride() and r.device == d.device, where
        if x.dim() and x.shape[-1] == 2:
            try:
                cz = pl.view_as_complex(x, copy=False)
            except ValueError:
                with pytest.raises(ValueError):
                    pl.view_as_complex(d, copy=False)
                continue
            dz = pl.view_as_complex(d, copy=False)
            assert dz.stride() == cz.stride() and dz.dtype == cz.dtype and dz.device == d.device, where
            assert pl.view_as_real(dz).stride() == pl.view_as_real(cz).stride(), where
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("device", DEVICES)
def test_complex_packing_and_copy_into(device):
    re, im = torch.randn(3, 4, 5), torch.randn(3, 4, 5)
    z = pl.pack_complex(re, im)
    dz = pl.pack_complex(on(device, re), on(device, im))
    assert dz.device.type == device and dz.dtype == z.dtype and dz.stride() == z.stride()
    out = torch.empty(5, 4, 3, dtype=torch.complex64, device=device).permute(2, 1, 0)
    assert pl.pack_complex(on(device, re), on(device, im), out=out) is out and out.stride() == (1, 3, 12)
    if device != "meta":
        assert torch.equal(out.cpu(), z)
    with pytest.raises(BufferError, match="autograd cannot follow"):
        pl.pack_complex(on(device, re).requires_grad_(), on(device, im), out=out)
    for dt in (torch.float16, torch.float64):   # complex32 and complex128, by the same kernel
        h = torch.randn(3, 4).to(dt)
        hz = pl.pack_complex(on(device, h), on(device, -h))
        assert hz.dtype == pl.pack_complex(h, -h).dtype and hz.stride() == (4, 1)
        if device != "meta":
            assert same_bits(hz.cpu(), pl.pack_complex(h, -h))
    for copy in (True, False):
        a, b = pl.unpack_complex(z, copy=copy)
        da, db = pl.unpack_complex(dz, copy=copy)
        assert (da.stride(), db.stride(), da.dtype) == (a.stride(), b.stride(), a.dtype), copy
        assert da.device == dz.device
    dst = torch.empty(4, 3, device=device).t()
    assert pl.copy_into(dst, torch.ones(3, 4, device=device)) is dst
    with pytest.raises(TypeError, match="int32 but dst is float32"):
        pl.copy_into(dst, torch.ones(3, 4, dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="same shape"):
        pl.copy_into(dst, torch.ones(4, 3, device=device))
    with pytest.raises(BufferError, match="one device"):
        pl.copy_into(dst, torch.ones(3, 4))
    with pytest.raises(TypeError, match="float32 to pair with out's complex128"):
        pl.pack_complex(on(device, re), on(device, im), out=torch.empty(3, 4, 5, dtype=torch.complex128,
                                                                      device=device))
    if device != "meta":
        assert torch.equal(dz.cpu(), z)


def _neg(x):
    return torch._neg_view(x)


def _bit_cases(device):
    """(name, call, expected) for every operation on tensors with torch's
    conjugate or negative bit: `call` runs pylayout on `device`, `expected`
    gives the values torch's own kernels give, read on the CPU."""
    z = torch.randn(4, 3, dtype=torch.complex64)
    r = torch.randn(4, 3)
    r4 = torch.randn(2, 3, 4, 5)
    dz, dr, dr4 = on(device, z), on(device, r), on(device, r4)

    def empty(shape, dtype=torch.float32):
        return torch.zeros(shape, dtype=dtype, device=device)

    def into(dst, src):
        assert pl.copy_into(dst, src) is dst
        return dst

    def pack_out(out):
        assert pl.pack_complex(dr, -dr, out=out) is out
        return out

    return [
        ("contiguous, conj", lambda: pl.contiguous(dz.t().conj()), z.t().conj()),
        ("contiguous, neg", lambda: pl.contiguous(_neg(dr).t()), -r.t()),
        ("to_order, neg", lambda: pl.to_order(_neg(dr.t()), (0, 1)), -r.t()),
        ("channels_last, neg", lambda: pl.contiguous(_neg(dr4), "channels_last"), -r4),
        ("copy_into, neg src", lambda: into(empty((3, 4)), _neg(dr).t()), -r.t()),
        ("copy_into, conj src", lambda: into(empty((3, 4), torch.complex64), dz.t().conj()), z.t().conj()),
        ("copy_into, conj dst", lambda: into(empty((3, 4), torch.complex64).conj(), dz.t()), z.t()),
        ("copy_into, neg dst", lambda: into(_neg(empty((3, 4))), dr.t()), r.t()),
        ("pack_complex, neg re", lambda: pl.pack_complex(_neg(dr), dr), torch.complex(-r, r)),
        ("pack_complex, conj out", lambda: pack_out(empty((4, 3), torch.complex64).conj()), torch.complex(r, -r)),
    ]


@pytest.mark.parametrize("device", NUMERIC + ["meta"])
def test_torch_bits_are_refused_on_the_cpu_and_torchs_elsewhere(device):
    """The conjugate and negative bits say the memory holds other values
    than the tensor's.  On the CPU the C core would read or write that raw
    memory, so every operation refuses them with the fix; off it torch's own
    kernels move the bytes and honour them, so every operation gives torch's
    values (a CUDA copy_into once refused a negated source here, because its
    fast path refused before reading the device).  Meta runs the same route
    without values."""
    for name, call, expected in _bit_cases(device):
        if device == "cpu":
            with pytest.raises(BufferError, match=r"resolve_(conj|neg)\(\) first"):
                call()
            continue
        y = call()
        assert y.device.type == device and tuple(y.shape) == tuple(expected.shape), name
        if device != "meta":
            assert torch.equal(y.resolve_conj().resolve_neg().cpu(), expected.resolve_conj().resolve_neg()), name
    re, im = torch.randn(3, 4), torch.randn(3, 4)
    if device != "cpu":   # pylayout.torch's own entry point, on the same bit
        out = torch.zeros(3, 4, dtype=torch.complex64, device=device).conj()
        assert plt.pack_complex(on(device, re), on(device, im), out=out) is out and out.is_conj()
        if device != "meta":
            assert torch.equal(out.resolve_conj().cpu(), torch.complex(re, im))


@pytest.mark.parametrize("device", DEVICES)
def test_guard_modes(device):
    """The operator author's guard of user stories 4 and 5, in every mode."""
    @pl.requires(x="channels_last", out="channels_last")
    def op(x):
        return x * 2 if device != "meta" else x.clone()

    x = torch.empty(2, 3, 4, 5, device=device)
    y = op(x)
    assert y.device.type == device and y.is_contiguous(memory_format=torch.channels_last)
    cl = x.contiguous(memory_format=torch.channels_last)
    assert pl.require(cl, "channels_last", mode="raise") is cl
    with pytest.raises(pl.LayoutError, match="channels_last"):
        pl.require(x, "channels_last", mode="raise")
    with pytest.warns(pl.LayoutWarning, match="converted"):
        w = pl.require(x, "channels_last", mode="warn")
    assert w.device.type == device and w.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_through_pylayout_torch(device):
    x = torch.randn(2, 3, 4, 5, device=device, requires_grad=True)
    for y in (plt.contiguous(x, "channels_last"), pl.contiguous(x, torch.channels_last),
              plt.to_order(x, (3, 1, 0, 2))):
        assert y.device.type == device and y.requires_grad
        (g,) = torch.autograd.grad(y.sum(), x)
        assert g.shape == x.shape and g.device.type == device
    re = torch.randn(4, 3, device=device, requires_grad=True)
    z = plt.pack_complex(re, re * 2)
    (g,) = torch.autograd.grad(plt.view_as_real(z).sum(), re)
    assert g.shape == re.shape and g.device.type == device


def _op_names(fn):
    """The operator names torch's profiler records while fn runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {e.name for e in prof.events()}


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
def test_plain_tensors_skip_autograd_and_the_dispatcher(device):
    """Uncompiled, a tensor that no autograd mode follows is converted right
    there: autograd.Function and the custom op cost 25-50 us a call, several
    times torch's own copy of a small tensor on a GPU.  A tensor that requires
    grad, or an active dispatch mode, still sees pylayout's custom ops."""
    from torch.utils._python_dispatch import TorchDispatchMode

    x = torch.empty(2, 3, 4, 5, device=device)
    z = torch.empty(3, 4, dtype=torch.complex64, device=device)
    calls = [lambda t: plt.contiguous(t, "channels_last"), lambda t: plt.to_order(t, (3, 2, 1, 0)),
             lambda t: pl.contiguous(t.transpose(1, 3)), lambda t: plt.pack_complex(t, t),
             lambda t: pl.view_as_complex(t[..., :2], copy=True)]
    for i, call in enumerate(calls):
        names = _op_names(lambda: call(x))
        assert not any(n.startswith("pylayout::") for n in names), (i, sorted(names))
        assert call(x).device == x.device
        grad_names = _op_names(lambda: call(x.detach().requires_grad_()))
        assert any(n.startswith("pylayout::") for n in grad_names), (i, sorted(grad_names))
    assert not any(n.startswith("pylayout::") for n in _op_names(lambda: plt.unpack_complex(z)))

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with Seen() as seen:
        plt.contiguous(x, "channels_last")
        plt.unpack_complex(z)
    assert "pylayout.to_format.default" in seen.ops and "pylayout.unpack_complex.default" in seen.ops, seen.ops

    class Called(torch.overrides.TorchFunctionMode):   # `with torch.device(...)` is one of these too
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.names.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    with Called() as called:
        plt.contiguous(x, "channels_last")
        plt.pack_complex(x, x)
    assert "to_format.default" in called.names and "pack_complex.default" in called.names, called.names


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
def test_pack_complex_refusals_match_across_devices(device):
    """pack_complex(out=) writes memory no autograd follows, on every device,
    and re, im and out share one device, with or without out."""
    import torch.autograd.forward_ad as fwad

    re = torch.randn(3, 4).to(device)
    out = torch.empty(3, 4, dtype=torch.complex64, device=device)
    with pytest.raises(BufferError, match="autograd cannot follow"):
        plt.pack_complex(re.clone().requires_grad_(), re, out=out)
    with fwad.dual_level():
        dual = fwad.make_dual(re, torch.ones(3, 4).to(device))
        with pytest.raises(BufferError, match="autograd cannot follow"):
            plt.pack_complex(dual, re, out=out)
        with pytest.raises(TypeError, match="forward-mode tangent"):
            pl.pack_complex(dual, re, out=out)
    other = "meta" if device != "meta" else "cpu"
    for call in (lambda: pl.pack_complex(re, torch.randn(3, 4, device=other)),
                 lambda: plt.pack_complex(re, torch.randn(3, 4, device=other))):
        with pytest.raises(BufferError, match="one device"):
            call()


@pytest.mark.parametrize("device", DEVICES)
def test_vmap_over_a_conversion_says_so_on_every_device(device):
    """functorch's wrappers take the custom ops on every device, meta (which
    the fast path describes without torch's export) included."""
    pl.contiguous(torch.empty(2, 3, device=device).t())   # a first meta tensor: noticed from now on

    def each(a):
        return pl.contiguous(a.t())

    for where in ("cpu", device):
        with pytest.raises(RuntimeError, match="vmap over _Conversion"):
            torch.func.vmap(each)(torch.empty(4, 3, 4, device=where))


@pytest.mark.parametrize("device", DEVICES)
def test_contiguous_off_the_cpu_runs_no_python_but_torchs_copy(device):
    """pylayout.contiguous of a plain tensor off the CPU: the C fast path
    decides the layout and calls pylayout.torch's _on_device, which has
    torch copy; no other Python function runs.  Anything autograd follows
    takes the full route through pylayout.torch."""
    import sys

    def python_calls(fn):
        calls = []
        def seen(frame, event, arg):
            if event == "call" and frame.f_code is not fn.__code__:
                calls.append(frame.f_code.co_name)

        sys.setprofile(seen)
        try:
            result = fn()
        finally:
            sys.setprofile(None)
        return result, calls

    x = torch.empty(2, 3, 4, 5, device=device).transpose(1, 3)
    pl.contiguous(x)  # a first meta tensor is described the slow way once (docs/reliability.md)
    y, calls = python_calls(lambda: pl.contiguous(x, "channels_last"))
    assert calls == ["_on_device"], calls
    assert y.device == x.device and y.stride() == pl.contiguous(torch.empty(2, 3, 4, 5).transpose(1, 3), "channels_last").stride()
    same, calls = python_calls(lambda: pl.contiguous(y, "channels_last"))
    assert same is y and calls == [], calls
    g, calls = python_calls(lambda: pl.contiguous(x.detach().requires_grad_(), "channels_last"))
    assert g.grad_fn is not None and "contiguous" in calls, calls


def test_torch_compile_with_meta_inputs():
    def f(x):
        return plt.contiguous(x.permute(0, 2, 3, 1), "channels_last")

    compiled = torch.compile(f, fullgraph=True, backend="eager")
    x = torch.empty(2, 3, 4, 5, device="meta")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = compiled(x)
    ref = pl.contiguous(torch.empty(2, 3, 4, 5).permute(0, 2, 3, 1), "channels_last")
    assert y.device.type == "meta" and y.shape == ref.shape and y.stride() == ref.stride()


def test_non_torch_device_tensors_still_refuse():
    """A DLTensor on CUDA from a producer that is not torch: pylayout cannot
    move its bytes, and says what would work."""
    import _producers as P
    rec = P.make_managed((4, 3), (1, 4), device=(P.kDLCUDA, 0))
    cap = rec.capsule()
    t = pl.from_dlpack(cap)
    assert pl.is_contiguous(t, "F")  # metadata works
    with pytest.raises(BufferError, match=r"device 'cuda'.*pass a torch\.Tensor on that device"):
        pl.contiguous(t)


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
def test_empty_on_a_device_has_the_cpu_strides(device):
    """pl.empty(..., device=) / pylayout.torch.empty: a torch tensor on that
    device with the strides pl.empty gives on the CPU, for every format,
    random dim orders and every dtype; the same refusals."""
    rng = random.Random(4242)
    checked = 0
    for _ in range(150):
        ndim = rng.randint(0, 6)
        shape = tuple(rng.choice([0, 1, 1, 2, 3, 5, 8]) for _ in range(ndim))
        order = list(range(ndim))
        rng.shuffle(order)
        dtype = rng.choice(["float32", "uint8", "bfloat16", "complex64", "bool", torch.float16, torch.int64])
        for kw in [dict(format=f) for f in FORMATS] + [dict(order=order), {}]:
            try:
                cpu = pl.empty(shape, dtype, **kw)
            except ValueError as e:
                with pytest.raises(ValueError, match=str(e).split(";")[0][:30]):
                    pl.empty(shape, dtype, device=device, **kw)
                continue
            t = pl.empty(shape, dtype, device=device, **kw)
            assert isinstance(t, torch.Tensor) and t.device.type == device, (shape, kw)
            assert t.stride() == cpu.strides and str(t.dtype) == "torch." + cpu.dtype, (shape, kw, dtype)
            checked += 1
    assert checked > 500, checked
    assert plt.empty((2, 3), device=device).dtype == torch.float32
    with pytest.raises(ValueError, match="not both"):
        pl.empty((2, 3), format="C", order=(1, 0), device=device)
    with pytest.raises(ValueError, match="more elements than int64"):
        pl.empty((2**40, 2**40), device=device)


# ------------------------------------------------- user stories 4 and 5 on a device


def raw(x):
    """The memory a raw-pointer kernel sees: x's storage from its offset, in
    address order, whatever x's strides say (on any device)."""
    return x.as_strided((x.numel(),), (1,), x.storage_offset())


def nhwc_conv_kernel(x, w, out):
    """Story 4's generated kernel: writes conv2d's result into out's memory in
    NHWC order, trusting that out is channels_last."""
    raw(out).copy_(F.conv2d(x, w).permute(0, 2, 3, 1).reshape(-1))
    return out


@pytest.mark.parametrize("device", NUMERIC)
def test_story4_conv_output_on_device(device):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 9, 8, generator=g).to(device)
    w = torch.randn(5, 3, 3, 3, generator=g).to(device)
    ref = F.conv2d(x, w)
    trap = torch.zeros(2, 5, 7, 6, device=device)      # what torch::zeros(..ChannelsLast..) really gave
    assert not pl.is_contiguous(trap, "channels_last") and pl.suggest_format(trap) == "contiguous"
    nhwc_conv_kernel(x, w, trap)
    assert not torch.allclose(trap, ref, atol=1e-4), "the wrong numbers must reproduce"
    # the fixes: convert the existing output on its device, or allocate it so there
    for out in (pl.contiguous(torch.zeros(2, 5, 7, 6, device=device), "channels_last"),
                pl.empty((2, 5, 7, 6), x.dtype, format="channels_last", device=x.device)):
        assert out.device == ref.device and out.is_contiguous(memory_format=torch.channels_last)
        assert pl.is_contiguous(out, torch.channels_last) and pl.suggest_format(out) == "channels_last"
        assert torch.allclose(nhwc_conv_kernel(x, w, out), ref, atol=1e-4)

    @pl.requires(mode="raise", out="channels_last")
    def conv(x, w, out):
        return nhwc_conv_kernel(x, w, out)

    bad = torch.zeros(2, 5, 7, 6, device=device)
    with pytest.raises(pl.LayoutError, match="'out'.*channels_last"):
        conv(x, w, bad)
    assert not bad.any(), "the guard must stop the kernel before it writes"

    @pl.requires(x="channels_last", out="channels_last")   # converts input and result on the device
    def conv_alloc(x, w):
        assert x.is_contiguous(memory_format=torch.channels_last)
        return F.conv2d(x, w).contiguous()

    r = conv_alloc(x, w)
    assert r.device == ref.device and r.is_contiguous(memory_format=torch.channels_last)
    assert torch.allclose(r, ref, atol=1e-4)


class RawGroupedGemm(torch.autograd.Function):
    """Story 5's kernel: G products (M, K) @ (K, N) read from raw memory, so its
    operands must be contiguous, and it cannot see autograd."""

    @staticmethod
    def kernel(a, b):
        (gs, m, k), n = a.shape, b.shape[2]
        return torch.bmm(raw(a.detach()).view(gs, m, k), raw(b.detach()).view(gs, k, n))

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return RawGroupedGemm.kernel(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad = pl.contiguous(grad)
        return (RawGroupedGemm.kernel(grad, pl.contiguous(b.transpose(1, 2))),
                RawGroupedGemm.kernel(pl.contiguous(a.transpose(1, 2)), grad))


def grouped_linear(x_km, w_nk):
    """The op's entry: transposed views in, conversions that keep the graph."""
    return RawGroupedGemm.apply(pl.contiguous(x_km.transpose(1, 2)), pl.contiguous(w_nk.transpose(1, 2)))


@pytest.mark.parametrize("device", NUMERIC)
def test_story5_grouped_gemm_on_device(device):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 4, 5, dtype=torch.float64, generator=g).to(device)   # stored (G, K, M)
    w = torch.randn(3, 6, 4, dtype=torch.float64, generator=g).to(device)   # stored (G, N, K)
    ref = torch.matmul(x.transpose(1, 2), w.transpose(1, 2))
    assert not torch.allclose(RawGroupedGemm.kernel(x.transpose(1, 2), w.transpose(1, 2)), ref), \
        "the kernel must ignore strides, as the real one does"
    x1, w1 = x.clone().requires_grad_(), w.clone().requires_grad_()
    x2, w2 = x.clone().requires_grad_(), w.clone().requires_grad_()
    y1 = grouped_linear(x1, w1)
    assert y1.device == ref.device and y1.grad_fn is not None and torch.allclose(y1, ref)
    (y1 ** 2).sum().backward()
    (torch.matmul(x2.transpose(1, 2), w2.transpose(1, 2)) ** 2).sum().backward()
    assert torch.allclose(x1.grad, x2.grad) and torch.allclose(w1.grad, w2.grad)
    assert x1.grad.device == ref.device
    assert torch.autograd.gradcheck(grouped_linear, (x.clone().requires_grad_(), w.clone().requires_grad_()))
    # the differentiable channels_last conversion and complex packing, checked numerically on the device
    xc = torch.randn(2, 3, 4, 5, dtype=torch.float64, generator=g).to(device).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: plt.contiguous(t, "channels_last"), (xc,))
    re, im = (torch.randn(4, 3, dtype=torch.float64, generator=g).to(device).requires_grad_() for _ in "ri")
    assert torch.autograd.gradcheck(lambda a, b: plt.view_as_real(plt.pack_complex(a, b.t().t())), (re, im))


# ------------------------------------------------- CUDA only (a GPU machine)


@needs_cuda
@pytest.mark.filterwarnings("ignore:Torchinductor does not support code generation for complex operators")
@pytest.mark.filterwarnings("ignore:dynamo_pgo force disabled")
def test_cuda_torch_compile_with_inductor():
    """Story 5 under torch.compile: inductor (Triton) on CUDA, forward and backward."""
    def f(x, re, im, n):
        a = plt.contiguous(x, "channels_last")
        b = plt.to_order(a, (3, 0, 2, 1))
        z = plt.pack_complex(re, im)
        r2, i2 = plt.unpack_complex(z * z)
        return a * 2, b + 1, r2, i2, pl.contiguous(n.t()), plt.contiguous(n, "fortran")

    def inputs():
        g = torch.Generator().manual_seed(6)
        ts = (torch.randn(2, 3, 4, 5, generator=g), torch.randn(4, 6, generator=g),
              torch.randn(4, 6, generator=g), torch.randn(5, 7, generator=g))
        return [t.cuda().requires_grad_() for t in ts]

    torch._dynamo.reset()
    e_in, c_in = inputs(), inputs()
    eager = f(*e_in)
    with torch._inductor.config.patch(force_disable_caches=True):
        cf = torch.compile(f, fullgraph=True)
        compiled = cf(*c_in)
    for i, (e, c) in enumerate(zip(eager, compiled)):
        assert c.device.type == "cuda" and e.shape == c.shape and e.dtype == c.dtype, i
        assert torch.allclose(e, c, atol=1e-5), i
    assert compiled[0].is_contiguous(memory_format=torch.channels_last)
    assert compiled[5].stride() == eager[5].stride() == (1, 5)
    sum(o.pow(2).sum() for o in eager).backward()
    sum(o.pow(2).sum() for o in compiled).backward()
    for a, b in zip(e_in, c_in):
        assert b.grad is not None and torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_cuda_operations_never_synchronise_with_the_host():
    """The README's promise: no host-device synchronisation.  torch's sync
    debug mode turns any synchronising call into an error."""
    x = torch.randn(4, 6, 8, 10, device="cuda")
    xg = x.clone().requires_grad_()
    ri = torch.randn(6, 2, 5, device="cuda").transpose(1, 2)   # last stride != 1: packs
    dst = torch.empty(10, 8, 6, 4, device="cuda").permute(3, 2, 1, 0)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        results = [
            pl.contiguous(x.permute(0, 2, 3, 1)), pl.contiguous(x, "channels_last"), pl.contiguous(x, "F"),
            pl.to_order(x, (2, 0, 3, 1)), pl.canonicalize(x[:, :1]), pl.view_as_complex(ri),
            pl.view_as_complex(x[..., :2], copy=True), pl.view_as_real(pl.view_as_complex(x[..., :2])),
            pl.pack_complex(x, x), *pl.unpack_complex(pl.pack_complex(x, x)), pl.copy_into(dst, x),
            pl.require(x, "channels_last"), plt.contiguous(xg, "channels_last"), plt.to_order(xg, (3, 2, 1, 0)),
        ]
        answers = (pl.is_contiguous(x), pl.is_contiguous(x, "channels_last"), pl.suggest_format(x),
                   pl.from_dlpack(x).shape)
        sum(r.sum() for r in results[-2:]).backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert answers == (True, False, "contiguous", (4, 6, 8, 10))
    assert all(r.device.type == "cuda" for r in results) and xg.grad is not None
    assert torch.equal(dst, x) and torch.equal(results[0], x.permute(0, 2, 3, 1).contiguous())
    assert torch.equal(xg.grad, torch.full_like(x, 2.0))


@needs_cuda
def test_cuda_copies_run_on_torchs_current_stream():
    """Every byte pylayout has torch move goes on torch's current stream, after
    the work already queued there: a side stream that first sleeps, then
    writes the input, gives the written values, never the stale ones."""
    side = torch.cuda.Stream()
    x = torch.zeros(64, 256, 256, device="cuda")
    re, im = torch.zeros(256, 256, device="cuda"), torch.zeros(256, 256, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)          # ~0.1 s of GPU time before the writes
        x.fill_(1.0)
        re.fill_(2.0)
        im.fill_(3.0)
        outs = [pl.contiguous(x.transpose(0, 2)), pl.contiguous(x, "F"),
                pl.to_order(x, (1, 2, 0)), pl.pack_complex(re, im)]
        dst = torch.empty(256, 256, 64, device="cuda").permute(2, 1, 0)
        pl.copy_into(dst, x.transpose(1, 2))
    assert not side.query(), "the side stream should still be busy: the check would prove nothing"
    side.synchronize()
    for o in outs[:3] + [dst]:
        assert bool((o == 1).all())
    assert bool((outs[3] == torch.complex(re, im)).all()) and outs[3][0, 0].item() == 2 + 3j


@needs_cuda
def test_cuda_dlpack_exchange_with_torch():
    x = torch.arange(24.0, device="cuda").view(2, 3, 4).permute(2, 0, 1)
    t = pl.from_dlpack(x)
    assert t.device == (2, torch.cuda.current_device()) and t.device_name.startswith("cuda")
    assert t.data_ptr == x.data_ptr() and t.strides == x.stride() and t.shape == tuple(x.shape)
    back = torch.from_dlpack(t)
    assert back.device == x.device and back.data_ptr() == x.data_ptr() and back.stride() == x.stride()
    assert torch.equal(back, x)
    assert not pl.is_contiguous(t) and pl.is_contiguous(t, "F") == pl.is_contiguous(x, "F")
    assert pl.suggest_format(t) == pl.suggest_format(x)
    with pytest.raises(BufferError, match=r"device 'cuda'.*pass a torch\.Tensor on that device"):
        pl.contiguous(t)        # a DLPack view, not a torch tensor: pylayout cannot move its bytes
    with pytest.raises(BufferError, match="one device"):
        pl.copy_into(torch.empty(4, 2, 3), x)


@needs_cuda
def test_cuda_dlpack_exchange_with_cupy():
    cupy = pytest.importorskip("cupy", reason="CuPy is the second CUDA producer for this check")
    a = cupy.arange(24, dtype=cupy.float32).reshape(2, 3, 4).transpose(2, 0, 1)
    t = pl.from_dlpack(a)
    assert t.device[0] == 2 and t.data_ptr == a.data.ptr
    assert t.strides == tuple(s // a.itemsize for s in a.strides) and t.shape == a.shape
    assert pl.is_contiguous(t, "F") == a.flags.f_contiguous
    b = cupy.from_dlpack(t)
    assert b.data.ptr == a.data.ptr and b.strides == a.strides and bool((b == a).all())
    v = torch.from_dlpack(t)
    assert v.device.type == "cuda" and v.data_ptr() == a.data.ptr
    assert torch.equal(pl.contiguous(v), torch.arange(24.0, device="cuda").view(2, 3, 4).permute(2, 0, 1).contiguous())
