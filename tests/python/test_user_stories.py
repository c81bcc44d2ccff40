"""The five user stories of docs/user-stories.md, reproduced with real torch and NumPy.

Each story first shows the ecosystem's failure (or records that current torch
fixed it), then pylayout's fix, with torch / NumPy as the oracle for the
correct numbers.

1. A "C kernel" that assumes row-major memory reads wrong elements from a
   transposed / sliced view; pylayout.contiguous / require / @requires fix it,
   and contiguous(x) is x when x already is contiguous.
2. torch.view_as_complex after einops.rearrange (shape (336, 1, 2), strides
   (2, 1, 1)); an empty tensor with odd strides that torch 2.13 still refuses.
3. channels_last and dim-order conversions equal torch's bit for bit.
4. The CUTLASS output trap: an NCHW buffer filled with NHWC data.
5. A grouped-GEMM custom autograd op: DLPack refuses grad tensors, conversions
   outside autograd cut the graph; with pylayout.torch the model trains and its
   gradients equal pure torch's.
"""
from __future__ import annotations

import ctypes

import pytest

torch = pytest.importorskip("torch", reason="the user stories are reproduced with real torch tensors; torch is not installed")
np = pytest.importorskip("numpy", reason="the user stories use NumPy as a kernel and oracle; NumPy is not installed")

import torch.nn.functional as F  # noqa: E402

import pylayout as pl  # noqa: E402
import pylayout.torch as plt  # noqa: E402
from conftest import same_bits  # noqa: E402

_CTYPE = {torch.float32: ctypes.c_float, torch.float64: ctypes.c_double}


def _raw_memory(x: torch.Tensor) -> np.ndarray:
    """x.numel() elements read straight from x.data_ptr(), as a C kernel taking
    `const float *` would: no strides, no offsets, no bounds."""
    n = x.numel()
    buf = (_CTYPE[x.dtype] * n).from_address(x.data_ptr())
    return np.frombuffer(buf, dtype=np.float32 if x.dtype == torch.float32 else np.float64, count=n)


# ================================================================ story 1


def row_major_kernel(x: torch.Tensor) -> torch.Tensor:
    """A custom operator's kernel: per-row sums of a (rows, cols) input, assuming
    row-major contiguous memory (reads data_ptr()[i * cols + j])."""
    rows, cols = x.shape
    flat = _raw_memory(x)
    return torch.from_numpy(flat.reshape(rows, cols).sum(axis=1).copy())


def test_story1_kernel_reads_wrong_elements_from_views():
    g = torch.Generator().manual_seed(1)
    base = torch.randn(6, 8, dtype=torch.float64, generator=g)
    ok = base[:, :]                       # contiguous: the kernel is right
    assert torch.allclose(row_major_kernel(ok), ok.sum(1))
    transposed = base.t()                 # (8, 6), strides (1, 8): what autograd hands over
    sliced = base[1:4, 2:7]               # (3, 5), strides (8, 1), offset 10
    stepped = base[::2, ::3]              # (3, 3), strides (16, 3)
    for name, x in [("transposed", transposed), ("sliced", sliced), ("stepped", stepped)]:
        assert not x.is_contiguous()
        wrong = row_major_kernel(x)
        assert not torch.allclose(wrong, x.sum(1)), f"{name}: the bug does not reproduce"
        # pylayout's one-line fixes
        for fix in (pl.contiguous, pl.require, lambda t: pl.require(t, "contiguous", name="x")):
            fixed = fix(x)
            assert fixed.is_contiguous()
            assert torch.allclose(row_major_kernel(fixed), x.sum(1)), name


def test_story1_contiguous_is_o1_when_already_contiguous():
    x = torch.randn(256, 128)
    assert pl.contiguous(x) is x
    assert pl.require(x) is x
    a = np.ones((64, 32), dtype=np.float32)
    assert pl.contiguous(a) is a
    # size-1 dims with odd strides: torch calls it contiguous, so does pylayout
    y = torch.rand(336, 2, 1).transpose(1, 2)
    assert y.is_contiguous() and pl.contiguous(y) is y


