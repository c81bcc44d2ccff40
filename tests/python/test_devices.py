"""Torch tensors on any device (docs: README, "Operator authors with CUDA tensors").

Off the CPU, pylayout decides the layout with its own C rules and torch
moves the bytes on the tensor's device.  These tests run every operation on
meta tensors, which take exactly the route CUDA tensors take, and compare
shapes, strides, dtypes and identity with the CPU path on generated layouts.
With a CUDA device present (never in CI), the same checks run on it too.
"""
from __future__ import annotations

import random
import warnings

import pytest

import pylayout as pl
from conftest import torch_layouts

torch = pytest.importorskip("torch", reason="device routes are torch's (CI installs torch)")
import pylayout.torch as plt  # noqa: E402

DEVICES = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])
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
    if dev_in.device.type != "meta":
        assert torch.equal(dev_out.cpu(), cpu_out), where


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
    assert pl.pack_complex(on(device, re), on(device, im), out=out) is out
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
