"""Behaviour of the per-call fast paths (issue 16, 1 KB calls): the same
results, identity, errors and kinds of result as before.  Nothing here is
timed: bench and `python -m pylayout bench --only "1 KB"` measure the speed."""
import numpy as np
import pytest

import pylayout as pl
from _producers import DLPackOnly
from pylayout import _core

torch = pytest.importorskip("torch")


def test_numpy_small_copy_same_result_kind_and_flags():
    a = np.arange(256, dtype=np.float32).reshape(16, 16).T
    c = pl.contiguous(a)
    assert type(c) is np.ndarray and c.flags.c_contiguous and c.flags.writeable
    assert np.array_equal(c, a) and not np.shares_memory(c, a)
    assert pl.contiguous(c) is c
    assert pl.contiguous(c, copy=True) is not c


def test_numpy_read_only_input_copies_to_a_writeable_result():
    a = np.arange(256, dtype=np.float64).reshape(16, 16).T
    a.flags.writeable = False
    c = pl.contiguous(a)
    assert c.flags.writeable and np.array_equal(c, a)
    assert pl.contiguous(np.ascontiguousarray(a)).flags.writeable is True


def test_torch_small_copy_same_result_kind_and_identity():
    x = torch.randn(16, 16).t()
    c = pl.contiguous(x)
    assert type(c) is torch.Tensor and c.is_contiguous() and torch.equal(c, x)
    assert c.data_ptr() != x.data_ptr()
    assert pl.contiguous(c) is c


def test_torch_guards_still_refuse_at_the_core():
    x = torch.randn(4, 4, dtype=torch.complex64).t()
    with pytest.raises(BufferError, match="conjugate"):
        _core.to_format(x.conj())
    with pytest.raises(BufferError, match="negative"):
        _core.to_format(torch.randn(4, 4).t()._neg_view())
    with pytest.raises(BufferError, match="requires grad"):
        _core.to_format(torch.randn(4, 4, requires_grad=True).t())


def test_autograd_routing_is_kept():
    x = torch.randn(4, 4, requires_grad=True).t()
    c = pl.contiguous(x)
    assert c.requires_grad and c.grad_fn is not None


def test_copy_keyword_keeps_its_meaning():
    a = np.zeros((8, 8), np.float32).T
    with pytest.raises(ValueError, match="copy=False"):
        pl.contiguous(a, copy=False)
    assert pl.contiguous(a, copy=None).flags.c_contiguous


def test_large_copies_still_release_the_gil():
    # above the small-copy size the copy runs without the GIL; results are the same
    a = np.arange(512 * 512, dtype=np.float32).reshape(512, 512).T
    assert np.array_equal(pl.contiguous(a), a)
    x = torch.arange(512 * 512, dtype=torch.float32).reshape(512, 512).t()
    assert torch.equal(pl.contiguous(x), x)


def test_producers_without_max_version_are_still_retried():
    class Legacy:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self):  # no keywords at all
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.arange(16, dtype=np.int32).reshape(4, 4).T
    c = pl.contiguous(Legacy(a))
    assert type(c) is pl.Tensor and np.array_equal(np.from_dlpack(c), a)


# ---------------------------------------------- the one-call fast path (issue 16)
# pylayout.contiguous(x, format) with no copy= or memory_format= is one C call,
# _core.convert_or_route: the same result as _core.to_format, or NotImplemented
# for the torch tensors that pylayout.torch converts (then the full path runs).

_FORMATS = [("contiguous", 4), ("fortran", 3), ("channels_last", 4), ("channels_last_3d", 5), ("F", 2)]


def _layouts(rng, ndim):
    """Transposed, sliced and already-dense views of a random tensor."""
    shape = tuple(int(s) for s in rng.integers(1, 6, size=ndim))
    base = rng.standard_normal(shape).astype(np.float32)
    yield base
    yield base.transpose(tuple(rng.permutation(ndim)))
    yield base[(slice(None, None, 2),) + (slice(None),) * (ndim - 1)]
    yield np.asfortranarray(base)