def test_story1_decorator_at_operator_entry():
    converted = []

    @pl.requires(x="contiguous", mode="warn")
    def md_forces(x):
        assert x.is_contiguous()
        return row_major_kernel(x)

    base = torch.randn(5, 7, dtype=torch.float64)
    with pytest.warns(pl.LayoutWarning, match="'x'") as rec:
        r = md_forces(base.t())
    converted += [str(w.message) for w in rec]
    assert torch.allclose(r, base.t().sum(1))
    assert "contiguous" in converted[0]
    # already contiguous: no warning, and the kernel gets the caller's tensor itself
    seen = []

    @pl.requires(x="contiguous")
    def entry(x):
        seen.append(x)
        return row_major_kernel(x)

    entry(base)
    assert seen[0] is base


def test_story1_with_autograd_views():
    """During training autograd hands the kernel a transposed view; pylayout.torch
    makes it contiguous inside the graph, and the gradient is still right."""
    w = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    x = w.t()                                             # view that requires grad
    with pytest.raises((RuntimeError, BufferError), match="require"):
        x.__dlpack__()                                    # no DLPack for the C kernel
    xc = pl.contiguous(x)                                 # differentiable
    assert xc.is_contiguous() and xc.requires_grad
    vals = row_major_kernel(xc.detach())
    assert torch.allclose(vals, x.sum(1))
    (xc * torch.arange(4.0, dtype=torch.float64)).sum().backward()
    assert torch.equal(w.grad, torch.arange(4.0, dtype=torch.float64).unsqueeze(1).expand(4, 6))


# ================================================================ story 2


def _story2_check(record_property, label, x):
    """If torch refuses, pylayout gives a correct zero-copy view; if torch accepts,
    pylayout's view equals torch's (strides and data_ptr)."""
    try:
        zt = torch.view_as_complex(x)
    except RuntimeError as e:
        assert "divisible by 2" in str(e)
        outcome = "torch refuses"
        zt = None
    else:
        outcome = "torch accepts"
    z = pl.view_as_complex(x)
    assert z.data_ptr() == x.data_ptr(), "memory allows a view: pylayout must not copy"
    assert torch.equal(torch.view_as_real(z), x)
    if zt is not None:
        assert z.stride() == zt.stride() and z.data_ptr() == zt.data_ptr() and torch.equal(z, zt)
    # .contiguous() does not help: torch already calls it contiguous
    assert x.contiguous() is x
    # with grad, the same via pylayout.torch
    xg = x.detach().requires_grad_()
    zg = pl.view_as_complex(xg)
    assert zg.data_ptr() == x.data_ptr()
    zg.real.sum().backward()
    assert torch.equal(xg.grad[..., 0], torch.ones_like(xg.grad[..., 0]))
    assert torch.equal(xg.grad[..., 1], torch.zeros_like(xg.grad[..., 1]))
    record_property(f"story2 {label} (torch {torch.__version__})", outcome)
    print(f"story 2, {label}: {outcome} in torch {torch.__version__}")
    return outcome


def test_story2_plain_torch_repro(record_property):
    x = torch.rand(336, 2, 1).transpose(1, 2).contiguous()
    assert tuple(x.shape) == (336, 1, 2) and x.stride() == (2, 1, 1)
    _story2_check(record_property, "transpose(1, 2).contiguous()", x)
    # canonicalize rewrites the size-1 stride so any stride checker accepts it
    c = pl.canonicalize(x)
    assert c.stride() == (2, 2, 1) and c.data_ptr() == x.data_ptr()
    assert torch.equal(torch.view_as_complex(c), pl.view_as_complex(x))
    # and pylayout explains what torch before pytorch#169780 objected to
    text = pl.explain(x)
    assert "view_as_complex" in text and "dim 1" in text


