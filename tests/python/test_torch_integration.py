"""Autograd-safe torch integration: pylayout.torch and the top-level API on torch tensors.

torch is the oracle throughout: every conversion is compared with the pure-torch
equivalent (values, strides, gradients), torch.autograd.gradcheck checks the
registered backward formulas numerically (float64, complex128 where complex),
torch.library.opcheck checks the custom ops' registrations, and
torch.compile(fullgraph=True) results are compared with eager mode.

Covered:
  * gradcheck through every pylayout.torch conversion: contiguous (each format,
    also from transposed input), to_order (random permutations),
    view_as_complex (zero-copy views, packing copies, copy=True),
    view_as_real, pack_complex, unpack_complex (copy=True/False), canonicalize;
  * the top-level pylayout.* functions on tensors that require grad route
    through autograd (never "Can't export tensors that require gradient") and
    give the same x.grad as pure torch;
  * identity fast paths (same object back, also with requires_grad);
  * torch.compile(fullgraph=True) of a function using several conversions
    matches eager; the custom ops are torch.ops.pylayout.* and show up in the
    captured graph;
  * custom ops never alias their inputs;
  * conjugate / negative-bit tensors: resolved values or a clear BufferError,
    never raw memory;
  * the layout guards require() / @requires(...).
"""
from __future__ import annotations

import random
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is the oracle for the torch integration and is not installed")
np = pytest.importorskip("numpy", reason="NumPy is needed for the guard checks on arrays and is not installed")

import pylayout as pl  # noqa: E402
import pylayout.torch as plt  # noqa: E402
from conftest import dense_in_order  # noqa: E402

F64 = torch.float64
C128 = torch.complex128


def _leaf(x):
    """A leaf tensor that requires grad and keeps x's strides and storage offset."""
    return x.detach().requires_grad_()


def _gradcheck(fn, *inputs):
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, check_batched_grad=False)


def _same_layout(a, b):
    """Equal strides on every dim whose size is > 1 (torch's notion of layout)."""
    return all(n == 1 or s == t for n, s, t in zip(a.shape, a.stride(), b.stride()))


# ------------------------------------------------------------ gradcheck: contiguous


@pytest.mark.parametrize("fmt,shape,perm", [
    ("contiguous", (3, 4, 5), (2, 0, 1)),
    ("contiguous", (2, 3, 4, 2), (0, 3, 1, 2)),
    ("channels_last", (2, 3, 4, 5), None),
    ("channels_last", (2, 5, 3, 4), (0, 2, 1, 3)),   # transposed input as well
    ("channels_last_3d", (2, 3, 2, 3, 4), None),
    ("fortran", (3, 4, 5), None),
    ("fortran", (4, 3), (1, 0)[::-1]),
])
def test_gradcheck_contiguous_formats(fmt, shape, perm):
    base = torch.randn(*shape, dtype=F64)
    x = _leaf(base.permute(*perm) if perm else base)
    y = plt.contiguous(x, fmt)
    # layout: the one torch (or, for fortran, the reversed dim order) gives
    if fmt == "fortran":
        exp = dense_in_order(torch, x.shape, list(range(x.dim()))[::-1]).stride()
        assert y.stride() == exp
    else:
        mf = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last,
              "channels_last_3d": torch.channels_last_3d}[fmt]
        assert y.is_contiguous(memory_format=mf)
        assert y.stride() == x.contiguous(memory_format=mf).stride()
    assert torch.equal(y, x)
    assert y.requires_grad and y.grad_fn is not None
    _gradcheck(lambda t: plt.contiguous(t, fmt), x)


@pytest.mark.parametrize("mf", ["channels_last", "channels_last_3d", "contiguous_format"])
def test_contiguous_accepts_torch_memory_format(mf):
    memory_format = getattr(torch, mf)
    shape = (2, 3, 2, 3, 2) if mf == "channels_last_3d" else (2, 3, 4, 5)
    x = _leaf(torch.randn(*shape, dtype=F64).transpose(1, 2))
    y = plt.contiguous(x, memory_format)
    assert y.is_contiguous(memory_format=memory_format)
    assert torch.equal(y, x)
    w = torch.randn(y.shape, dtype=F64)
    (y * w).sum().backward()
    assert torch.equal(x.grad, w)


def test_contiguous_rejects_wrong_rank_for_channels_last():
    with pytest.raises(ValueError, match="4-D"):
        plt.contiguous(torch.randn(2, 3, 4), "channels_last")
    with pytest.raises(ValueError, match="5-D"):
        plt.contiguous(torch.randn(2, 3, 4, 5), "channels_last_3d")
    with pytest.raises(ValueError, match="unknown memory format"):
        plt.contiguous(torch.randn(2, 3), "nhwc")