@pytest.mark.parametrize("fmt,ndim", _FORMATS)
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64, np.complex128, np.bool_])
def test_fast_path_matches_the_full_path_numpy(fmt, ndim, dtype):
    rng = np.random.default_rng(ndim)
    for x in _layouts(rng, ndim):
        x = x.astype(dtype)
        fast = _core.convert_or_route(x, fmt)
        full = pl._like(x, _core.to_format(x, fmt))
        assert type(fast) is np.ndarray and fast.dtype == x.dtype
        assert fast.strides == full.strides and np.array_equal(fast, x)
        assert (fast is x) == (full is x)
        assert pl.is_contiguous(fast, fmt)


@pytest.mark.parametrize("fmt,ndim", _FORMATS + [(torch.preserve_format, 3), (torch.channels_last, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.complex64])
def test_fast_path_matches_torch(fmt, ndim, dtype):
    g = torch.Generator().manual_seed(ndim)
    shape = tuple(int(s) for s in torch.randint(1, 6, (ndim,), generator=g))
    base = torch.randn(shape, generator=g).to(dtype)
    for x in (base, base.permute(*torch.randperm(ndim, generator=g).tolist()), base[::2], base.mT if ndim > 1 else base):
        fast = _core.convert_or_route(x, fmt)
        assert type(fast) is torch.Tensor and torch.equal(fast, x)
        name = fmt if isinstance(fmt, str) else None
        if fmt is torch.preserve_format:
            assert pl.is_dense(fast)
        elif name in ("contiguous", "fortran", "channels_last", "channels_last_3d", "F"):
            assert pl.is_contiguous(fast, fmt)
        else:
            assert fast.is_contiguous(memory_format=fmt)
        if pl.is_contiguous(x, fmt) if fmt is not torch.preserve_format else pl.is_dense(x):
            assert fast is x
        else:
            assert fast.data_ptr() != x.data_ptr()


def test_fast_path_routes_what_pylayout_torch_converts():
    x = torch.randn(4, 4).t()
    assert _core.convert_or_route(x.clone().requires_grad_(), "contiguous") is NotImplemented
    meta = torch.empty(4, 4, device="meta", requires_grad=True).t()
    assert _core.convert_or_route(meta, "contiguous") is NotImplemented
    # a plain tensor off the CPU stays on the fast path: the layout is decided in C and torch
    # copies (pylayout.torch._on_device); a meta tensor so once the process has seen one
    import pylayout.torch  # noqa: F401  (hands _on_device over)
    assert not pl.is_contiguous(meta.detach())
    plain = _core.convert_or_route(meta.detach(), "contiguous")
    assert plain is not NotImplemented and plain.device.type == "meta" and plain.stride() == (4, 1)
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level():
        dual = fwad.make_dual(x, torch.ones(4, 4).t())
        assert _core.convert_or_route(dual, "contiguous") is NotImplemented
        plain = _core.convert_or_route(x, "contiguous")  # a level is active, but x has no tangent
        assert plain is not NotImplemented and torch.equal(plain, x)
    seen = []

    def probe(row):
        seen.append(_core.convert_or_route(row, "contiguous"))
        return row * 1

    torch.vmap(probe)(torch.randn(3, 4, 4))
    assert seen == [NotImplemented]
    # and pylayout.contiguous gives each its answer through the full path
    c = pl.contiguous(x.clone().requires_grad_())
    assert c.requires_grad and c.is_contiguous()
    with fwad.dual_level():
        dual = fwad.make_dual(x, torch.ones(4, 4).t())
        c = pl.contiguous(dual)
        assert fwad.unpack_dual(c).tangent is not None


def test_one_routing_rule_for_the_fast_and_the_full_paths():
    """_core.torch_route is the rule; the fast path (NotImplemented) and the
    shim's _autograd (pylayout.torch) give the same answer on every case."""
    import torch.autograd.forward_ad as fwad
    x = torch.randn(4, 4).t()
    cases = {"plain": (x, False), "grad": (x.clone().requires_grad_(), True),
             "meta": (torch.empty(4, 4, device="meta").t(), True), "numpy": (x.numpy(), False),
             "pylayout": (pl.from_dlpack(x.numpy()), False)}
    with fwad.dual_level():
        cases["dual"] = (fwad.make_dual(x, torch.ones(4, 4).t()), True)
        cases["no tangent at a level"] = (x, False)
        for name, (t, routed) in cases.items():
            assert _core.torch_route(t) is routed, name
            assert (pl._autograd(t) is not None) is routed, name
            if name != "meta":
                assert (_core.convert_or_route(t, "contiguous") is NotImplemented) is routed, name
    wrapped = []
    torch.vmap(lambda row: wrapped.append((_core.torch_route(row), pl._autograd(row) is not None)) or row * 1)(
        torch.randn(3, 4, 4))
    assert wrapped == [(True, True)]


def test_fast_path_leaves_guard_refusals_to_the_full_path():
    z = torch.randn(4, 4, dtype=torch.complex64)
    assert _core.convert_or_route(z.conj(), "contiguous") is NotImplemented
    zc = z.conj()
    assert pl.contiguous(zc) is zc  # already contiguous: itself, as before
    with pytest.raises(BufferError, match="conjugate"):  # a copy: the guard's refusal, as before
        pl.contiguous(z.t().conj())


def test_fast_path_arguments():
    a = np.zeros((2, 3)).T
    with pytest.raises(TypeError, match="2 positional"):
        _core.convert_or_route(a)
    with pytest.raises(ValueError, match="unknown memory format"):
        _core.convert_or_route(a, "sideways")
    with pytest.raises(TypeError):
        _core.convert_or_route(object(), "contiguous")


# ------------------------------------------ pylayout.contiguous is a C function
# Its common call, contiguous(x) or contiguous(x, format), runs in C with no
# Python frame; keyword calls go to its Python half, pylayout._contiguous,
# and a route to pylayout.torch to the route after the fast path.  The two
# halves must answer alike: the second parameter of each case below is a
# keyword call, which the Python half answers.


def test_contiguous_and_copy_into_are_the_c_functions_with_their_python_halves_signatures():
    import inspect
    assert pl.contiguous is _core.contiguous and pl.copy_into is _core.copy_into
    assert inspect.signature(pl.contiguous) == inspect.signature(pl._contiguous)   # torch.compile asks this
    assert inspect.signature(pl.copy_into) == inspect.signature(pl._copy_into)
    for fn in (pl.contiguous, pl.copy_into):
        assert fn.__doc__ and ">>>" in fn.__doc__


def test_copy_into_positional_and_keyword_calls_answer_alike():
    rng = np.random.default_rng(11)
    for x in _layouts(rng, 3):
        outs = [np.empty_like(x, order="F") for _ in range(3)]
        assert pl.copy_into(outs[0], x) is outs[0]
        assert pl.copy_into(outs[1], src=x) is outs[1]
        assert pl.copy_into(src=x, dst=outs[2]) is outs[2]
        for o in outs:
            assert np.array_equal(o, x)
    t = torch.randn(3, 4, 5).permute(2, 0, 1)
    d1, d2 = torch.empty(5, 3, 4), torch.empty(5, 3, 4)
    v = d2._version
    assert pl.copy_into(d1, t) is d1 and pl.copy_into(dst=d2, src=t) is d2
    assert torch.equal(d1, t) and torch.equal(d2, t) and d2._version > v


def test_copy_into_arguments_are_checked_as_a_python_function_checks_them():
    a = np.zeros((2, 3))
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'src'"):
        pl.copy_into(a)
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        pl.copy_into(a, a, a)
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        pl.copy_into(a, out=a)
    with pytest.raises(ValueError, match="same shape"):
        pl.copy_into(a, np.zeros((3, 2)))


def test_copy_into_routes_torch_tensors_while_compiling(monkeypatch):
    """As contiguous: while torch.compiler.is_compiling(), torch operands go
    to pylayout.torch; NumPy operands stay in C."""
    import pylayout.torch as plt
    calls = []
    real = plt.copy_into
    monkeypatch.setattr(plt, "copy_into", lambda dst, src: calls.append(1) or real(dst, src))
    x, d = torch.randn(4, 5).t(), torch.empty(5, 4)
    pl.copy_into(d, x)
    assert calls == [] and torch.equal(d, x)
    monkeypatch.setattr(torch.compiler, "_is_compiling_flag", True)
    d2 = torch.empty(5, 4)
    assert pl.copy_into(d2, x) is d2 and torch.equal(d2, x)
    assert calls == [1]
    n, nd = x.numpy(), np.empty((5, 4), np.float32)
    assert pl.copy_into(nd, n) is nd and calls == [1]


def test_compiling_is_asked_of_torch_where_its_flag_is_missing(monkeypatch):
    """The C functions read torch.compiler's _is_compiling_flag, the value
    is_compiling() returns; a torch without the flag is asked is_compiling()."""
    import pylayout.torch as plt
    calls = []
    real = plt.copy_into
    monkeypatch.setattr(plt, "copy_into", lambda dst, src: calls.append(1) or real(dst, src))
    answer = [True]
    monkeypatch.delattr(torch.compiler, "_is_compiling_flag")
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: answer[0])
    hooks = pl._hooks()                          # the Python halves' own handle on is_compiling
    monkeypatch.setattr(pl, "_torch_hooks", (hooks[0], torch.compiler.is_compiling) + hooks[2:])
    x, d = torch.randn(4, 5).t(), torch.empty(5, 4)
    assert pl.copy_into(d, x) is d and torch.equal(d, x) and calls == [1]
    answer[0] = False
    d.zero_()
    assert pl.copy_into(d, x) is d and torch.equal(d, x) and calls == [1]


