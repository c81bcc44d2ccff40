"""Layout queries (is_contiguous, suggest_format, is_dense) against torch and NumPy.

N_LAYOUTS seeded layouts from conftest.torch_layouts (random shapes up to 6-D
with size-0/size-1 dims, permutations, stepped slices, expands, arbitrary
as_strided strides, channels_last / channels_last_3d, and the ambiguous
C == 1, H == W == 1, N111 cases).  Every query is asked through three routes:
the torch tensor itself (C exchange API, metadata peek), a pylayout.Tensor
imported from it, and (where NumPy can hold it) a NumPy array of the same
memory.

Oracles for suggest_format:
  * torch._prims_common.suggest_memory_format (Python);
  * c10's Tensor::suggest_memory_format (C++), observed through
    upsample_nearest{2d,3d}, whose output is allocated in
    input.suggest_memory_format() (not defined for inputs with a size-0
    spatial or channel dim; those layouts use the Python oracle only);
  * torch.empty_like(x) (preserve_format) for non-dense x.  In torch 2.13 it
    does NOT use suggest_memory_format for non-dense strided inputs but
    infer_dense_strides (it keeps x's stride permutation), so it disagrees
    with both suggest oracles on many layouts; test_empty_like_oracle records
    that disagreement (a warning with counts and examples) rather than holding
    pylayout to it.
"""
from __future__ import annotations


import pytest

import pylayout as pl
from conftest import torch_layouts

N_LAYOUTS = 12000
SEED = 20240611

TORCH_FORMATS = ("contiguous", "channels_last", "channels_last_3d")


@pytest.fixture(scope="module")
def layouts(torch):
    return torch_layouts(torch, N_LAYOUTS, SEED)


@pytest.fixture(scope="module")
def fmt_objs(torch):
    return {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last,
            "channels_last_3d": torch.channels_last_3d}


def _report(bad, what):
    assert not bad, f"{len(bad)} layouts where {what}; first ones:\n" + "\n".join(map(str, bad[:12]))


def test_generator_covers_the_cases(torch, layouts):
    """The generated set really contains the layouts the queries must get right."""
    descs = [d for d, _ in layouts]
    shapes = [tuple(x.shape) for _, x in layouts]
    assert len(layouts) >= 10000
    assert sum(1 for s in shapes if 0 in s) > 300, "size-0 dims"
    assert sum(1 for s in shapes if len(s) == 0) > 50, "0-d tensors"
    assert sum(1 for s in shapes if len(s) == 6) > 200, "6-D tensors"
    assert sum(1 for _, x in layouts if 0 in x.stride() and x.numel() > 1) > 300, "expanded (stride 0)"
    assert sum(1 for _, x in layouts if x.storage_offset() > 0) > 1000, "storage offsets"
    assert sum(1 for _, x in layouts if x.ndim == 4 and x.is_contiguous(memory_format=torch.channels_last)
               and not x.is_contiguous()) > 300, "channels_last"
    assert sum(1 for d in descs if "ambiguous:N111" in d) > 200
    assert sum(1 for d in descs if "ambiguous:C1" in d) > 100
    assert sum(1 for d in descs if "ambiguous:HW1" in d) > 100


def test_is_contiguous_matches_torch(torch, layouts, fmt_objs):
    bad = []
    for desc, x in layouts:
        t = pl.from_dlpack(x)
        for name, obj in fmt_objs.items():
            want = x.is_contiguous(memory_format=obj)
            got = (pl.is_contiguous(x, name), pl.is_contiguous(x, obj), pl.is_contiguous(t, name),
                   pl.is_contiguous(t, obj))
            if any(g is not want for g in got):
                bad.append((desc, name, "torch", want, "pylayout(x,str), (x,obj), (t,str), (t,obj)", got))
        want = x.is_contiguous()
        if pl.is_contiguous(x) is not want or pl.is_contiguous(t) is not want:
            bad.append((desc, "default format", want))
    _report(bad, "pylayout.is_contiguous differs from torch.Tensor.is_contiguous(memory_format=...)")