def test_gradcheck_to_order_random_permutations():
    rng = random.Random(7)
    for _ in range(6):
        ndim = rng.randint(2, 4)
        shape = [rng.randint(2, 4) for _ in range(ndim)]
        order = list(range(ndim))
        rng.shuffle(order)
        in_perm = list(range(ndim))
        rng.shuffle(in_perm)
        x = _leaf(torch.randn(*shape, dtype=F64).permute(*in_perm))
        y = plt.to_order(x, order)
        assert torch.equal(y, x)
        assert y.stride() == dense_in_order(torch, x.shape, order).stride(), (order, in_perm)
        _gradcheck(lambda t, o=order: plt.to_order(t, o), x)


def test_to_order_rejects_bad_permutation():
    with pytest.raises(ValueError, match="permutation"):
        plt.to_order(torch.randn(2, 3), (0, 0))


# ------------------------------------------------------------ gradcheck: complex


def test_gradcheck_view_as_complex_viewable_is_zero_copy():
    # contiguous, transposed outer dims, channels_last-like, size-1 dim with odd stride
    cases = [
        torch.randn(3, 4, 2, dtype=F64),
        torch.randn(4, 3, 2, dtype=F64).transpose(0, 1),
        torch.randn(336, 2, 1, dtype=F64).transpose(1, 2).contiguous(),   # user story 2
        torch.randn(5, 8, dtype=F64)[:, 2:6].reshape(5, 2, 2)[:, 1:],      # sliced, even offset
    ]
    for x0 in cases:
        x = _leaf(x0)
        z = plt.view_as_complex(x)
        assert z.dtype == C128 and z.shape == x.shape[:-1]
        assert z.data_ptr() == x.data_ptr(), "a view exists: no copy expected"
        assert torch.equal(torch.view_as_real(z), x)
        _gradcheck(plt.view_as_complex, x)


def test_gradcheck_view_as_complex_packs_when_no_view():
    # (a) the parts are not adjacent (last stride != 1); (b) odd outer stride; (c) odd offset
    a = _leaf(torch.randn(3, 2, 4, dtype=F64).transpose(1, 2))          # (3,4,2) strides (8,1,4)
    base_b = _leaf(torch.randn(3, 5, dtype=F64))                        # [:, 1:3]: stride 5, offset 1

    def b(t):
        return plt.view_as_complex(t[:, 1:3])

    za = plt.view_as_complex(a)
    assert za.data_ptr() != a.data_ptr()
    assert torch.equal(za, torch.complex(a[..., 0], a[..., 1]))
    with pytest.raises(RuntimeError):
        torch.view_as_complex(a)   # torch itself refuses these layouts
    for fn, x in [(plt.view_as_complex, a), (b, base_b)]:
        _gradcheck(fn, x)
    zb = b(base_b)
    assert torch.equal(zb, torch.complex(base_b[:, 1], base_b[:, 2]))
    with pytest.raises(ValueError, match="dim 0"):
        plt.view_as_complex(base_b[:, 1:3], copy=False)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_view_as_complex_odd_storage_offset_packs(requires_grad):
    """A contiguous (3, 2) slice at an odd storage offset: no aligned complex view
    exists, so copy=None must pack (as the C path does), not hand torch an odd offset."""
    base = torch.randn(7, dtype=F64).requires_grad_(requires_grad)
    x = base[1:].view(3, 2)
    assert x.is_contiguous() and x.storage_offset() == 1
    expected = torch.complex(base.detach()[1::2], base.detach()[2::2])
    assert torch.equal(pl.view_as_complex(x.detach()), expected)     # C path (no grad)
    z = plt.view_as_complex(x)
    assert torch.equal(z, expected)
    assert torch.equal(pl.view_as_complex(x), expected)
    with pytest.raises(ValueError, match="offset"):
        plt.view_as_complex(x, copy=False)
    if requires_grad:
        _gradcheck(lambda t: plt.view_as_complex(t[1:].view(3, 2)), _leaf(base))


def test_view_as_complex_odd_storage_offset_compiled_never_misreads():
    """Dynamo cannot see storage offsets: compiled code may raise (torch's own
    parity check) but must never return misaligned values."""
    torch._dynamo.reset()
    base = torch.randn(7, dtype=F64)
    expected = torch.complex(base[1::2], base[2::2])
    fn = torch.compile(lambda t: plt.view_as_complex(t[1:].view(3, 2)) * 1, fullgraph=True, backend="eager")
    try:
        got = fn(base)
    except Exception as e:  # torch.view_as_complex's check, wrapped by dynamo
        assert "storage_offset" in str(e) or "divisible by 2" in str(e), str(e)
    else:
        assert torch.equal(got, expected)


def test_gradcheck_view_as_complex_copy_true():
    x = _leaf(torch.randn(3, 4, 2, dtype=F64))
    z = plt.view_as_complex(x, copy=True)
    assert z.data_ptr() != x.data_ptr()
    assert torch.equal(z, torch.view_as_complex(x.detach()))
    _gradcheck(lambda t: plt.view_as_complex(t, copy=True), x)