def test_the_torch_guard_asks_is_conj_of_complex_tensors_only():
    """The conjugate bit changes only a complex tensor's values, so only those
    are asked x.is_conj() (a call that releases the GIL); every tensor is asked
    is_neg().  Both bits are still refused where they matter."""
    asked = []

    class Spy(torch.Tensor):
        def is_conj(self):
            asked.append(("conj", self.dtype))
            return torch.Tensor.is_conj(self)

        def is_neg(self):
            asked.append(("neg", self.dtype))
            return torch.Tensor.is_neg(self)

    x = torch.randn(4, 5).t().as_subclass(Spy)
    assert torch.equal(pl.contiguous(x), x)
    assert asked == [("neg", torch.float32)], asked
    asked.clear()
    z = torch.randn(4, 5, dtype=torch.complex64).t().as_subclass(Spy)
    d = torch.empty(5, 4, dtype=torch.complex64)
    pl.copy_into(d, z)
    assert torch.equal(d, z) and sorted(asked) == [("conj", torch.complex64), ("neg", torch.complex64)], asked
    zc = torch.randn(4, 5, dtype=torch.complex64).conj()
    with pytest.raises(BufferError, match="conjugate bit"):
        pl.copy_into(torch.empty(4, 5, dtype=torch.complex64), zc)
    with pytest.raises(BufferError, match="negative bit"):
        pl.copy_into(torch.empty(4, 5), zc.imag)     # a real tensor with the negative bit


