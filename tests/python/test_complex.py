"""Complex views and planar <-> interleaved packing (user story 2).

Oracles: real torch (view_as_complex, view_as_real, complex, stack) and real
NumPy (byte strides, ndarray.view).  Every comparison of values is bit-exact:
the data are random bit patterns (NaNs with payloads, signalling NaNs, -0.0,
infinities, subnormals) compared as integers, so a copy that goes through
floating-point registers and quiets a NaN, or a swap of re and im, shows.

The memory rule pylayout promises (pylayout.h, "complex"): a real tensor is
viewable as complex iff its last dim has size 2 and stride 1, its first
element is aligned to the complex element size, and every other dim of
size > 1 has an even stride; an empty tensor is always viewable.  torch
with pytorch#169780 (2.11 on) accepts odd strides on size-1 dims (it halves strides with C integer
division: 1 -> 0, 3 -> 1) but still refuses empty tensors with odd strides;
older torch refused both.  The tests below record which torch behaviour ran.
"""
from __future__ import annotations

import gc
import random
import re as _re

import pytest

import _producers
import pylayout as pl
from conftest import bits, inverse_permutation, same_bits, torch_layouts

pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

# --------------------------------------------------------------- helpers

# Special bit patterns that a float copy could alter: -0.0, signalling NaN,
# quiet NaN with payload, negative NaN, +inf, smallest subnormal.
_SPECIAL_BITS = {
    16: [0x8000, 0x7D01, 0x7E55, 0xFE01, 0x7C00, 0x0001],
    32: [0x80000000, 0x7F800001, 0x7FC12345, 0xFFC00001, 0x7F800000, 0x00000001],
    64: [0x8000000000000000, 0x7FF0000000000001, 0x7FF8DEADBEEF0001, 0xFFF8000000000001,
         0x7FF0000000000000, 0x0000000000000001],
}


def _signed(v, bits):
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _int_dtype(torch, real_dtype):
    return {torch.float16: torch.int16, torch.float32: torch.int32, torch.float64: torch.int64}[real_dtype]


def _real_of(torch, complex_dtype):
    return {torch.complex32: torch.float16, torch.complex64: torch.float32,
            torch.complex128: torch.float64}[complex_dtype]


def _complex_of(torch, real_dtype):
    return {torch.float16: torch.complex32, torch.float32: torch.complex64,
            torch.float64: torch.complex128}[real_dtype]


def _random_bits(torch, n, real_dtype, seed):
    """n random real values of real_dtype, as raw bit patterns, with specials mixed in."""
    it = _int_dtype(torch, real_dtype)
    bits = torch.finfo(real_dtype).bits
    gen = torch.Generator().manual_seed(seed)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    ints = torch.randint(lo, hi, (max(n, 1),), dtype=it, generator=gen)
    rng = random.Random(seed)
    for v in _SPECIAL_BITS[bits]:
        if n and rng.random() < 0.7:
            ints[rng.randrange(n)] = _signed(v, bits)
    return ints[:n].view(real_dtype)


def _fill_storage(torch, x, seed):
    """Overwrite x's whole storage with random bits (works for overlapping views)."""
    real = _real_of(torch, x.dtype) if x.is_complex() else x.dtype
    storage = x.untyped_storage()
    n = storage.nbytes() // torch.finfo(real).bits * 8
    if n == 0:
        return x
    flat = torch.empty(0, dtype=real).set_(storage, 0, (n,))
    flat.copy_(_random_bits(torch, n, real, seed))
    return x


def _expected_complex_bits(torch, x):
    """Bits of torch.complex(x[..., 0], x[..., 1]), computed without pylayout."""
    z = torch.complex(x[..., 0].contiguous(), x[..., 1].contiguous())
    return bits(z)


def _viewable(x):
    """The memory rule of pylayout.h for a real torch tensor whose last dim has size 2.

    Returns (viewable, offending dims); offending dims is [] for a pure
    alignment failure."""
    if x.numel() == 0:
        return True, []
    bad = [x.dim() - 1] if x.stride(-1) != 1 else []
    bad += [d for d in range(x.dim() - 1) if x.shape[d] > 1 and x.stride(d) % 2 != 0]
    if bad:
        return False, bad
    if x.data_ptr() % (2 * x.element_size()) != 0:
        return False, []
    return True, []


def _addr(t):
    """Address of a pylayout.Tensor's first element (DLPack: data + byte_offset)."""
    return t.data_ptr + t.byte_offset


def _torch_view_as_complex(torch, x):
    try:
        return torch.view_as_complex(x)
    except RuntimeError:
        return None


# ------------------------------------------------------------ user story 2


def _story_tensors(torch):
    einops = pytest.importorskip("einops", reason="einops is needed to reproduce user story 2 exactly")
    torch.manual_seed(2)
    a = torch.rand(336, 2, 1).transpose(1, 2).contiguous()
    b = einops.rearrange(torch.rand(336, 2), "b (complex c) -> b c complex", complex=2)
    return [("transpose+contiguous", a), ("einops.rearrange", b)]


def test_user_story_2_tensors_have_the_reported_layout(torch):
    for name, x in _story_tensors(torch):
        assert tuple(x.shape) == (336, 1, 2) and x.stride() == (2, 1, 1), name
        # .contiguous() does not help: torch already calls it contiguous.
        assert x.is_contiguous() and x.contiguous() is x, name


def test_user_story_2_view_as_complex_is_zero_copy(torch):
    for name, x in _story_tensors(torch):
        expected = torch.complex(x[..., 0].contiguous(), x[..., 1].contiguous())
        z = pl.view_as_complex(x)
        assert isinstance(z, torch.Tensor) and z.dtype == torch.complex64, name
        assert tuple(z.shape) == (336, 1), name
        assert z.data_ptr() == x.data_ptr(), f"{name}: pylayout copied a viewable tensor"
        assert torch.equal(z, expected), name
        zf = pl.view_as_complex(x, copy=False)
        assert zf.data_ptr() == x.data_ptr() and torch.equal(zf, expected), name
        # Aliasing: write through the view, read through x.
        z[7, 0] = complex(-3.5, 9.25)
        z[335, 0] = complex(1.0, -2.0)
        assert x[7, 0, 0].item() == -3.5 and x[7, 0, 1].item() == 9.25, name
        assert x[335, 0, 0].item() == 1.0 and x[335, 0, 1].item() == -2.0, name
        x[0, 0, 1] = 42.0
        assert z[0, 0].imag.item() == 42.0, name