def test_gradcheck_view_as_real():
    z = _leaf(torch.randn(4, 3, dtype=C128).t())
    r = plt.view_as_real(z)
    assert r.data_ptr() == z.data_ptr()
    assert torch.equal(r, torch.view_as_real(z.detach()))
    _gradcheck(plt.view_as_real, z)


def test_gradcheck_pack_complex_and_complex_gradient():
    re = _leaf(torch.randn(3, 4, dtype=F64))
    im = _leaf(torch.randn(4, 3, dtype=F64).t())
    z = plt.pack_complex(re, im)
    assert z.dtype == C128 and z.is_contiguous()
    assert torch.equal(z, torch.complex(re.detach(), im.detach()))
    _gradcheck(plt.pack_complex, re, im)
    # a real loss of a complex result: gradients match torch.complex's
    w = torch.randn(3, 4, dtype=C128)
    (z * w).abs().sum().backward()
    re2, im2 = _leaf(re), _leaf(im)
    (torch.complex(re2, im2) * w).abs().sum().backward()
    assert torch.allclose(re.grad, re2.grad) and torch.allclose(im.grad, im2.grad)


def test_pack_complex_rejects_mismatch():
    with pytest.raises(TypeError):
        plt.pack_complex(torch.zeros(2), torch.zeros(2, dtype=F64))
    with pytest.raises(ValueError):
        plt.pack_complex(torch.zeros(2), torch.zeros(3))


@pytest.mark.parametrize("copy", [True, False])
def test_gradcheck_unpack_complex(copy):
    z = _leaf(torch.randn(3, 5, dtype=C128)[:, 1:4])
    re, im = plt.unpack_complex(z, copy=copy)
    assert torch.equal(re, z.detach().real) and torch.equal(im, z.detach().imag)
    if copy:
        assert re.is_contiguous() and im.is_contiguous()
        assert re.data_ptr() != z.data_ptr()
    else:
        assert re.data_ptr() == z.data_ptr()
    _gradcheck(lambda t: plt.unpack_complex(t, copy=copy), z)
    # one output unused: its gradient is taken as zero
    _gradcheck(lambda t: plt.unpack_complex(t, copy=copy)[0] * 2, z)
    _gradcheck(lambda t: plt.unpack_complex(t, copy=copy)[1], z)


def test_gradcheck_canonicalize():
    x = _leaf(torch.randn(4, 2, 1, dtype=F64).transpose(1, 2))   # (4,1,2) strides (2,1,1)
    c = plt.canonicalize(x)
    assert c.stride() == (2, 2, 1) and c.data_ptr() == x.data_ptr()
    assert torch.equal(c, x)
    _gradcheck(plt.canonicalize, x)
    assert plt.canonicalize(c) is c


# ------------------------------------------------------------ top-level API with grad


def _check_top_level(pl_fn, torch_fn, x0):
    """pl_fn(x) on a tensor that requires grad: same values as torch_fn and the same x.grad."""
    x = _leaf(x0)
    try:
        y = pl_fn(x)
    except BufferError as e:  # pragma: no cover - the bug this test guards against
        pytest.fail(f"top-level call went through DLPack instead of autograd: {e}")
    xr = _leaf(x0)
    yr = torch_fn(xr)
    ys, yrs = (y, yr) if isinstance(y, tuple) else ((y,), (yr,))
    loss, loss_r = 0, 0
    g = torch.Generator().manual_seed(0)
    for a, b in zip(ys, yrs):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert torch.equal(a, b)
        assert a.requires_grad
        w = torch.randn(a.shape, dtype=a.dtype, generator=g)
        loss = loss + (a * w).real.sum()
        loss_r = loss_r + (b * w).real.sum()
    loss.backward()
    loss_r.backward()
    assert x.grad is not None
    assert torch.allclose(x.grad, xr.grad)
    return y