@pytest.mark.parametrize("fmt", ["contiguous", "C", "F", "fortran"])
def test_positional_and_keyword_calls_answer_alike(fmt):
    rng = np.random.default_rng(7)
    for x in _layouts(rng, 3):
        by_c = pl.contiguous(x, fmt)
        by_py = pl.contiguous(x, format=fmt)
        also = pl.contiguous(x=x, format=fmt)
        for got in (by_py, also):
            assert type(got) is type(by_c) and got.strides == by_c.strides and np.array_equal(got, by_c)
            assert (got is x) == (by_c is x)
    t = torch.randn(3, 4, 5).permute(2, 0, 1)
    for got in (pl.contiguous(t), pl.contiguous(t, format="contiguous"), pl.contiguous(x=t)):
        assert type(got) is torch.Tensor and got.is_contiguous() and torch.equal(got, t)


def test_contiguous_arguments_are_checked_as_a_python_function_checks_them():
    a = np.zeros((2, 3)).T
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        pl.contiguous()
    with pytest.raises(TypeError, match="takes from 1 to 2 positional arguments but 3 were given"):
        pl.contiguous(a, "C", None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'order'"):
        pl.contiguous(a, order="C")
    with pytest.raises(TypeError, match="multiple values for argument 'format'"):
        pl.contiguous(a, "C", format="F")
    with pytest.raises(ValueError, match="unknown memory format"):
        pl.contiguous(a, "sideways")
    with pytest.raises(TypeError):
        pl.contiguous(object())


def test_contiguous_with_other_producers_and_subclasses_returns_their_kind():
    class Sub(np.ndarray):
        pass

    a = np.arange(12.0).reshape(3, 4)
    m = a.T.view(Sub)                        # an ndarray subclass: a plain ndarray back, via _like
    got = pl.contiguous(m)
    assert type(got) is np.ndarray and got.flags.c_contiguous and np.array_equal(got, m)
    d = DLPackOnly(a.T)                      # any other producer: a pylayout.Tensor back
    got = pl.contiguous(d)
    assert type(got) is pl.Tensor and got.strides == (3, 1) and np.array_equal(np.from_dlpack(got), a.T)
    t = pl.from_dlpack(a.T)                  # a pylayout.Tensor: a pylayout.Tensor
    got = pl.contiguous(t)
    assert type(got) is pl.Tensor and got.strides == (3, 1)


def test_contiguous_routes_torch_tensors_while_compiling(monkeypatch):
    """While torch.compiler.is_compiling() (non-strict torch.export sets it,
    over fake tensors), the C function hands torch tensors to pylayout.torch's
    ops, as the Python half does under tracing."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch.randn(4, 5).t()
    with Ops() as eager:
        c = pl.contiguous(x)
    assert not any("pylayout" in op for op in eager.seen), eager.seen   # the C core copied it
    monkeypatch.setattr(torch.compiler, "_is_compiling_flag", True)
    assert torch.compiler.is_compiling()
    with Ops() as compiling:
        d = pl.contiguous(x)
    assert any("pylayout.to_format" in op for op in compiling.seen), compiling.seen
    assert torch.equal(c, d) and d.is_contiguous()
    n = x.numpy()                            # not a torch tensor: the C core, compiling or not
    assert type(pl.contiguous(n)) is np.ndarray


def test_small_outputs_reused_are_never_shared():
    # the allocator keeps one freed block per small size; live results never alias
    a = np.arange(256, dtype=np.float32).reshape(16, 16).T
    outs = [pl.contiguous(a) for _ in range(8)]
    for k, o in enumerate(outs):
        o += k
    for k, o in enumerate(outs):
        assert np.array_equal(o, a + k)
    assert len({o.ctypes.data for o in outs}) == len(outs)


def test_copy_into_fast_path_copies_bumps_and_routes():
    src = torch.randn(16, 16).t()
    dst = torch.empty(16, 16)
    v = dst._version
    assert _core.copy_into_or_route(dst, src) is dst
    assert torch.equal(dst, src) and dst._version > v  # rule 3 on the fast path
    a = np.zeros((16, 16), np.float32)
    assert _core.copy_into_or_route(a, src.numpy()) is a and np.array_equal(a, src.numpy())
    assert _core.copy_into_or_route(dst.clone().requires_grad_(), src) is NotImplemented
    assert _core.copy_into_or_route(dst, src.clone().requires_grad_()) is NotImplemented
    assert _core.copy_into_or_route(torch.empty(16, 16, device="meta"), src) is NotImplemented
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level():
        assert _core.copy_into_or_route(dst, src) is dst  # a level is active, but neither has a tangent
        assert _core.copy_into_or_route(dst, fwad.make_dual(src, torch.ones(16, 16))) is NotImplemented
        with pytest.raises(TypeError, match="tangent"):  # the full path still refuses tangents
            pl.copy_into(dst, fwad.make_dual(src, torch.ones(16, 16)))
    ro = np.zeros((4, 4))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _core.copy_into_or_route(ro, np.ones((4, 4)))
    with pytest.raises(TypeError, match="2 positional"):
        _core.copy_into_or_route(dst)


def test_types_remembered_as_not_torch_never_include_torch_and_stay_few():
    x = torch.randn(4, 4).t()
    p = torch.nn.Parameter(torch.randn(4, 4).t(), requires_grad=False)
    for t in (x, p):
        pl.contiguous(t)
        pl.copy_into(torch.empty(4, 4), t)
    assert not any(issubclass(tp, torch.Tensor) for tp in pl._plain)
    # a keyword call goes to the Python half (_contiguous), which remembers
    # types; the plain call of an ndarray never leaves C
    pl.contiguous(np.zeros((3, 2)).T, format="contiguous")
    assert np.ndarray in pl._plain

    for _ in range(100):  # a new type each time, as code that makes classes in a loop would
        kind = type("P", (DLPackOnly,), {})
        got = pl.contiguous(kind(np.ones((2, 3)).T), format="contiguous")  # the Python half, as above
        assert np.array_equal(np.from_dlpack(got), np.ones((3, 2)))
    assert len(pl._plain) == pl._PLAIN_MAX  # filled up to its bound, never past it