def test_channels_last_on_wrong_rank_is_false_like_torch(torch):
    # torch answers False (no error) for channels_last on non-4-D and channels_last_3d on non-5-D.
    for shape in [(), (3,), (2, 3), (2, 3, 4), (2, 3, 4, 5, 6), (1, 1, 1, 1, 1, 1)]:
        x = torch.zeros(shape)
        assert x.is_contiguous(memory_format=torch.channels_last) is False
        assert pl.is_contiguous(x, "channels_last") is False
        assert pl.is_contiguous(x, torch.channels_last) is False
    for shape in [(), (3,), (2, 3), (2, 3, 4), (2, 3, 4, 5), (1, 1, 1, 1), (1, 1, 1, 1, 1, 1)]:
        x = torch.zeros(shape)
        assert x.is_contiguous(memory_format=torch.channels_last_3d) is False
        assert pl.is_contiguous(x, "channels_last_3d") is False
        assert pl.is_contiguous(x, torch.channels_last_3d) is False


def test_c_and_fortran_match_numpy_flags(torch, np, layouts):
    bad = []
    checked = 0
    for desc, x in layouts:
        a = x.numpy()  # same memory, same strides (bytes)
        checked += 1
        t = pl.from_dlpack(a)
        got_f = (pl.is_contiguous(a, "fortran"), pl.is_contiguous(a, "F"), pl.is_contiguous(t, "fortran"),
                 pl.is_contiguous(x, "fortran"))
        if any(g is not bool(a.flags.f_contiguous) for g in got_f):
            bad.append((desc, "fortran", bool(a.flags.f_contiguous), got_f))
        got_c = (pl.is_contiguous(a), pl.is_contiguous(a, "C"), pl.is_contiguous(t, "contiguous"))
        if any(g is not bool(a.flags.c_contiguous) for g in got_c):
            bad.append((desc, "C", bool(a.flags.c_contiguous), got_c))
    assert checked >= 10000
    _report(bad, "pylayout's C/fortran answer differs from NumPy's flags")


def test_numpy_negative_strides_and_fortran(np):
    rng = np.random.default_rng(7)
    bad = []
    for i in range(2000):
        ndim = int(rng.integers(0, 6))
        shape = tuple(int(s) for s in rng.choice([0, 1, 1, 2, 3, 4], size=ndim))
        base = np.empty(shape, dtype=np.int16, order="F" if rng.random() < 0.5 else "C")
        idx = tuple(slice(None, None, int(rng.choice([1, -1, 2, -2]))) for _ in range(ndim))
        a = base[idx] if ndim else base
        if ndim > 1 and rng.random() < 0.5:
            a = a.transpose(rng.permutation(ndim))
        got = (pl.is_contiguous(a), pl.is_contiguous(a, "fortran"))
        want = (bool(a.flags.c_contiguous), bool(a.flags.f_contiguous))
        if got != want:
            bad.append((shape, a.strides, want, got))
    _report(bad, "pylayout's C/fortran answer differs from NumPy's flags (negative strides)")


def _cpp_suggest(torch, x, fmt_objs):
    """Formats whose dense strides equal those c10's suggest_memory_format picks, or None."""
    if x.ndim == 4:
        op = torch._C._nn.upsample_nearest2d
        names = ("contiguous", "channels_last")
    elif x.ndim == 5:
        op = torch._C._nn.upsample_nearest3d
        names = ("contiguous", "channels_last_3d")
    else:
        return {"contiguous"}  # suggest_memory_format is contiguous for every other rank
    try:
        y = op(x, list(x.shape[2:]))
    except RuntimeError:
        return None  # size-0 input: the op refuses it
    return {n for n in names if torch.empty(x.shape, memory_format=fmt_objs[n]).stride() == y.stride()}


def test_suggest_format_matches_torch(torch, layouts, fmt_objs):
    from torch._prims_common import suggest_memory_format

    names = {v: k for k, v in fmt_objs.items()}
    bad = []
    cpp_checked = 0
    for desc, x in layouts:
        got = pl.suggest_format(x)
        got_t = pl.suggest_format(pl.from_dlpack(x))
        py = names[suggest_memory_format(x)]
        if got != py or got_t != py:
            bad.append((desc, "python oracle", py, "pylayout", got, got_t))
        cpp = _cpp_suggest(torch, x, fmt_objs)
        if cpp is not None:
            cpp_checked += 1
            if got not in cpp:
                bad.append((desc, "c10 oracle (upsample)", cpp, "pylayout", got))
    assert cpp_checked > 0.8 * len(layouts)
    _report(bad, "pylayout.suggest_format differs from torch's suggest_memory_format")