def test_top_level_api_routes_through_autograd():
    t = torch.randn(3, 4, 5, dtype=F64).permute(2, 0, 1)
    y = _check_top_level(pl.contiguous, lambda x: x.contiguous(), t)
    assert y.is_contiguous()
    nchw = torch.randn(2, 3, 4, 5, dtype=F64)
    y = _check_top_level(lambda x: pl.contiguous(x, "channels_last"),
                         lambda x: x.contiguous(memory_format=torch.channels_last), nchw)
    assert y.is_contiguous(memory_format=torch.channels_last)
    y = _check_top_level(lambda x: pl.contiguous(x, "fortran"), lambda x: x.clone(), t)
    assert y.stride() == dense_in_order(torch, t.shape, [2, 1, 0]).stride()
    y = _check_top_level(lambda x: pl.to_order(x, (1, 2, 0)), lambda x: x.clone(), t)
    assert y.stride() == dense_in_order(torch, t.shape, [1, 2, 0]).stride()
    ri = torch.randn(3, 2, 4, dtype=F64).transpose(1, 2)     # packs
    _check_top_level(pl.view_as_complex, lambda x: torch.view_as_complex(x.contiguous()), ri)
    _check_top_level(pl.view_as_complex, torch.view_as_complex, torch.randn(3, 4, 2, dtype=F64))
    _check_top_level(pl.view_as_real, torch.view_as_real, torch.randn(3, 4, dtype=C128).t())
    _check_top_level(pl.unpack_complex, lambda z: (z.real, z.imag), torch.randn(3, 4, dtype=C128))
    _check_top_level(lambda z: pl.unpack_complex(z, copy=False), lambda z: (z.real, z.imag),
                     torch.randn(3, 4, dtype=C128))
    _check_top_level(pl.canonicalize, lambda x: x.view(x.shape),
                     torch.randn(4, 2, 1, dtype=F64).transpose(1, 2))
    _check_top_level(pl.require, lambda x: x.contiguous(), t)
    _check_top_level(lambda x: pl.require(x, "channels_last"),
                     lambda x: x.contiguous(memory_format=torch.channels_last), nchw)


def test_top_level_pack_complex_with_grad():
    re, im = _leaf(torch.randn(3, 4, dtype=F64)), _leaf(torch.randn(3, 4, dtype=F64))
    z = pl.pack_complex(re, im)
    assert isinstance(z, torch.Tensor) and z.requires_grad
    z.abs().sum().backward()
    re2, im2 = _leaf(re), _leaf(im)
    torch.complex(re2, im2).abs().sum().backward()
    assert torch.allclose(re.grad, re2.grad) and torch.allclose(im.grad, im2.grad)
    # only one of the two needing grad is enough to route through autograd
    im3 = _leaf(im)
    pl.pack_complex(re.detach(), im3).imag.sum().backward()
    assert torch.equal(im3.grad, torch.ones_like(im3))


def test_top_level_without_grad_returns_torch_tensors():
    t = torch.randn(3, 4, 5).permute(2, 0, 1)
    y = pl.contiguous(t)
    assert type(y) is torch.Tensor and y.is_contiguous() and torch.equal(y, t)
    assert not y.requires_grad


# ------------------------------------------------------------ identity fast paths


@pytest.mark.parametrize("requires_grad", [False, True])
def test_identity_fast_paths(requires_grad):
    def mk(x):
        return x.detach().requires_grad_(requires_grad)

    c = mk(torch.randn(3, 4, 5, dtype=F64))
    cl = mk(torch.randn(2, 3, 4, 5, dtype=F64).contiguous(memory_format=torch.channels_last))
    cl3 = mk(torch.randn(2, 3, 2, 3, 4, dtype=F64).contiguous(memory_format=torch.channels_last_3d))
    ft = mk(torch.randn(5, 4, 3, dtype=F64).permute(2, 1, 0))
    for f in (plt.contiguous, pl.contiguous, pl.require):
        assert f(c) is c
        assert f(cl, "channels_last") is cl
        assert f(cl, torch.channels_last) is cl
        assert f(cl3, "channels_last_3d") is cl3
        assert f(ft, "fortran") is ft
    for f in (plt.to_order, pl.to_order):
        assert f(c, (0, 1, 2)) is c
        assert f(ft, (2, 1, 0)) is ft
    canon = mk(torch.randn(4, 1, 2, dtype=F64))
    assert plt.canonicalize(canon) is canon
    # the top-level C path (no grad) returns a new zero-copy view here, not the same object
    same = pl.canonicalize(canon)
    assert same.data_ptr() == canon.data_ptr() and same.stride() == canon.stride()
    # size-1 dims are skipped, as torch skips them
    odd = mk(torch.randn(4, 2, 1, dtype=F64).transpose(1, 2))
    assert odd.is_contiguous() and plt.contiguous(odd) is odd


# ------------------------------------------------------------ custom ops: registration, aliasing


def test_custom_ops_are_registered_under_pylayout_namespace():
    for name in ("to_order", "to_format", "pack_complex", "unpack_complex"):
        assert hasattr(torch.ops.pylayout, name), name
        assert isinstance(getattr(torch.ops.pylayout, name).default, torch._ops.OpOverload)