def test_user_story_2_agrees_with_this_torch(torch):
    """torch before pytorch#169780 refuses the story tensors; 2.11 on accept them.

    Either branch asserts: refused -> pylayout is zero-copy and correct;
    accepted -> pylayout gives exactly torch's view (strides, data_ptr)."""
    branches = []
    for name, x in _story_tensors(torch):
        tz = _torch_view_as_complex(torch, x)
        z = pl.view_as_complex(x)
        expected = torch.complex(x[..., 0].contiguous(), x[..., 1].contiguous())
        if tz is None:
            branches.append("torch refuses (before pytorch#169780)")
            assert z.data_ptr() == x.data_ptr() and torch.equal(z, expected), \
                f"{name}: torch {torch.__version__} refused; pylayout must still give a zero-copy view"
        else:
            branches.append("torch accepts (pytorch#169780)")
            assert z.stride() == tz.stride() == (1, 0), \
                f"{name}: torch {torch.__version__} accepted with strides {tz.stride()}, pylayout {z.stride()}"
            assert z.data_ptr() == tz.data_ptr() == x.data_ptr(), name
            assert z.shape == tz.shape and torch.equal(z, tz) and torch.equal(z, expected), name
    assert len(set(branches)) == 1, branches


def test_torch_still_refuses_empty_tensors_with_odd_strides(torch):
    """Documents torch 2.13: empty tensors with odd strides are refused; pylayout views them."""
    x = torch.empty_strided((0, 3, 2), (1, 3, 1))
    with pytest.raises(RuntimeError, match="stride divisible by 2"):
        torch.view_as_complex(x)
    z = pl.view_as_complex(x, copy=False)
    assert tuple(z.shape) == (0, 3) and z.dtype == torch.complex64
    assert z.stride() == (0, 1)  # C division of (1, 3), as torch would compute
    assert z.data_ptr() == x.data_ptr()


def test_canonicalize_explains_and_fixes_story_2(torch):
    for name, x in _story_tensors(torch):
        c = pl.canonicalize(x)
        assert c.stride() == (2, 2, 1) and c.data_ptr() == x.data_ptr(), name
        # With canonical strides every torch release accepts the tensor.
        tz = torch.view_as_complex(c)
        assert tz.data_ptr() == x.data_ptr() and tz.stride() == (1, 1), name


# ------------------------------------------------------ differential: torch


def _dims(rng, k, p_zero=0.05):
    return [0 if rng.random() < p_zero else rng.choice([1, 1, 2, 2, 3, 4, 5]) for _ in range(k)]


def _gen_layout(torch, rng, dtype, seed):
    """A real tensor whose last dim is (mostly) (re, im), in a random layout.

    Returns (description, tensor).  Kinds: slices of a permuted parent with
    steps and offsets; as_strided with arbitrary strides and storage
    offsets; flat[k:k+n].view(shape); size-1 dims with odd strides; expand."""
    kind = rng.choices(["slice", "as_strided", "offset", "story"], [40, 30, 20, 10])[0]
    k = rng.randint(0, 4)
    if kind == "slice":
        sizes = _dims(rng, k)
        steps = [rng.choice([1, 1, 2, 3]) for _ in range(k)]
        starts = [rng.randint(0, 2) for _ in range(k)]
        parent = [st + (s - 1) * p + 1 + rng.randint(0, 1) if s else st + 1
                  for s, p, st in zip(sizes, steps, starts)]
        last_parent = rng.choice([2, 2, 2, 2, 3, 4, 5])
        base = _random_bits(torch, _prod(parent) * last_parent, dtype, seed).view(*parent, last_parent)
        perm = list(range(k))
        rng.shuffle(perm)
        base = base.permute(*perm, k)
        sizes, steps, starts = ([sizes[p] for p in perm], [steps[p] for p in perm], [starts[p] for p in perm])
        idx = [slice(st, st + (s - 1) * p + 1, p) if s else slice(st, st) for s, p, st in zip(sizes, steps, starts)]
        r = rng.random()
        if r < 0.75 or last_parent == 2:
            o = rng.randint(0, last_parent - 2)
            idx.append(slice(o, o + 2))
        elif r < 0.9:
            idx.append(slice(0, None, 2) if last_parent in (3, 4) else slice(1, None, 2))  # stride 2
        else:
            idx.append(slice(0, rng.choice([1, 3])))  # last dim of another size
        x = base[tuple(idx)]
        desc = f"slice perm={perm} steps={steps} starts={starts} last_parent={last_parent}"
    elif kind == "as_strided":
        shape = _dims(rng, k) + [2 if rng.random() < 0.9 else rng.choice([1, 3, 4])]
        strides = [rng.choice([0, 1, 2, 2, 3, 4, 5, 6, 8, 10, 12]) for _ in range(k)]
        strides.append(1 if rng.random() < 0.8 else rng.choice([0, 2, 3]))
        offset = rng.randint(0, 5)
        extent = offset + (sum((s - 1) * st for s, st in zip(shape, strides)) + 1 if _prod(shape) else 0)
        base = _random_bits(torch, extent + 1, dtype, seed)
        x = base.as_strided(shape, strides, offset)
        desc = "as_strided"
    elif kind == "offset":
        shape = _dims(rng, k) + [2]
        n = _prod(shape)
        off = rng.randint(0, 3)
        flat = _random_bits(torch, n + off + 1, dtype, seed)
        x = flat[off:off + n].view(shape)
        perm = list(range(k))
        rng.shuffle(perm)
        x = x.permute(*perm, k)
        desc = f"offset={off} perm={perm}"
    else:
        # Story-2-like: size-1 dims with odd strides next to the (re, im) dim.
        b = max(k, 1)
        lead = _dims(rng, b - 1)
        x = _random_bits(torch, _prod(lead) * 2 * 1, dtype, seed).view(*lead, 2, 1).transpose(-1, -2)
        if rng.random() < 0.5:
            x = x.contiguous()
        desc = "story"
    if x.dim() > 1 and rng.random() < 0.15:
        # expand a size-1 non-last dim: stride 0, viewable
        ones = [d for d in range(x.dim() - 1) if x.shape[d] == 1]
        if ones:
            shape = list(x.shape)
            shape[rng.choice(ones)] = rng.choice([2, 3])
            x = x.expand(*shape)
            desc += "+expand"
    if x.dim() < 5 and rng.random() < 0.15:
        # a size-1 dim with an arbitrary (often odd) stride
        d = rng.randint(0, x.dim() - 1) if x.dim() else 0
        shape, strides = list(x.shape), list(x.stride())
        shape.insert(d, 1)
        strides.insert(d, rng.choice([1, 3, 5, 7, 2]))
        x = x.as_strided(shape, strides, x.storage_offset())
        desc += f"+size1@{d}"
    return desc, x