def test_suggest_format_numpy_input(torch, np, layouts):
    from torch._prims_common import suggest_memory_format

    bad = []
    for desc, x in layouts[:3000]:
        want = str(suggest_memory_format(x)).replace("torch.", "").replace("contiguous_format", "contiguous")
        got = pl.suggest_format(x.numpy())
        if got != want:
            bad.append((desc, want, got))
    _report(bad, "pylayout.suggest_format(ndarray) differs from torch on the same memory")


def _empty_like_format(torch, x, fmt_objs):
    y = torch.empty_like(x)
    names = ["contiguous"] + {4: ["channels_last"], 5: ["channels_last_3d"]}.get(x.ndim, [])
    match = {n for n in names if torch.empty(x.shape, memory_format=fmt_objs[n]).stride() == y.stride()}
    return y, match


def test_is_dense_matches_empty_like(torch, layouts):
    """empty_like(x) keeps x's strides exactly iff x is non-overlapping and dense (c10)."""
    bad = []
    for desc, x in layouts:
        if x.numel() == 0:
            continue  # test_is_dense_empty_tensors
        want = torch.empty_like(x).stride() == x.stride()
        got = pl.is_dense(x)
        if got is not want:
            bad.append((desc, "torch dense", want, "pylayout", got))
    _report(bad, "pylayout.is_dense differs from torch's is_non_overlapping_and_dense")


def test_is_dense_empty_tensors(torch, layouts):
    """Empty tensors are dense, whatever their strides (pylayout.h says so, and c10 agrees:
    is_non_overlapping_and_dense is true whenever is_contiguous is, and every empty tensor is
    contiguous, so empty_like keeps their strides).

    Regression: pylayout_is_dense (src/layout.c) used to lack a numel == 0 shortcut, so
    e.g. pylayout.is_dense(torch.empty(0, 3)[:, ::2]) was False (strides (3, 2)).
    """
    bad = []
    n = 0
    for desc, x in layouts:
        if x.numel() != 0:
            continue
        n += 1
        assert torch.empty_like(x).stride() == x.stride()  # torch: dense
        if pl.is_dense(x) is not True:
            bad.append(desc)
    assert n > 300
    _report(bad, "pylayout.is_dense is False for an empty tensor (torch and pylayout.h: dense)")


def test_empty_like_oracle(torch, layouts, fmt_objs):
    """For non-dense x, compare pylayout.suggest_format with the format of torch.empty_like(x).

    torch has two oracles here, and on most non-dense layouts they differ by design:
    torch.empty_like (preserve_format) keeps the input's stride order
    (infer_dense_strides), suggest_memory_format tests the stride ordering.
    pylayout follows suggest_memory_format, so it must agree with empty_like
    wherever the two torch oracles agree with each other; the other layouts are
    not a disagreement with pylayout and are not reported.
    """
    from torch._prims_common import suggest_memory_format

    names = {v: k for k, v in fmt_objs.items()}
    non_dense = oracles_differ = 0
    bad = []
    for desc, x in layouts:
        y, match = _empty_like_format(torch, x, fmt_objs)
        if y.stride() == x.stride():
            continue  # dense: empty_like kept the strides, nothing to learn
        non_dense += 1
        py = names[suggest_memory_format(x)]
        got = pl.suggest_format(x)
        if py not in match:
            oracles_differ += 1
            continue
        if got not in match:
            bad.append((desc, "empty_like", match, "pylayout", got))
    assert non_dense > 2000
    assert non_dense - oracles_differ > 1000, "too few layouts on which torch's two oracles agree to compare"
    _report(bad, "pylayout.suggest_format differs from torch.empty_like where torch's oracles agree")