def test_custom_ops_do_not_alias_inputs():
    x = torch.randn(3, 4, 5, dtype=F64)                    # already contiguous
    cl = x.view(1, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    z = torch.randn(3, 4, dtype=C128)
    outs = [
        (torch.ops.pylayout.to_format(x, "contiguous"), x),
        (torch.ops.pylayout.to_format(cl, "channels_last"), cl),
        (torch.ops.pylayout.to_order(x, [0, 1, 2]), x),
        (torch.ops.pylayout.to_order(x.permute(2, 0, 1), [1, 2, 0]), x),
        (torch.ops.pylayout.pack_complex(x, x), x),
        (torch.ops.pylayout.unpack_complex(z)[0], z),
        (torch.ops.pylayout.unpack_complex(z)[1], z),
        (plt.contiguous(x.transpose(0, 1)), x),
        (plt.view_as_complex(torch.randn(3, 2, 4).transpose(1, 2)), None),
        (plt.view_as_complex(x[..., :2], copy=True), x),
    ]
    for i, (out, inp) in enumerate(outs):
        if inp is not None:
            assert out.data_ptr() != inp.data_ptr(), f"output {i} aliases its input"
            assert out.untyped_storage().data_ptr() != inp.untyped_storage().data_ptr(), i
    before = x.clone()
    y = torch.ops.pylayout.to_format(x, "contiguous")
    y.add_(1)
    assert torch.equal(x, before), "writing the op's output must not change its input"


def test_opcheck_custom_ops():
    """torch.library.opcheck: schema (no aliasing/mutation), fake kernels, autograd registration."""
    x = torch.randn(2, 3, 4, 5, dtype=F64, requires_grad=True)
    xt = _leaf(torch.randn(2, 5, 4, 3, dtype=F64).transpose(1, 3))
    re, im = torch.randn(4, 5, dtype=F64, requires_grad=True), torch.randn(4, 5, dtype=F64, requires_grad=True)
    z = torch.randn(3, 4, dtype=C128, requires_grad=True)
    cases = [
        (torch.ops.pylayout.to_format.default, (x, "channels_last")),
        (torch.ops.pylayout.to_format.default, (xt, "contiguous")),
        (torch.ops.pylayout.to_format.default, (x, "fortran")),
        (torch.ops.pylayout.to_order.default, (x, [3, 1, 0, 2])),
        (torch.ops.pylayout.pack_complex.default, (re, im)),
        (torch.ops.pylayout.unpack_complex.default, (z,)),
        # mutates dst (declared), not differentiable: inputs that do not require grad
        (torch.ops.pylayout.copy_into.default, (torch.empty(5, 4, dtype=F64), torch.randn(4, 5, dtype=F64).t())),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


# ------------------------------------------------------------ torch.compile


def _pipeline(x, ri, re, im, n):
    """Several pylayout.torch conversions in one function."""
    a = plt.contiguous(x, "channels_last")                 # NCHW -> NHWC memory
    b = plt.to_order(a, (3, 0, 2, 1))
    z = plt.view_as_complex(ri)                            # ri has last stride != 1: packs
    p = plt.pack_complex(re, im)
    r2, i2 = plt.unpack_complex(p * z)
    f = plt.contiguous(n, "fortran")
    c = plt.canonicalize(x[:, :1])
    return a * 2, b + 1, r2, i2, plt.view_as_real(z), f, c.sum(), pl.contiguous(n.t()), a, b


def _pipeline_inputs(requires_grad=False):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 4, 5, dtype=torch.float32, generator=g)
    ri = torch.randn(4, 2, 6, generator=g).transpose(1, 2)     # (4, 6, 2) strides (12, 1, 6)
    re = torch.randn(4, 6, generator=g)
    im = torch.randn(4, 6, generator=g)
    n = torch.randn(5, 7, generator=g)
    return [t.detach().requires_grad_(requires_grad) for t in (x, ri, re, im, n)]


@pytest.mark.filterwarnings("ignore:Torchinductor does not support code generation for complex operators")
@pytest.mark.filterwarnings("ignore:dynamo_pgo force disabled")
def test_torch_compile_fullgraph_matches_eager():
    torch._dynamo.reset()
    graphs = []

    def recording_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    inputs = _pipeline_inputs()
    eager = _pipeline(*inputs)
    # the real compiler (inductor) and a recording backend that shows the captured graph.
    # Inductor's on-disk FX graph cache does not key on custom ops' fake kernels: a
    # stale entry from an older pylayout.torch would be replayed, so compile afresh.
    with torch._inductor.config.patch(force_disable_caches=True):
        compiled = torch.compile(_pipeline, fullgraph=True)(*inputs)
    recorded = torch.compile(_pipeline, fullgraph=True, backend=recording_backend)(*inputs)
    for res in (compiled, recorded):
        assert len(res) == len(eager)
        for i, (e, c) in enumerate(zip(eager, res)):
            assert e.shape == c.shape and e.dtype == c.dtype, i
            assert torch.allclose(e, c, atol=1e-6), i
    # layouts that are the point of the conversions survive compilation
    assert eager[8].is_contiguous(memory_format=torch.channels_last)
    assert eager[9].stride() == dense_in_order(torch, eager[9].shape, (3, 0, 2, 1)).stride()
    assert eager[5].stride() == (1, 5)
    for res in (compiled, recorded):
        assert res[0].is_contiguous(memory_format=torch.channels_last)
        for i in (5, 8, 9):   # the conversions' own outputs keep their layout when compiled
            assert _same_layout(res[i], eager[i]), (i, res[i].stride(), eager[i].stride())
    targets = {str(n.target) for gm in graphs for n in gm.graph.nodes if n.op == "call_function"}
    for op in ("pylayout.to_format", "pylayout.to_order", "pylayout.pack_complex", "pylayout.unpack_complex"):
        assert any(op in t for t in targets), (op, sorted(targets))


def test_torch_compile_backward_matches_eager():
    torch._dynamo.reset()

    def loss_fn(x, ri, re, im, n):
        out = _pipeline(x, ri, re, im, n)
        return sum((o.abs() if o.is_complex() else o).float().pow(2).sum() for o in out)

    eager_in = _pipeline_inputs(requires_grad=True)
    comp_in = _pipeline_inputs(requires_grad=True)
    le = loss_fn(*eager_in)
    le.backward()
    lc = torch.compile(loss_fn, fullgraph=True, backend="aot_eager")(*comp_in)
    lc.backward()
    assert torch.allclose(le, lc, rtol=1e-5)
    for a, b in zip(eager_in, comp_in):
        assert a.grad is not None and b.grad is not None
        assert torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-5)