def _prod(v):
    p = 1
    for s in v:
        p *= s
    return p


_DTYPES = ("float16", "float32", "float64")
N_LAYOUTS = 8000


def test_view_as_complex_differential(torch):
    rng = random.Random(20260)
    stats = dict(torch_ok=0, viewable_torch_refused=0, viewable_size1_odd=0, viewable_empty=0, copied=0,
                 not_last2=0, align_only=0, view_checked=0, torch_ok_size1_odd=0)
    for i in range(N_LAYOUTS):
        dtype = getattr(torch, _DTYPES[i % 3])
        desc, x = _gen_layout(torch, rng, dtype, seed=i)
        where = f"#{i} {desc} dtype={dtype} shape={tuple(x.shape)} strides={x.stride()} off={x.storage_offset()}"
        before = bits(x).clone()
        if x.dim() == 0 or x.shape[-1] != 2:
            stats["not_last2"] += 1
            assert _torch_view_as_complex(torch, x) is None, where
            for copy in (None, False, True):
                with pytest.raises(ValueError, match="size 2"):
                    pl.view_as_complex(x, copy=copy)
            continue
        ok, offenders = _viewable(x)
        tz = _torch_view_as_complex(torch, x)
        expected = _expected_complex_bits(torch, x)
        if tz is not None:
            stats["torch_ok"] += 1
            if any(x.shape[d] == 1 and x.stride(d) % 2 for d in range(x.dim() - 1)):
                stats["torch_ok_size1_odd"] += 1  # pytorch#169780's behaviour
            assert ok, f"{where}: torch views it but the documented rule says it is not viewable"
            z = pl.view_as_complex(x, copy=False)
            assert z.dtype == tz.dtype and z.shape == tz.shape, where
            assert z.stride() == tz.stride(), f"{where}: torch {tz.stride()} vs pylayout {z.stride()}"
            assert z.data_ptr() == tz.data_ptr(), where
        elif ok:
            stats["viewable_torch_refused"] += 1
            if x.numel() == 0:
                stats["viewable_empty"] += 1
            elif any(x.shape[d] == 1 and x.stride(d) % 2 for d in range(x.dim() - 1)):
                stats["viewable_size1_odd"] += 1
        if ok:
            stats["view_checked"] += 1
            for copy in (None, False):
                z = pl.view_as_complex(x, copy=copy)
                assert isinstance(z, torch.Tensor) and z.dtype == _complex_of(torch, dtype), where
                assert tuple(z.shape) == tuple(x.shape[:-1]), where
                assert z.stride() == tuple(s // 2 for s in x.stride()[:-1]), where
                if x.numel() or x.storage_offset() % 2 == 0:
                    assert z.data_ptr() == x.data_ptr(), f"{where}: copy={copy} copied a viewable tensor"
                else:  # torch's complex views need an even offset: an empty view may start one float earlier
                    assert z.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(), \
                        f"{where}: copy={copy} is not a view of x's storage"
                assert torch.equal(bits(z), expected), f"{where}: wrong values"
        else:
            stats["copied"] += 1
            if not offenders:
                stats["align_only"] += 1
            z = pl.view_as_complex(x)
            assert z.data_ptr() != x.data_ptr(), where
            assert z.is_contiguous() and tuple(z.shape) == tuple(x.shape[:-1]), where
            assert torch.equal(bits(z), expected), f"{where}: packed copy has wrong bits"
            with pytest.raises(ValueError) as ei:
                pl.view_as_complex(x, copy=False)
            msg = str(ei.value)
            if offenders:
                named = [int(m) for m in _re.findall(r"\bdim (\d+)", msg)]
                assert named and named[0] in offenders, f"{where}: message {msg!r} should name one of {offenders}"
            else:
                assert _re.search(r"align|address|offset", msg), f"{where}: {msg!r}"
        c = pl.view_as_complex(x, copy=True)
        assert c.dtype == _complex_of(torch, dtype) and tuple(c.shape) == tuple(x.shape[:-1]), where
        if x.numel():
            assert c.data_ptr() != x.data_ptr(), f"{where}: copy=True returned a view"
        assert c.is_contiguous(), where
        assert torch.equal(bits(c), expected), f"{where}: copy=True has wrong bits"
        assert torch.equal(bits(x), before), f"{where}: the input was modified"
    # The generator must reach every interesting case (else this test proves little).
    assert stats["torch_ok"] > 500, stats
    assert stats["viewable_torch_refused"] > 30, stats
    assert stats["viewable_empty"] > 5, stats
    assert stats["copied"] > 300, stats
    assert stats["align_only"] > 30, stats
    assert stats["not_last2"] > 30, stats
    # Size-1 dims with odd strides were exercised: torch with pytorch#169780 accepts them
    # (torch_ok_size1_odd > 0, and pylayout matched its strides above), older
    # torch refuses them (viewable_size1_odd > 0, pylayout still zero-copy).
    assert stats["torch_ok_size1_odd"] + stats["viewable_size1_odd"] > 100, stats
    branch = "pytorch#169780: torch accepts" if stats["torch_ok_size1_odd"] else "older torch refuses"
    assert not (stats["torch_ok_size1_odd"] and stats["viewable_size1_odd"]), f"mixed torch behaviour {stats}"
    print(f"size-1 odd strides, {branch}")
    print(f"torch {torch.__version__}: {stats}")


def test_view_as_complex_torch_rejects_what_pylayout_rejects(torch):
    """Targeted cases, each with the dim the error must name."""
    base = torch.arange(48, dtype=torch.float32)
    cases = [
        (base.as_strided((4, 2, 2), (6, 3, 1)), 1),  # odd stride on dim 1
        (base.as_strided((3, 2, 2), (8, 2, 0)), 2),  # (re, im) stride 0
        (base.as_strided((3, 2), (3, 1)), 0),  # odd stride on dim 0
        (base.as_strided((3, 2), (4, 2)), 1),  # (re, im) stride 2
        (base.as_strided((2, 1, 3, 2), (12, 5, 3, 1)), 2),  # size-1 dim 1 is fine, dim 2 is not
    ]
    for x, dim in cases:
        assert x.shape[-1] == 2
        assert _torch_view_as_complex(torch, x) is None
        with pytest.raises(ValueError, match=rf"\bdim {dim}\b"):
            pl.view_as_complex(x, copy=False)
    # Odd storage offset: torch refuses, pylayout copies (no dim to name).
    x = base[1:9].view(4, 2)
    assert _torch_view_as_complex(torch, x) is None
    with pytest.raises(ValueError):
        pl.view_as_complex(x, copy=False)
    z = pl.view_as_complex(x)
    assert z.data_ptr() != x.data_ptr() and torch.equal(z, torch.complex(x[:, 0], x[:, 1]))


def test_view_as_complex_wrong_dtype_and_shape(torch, np):
    for bad in (torch.zeros(3, 2, dtype=torch.bfloat16), torch.zeros(3, 2, dtype=torch.int32),
                torch.zeros(3, 2, dtype=torch.complex64), np.zeros((3, 2), np.int64)):
        for copy in (None, False, True):
            with pytest.raises(TypeError, match="float16, float32 or float64"):
                pl.view_as_complex(bad, copy=copy)
    for bad in (torch.zeros(()), torch.zeros(3), torch.zeros(2, 3), np.zeros((4, 1))):
        for copy in (None, False, True):
            with pytest.raises(ValueError, match="size 2"):
                pl.view_as_complex(bad, copy=copy)


# ------------------------------------------------------ differential: NumPy


def _np_bits(np, a):
    return a.view({2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize])


def _np_random(np, shape, dtype, rng):
    n = _prod(shape)
    ib = {2: np.int16, 4: np.int32, 8: np.int64}[np.dtype(dtype).itemsize]
    info = np.iinfo(ib)
    gen = np.random.default_rng(rng.randrange(1 << 30))
    a = gen.integers(info.min, info.max, size=max(n, 1), dtype=ib, endpoint=True)[:n]
    bits = np.dtype(dtype).itemsize * 8
    for v in _SPECIAL_BITS[bits]:
        if n and rng.random() < 0.7:
            a[rng.randrange(n)] = _signed(v, bits)
    return a.view(dtype).reshape(shape)


def test_view_as_complex_numpy_differential(np):
    """NumPy (byte strides, negative strides) against the rule and ndarray.view."""
    rng = random.Random(77)
    seen = dict(view=0, neg=0, copy=0, numpy_view=0, half=0)
    for i in range(900):
        dtype = (np.float16, np.float32, np.float64)[i % 3]
        k = rng.randint(0, 3)
        sizes = _dims(rng, k)
        last_parent = rng.choice([2, 2, 2, 3, 4])
        parent = [s * 2 + 1 for s in sizes]
        a = _np_random(np, parent + [last_parent], dtype, rng)
        idx = []
        for s in sizes:
            step = rng.choice([1, 2, 3, -1, -2])
            if s == 0:
                idx.append(slice(0, 0))
            elif step > 0:
                st = rng.randint(0, 1)
                idx.append(slice(st, st + (s - 1) * step + 1, step))
            else:
                st = 2 * s - rng.randint(0, 1)
                idx.append(slice(st, st + (s - 1) * step - 1 if st + (s - 1) * step - 1 >= 0 else None, step))
        o = rng.randint(0, last_parent - 2)
        idx.append(slice(o, o + 2))
        a = a[tuple(idx)]
        perm = list(range(k))
        rng.shuffle(perm)
        a = a.transpose(*perm, k)
        assert a.shape[-1] == 2
        item = a.dtype.itemsize
        where = f"#{i} {a.dtype} shape={a.shape} strides={a.strides}"
        nonempty = a.size > 0
        viewable = (not nonempty) or (
            a.strides[-1] == item and a.ctypes.data % (2 * item) == 0
            and all(s == 1 or st % (2 * item) == 0 for s, st in zip(a.shape[:-1], a.strides[:-1])))
        expect_re, expect_im = _np_bits(np, a[..., 0]), _np_bits(np, a[..., 1])
        z = pl.view_as_complex(a)
        if dtype is np.float16:
            seen["half"] += 1
            assert isinstance(z, pl.Tensor) and z.dtype == "complex32", where
            if viewable and nonempty:
                assert _addr(z) == a.ctypes.data, where
            continue
        assert isinstance(z, np.ndarray) and z.shape == a.shape[:-1], where
        assert z.dtype == {np.float32: np.complex64, np.float64: np.complex128}[dtype], where
        assert np.array_equal(_np_bits(np, z.real), expect_re) and np.array_equal(_np_bits(np, z.imag), expect_im), \
            where
        if viewable and nonempty:
            seen["view"] += 1
            seen["neg"] += any(s < 0 for s in a.strides)
            assert z.ctypes.data == a.ctypes.data, f"{where}: not zero-copy"
            for d in range(a.ndim - 1):
                if a.shape[d] != 1:
                    assert z.strides[d] == a.strides[d], where  # same bytes: halved elements, doubled size
            if a.strides[-1] == item:
                # NumPy's own view of the same memory (needs only a contiguous last axis).
                nv = a.view(z.dtype)[..., 0]
                seen["numpy_view"] += 1
                assert nv.ctypes.data == z.ctypes.data and np.array_equal(_np_bits(np, nv.real), expect_re), where
                assert all(nv.strides[d] == z.strides[d] for d in range(z.ndim) if z.shape[d] != 1), where
        elif nonempty:
            seen["copy"] += 1
            assert z.ctypes.data != a.ctypes.data and z.flags.c_contiguous, where
            with pytest.raises(ValueError):
                pl.view_as_complex(a, copy=False)
    assert seen["view"] > 100 and seen["neg"] > 20 and seen["copy"] > 50 and seen["numpy_view"] > 100, seen


def test_float16_numpy_gives_pylayout_complex32(np, torch):
    a = _np_random(np, (5, 2), np.float16, random.Random(3))
    z = pl.view_as_complex(a)
    assert isinstance(z, pl.Tensor) and z.dtype == "complex32" and z.shape == (5,)
    assert _addr(z) == a.ctypes.data
    t = torch.from_dlpack(z)
    assert t.dtype == torch.complex32 and t.data_ptr() == a.ctypes.data
    assert np.array_equal(torch.view_as_real(t).view(torch.int16).numpy(), a.view(np.int16))


# ----------------------------------------------------------- read-only


def test_views_of_read_only_arrays_are_read_only(np):
    a = np.arange(12, dtype=np.float32).reshape(6, 2)
    a.flags.writeable = False
    z = pl.view_as_complex(a)
    assert z.ctypes.data == a.ctypes.data and not z.flags.writeable
    assert not pl.view_as_complex(a, copy=False).flags.writeable
    r = pl.view_as_real(z)
    assert not r.flags.writeable
    re, im = pl.unpack_complex(z, copy=False)
    assert not re.flags.writeable and not im.flags.writeable
    assert not pl.canonicalize(a).flags.writeable
    h = np.zeros((4, 2), np.float16)
    h.flags.writeable = False
    zh = pl.view_as_complex(h)
    assert isinstance(zh, pl.Tensor) and zh.readonly
    # Copies are new memory and writeable.
    assert pl.view_as_complex(a, copy=True).flags.writeable
    assert pl.view_as_complex(a[::3 - 2, ::-1]).flags.writeable  # last stride -1: a packed copy
    re, im = pl.unpack_complex(z)
    assert re.flags.writeable and im.flags.writeable


def test_pack_into_read_only_out_raises(np):
    out = np.full(4, 7 + 7j, np.complex64)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        pl.pack_complex(np.ones(4, np.float32), np.ones(4, np.float32), out=out)
    assert (out == 7 + 7j).all()


# ---------------------------------------------------------- view_as_real


def test_view_as_real_matches_torch(torch):
    n = 0
    for i, cdt in enumerate((torch.complex32, torch.complex64, torch.complex128)):
        for where, z in torch_layouts(torch, 300, seed=500 + i, dtype=cdt):
            tr = torch.view_as_real(z)
            r = pl.view_as_real(z)
            where = f"{cdt} {where}"
            assert r.dtype == tr.dtype == _real_of(torch, cdt), where
            assert r.shape == tr.shape and r.stride() == tr.stride(), f"{where}: {r.stride()} vs {tr.stride()}"
            assert r.data_ptr() == tr.data_ptr() == z.data_ptr(), where
            n += 1
    assert n == 900
    z = _fill_storage(torch, torch.empty(5, 4, dtype=torch.complex64), 1).t()[1:, ::2]
    r = pl.view_as_real(z)
    r[0, 0, 1] = 5.0
    assert z[0, 0].imag.item() == 5.0


def test_view_as_real_numpy(np):
    rng = random.Random(9)
    for i in range(200):
        dtype = (np.complex64, np.complex128)[i % 2]
        shape = _dims(rng, rng.randint(0, 4))
        base = _np_random(np, [s * 2 + 1 for s in shape] + [2], {np.complex64: np.float32,
                                                                 np.complex128: np.float64}[dtype], rng)
        a = base.view(dtype).squeeze(-1)
        if a.ndim:
            a = a[tuple(slice(None, None, rng.choice([1, 2, -1, -2])) for _ in shape)]
        if a.ndim > 1:
            a = a.transpose(*rng.sample(range(a.ndim), a.ndim))
        r = pl.view_as_real(a)
        assert isinstance(r, np.ndarray) and r.shape == a.shape + (2,)
        expected = np.stack([a.real, a.imag], -1)
        assert np.array_equal(_np_bits(np, r), _np_bits(np, expected))
        if a.size:
            assert r.ctypes.data == a.ctypes.data
            half = a.dtype.itemsize // 2
            assert r.strides == a.strides + (half,)


def test_view_as_real_rejects_real_and_conj(torch, np):
    for bad in (torch.zeros(3), np.zeros(3, np.float32), torch.zeros(3, dtype=torch.int64)):
        with pytest.raises(TypeError, match="complex"):
            pl.view_as_real(bad)
    with pytest.raises(BufferError, match="conj"):
        pl.view_as_real(torch.ones(3, dtype=torch.complex64).conj())


# ------------------------------------------------------- pack / unpack


def _pack_inputs(torch, rng, dtype, seed):
    _, re = torch_layouts(torch, 1, seed=seed, dtype=dtype)[0]
    _fill_storage(torch, re, seed)
    shape = tuple(re.shape)
    how = rng.choice(["contiguous", "fortran", "broadcast", "same"])
    if how == "fortran" and len(shape) > 1:
        im = _random_bits(torch, _prod(shape), dtype, seed + 1).view(*shape[::-1]).permute(
            *range(len(shape) - 1, -1, -1))
    elif how == "broadcast" and len(shape) and _prod(shape):
        d = rng.randrange(len(shape))
        s1 = list(shape)
        s1[d] = 1
        im = _random_bits(torch, _prod(s1), dtype, seed + 1).reshape(s1).expand(*shape)
    elif how == "same":
        im = re
    else:
        im = _random_bits(torch, _prod(shape), dtype, seed + 1).reshape(shape)
    return re, im


def test_pack_complex_differential(torch):
    rng = random.Random(4242)
    n_out = 0
    for i in range(1500):
        dtype = (torch.float16, torch.float32, torch.float64)[i % 3]
        cdt = _complex_of(torch, dtype)
        re, im = _pack_inputs(torch, rng, dtype, seed=10_000 + i)
        where = f"#{i} {dtype} shape={tuple(re.shape)} re.strides={re.stride()} im.strides={im.stride()}"
        expected = bits(torch.complex(re.contiguous(), im.contiguous()))
        re_before, im_before = bits(re).clone(), bits(im).clone()
        z = pl.pack_complex(re, im)
        assert isinstance(z, torch.Tensor) and z.dtype == cdt and z.shape == re.shape, where
        assert z.is_contiguous(), where
        assert torch.equal(bits(z), expected), f"{where}: wrong bits"
        # out= of arbitrary strides, inside a sentinel-filled parent.
        shape = tuple(re.shape)
        kind = rng.choice(["contiguous", "transposed", "gaps"])
        if kind == "transposed" and len(shape) > 1:
            parent = torch.empty(shape[::-1], dtype=cdt)
            out = parent.permute(*range(len(shape) - 1, -1, -1))
        elif kind == "gaps":
            parent = torch.empty([s * 2 + 1 for s in shape], dtype=cdt)
            out = parent[tuple(slice(1, None, 2) for _ in shape)] if shape else parent
            if len(shape) > 1:
                perm = rng.sample(range(len(shape)), len(shape))
                parent = torch.empty([s * 2 + 1 for s in (shape[p] for p in perm)], dtype=cdt)
                inv = inverse_permutation(perm)
                out = parent[tuple(slice(1, None, 2) for _ in shape)].permute(*inv)
        else:
            parent = torch.empty(shape, dtype=cdt)
            out = parent
        assert tuple(out.shape) == shape
        fill = 0x5A5A if cdt == torch.complex32 else -0x5A5A5A5A
        pb = bits(parent).flatten()  # a view: parent is contiguous
        pb.fill_(fill)
        res = pl.pack_complex(re, im, out=out)
        assert res is out, where
        assert torch.equal(bits(out), expected), f"{where}: out={kind} {out.stride()} wrong bits"
        # Nothing outside out's elements changed: blank out's elements, the rest must be the sentinel.
        rest = pb.clone()
        rest.as_strided(tuple(out.shape) + (2,), tuple(2 * st for st in out.stride()) + (1,),
                        2 * out.storage_offset()).fill_(fill)
        assert bool((rest == fill).all()), f"{where}: out={kind} wrote outside out"
        n_out += 1
        assert torch.equal(bits(re), re_before) and torch.equal(bits(im), im_before), where
    assert n_out == 1500


def test_unpack_complex_differential(torch):
    n = 0
    for i, cdt in enumerate((torch.complex32, torch.complex64, torch.complex128)):
        rdt = _real_of(torch, cdt)
        isz = torch.finfo(rdt).bits // 8
        for where, z in torch_layouts(torch, 250, seed=900 + i, dtype=cdt):
            _fill_storage(torch, z, 77 * i + n)
            where = f"{cdt} {where}"
            tr = torch.view_as_real(z)
            exp_re, exp_im = bits(tr[..., 0]), bits(tr[..., 1])
            re, im = pl.unpack_complex(z)
            for p, e in ((re, exp_re), (im, exp_im)):
                assert isinstance(p, torch.Tensor) and p.dtype == rdt and p.shape == z.shape, where
                assert p.is_contiguous() and torch.equal(bits(p), e), where
                if z.numel():
                    assert p.data_ptr() != z.data_ptr(), where
            re_v, im_v = pl.unpack_complex(z, copy=False)
            assert re_v.stride() == im_v.stride() == tuple(2 * s for s in z.stride()), where
            assert torch.equal(bits(re_v), exp_re) and torch.equal(bits(im_v), exp_im), where
            if z.numel():
                assert re_v.data_ptr() == z.data_ptr(), where
                assert im_v.data_ptr() == z.data_ptr() + isz, where
            # unpack into strided destinations via out= is C-only; pack back round-trips.
            back = pl.pack_complex(re, im)
            assert same_bits(back, z.contiguous()), where
            n += 1
    assert n == 750
    z = torch.zeros(3, 4, dtype=torch.complex64)
    re_v, im_v = pl.unpack_complex(z, copy=False)
    re_v[1, 2] = 3.0
    im_v[2, 3] = -4.0
    assert z[1, 2] == 3 and z[2, 3] == -4j


def test_pack_unpack_numpy(np, torch):
    rng = random.Random(5)
    for dtype, cdt in ((np.float32, np.complex64), (np.float64, np.complex128)):
        re = _np_random(np, (4, 6), dtype, rng).T  # Fortran-ordered
        im = np.broadcast_to(_np_random(np, (4,), dtype, rng), (6, 4))  # stride 0 on dim 0
        z = pl.pack_complex(re, im)
        assert isinstance(z, np.ndarray) and z.dtype == cdt and z.shape == (6, 4) and z.flags.c_contiguous
        assert np.array_equal(_np_bits(np, z.real), _np_bits(np, re))
        assert np.array_equal(_np_bits(np, z.imag), _np_bits(np, np.ascontiguousarray(im)))
        out = np.zeros((4, 6), cdt).T
        assert pl.pack_complex(re, im, out=out) is out
        assert np.array_equal(_np_bits(np, np.stack([out.real, out.imag], -1)),
                              _np_bits(np, np.stack([z.real, z.imag], -1)))
        r2, i2 = pl.unpack_complex(z[::-1, ::2])
        assert isinstance(r2, np.ndarray) and r2.dtype == dtype and r2.flags.c_contiguous
        assert np.array_equal(_np_bits(np, r2), _np_bits(np, z[::-1, ::2].real))
        assert np.array_equal(_np_bits(np, i2), _np_bits(np, z[::-1, ::2].imag))
        rv, iv = pl.unpack_complex(z[::-1, ::2], copy=False)
        assert rv.ctypes.data == z[::-1, ::2].ctypes.data
        assert iv.ctypes.data == z[::-1, ::2].ctypes.data + np.dtype(dtype).itemsize
        assert rv.strides == z[::-1, ::2].strides
    # float16 NumPy: there is no NumPy complex32, so a pylayout.Tensor comes back.
    h_re, h_im = _np_random(np, (3,), np.float16, rng), _np_random(np, (3,), np.float16, rng)
    zh = pl.pack_complex(h_re, h_im)
    assert isinstance(zh, pl.Tensor) and zh.dtype == "complex32"
    t = torch.view_as_real(torch.from_dlpack(zh)).view(torch.int16).numpy()
    assert np.array_equal(t[:, 0], h_re.view(np.int16)) and np.array_equal(t[:, 1], h_im.view(np.int16))


def test_pack_complex_errors_write_nothing(torch, np):
    def fresh_out(shape=(3, 4)):
        return torch.full(shape, complex(7.0, -7.0), dtype=torch.complex64)

    def untouched(out):
        return bool((out == complex(7.0, -7.0)).all())

    f32 = torch.ones(3, 4)
    for bad in (torch.ones(3, 4, dtype=torch.bfloat16), torch.ones(3, 4, dtype=torch.int32)):
        with pytest.raises(TypeError):
            pl.pack_complex(bad, bad)
        out = fresh_out()
        with pytest.raises(TypeError):
            pl.pack_complex(bad, bad, out=out)
        assert untouched(out)
    with pytest.raises(TypeError):
        pl.pack_complex(f32, torch.ones(3, 4, dtype=torch.float64))  # im of another dtype
    with pytest.raises(TypeError, match="complex128"):
        pl.pack_complex(f32, f32, out=torch.zeros(3, 4, dtype=torch.complex128))  # out of another dtype
    with pytest.raises(TypeError):
        pl.pack_complex(f32, f32, out=torch.zeros(3, 4))  # real out
    # shape mismatch
    with pytest.raises(ValueError):
        pl.pack_complex(f32, torch.ones(4, 3))
    with pytest.raises(ValueError):
        pl.pack_complex(f32, torch.ones(3, 4, 1))
    out = fresh_out((4, 3))
    with pytest.raises(ValueError):
        pl.pack_complex(f32, f32, out=out)
    assert untouched(out)
    # out overlapping re (re is a view into out): ValueError, out untouched.
    out = fresh_out()
    re_alias = torch.view_as_real(out)[..., 0]
    with pytest.raises(ValueError, match="overlap"):
        pl.pack_complex(re_alias, torch.zeros(3, 4), out=out)
    assert untouched(out)
    out = fresh_out()
    with pytest.raises(ValueError, match="overlap"):
        pl.pack_complex(torch.zeros(3, 4), torch.view_as_real(out)[..., 1], out=out)
    assert untouched(out)
    # out overlapping itself (broadcast)
    base = fresh_out((1, 4))
    with pytest.raises(ValueError):
        pl.pack_complex(f32, f32, out=base.expand(3, 4))
    assert untouched(base)
    # read-only out (NumPy): ValueError, untouched
    o = np.full((3, 4), 7 - 7j, np.complex64)
    o.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        pl.pack_complex(np.ones((3, 4), np.float32), np.ones((3, 4), np.float32), out=o)
    assert (o == 7 - 7j).all()


def test_unpack_complex_errors(torch):
    for bad in (torch.ones(3), torch.ones(3, dtype=torch.bfloat16), torch.ones(3, dtype=torch.int16)):
        for copy in (True, False):
            with pytest.raises(TypeError, match="complex"):
                pl.unpack_complex(bad, copy=copy)


# ----------------------------------------------------------- canonicalize


def _expected_canonical(shape, strides):
    """pylayout.h: a size-1 dim takes the extent of the dims inside it,
    max(|stride| * size) over them, 1 when innermost."""
    out = list(strides)
    for d in reversed(range(len(shape))):  # inner size-1 dims first: their new strides count
        if shape[d] == 1:
            out[d] = max([1] + [abs(out[k]) * shape[k] for k in range(d + 1, len(shape))])
    return tuple(out)


def test_canonicalize_torch_layouts(torch):
    n_changed = 0
    for where, x in torch_layouts(torch, 1500, seed=31337):
        c = pl.canonicalize(x)
        assert isinstance(c, torch.Tensor) and c.shape == x.shape and c.dtype == x.dtype, where
        assert c.data_ptr() == x.data_ptr(), f"{where}: canonicalize copied"
        for d in range(x.dim()):
            if x.shape[d] != 1:
                assert c.stride(d) == x.stride(d), f"{where}: dim {d} is not size 1 but its stride changed"
        assert c.stride() == _expected_canonical(tuple(x.shape), x.stride()), f"{where}: {c.stride()}"
        if x.numel() and x.is_contiguous():
            assert c.stride() == torch.empty(x.shape).stride(), where
        n_changed += c.stride() != x.stride()
    assert n_changed > 100


def test_canonicalize_numpy(np):
    a = np.zeros((4, 2, 1), np.float32).transpose(0, 2, 1)
    assert pl.canonicalize(a).strides == (8, 8, 4)
    b = np.zeros((5, 3, 4), np.float64)[::-2, 1:2, ::-1]  # negative strides, a size-1 middle dim
    c = pl.canonicalize(b)
    assert c.ctypes.data == b.ctypes.data and c.strides == (b.strides[0], 4 * 8, b.strides[2])
    assert np.shares_memory(c, b)
    assert pl.canonicalize(np.zeros((1, 1, 1), np.int8)[:, :, :]).strides == (1, 1, 1)


def test_canonicalize_makes_viewable_tensors_acceptable_to_strict_torch(torch):
    """canonicalize exists so that stride-checking code (torch's
    view_as_complex before pytorch#169780: every stride but the last even) accepts a viewable
    tensor.  Whenever pylayout views x zero-copy, canonicalize(x) must have
    even strides in every dim but the last."""
    rng = random.Random(99)
    checked = 0
    for i in range(1500):
        desc, x = _gen_layout(torch, rng, torch.float32, seed=i)
        if x.dim() == 0 or x.shape[-1] != 2 or x.numel() == 0 or not _viewable(x)[0]:
            continue
        c = pl.canonicalize(x)
        odd = [d for d in range(x.dim() - 1) if c.stride(d) % 2]
        assert not odd, f"#{i} {desc} shape={tuple(x.shape)} strides={x.stride()} -> {c.stride()}: odd dims {odd}"
        tz = torch.view_as_complex(c)
        assert tz.data_ptr() == x.data_ptr()
        checked += 1
    assert checked > 300


def test_canonicalize_after_broadcast_dim(torch):
    """A size-1 dim outside a broadcast (stride 0) dim: (1, 3, 2) strides (7, 0, 1).

    The view is valid (pylayout views it); the 'compact layout of the inner
    dims' (3, 2) gives stride 6 to dim 0, which strict stride checks accept."""
    x = torch.zeros(1, 1, 2).as_strided((1, 3, 2), (7, 0, 1))
    assert pl.view_as_complex(x, copy=False).data_ptr() == x.data_ptr()
    c = pl.canonicalize(x)
    assert c.stride(0) % 2 == 0, f"canonical strides {c.stride()}: dim 0 odd"


# ------------------------------------------------------------- non-CPU

F32, C64 = (_producers.kDLFloat, 32, 1), (_producers.kDLComplex, 64, 1)
_DEVICE_RE = r"(?i)device type 2|cuda"


def _cuda(shape, strides, dtype):
    """A crafted CUDA tensor (ctypes producer), imported as a pylayout.Tensor."""
    rec = _producers.make_managed(shape, strides, dtype=dtype, device=(_producers.kDLCUDA, 0))
    return rec, pl.from_dlpack(rec.capsule())


def test_non_cpu_views_are_metadata_only():
    rec, x = _cuda((3, 4, 2), (8, 2, 1), F32)
    z = pl.view_as_complex(x)
    assert isinstance(z, pl.Tensor) and z.device == (_producers.kDLCUDA, 0)
    assert z.dtype == "complex64" and z.shape == (3, 4) and z.strides == (4, 1)
    assert _addr(z) == rec.data_ptr
    assert _addr(pl.view_as_complex(x, copy=False)) == rec.data_ptr
    r = pl.view_as_real(z)
    assert r.device == (_producers.kDLCUDA, 0) and r.shape == (3, 4, 2) and r.strides == (8, 2, 1)
    assert _addr(r) == rec.data_ptr and r.dtype == "float32"
    c = pl.canonicalize(pl.view_as_complex(_cuda((3, 1, 2), (2, 1, 1), F32)[1]))
    assert c.strides == (1, 1) and c.device == (_producers.kDLCUDA, 0)
    re, im = pl.unpack_complex(z, copy=False)
    assert re.device == im.device == (_producers.kDLCUDA, 0) and re.strides == im.strides == (8, 2)
    assert _addr(re) == rec.data_ptr and _addr(im) == rec.data_ptr + 4
    del x, z, r, re, im
    gc.collect()
    assert rec.deleted == 1, "the views must keep the producer's tensor alive, then free it exactly once"


def test_non_cpu_copies_raise_naming_device():
    _, x = _cuda((3, 2), (3, 1), F32)  # not viewable: needs a copy
    with pytest.raises(ValueError, match=r"\bdim 0\b"):
        pl.view_as_complex(x, copy=False)
    for copy in (None, True):
        with pytest.raises(BufferError, match=_DEVICE_RE):
            pl.view_as_complex(x, copy=copy)
    _, ok = _cuda((3, 2), (2, 1), F32)
    with pytest.raises(BufferError, match=_DEVICE_RE):
        pl.view_as_complex(ok, copy=True)
    _, zc = _cuda((5,), (1,), C64)
    with pytest.raises(BufferError, match=_DEVICE_RE):
        pl.unpack_complex(zc)
    _, a = _cuda((4,), (1,), F32)
    _, b = _cuda((4,), (1,), F32)
    with pytest.raises(BufferError, match=_DEVICE_RE):
        pl.pack_complex(a, b)
    _, out = _cuda((4,), (1,), C64)
    with pytest.raises(BufferError, match=_DEVICE_RE):
        pl.pack_complex(pl.empty((4,), "float32"), pl.empty((4,), "float32"), out=out)


def test_device_error_survives_the_producers_deleter():
    """Raw capsules: pylayout owns the only reference, so the producer's
    deleter runs inside the failing call.  The BufferError must still reach
    the caller (a deleter may run Python code, which must not see, or
    clear, a pending exception)."""
    rec, cap = _producers.make_managed((3, 2), (3, 1), device=(_producers.kDLCUDA, 0)), None
    cap = rec.capsule()
    with pytest.raises(BufferError, match=_DEVICE_RE):
        pl.view_as_complex(cap)
    recs = [_producers.make_managed((4,), (1,), device=(_producers.kDLCUDA, 0)) for _ in range(2)]
    with pytest.raises(BufferError, match=_DEVICE_RE):
        pl.pack_complex(recs[0].capsule(), recs[1].capsule())
    gc.collect()
    assert rec.deleted == 1 and all(r.deleted == 1 for r in recs)