def test_format_argument_forms(torch):
    x = torch.empty(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    assert pl.is_contiguous(x, torch.channels_last) is True
    assert pl.is_contiguous(x, "channels_last") is True
    assert pl.is_contiguous(x, format="channels_last") is True
    assert pl.is_contiguous(x, torch.contiguous_format) is False
    assert pl.is_contiguous(x, "C") is False
    # torch.preserve_format (issue 14: torch's meaning): dense in some order
    assert pl.is_contiguous(x, torch.preserve_format) is True
    assert pl.is_contiguous(x[:, :, ::2], torch.preserve_format) is False
    for bad in ("nchw", "NHWC", "", "channels-last", 3):
        with pytest.raises(ValueError):
            pl.is_contiguous(x, bad)


def test_hand_picked_ambiguous_cases(torch):
    cl = torch.channels_last
    cases = [
        torch.empty(2, 1, 3, 3),  # C == 1
        torch.empty(2, 1, 3, 3, memory_format=cl),
        torch.empty(2, 3, 1, 1),  # H == W == 1
        torch.empty(2, 3, 1, 1, memory_format=cl),
        torch.empty(4, 1, 1, 1),  # N111
        torch.empty(4, 1, 1, 1, memory_format=cl),
        torch.empty(4, 5).as_strided((4, 1, 1, 1), (5, 5, 5, 5)),  # N11W sliced on W
        torch.empty(1, 3, 1, 4).transpose(1, 3),
        torch.empty(3, 1, 5, 1).as_strided((3, 1, 5, 1), (5, 1, 1, 1)),
        torch.empty(2, 1, 1, 1, 1, memory_format=torch.channels_last_3d),
        torch.empty(2, 3, 1, 1, 1, memory_format=torch.channels_last_3d),
        torch.empty(0, 3, 4, 5, memory_format=cl),
        torch.empty(2, 3, 4, 5).expand(2, 3, 4, 5)[:, :1].expand(2, 3, 4, 5),  # stride(1) == 0
    ]
    from torch._prims_common import suggest_memory_format

    for x in cases:
        for name, f in (("contiguous", torch.contiguous_format), ("channels_last", cl),
                        ("channels_last_3d", torch.channels_last_3d)):
            assert pl.is_contiguous(x, name) is x.is_contiguous(memory_format=f), (x.shape, x.stride(), name)
        want = str(suggest_memory_format(x)).replace("torch.", "").replace("contiguous_format", "contiguous")
        assert pl.suggest_format(x) == want, (x.shape, x.stride())


# ---------------------------------------------------------------- stride rules
# The core's stride rules (pylayout_format_strides, _order_strides,
# _complex_dtype / _real_dtype behind pylayout._core) against torch, which
# allocates the same layouts itself, on generated shapes.

def _generated_shapes(n, seed):
    import random

    rng = random.Random(seed)
    for _ in range(n):
        yield tuple(rng.choice([0, 1, 1, 2, 3, 5, 8]) for _ in range(rng.randint(0, 6)))


def test_format_strides_are_torchs(torch, fmt_objs):
    compared = refused = 0
    for shape in _generated_shapes(3000, seed=31):
        for name, mf in fmt_objs.items():
            try:
                want = torch.empty(shape, memory_format=mf).stride()
            except RuntimeError:  # torch: channels_last needs 4-D, channels_last_3d 5-D
                with pytest.raises(ValueError):
                    pl._core.format_strides(shape, name)
                refused += 1
                continue
            assert pl._core.format_strides(shape, name) == want, (shape, name)
            compared += 1
        # Fortran: torch allocates the reversed shape and permutes it back.
        rev = tuple(reversed(range(len(shape))))
        want = torch.empty(tuple(shape[d] for d in rev)).permute(rev).stride() if shape else ()
        assert pl._core.format_strides(shape, "fortran") == want, (shape, "fortran")
    assert compared > 3000 and refused > 1000


def test_order_strides_are_torchs(torch):
    import random

    rng = random.Random(32)
    for shape in _generated_shapes(3000, seed=33):
        order = list(range(len(shape)))
        rng.shuffle(order)  # order[0] outermost
        inverse = sorted(range(len(order)), key=order.__getitem__)
        want = torch.empty([shape[d] for d in order]).permute(inverse).stride() if shape else ()
        assert pl._core.order_strides(shape, order) == want, (shape, order)


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental:UserWarning")
def test_complex_dtype_pairs_are_torchs(torch):
    for real in (torch.float16, torch.float32, torch.float64):
        re, im = torch.ones(3, dtype=real), torch.zeros(3, dtype=real)
        z = pl.pack_complex(re, im)
        assert z.dtype == torch.complex(re, im).dtype, real
        assert pl.view_as_real(z).dtype == torch.view_as_real(z).dtype == real
        assert [t.dtype for t in pl.unpack_complex(z)] == [real, real]
    with pytest.raises(TypeError):
        pl.pack_complex(torch.ones(3, dtype=torch.bfloat16), torch.ones(3, dtype=torch.bfloat16))