# pylayout.contiguous is a C function: torch.compile traces its Python half
# (pylayout._contiguous) in its place, registered when torch._dynamo is
# imported (pylayout/_compile.py).  Whichever is imported first, a fresh
# process compiles it with fullgraph=True.
_COMPILE_CHILD = """
import sys
{first}
import torch
def f(x):
    y = x.transpose(1, 3)
    return pl.contiguous(y) * 2, pl.contiguous(y, "F"), pl.contiguous(x, memory_format=torch.channels_last)
graphs = []
def backend(gm, example_inputs):
    graphs.append(gm)
    return gm.forward
x = torch.randn(2, 3, 4, 5)
got = torch.compile(f, fullgraph=True, backend=backend)(x)
for g, e in zip(got, f(x)):
    assert torch.equal(g, e) and g.stride() == e.stride(), (g.stride(), e.stride())
targets = [str(n.target) for gm in graphs for n in gm.graph.nodes if n.op == "call_function"]
assert sum("pylayout.to_format" in t for t in targets) == 3, targets
assert not any(type(f).__name__ == "_AfterImport" for f in sys.meta_path)  # the hook went with its one use
def g(x, dst):                       # copy_into: the op pylayout::copy_into, mutating dst
    pl.copy_into(dst, x.transpose(1, 3) * 3)
    return dst + 1
d1, d2 = torch.empty(2, 5, 4, 3), torch.empty(2, 5, 4, 3)
graphs.clear()
assert torch.equal(torch.compile(g, fullgraph=True, backend=backend)(x, d1), g(x, d2)) and torch.equal(d1, d2)
assert any("pylayout.copy_into" in str(n.target) for gm in graphs for n in gm.graph.nodes), graphs
import inspect, torch._dynamo as d
assert "def " in inspect.getsource(d.reset)  # torch._dynamo's own loader still answers
print("ok")
"""


_RELOADED = """import torch._dynamo, importlib, warnings
import pylayout as pl
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    pl = importlib.reload(pl)               # registered once: no duplicate, no warning
assert not [m for m in w if "pylayout" in str(m.message)], [str(m.message) for m in w]"""


@pytest.mark.parametrize("first", ["import pylayout as pl", "import torch._dynamo\nimport pylayout as pl", _RELOADED],
                         ids=["pylayout first", "torch._dynamo first", "reloaded"])
def test_torch_compile_traces_the_c_function_whichever_is_imported_first(first):
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", _COMPILE_CHILD.format(first=first)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-2000:] + proc.stderr[-4000:]


def test_non_strict_export_reaches_pylayout_torch_ops_through_both_fronts():
    """Non-strict torch.export runs the module eagerly over fake tensors with
    torch.compiler's compiling flag set.  The C functions read that flag (what
    is_compiling() returns) and hand those tensors to pylayout.torch's custom
    ops: the exported graph holds them, and it computes what eager mode does."""
    import os
    import subprocess
    import sys
    code = """
import torch
import pylayout as pl
class M(torch.nn.Module):
    def forward(self, x):
        d = torch.empty(x.shape[1], x.shape[0])
        pl.copy_into(d, x.t())
        return pl.contiguous(x.t()) + d
x = torch.randn(3, 4)
ep = torch.export.export(M(), (x,), strict=False)
targets = [str(n.target) for n in ep.graph.nodes]
assert any("pylayout.copy_into" in t for t in targets) and any("pylayout.to_format" in t for t in targets), targets
assert torch.equal(ep.module()(x), 2 * x.t()) and torch.equal(M()(x), 2 * x.t())
print("ok")
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-2000:] + proc.stderr[-4000:]


def test_a_torch_that_cannot_register_is_warned_about():
    import os
    import subprocess
    import sys
    code = """