def test_story2_einops_rearrange(record_property):
    einops = pytest.importorskip("einops", reason="einops is needed to reproduce user story 2 exactly")
    raw = torch.rand(336, 2)
    x = einops.rearrange(raw, "b (complex c) -> b c complex", complex=2)
    assert tuple(x.shape) == (336, 1, 2) and x.stride() == (2, 1, 1)
    _story2_check(record_property, "einops.rearrange", x)
    z = pl.view_as_complex(x)
    assert torch.equal(z[:, 0], torch.complex(raw[:, 0], raw[:, 1]))
    # NumPy through einops too: pylayout gives a NumPy complex view
    xn = einops.rearrange(raw.numpy(), "b (complex c) -> b c complex", complex=2)
    zn = pl.view_as_complex(xn)
    assert isinstance(zn, np.ndarray) and zn.ctypes.data == xn.ctypes.data
    assert np.array_equal(zn[:, 0], raw.numpy()[:, 0] + 1j * raw.numpy()[:, 1])


def test_story2_empty_tensor_torch_still_refuses():
    x = torch.empty_strided((0, 3, 2), (1, 3, 1))
    with pytest.raises(RuntimeError, match="divisible by 2"):
        torch.view_as_complex(x)   # torch 2.13 still refuses; the memory allows a view
    z = pl.view_as_complex(x)
    assert isinstance(z, torch.Tensor) and z.dtype == torch.complex64 and tuple(z.shape) == (0, 3)
    assert z.data_ptr() == x.data_ptr()
    zg = plt.view_as_complex(x.detach().requires_grad_())
    assert tuple(zg.shape) == (0, 3) and zg.requires_grad


def test_story2_copy_policies():
    x = torch.rand(4, 2, 3).transpose(1, 2)       # (4, 3, 2): parts not adjacent: no view
    with pytest.raises(RuntimeError):
        torch.view_as_complex(x)
    with pytest.raises(ValueError, match="dim 2"):
        pl.view_as_complex(x, copy=False)
    z = pl.view_as_complex(x)                      # copy=None packs
    assert torch.equal(z, torch.complex(x[..., 0], x[..., 1]))
    re, im = pl.unpack_complex(z)
    assert torch.equal(pl.pack_complex(re, im), z)
    assert torch.equal(pl.view_as_real(z), x)


# ================================================================ story 3

_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.uint8, torch.bool, torch.complex64]


def _rand(shape, dtype, g):
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype in (torch.int64, torch.uint8):
        return torch.randint(0, 200, shape, generator=g).to(dtype)
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    x = torch.randn(shape, generator=g).to(dtype)
    x.view(-1)[:3] = torch.tensor([float("nan"), -0.0, float("inf")]).to(dtype)   # bit patterns matter
    return x


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_story3_channels_last_matches_torch(dtype):
    g = torch.Generator().manual_seed(3)
    x = _rand((3, 5, 7, 9), dtype, g)
    y = pl.contiguous(x, "channels_last")
    assert y.is_contiguous(memory_format=torch.channels_last)
    ref = x.contiguous(memory_format=torch.channels_last)
    assert y.stride() == ref.stride()
    assert same_bits(y, ref)
    assert pl.suggest_format(y) == "channels_last"
    assert pl.contiguous(y, torch.channels_last) is y
    back = pl.contiguous(y)
    assert back.is_contiguous() and same_bits(back, x)
    # 5-D channels_last_3d
    x5 = _rand((2, 3, 4, 5, 6), dtype, g)
    y5 = pl.contiguous(x5, "channels_last_3d")
    ref5 = x5.contiguous(memory_format=torch.channels_last_3d)
    assert y5.is_contiguous(memory_format=torch.channels_last_3d) and y5.stride() == ref5.stride()
    assert same_bits(y5, ref5)


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_story3_permute_contiguous_equivalents(dtype):
    g = torch.Generator().manual_seed(4)
    x = _rand((4, 6, 5, 3), dtype, g)
    for perm in [(0, 2, 3, 1), (3, 2, 1, 0), (1, 0, 3, 2), (2, 0, 1, 3)]:
        ref = x.permute(*perm).contiguous()
        got = pl.contiguous(x.permute(*perm))
        assert got.is_contiguous() and got.shape == ref.shape
        assert same_bits(got, ref), perm
        # to_order: same memory bytes as permute().contiguous(), logical shape kept
        o = pl.to_order(x, perm)
        assert o.shape == x.shape
        assert same_bits(o.permute(*perm), ref)
        assert o.permute(*perm).is_contiguous()
    # fortran order vs NumPy
    if dtype != torch.bfloat16:          # NumPy has no bfloat16
        a = x.numpy()
        f = pl.contiguous(a.transpose(1, 0, 3, 2), "fortran")
        assert isinstance(f, np.ndarray) and f.flags.f_contiguous
        ref_f = np.asfortranarray(a.transpose(1, 0, 3, 2))
        assert f.tobytes(order="A") == ref_f.tobytes(order="A")