import warnings
import pylayout as pl
import torch
def refuse(fn):
    raise RuntimeError("no polyfills here")
torch.compiler.substitute_in_graph = refuse
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    import torch._dynamo
assert any("could not register pylayout.contiguous" in str(m.message) for m in w), [str(m.message) for m in w]
a = torch.randn(3, 4).t()
assert torch.equal(pl.contiguous(a), a)       # eager calls are unaffected
print("ok")
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-2000:] + proc.stderr[-4000:]


# ------------------------------------------------------------ conjugate / negative bits


def test_pylayout_torch_resolves_conj_and_neg_bits():
    z = torch.randn(4, 3, dtype=C128)
    zc = z.t().conj()                      # conj bit, non-contiguous: a copy is needed
    assert zc.is_conj()
    y = plt.contiguous(zc)
    assert not y.is_conj()
    assert torch.equal(y, zc.resolve_conj()) and y.is_contiguous()
    assert torch.equal(y.imag, -z.t().imag), "must be the conjugated values, not raw memory"
    y2 = plt.to_order(zc, (1, 0))
    assert torch.equal(y2, zc.resolve_conj())
    neg = z.conj().imag.t()                # negative bit
    assert neg.is_neg()
    assert torch.equal(plt.contiguous(neg), -z.imag.t())
    assert torch.equal(plt.view_as_real(zc), torch.view_as_real(zc.resolve_conj()))
    re, im = plt.unpack_complex(zc)
    assert torch.equal(im, -z.t().imag)
    re, im = plt.unpack_complex(zc, copy=False)
    assert torch.equal(im, -z.t().imag)
    p = plt.pack_complex(neg.contiguous(), neg)
    assert torch.equal(p.imag, -z.imag.t())


def test_pylayout_torch_conj_with_grad():
    z = _leaf(torch.randn(4, 3, dtype=C128))
    y = plt.contiguous(z.t().conj())
    w = torch.randn(3, 4, dtype=C128)
    (y * w).real.sum().backward()
    z2 = _leaf(z)
    (z2.t().conj().contiguous() * w).real.sum().backward()
    assert torch.allclose(z.grad, z2.grad)
    # the top-level API with grad takes the same route: no BufferError, resolved values
    z3 = _leaf(z)
    y3 = pl.contiguous(z3.t().conj())
    assert torch.equal(y3, z.detach().t().conj().resolve_conj())
    (y3 * w).real.sum().backward()
    assert torch.allclose(z3.grad, z2.grad)


def test_top_level_conj_never_silently_wrong():
    """Without grad, the C path cannot read conj/neg-bit memory: values or a clear BufferError."""
    z = torch.randn(4, 3, dtype=C128)
    conj_cases = [
        ("contiguous", lambda t: pl.contiguous(t), lambda t: t.resolve_conj().contiguous()),
        ("to_order", lambda t: pl.to_order(t, (0, 1)), lambda t: t.resolve_conj().contiguous()),
        ("view_as_real", pl.view_as_real, lambda t: torch.view_as_real(t.resolve_conj())),
        ("canonicalize", pl.canonicalize, lambda t: t.resolve_conj()),
    ]
    outcomes = {}
    for name, f, ref in conj_cases:
        for label, t in (("conj", z.conj()), ("conj_t", z.t().conj())):
            try:
                y = f(t)
            except BufferError as e:
                assert "resolve_conj" in str(e), (name, label, str(e))
                outcomes[name, label] = "BufferError"
                continue
            assert torch.equal(y.resolve_conj(), ref(t)), (name, label)
            outcomes[name, label] = "same object" if y is t else "values"
    # the C path on a non-contiguous conj tensor must copy, so it has to refuse
    assert outcomes["contiguous", "conj_t"] == "BufferError"
    # already contiguous: returned as is (torch's own object, whose values are right)
    assert outcomes["contiguous", "conj"] == "same object"
    with pytest.raises(BufferError, match="resolve_neg"):
        pl.contiguous(z.conj().imag.t())
    # after resolving, the C path works
    assert torch.equal(pl.contiguous(z.t().conj().resolve_conj()), z.t().conj())


# ------------------------------------------------------------ guards


def test_requires_converts_only_what_needs_converting():
    seen = {}

    @pl.requires(a="contiguous", w="channels_last", out="channels_last")
    def kernel(a, w, scale=1.0):
        assert a.is_contiguous()
        assert w.is_contiguous(memory_format=torch.channels_last)
        seen["a"], seen["w"] = a, w
        return (w * scale).contiguous()          # NCHW result: the guard converts it

    a_ok = torch.randn(3, 4)
    w_bad = torch.randn(2, 3, 4, 5)
    res = kernel(a_ok, w_bad, scale=2.0)
    assert seen["a"] is a_ok and seen["a"].data_ptr() == a_ok.data_ptr()
    assert seen["w"] is not w_bad and seen["w"].data_ptr() != w_bad.data_ptr()
    assert torch.equal(seen["w"], w_bad)
    assert res.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(res, w_bad * 2)

    a_bad = torch.randn(4, 3).t()
    w_ok = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    kernel(a_bad, w=w_ok)
    assert seen["w"] is w_ok
    assert seen["a"] is not a_bad and torch.equal(seen["a"], a_bad)