def test_story3_layout_inspection_readable():
    x = torch.zeros(2, 3, 4, 5).permute(0, 2, 3, 1)
    text = pl.explain(x)
    for needle in ("shape", "strides", "contiguous", "channels_last", str(tuple(x.stride()))):
        assert needle in text, needle
    cl = torch.zeros(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    assert pl.is_contiguous(cl, "channels_last") and not pl.is_contiguous(cl)
    assert pl.is_dense(x) and not pl.is_dense(torch.zeros(4, 4)[:, ::2])


# ================================================================ story 4

N, C, H, W, K, R, S = 2, 3, 7, 8, 4, 3, 3
P, Q = H - R + 1, W - S + 1


def _conv_inputs():
    g = torch.Generator().manual_seed(5)
    return torch.randn(N, C, H, W, generator=g), torch.randn(K, C, R, S, generator=g)


def nhwc_conv_kernel(inp, weight, out):
    """A generated conv kernel: computes the result and writes it into `out`'s
    memory in NHWC order (out[n, p, q, k] at ((n*P + p)*Q + q)*K + k),
    trusting that `out` is channels_last, as CUTLASS's kernel did."""
    res = F.conv2d(inp, weight)                                 # (N, K, P, Q)
    nhwc = res.permute(0, 2, 3, 1).contiguous().numpy().ravel()  # NHWC bytes
    dst = _raw_memory(out)
    dst[:] = nhwc
    return out


def test_story4_nchw_output_gives_wrong_numbers():
    inp, weight = _conv_inputs()
    ref = F.conv2d(inp, weight)
    out = torch.zeros(N, K, P, Q)                    # what the generated code really allocated
    assert not pl.is_contiguous(out, "channels_last")  # pylayout detects the trap beforehand
    assert pl.suggest_format(out) == "contiguous"
    nhwc_conv_kernel(inp, weight, out)
    assert not torch.allclose(out, ref, atol=1e-4), "the trap must reproduce"
    # the same numbers, just in NHWC order
    assert torch.allclose(out.view(N, P, Q, K).permute(0, 3, 1, 2), ref, atol=1e-5)


@pytest.mark.parametrize("how", ["pl.empty", "pl.contiguous"])
def test_story4_fix(how):
    inp, weight = _conv_inputs()
    ref = F.conv2d(inp, weight)
    if how == "pl.empty":
        out = torch.from_dlpack(pl.empty((N, K, P, Q), "float32", format="channels_last"))
    else:
        out = pl.contiguous(torch.zeros(N, K, P, Q), "channels_last")
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (N, K, P, Q)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert pl.is_contiguous(out, "channels_last")
    assert out.stride() == torch.empty(N, K, P, Q, memory_format=torch.channels_last).stride()
    nhwc_conv_kernel(inp, weight, out)
    assert torch.allclose(out, ref, atol=1e-5)


def test_story4_suggest_format_agrees_with_torch():
    from torch._prims_common import suggest_memory_format

    cases = [
        torch.zeros(N, K, P, Q),
        torch.empty(N, K, P, Q, memory_format=torch.channels_last).zero_(),
        torch.from_dlpack(pl.empty((N, K, P, Q), "float32", format="channels_last")),
        torch.empty(N, 1, P, Q, memory_format=torch.channels_last).zero_(),    # ambiguous C == 1
        torch.empty(N, K, 1, 1, memory_format=torch.channels_last).zero_(),    # ambiguous H == W == 1
        torch.zeros(N, K, P, Q).permute(0, 2, 3, 1),
        torch.empty(2, 3, 4, 5, 6, memory_format=torch.channels_last_3d).zero_(),
        torch.zeros(2, 3, 4, 5, 6),
    ]
    names = {torch.contiguous_format: "contiguous", torch.channels_last: "channels_last",
             torch.channels_last_3d: "channels_last_3d"}
    for x in cases:
        assert pl.suggest_format(x) == names[suggest_memory_format(x)], (tuple(x.shape), x.stride())
        for fmt, mf in (("contiguous", torch.contiguous_format), ("channels_last", torch.channels_last),
                        ("channels_last_3d", torch.channels_last_3d)):
            rank_ok = fmt == "contiguous" or x.dim() == (4 if fmt == "channels_last" else 5)
            expected = x.is_contiguous(memory_format=mf) if rank_ok else False
            assert pl.is_contiguous(x, fmt) == expected, (fmt, tuple(x.shape), x.stride())


def test_story4_guard_on_kernel_wrapper():
    inp, weight = _conv_inputs()
    ref = F.conv2d(inp, weight)

    @pl.requires(mode="raise", inp="contiguous", out="channels_last")
    def conv(inp, weight, out):
        return nhwc_conv_kernel(inp, weight, out)

    bad = torch.zeros(N, K, P, Q)
    with pytest.raises(pl.LayoutError, match="'out'") as ei:
        conv(inp, weight, bad)
    assert "channels_last" in str(ei.value)
    assert not bad.any(), "the guard must stop the kernel before it writes"
    good = torch.empty(N, K, P, Q, memory_format=torch.channels_last).zero_()
    assert conv(inp, weight, good) is good
    assert torch.allclose(good, ref, atol=1e-5)

    # a wrapper that allocates and returns its output: the guard converts the result
    @pl.requires(out="channels_last")
    def conv_alloc(inp, weight):
        return F.conv2d(inp, weight).contiguous()

    r = conv_alloc(inp, weight)
    assert r.is_contiguous(memory_format=torch.channels_last) and torch.allclose(r, ref, atol=1e-5)


# ================================================================ story 5

G, M, KD, ND = 3, 5, 4, 6


def _numpy_grouped_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The 'CUTLASS' kernel: G independent (M, K) @ (K, N) products. It reads raw
    row-major memory, so it requires contiguous inputs, and it cannot see autograd."""
    assert a.is_contiguous() and b.is_contiguous(), "kernel requires contiguous inputs"
    ga, m, k = a.shape
    _, _, n = b.shape
    am = _raw_memory(a).reshape(ga, m, k)
    bm = _raw_memory(b).reshape(ga, k, n)
    return torch.from_numpy(np.matmul(am, bm))


class GroupedGemm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        # the inputs arrive in layout (pylayout.torch, outside this Function)
        ctx.save_for_backward(a, b)
        return _numpy_grouped_gemm(a.detach(), b.detach())

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad = pl.contiguous(grad)
        ga = _numpy_grouped_gemm(grad, pl.contiguous(b.detach().transpose(1, 2)))
        gb = _numpy_grouped_gemm(pl.contiguous(a.detach().transpose(1, 2)), grad)
        return ga, gb


def _model_inputs(dtype=torch.float64):
    g = torch.Generator().manual_seed(11)
    x_km = torch.randn(G, KD, M, dtype=dtype, generator=g)          # activations stored (G, K, M)
    w_nk = torch.randn(G, ND, KD, dtype=dtype, generator=g) * 0.3   # weights stored transposed
    target = torch.randn(G, M, ND, dtype=dtype, generator=g)
    return x_km, w_nk, target


def grouped_linear(x_km, w_nk):
    """The custom op's Python entry: transposed views in, layout conversions that
    keep the graph (pylayout), then the kernel."""
    a = pl.contiguous(x_km.transpose(1, 2))    # (G, M, K)
    b = pl.contiguous(w_nk.transpose(1, 2))    # (G, K, N)
    return GroupedGemm.apply(a, b)


def test_story5_dlpack_trap():
    w = torch.randn(2, 3, requires_grad=True)
    with pytest.raises((BufferError, RuntimeError), match="Can't export tensors that require gradient"):
        w.__dlpack__()
    with pytest.raises((BufferError, RuntimeError), match="require gradient"):
        np.from_dlpack(w)
    # pylayout's top-level API does not go through DLPack for such tensors
    y = pl.contiguous(w.t())
    assert y.requires_grad and y.grad_fn is not None


def test_story5_graph_cut_trap():
    """Converting the inputs outside autograd (detach + DLPack, as the original op
    did) cuts the graph: backward fails with torch's error."""
    x_km, w_nk, target = _model_inputs()
    w = w_nk.clone().requires_grad_()
    a = torch.from_dlpack(pl.contiguous(x_km.transpose(1, 2)))
    b = torch.from_dlpack(pl.contiguous(w.detach().transpose(1, 2)))   # graph cut here
    loss = ((GroupedGemm.apply(a, b) - target) ** 2).mean()
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        loss.backward()


def test_story5_trains_with_pylayout():
    x_km, w_nk, target = _model_inputs()
    w = torch.nn.Parameter(w_nk.clone())
    opt = torch.optim.SGD([w], lr=0.5)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = ((grouped_linear(x_km, w) - target) ** 2).mean()
        loss.backward()
        assert w.grad is not None and w.grad.abs().sum() > 0
        opt.step()
        losses.append(loss.item())
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.8 * losses[0], losses


def test_story5_gradients_equal_pure_torch():
    x_km, w_nk, target = _model_inputs()
    x1, w1 = x_km.clone().requires_grad_(), w_nk.clone().requires_grad_()
    x2, w2 = x_km.clone().requires_grad_(), w_nk.clone().requires_grad_()
    y1 = grouped_linear(x1, w1)
    y2 = torch.matmul(x2.transpose(1, 2), w2.transpose(1, 2))
    assert torch.allclose(y1, y2)
    ((y1 - target) ** 2).mean().backward()
    ((y2 - target) ** 2).mean().backward()
    assert torch.allclose(x1.grad, x2.grad) and torch.allclose(w1.grad, w2.grad)
    # and numerically, through the conversions and the Function together
    assert torch.autograd.gradcheck(grouped_linear, (x_km.clone().requires_grad_(), w_nk.clone().requires_grad_()))


def test_story5_channels_last_inputs_via_pylayout_torch():
    """A kernel that wants NHWC activations: the differentiable channels_last
    conversion keeps gradients flowing (a 1x1 conv as a per-pixel GEMM)."""
    g = torch.Generator().manual_seed(12)
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64, generator=g, requires_grad=True)
    wt = torch.randn(6, 3, dtype=torch.float64, generator=g, requires_grad=True)

    class PixelGemm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, xcl, w):
            assert xcl.is_contiguous(memory_format=torch.channels_last)
            ctx.save_for_backward(xcl, w)
            n, c, h, wd = xcl.shape
            rows = _raw_memory(xcl.detach()).reshape(n * h * wd, c)          # NHWC memory
            out = rows @ w.detach().numpy().T                                 # (NHW, K)
            return torch.from_numpy(out).view(n, h, wd, -1).permute(0, 3, 1, 2)

        @staticmethod
        def backward(ctx, grad):
            xcl, w = ctx.saved_tensors
            return torch.einsum("nkhw,kc->nchw", grad, w), torch.einsum("nkhw,nchw->kc", grad, xcl)

    y = PixelGemm.apply(plt.contiguous(x, "channels_last"), wt)
    y.square().sum().backward()
    x2, w2 = x.detach().clone().requires_grad_(), wt.detach().clone().requires_grad_()
    y2 = F.conv2d(x2, w2[:, :, None, None])
    y2.square().sum().backward()
    assert torch.allclose(y, y2)
    assert torch.allclose(x.grad, x2.grad) and torch.allclose(wt.grad, w2.grad)