def test_requires_return_tuple_and_grad():
    @pl.requires(x="contiguous", returns="fortran")
    def f(x):
        return x * 2, "label", x + 1

    x = _leaf(torch.randn(4, 3, dtype=F64).t())
    a, label, b = f(x)
    assert label == "label"
    for r in (a, b):
        assert r.stride() == (1, 3) and r.requires_grad
    (a.sum() + b.sum()).backward()
    assert torch.equal(x.grad, torch.full_like(x, 3.0))


def test_requires_raise_mode_names_argument():
    @pl.requires(mode="raise", a="contiguous", w="channels_last")
    def kernel(a, w):
        return a

    a = torch.randn(3, 4)
    with pytest.raises(pl.LayoutError, match="'w'") as ei:
        kernel(a, torch.randn(2, 3, 4, 5))
    assert "channels_last" in str(ei.value)
    assert isinstance(ei.value, ValueError)
    with pytest.raises(pl.LayoutError, match="'a'"):
        kernel(a.t(), torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last))
    ok = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    assert kernel(a, ok) is a


def test_requires_warn_mode_names_argument_and_converts():
    @pl.requires(mode="warn", weight="contiguous")
    def kernel(weight):
        assert weight.is_contiguous()
        return weight

    w = torch.randn(4, 3).t()
    with pytest.warns(pl.LayoutWarning, match="'weight'"):
        r = kernel(w)
    assert r.is_contiguous() and torch.equal(r, w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = torch.randn(3, 4)
        assert kernel(c) is c       # no warning when nothing is converted


def test_requires_out_parameter_is_validated_not_converted():
    @pl.requires(x="contiguous", out="channels_last")
    def kernel(x, out):
        out.copy_(x)
        return out

    x = torch.randn(2, 3, 4, 5)
    good = torch.empty(2, 3, 4, 5, memory_format=torch.channels_last)
    assert kernel(x, good) is good and torch.equal(good, x)
    bad = torch.zeros(2, 3, 4, 5)
    with pytest.raises(pl.LayoutError, match="'out'"):
        kernel(x, bad)
    assert not bad.any(), "a rejected out buffer must not be written"

    @pl.requires(mode="convert", out="channels_last")
    def kernel2(out):
        return out

    with pytest.raises(pl.LayoutError, match="'out'"):
        kernel2(bad)   # whatever the mode: converting would lose the kernel's writes


def test_requires_unknown_names_and_bad_mode():
    with pytest.raises(TypeError, match="nope"):
        @pl.requires(nope="contiguous")
        def f(x):
            return x
    with pytest.raises(ValueError):
        pl.requires(mode="sometimes", x="contiguous")
    with pytest.raises(ValueError):
        pl.require(torch.zeros(2), mode="sometimes")


def test_require_returns_same_or_converted():
    x = torch.randn(3, 4)
    assert pl.require(x) is x
    y = pl.require(x.t())
    assert y.is_contiguous() and torch.equal(y, x.t()) and y.data_ptr() != x.data_ptr()
    cl = pl.require(torch.randn(2, 3, 4, 5), torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last)
    with pytest.raises(pl.LayoutError, match="'kernel_in'"):
        pl.require(x.t(), name="kernel_in", mode="raise")
    with pytest.warns(pl.LayoutWarning, match="'kernel_in'"):
        pl.require(x.t(), name="kernel_in", mode="warn")


def test_guards_with_numpy():
    a = np.arange(12.0).reshape(3, 4)
    assert pl.require(a) is a
    f = pl.require(a, "fortran")
    assert isinstance(f, np.ndarray) and f.flags.f_contiguous and (f == a).all()
    t = pl.require(a.T)
    assert isinstance(t, np.ndarray) and t.flags.c_contiguous and (t == a.T).all()

    @pl.requires(x="contiguous", y="fortran", out="contiguous")
    def kernel(x, y):
        assert x.flags.c_contiguous and y.flags.f_contiguous
        return x.T @ np.ones((3, 1)) + 0 * y.sum()   # (4,1) result from a transposed view

    r = kernel(a, a)
    assert isinstance(r, np.ndarray) and r.flags.c_contiguous
    assert np.array_equal(r, a.T @ np.ones((3, 1)))
    with pytest.raises(pl.LayoutError, match="'y'"):
        pl.requires(mode="raise", y="fortran")(lambda y: y)(a)
