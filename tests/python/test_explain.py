"""pylayout.explain / pylayout.layout: the text names the right facts and fixes.

Text is asserted for hand-picked layouts (the einops view_as_complex case,
transposes, channels_last, the C == 1 ambiguity, Fortran arrays, expands),
and every accept/refuse claim of the "ops" section is checked against the
real op (torch.view_as_complex, x.view(-1), is_contiguous(memory_format=...),
NumPy's reshape(copy=False), pylayout.view_as_complex(copy=False)) over a few
hundred generated layouts.
"""
from __future__ import annotations

import gc
import itertools
import random
import re

import pytest

import _producers
import pylayout as pl
from conftest import same_bits, torch_layouts

explain = pl.explain
layout = pl.layout

OK, NO, NA = "\u2713", "\u2717", "\u00b7"


def op_line(text, name):
    """The first line of the ops entry `name`: (mark, rest)."""
    ops = text.split("\nops\n", 1)[1]
    for line in ops.splitlines():
        m = re.match(r"  (\S) (.+)$", line)
        if m and m.group(2).startswith(name):
            return m.group(1), m.group(2)
    raise AssertionError(f"no ops line for {name!r} in:\n{text}")


def op_block(text, name):
    """The whole ops entry `name` (first line and its continuation lines)."""
    ops = text.split("\nops\n", 1)[1].splitlines()
    for i, line in enumerate(ops):
        if re.match(r"  \S " + re.escape(name), line):
            block = [line]
            for nxt in ops[i + 1:]:
                if re.match(r"  \S ", nxt):
                    break
                block.append(nxt)
            return "\n".join(block)
    raise AssertionError(f"no ops entry for {name!r} in:\n{text}")


def has_op(text, name):
    ops = text.split("\nops\n", 1)[1]
    return any(re.match(r"  \S " + re.escape(name), line) for line in ops.splitlines())


def accepts(text, name):
    mark = op_line(text, name)[0]
    assert mark in (OK, NO), text
    return mark == OK


def field(text, key):
    for line in text.splitlines():
        if line.startswith("  " + key + " "):
            return line[len(key) + 2:].strip()
    raise AssertionError(f"no {key!r} line in:\n{text}")


# ------------------------------------------------------------ the user stories


def test_einops_view_as_complex_case(torch):
    einops = pytest.importorskip("einops", reason="einops reproduces user story 2 and is not installed")
    x = einops.rearrange(torch.rand(336, 2), "b (complex c) -> b c complex", complex=2)
    assert tuple(x.shape) == (336, 1, 2) and x.stride() == (2, 1, 1)
    text = explain(x)
    block = op_block(text, "torch.view_as_complex")
    assert "dim 1 (size 1) has stride 1" in block
    assert "pylayout.view_as_complex(x)" in block
    assert "pylayout.canonicalize(x)" in block
    assert "pytorch#169780" in block   # the torch change that accepts it, whichever way this torch went
    # the verdict matches the installed torch
    try:
        torch.view_as_complex(x)
        torch_ok = True
    except RuntimeError:
        torch_ok = False
    assert accepts(text, "torch.view_as_complex") == torch_ok
    # and the fix it names really is a zero-copy view
    z = pl.view_as_complex(x, copy=False)
    assert z.data_ptr() == x.data_ptr() and tuple(z.shape) == (336, 1)


def test_older_torch_refusal_is_explained(torch, monkeypatch):
    """Under the rules of torch releases before pytorch#169780 the einops
    tensor is refused, with the dim named and the fix."""
    from pylayout import _explain

    monkeypatch.setattr(_explain, "_torch_skips_size1", lambda: False)
    x = torch.rand(336, 2, 1).transpose(1, 2).contiguous()   # plain-torch reproduction
    assert x.stride() == (2, 1, 1)
    text = explain(x)
    assert not accepts(text, "torch.view_as_complex")
    block = op_block(text, "torch.view_as_complex")
    assert "dim 1 (size 1) has stride 1" in block
    assert "fix: pylayout.view_as_complex(x) (zero-copy view)" in block
    assert "pylayout.canonicalize(x)" in block
    assert "torch releases with pytorch#169780" in block
    # and under the rules of releases with it, accepted with the older refusal named
    monkeypatch.setattr(_explain, "_torch_skips_size1", lambda: True)
    block = op_block(explain(x), "torch.view_as_complex")
    assert accepts(explain(x), "torch.view_as_complex")
    assert "but torch releases before pytorch#169780" in block and "dim 1 (size 1) has stride 1" in block


def test_the_size1_rule_is_asked_of_the_installed_torch(torch):
    """explain's verdict on a size-1 dim's odd stride is what this torch does,
    whatever its version (a version number said 2.13; 2.11 had the change)."""
    from pylayout import _explain

    x = torch.rand(336, 2, 1).transpose(1, 2).contiguous()
    try:
        torch.view_as_complex(x)
        ok = True
    except RuntimeError:
        ok = False
    assert _explain._torch_skips_size1() is ok
    assert accepts(explain(x), "torch.view_as_complex") is ok


def test_view_as_complex_refusals_name_dim_and_fix(torch):
    base = torch.rand(4, 3, 2)
    x = base[:, 1:]                                 # stride (6, 2, 1): fine
    assert accepts(explain(x), "torch.view_as_complex")
    odd = torch.empty(100).as_strided((3, 2), (3, 1))   # odd stride on a size-3 dim: no view anywhere
    block = op_block(explain(odd), "torch.view_as_complex")
    assert op_line(explain(odd), "torch.view_as_complex")[0] == NO
    assert "dim 0 (size 3) has stride 3" in block
    assert "packs a copy" in block
    off = torch.rand(9)[1:].view(4, 2)              # odd storage offset
    block = op_block(explain(off), "torch.view_as_complex")
    assert "storage offset 1 is odd" in block
    bf = torch.rand(3, 2, dtype=torch.bfloat16)
    assert "bfloat16" in op_block(explain(bf), "torch.view_as_complex")
    c = torch.rand(3, 2, dtype=torch.complex64)     # already complex: view_as_complex does not apply
    assert not has_op(explain(c), "torch.view_as_complex")


def test_only_ops_that_apply_are_listed(torch):
    """view_as_complex only for a real last dim of size 2, channels_last kernels only for 4-D and 5-D."""
    for shape, vac, cl in [((3, 4), False, None), ((3, 2), True, None), ((2,), True, None), ((), False, None),
                           ((2, 3, 4, 5), False, "channels_last kernel"), ((1, 2, 3, 4, 2), True,
                                                                          "channels_last_3d kernel")]:
        text = explain(torch.rand(shape))
        assert has_op(text, "torch.view_as_complex") == vac, text
        assert has_op(text, "channels_last") == (cl is not None), text
        if cl:
            assert has_op(text, cl)
        assert has_op(text, "x.view(-1)") and has_op(text, "C kernel")
        assert NA not in text.split("\nops\n", 1)[1], "no 'n/a' lines"


def test_transposed_view_fails_with_fix(torch):
    x = torch.rand(3, 4).t()
    text = explain(x)
    assert field(text, "strides") == "(1, 4) elements"
    assert field(text, "byte strides") == "(4, 16)"
    assert not accepts(text, "x.view(-1)")
    block = op_block(text, "x.view(-1)")
    assert "pylayout.contiguous(x)" in block and "x.reshape" in block
    assert "dim 0 (size 4, stride 1)" in block
    with pytest.raises(RuntimeError):
        x.view(-1)
    assert not accepts(text, "C kernel")
    assert "pylayout.contiguous(x)" in op_block(text, "C kernel")
    assert "dense, but dims are in another order" in op_block(text, "C kernel")
    assert f"{NO} contiguous" in field(text, "torch formats")
    assert field(text, "numpy flags").startswith(f"C {NO}  F {OK}")


def test_channels_last_by_torch_rules(torch):
    x = torch.rand(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    text = explain(x)
    fmts = field(text, "torch formats")
    assert f"{OK} channels_last" in fmts and f"{NO} contiguous" in fmts
    assert field(text, "suggest_format") == "channels_last"
    assert accepts(text, "channels_last kernel")
    assert not accepts(text, "C kernel")
    # a plain NCHW tensor: refused, with the conversion as the fix
    y = torch.rand(2, 3, 4, 5)
    block = op_block(explain(y), "channels_last kernel")
    assert block.lstrip().startswith(NO)
    assert 'pylayout.contiguous(x, "channels_last")' in block
    assert "(60, 1, 15, 3)" in block     # the strides channels_last would have
    z = torch.rand(2, 3, 4, 5, 6).contiguous(memory_format=torch.channels_last_3d)
    tz = explain(z)
    assert f"{OK} channels_last_3d" in field(tz, "torch formats")
    assert accepts(tz, "channels_last_3d kernel")


def test_c1_ambiguous_reports_both(torch):
    x = torch.rand(2, 1, 4, 5)                       # C == 1: NCHW and NHWC memory coincide
    text = explain(x)
    fmts = field(text, "torch formats")
    assert f"{OK} contiguous" in fmts and f"{OK} channels_last" in fmts
    assert "both contiguous and channels_last" in field(text, "ambiguous")
    assert field(text, "suggest_format") == "contiguous"
    assert x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)
    assert accepts(text, "channels_last kernel") and accepts(text, "C kernel")


def test_numpy_fortran_order(np):
    a = np.asfortranarray(np.zeros((3, 4), dtype=np.float32))
    text = explain(a)
    assert text.startswith("pylayout.explain: numpy.ndarray")
    assert field(text, "numpy flags").startswith(f"C {NO}  F {OK}")
    assert field(text, "strides") == "(1, 3) elements"
    assert field(text, "byte strides") == "(4, 12)"
    assert not accepts(text, "a.reshape(-1, copy=False)")
    assert field(text, "dense").startswith("yes")


def test_expanded_tensor_overlaps(torch):
    x = torch.rand(3, 1).expand(3, 4)
    text = explain(x)
    ov = field(text, "overlapping")
    assert ov.startswith("YES") and "dim 1 (size 4) has stride 0" in ov
    assert field(text, "dense").startswith("no")


def test_interleaving_strides(torch):
    base = torch.empty(100)
    over = base.as_strided((2, 3), (2, 1))          # addresses 0 1 2 / 2 3 4
    assert field(explain(over), "overlapping").startswith("YES: strides interleave")
    apart = base.as_strided((2, 2), (3, 2))         # addresses 0 2 / 3 5: interleaved but disjoint
    assert field(explain(apart), "overlapping").startswith("no")
    same = torch.empty(1454404).as_strided((600, 601), (600, 7))    # 7 * 600 == 600 * 7
    assert "7 steps along dim 0" in field(explain(same), "overlapping")
    big = torch.empty(10**6).as_strided((2, 200000), (3, 2))     # disjoint, too many to enumerate
    assert field(explain(big), "overlapping").startswith("maybe")


def test_storage_offset_and_bytes(torch):
    x = torch.arange(20.0, dtype=torch.float64)[3:].view(1, 17)
    text = explain(x)
    assert field(text, "storage offset") == "3 elements (24 bytes) into its storage"
    assert field(text, "dtype") == "float64 (8 bytes each)"


# ------------------------------------------------------------ never crashes


def test_odd_inputs_do_not_crash(torch, np):
    cases = [
        torch.tensor(3.0),                                        # 0-d
        torch.empty(0, 3),                                        # size 0
        torch.empty(2, 0, 2).as_strided((2, 0, 2), (3, 3, 1)),    # empty with odd strides
        torch.rand(3, 2, dtype=torch.bfloat16),
        torch.rand(3, dtype=torch.complex128),
        torch.rand(3, dtype=torch.complex64).conj(),              # conj bit
        torch.rand(3)._neg_view(),                                # neg bit
        torch.rand(3, 2, requires_grad=True),
        torch.empty(4, 2, device="meta"),                         # DLPack refuses meta
        torch.zeros(2, 3, dtype=torch.float8_e4m3fn),
        torch.zeros(3, 1).expand(3, 10**6),                       # huge stride-0 expand
        torch.rand(4, 4).to_sparse(),                             # no strides at all
        np.float32(1.0),                                          # NumPy scalar: not a producer we know
        np.zeros((0,)),
        np.arange(12.0).reshape(3, 4)[::-1, ::-2],               # negative strides
        np.lib.stride_tricks.as_strided(np.zeros(1), shape=(2, 2), strides=(2**40, 8)),  # huge strides
        np.zeros(3, dtype=">f4"),                                 # non-native byte order
        np.zeros(3, dtype=[("a", "f4"), ("b", "i1")])["a"],       # strides not whole elements
        np.zeros((2, 3), dtype=object),
        object(),
    ]
    for x in cases:
        text = explain(x)
        assert text.startswith("pylayout.explain:"), text
        str(layout(x)), layout(x)._repr_html_()
    assert "meta" in field(explain(cases[8]), "device")
    assert "DLPack refused" in field(explain(cases[8]), "metadata from")
    assert "no strides" in explain(cases[11])
    assert "conjugate bit" in explain(cases[5])
    assert "requires grad" in explain(cases[7])
    assert "negative strides" in explain(cases[14])
    assert "not whole elements" in explain(cases[17])
    assert f"{OK} contiguous" in field(explain(cases[0]), "torch formats")


def test_non_cpu_capsule_metadata_only():
    rec = _producers.make_managed((4, 2), (2, 1), device=(_producers.kDLCUDA, 0), data=0x10000)
    text = explain(rec.capsule())
    assert field(text, "device") == "cuda:0"
    assert field(text, "shape").startswith("(4, 2)")
    assert accepts(text, "torch.view_as_complex")
    assert accepts(text, "C kernel")
    rec2 = _producers.make_managed((4, 2), (1, 4), device=(_producers.kDLCUDA, 0), data=0x10000)
    text2 = explain(rec2.capsule())
    assert "pylayout copies need CPU memory" in op_block(text2, "C kernel")
    html = layout(_producers.make_managed((2, 3), device=(_producers.kDLCUDA, 0), data=0x10000).capsule())
    assert "<table" in html._repr_html_()
    gc.collect()
    assert rec.deleted == 1 and rec2.deleted == 1


def test_docstring_examples(np):
    import doctest

    from pylayout import _explain

    result = doctest.testmod(_explain, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 2 and result.failed == 0


def test_pylayout_tensor_input(np):
    t = pl.from_dlpack(np.zeros((2, 3), dtype=np.int16))
    text = explain(t)
    assert text.startswith("pylayout.explain: pylayout")
    assert field(text, "dtype") == "int16 (2 bytes each)"


# ------------------------------------------------------------ layout()


def test_layout_text_grid(torch):
    out = str(layout(torch.rand(3, 4).t()))
    assert out.startswith(explain(torch.rand(3, 4).t()).splitlines()[0])
    grid = out.split("memory offset of each element", 1)[1].splitlines()
    assert grid[1].strip() == "down: dim 0 -> stride 1" and grid[2].strip() == "across: dim 1 -> stride 4"
    assert grid[3].split() == ["0", "1", "2"]
    assert grid[4].split() == ["0", "0", "4", "8"]
    assert grid[7].split() == ["3", "3", "7", "11"]
    lay = layout(torch.rand(2))
    assert repr(lay) == str(lay)


def test_layout_grid_of_higher_dims_and_cap(torch):
    out = str(layout(torch.rand(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)))
    assert "down the panels: dim 0 -> stride 60" in out and "across the panels: dim 1 -> stride 1" in out
    panels = out.split("  x[")[1:]
    assert [p.split("]", 1)[0] for p in panels] == ["0, 0, :, :", "0, 1, :, :", "0, 2, :, :",
                                                   "1, 0, :, :", "1, 1, :, :", "1, 2, :, :"]
    assert panels[1].splitlines()[2].split() == ["0", "1", "4", "7", "10", "13"]   # x[0, 1, 0, :]: NHWC offsets
    big = str(layout(torch.rand(40, 30)))
    assert "dim 0 -> stride 30, first 16 of 40" in big and "dim 1 -> stride 1, first 16 of 30" in big
    expanded = str(layout(torch.rand(3, 1).expand(3, 4)))
    rows = expanded.split("share an address)", 1)[1].splitlines()[4:]
    assert rows[0].split() == ["0", "0", "0", "0", "0"]
    assert "stride 0 (broadcast" in expanded
    assert "memory offset" not in str(layout(torch.empty(0, 3)))
    assert "0-d" in str(layout(torch.tensor(1.0)))


def test_layout_html_is_escaped_and_self_contained(torch):
    x = torch.rand(2, 3, 4, 5)                    # fix text contains "channels_last" in quotes
    h = layout(x)._repr_html_()
    assert "<table" in h and "<td" in h and "hsl(" in h
    assert '&quot;channels_last&quot;' in h
    assert 'pylayout.contiguous(x, "channels_last")' not in h
    for bad in ("<script", "http://", "https://", "<link", "<img", "src=", "url("):
        assert bad not in h
    # every '<' is a tag we emitted: strip tags and no stray angle brackets remain
    assert "<" not in re.sub(r"</?(div|table|tr|th|td|pre|span)\b[^<>]*>", "", h)
    einops_like = torch.rand(336, 2, 1).transpose(1, 2).contiguous()
    h2 = layout(einops_like)._repr_html_()
    assert "pytorch#169780" in h2
    assert "<" not in re.sub(r"</?(div|table|tr|th|td|pre|span)\b[^<>]*>", "", h2)
    capped = layout(torch.rand(40, 30))._repr_html_()
    assert capped.count("<td title=") == 16 * 16 and "first 16 of 40" in capped


# ------------------------------------------------------------ claims vs real ops


def _complex_layouts(torch, n, seed):
    """Real tensors with a trailing dim of size 2 in many stride patterns."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        dtype = rng.choice([torch.float32, torch.float32, torch.float64, torch.float16])
        kind = rng.random()
        if kind < 0.45:
            ndim = rng.randint(1, 4)
            shape = [rng.choice([0, 1, 1, 2, 3, 4]) for _ in range(ndim - 1)] + [2]
            strides = [rng.choice([0, 1, 2, 3, 4, 6, 8, 10]) for _ in range(ndim - 1)]
            strides.append(rng.choice([1, 1, 1, 2]))
            off = rng.choice([0, 0, 1, 2])
            extent = off + sum((s - 1) * st for s, st in zip(shape, strides) if s > 0) + 1
            x = torch.empty(max(extent, 1), dtype=dtype).as_strided(shape, strides, off)
        elif kind < 0.75:
            shape = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 4))] + [2]
            x = torch.empty(shape, dtype=dtype)
            perm = list(range(len(shape) - 1))
            rng.shuffle(perm)
            x = x.permute(*perm, len(shape) - 1)
            idx = tuple(slice(rng.randrange(0, max(s, 1)), None, rng.choice([1, 2])) for s in x.shape[:-1])
            x = x[idx]
        else:
            b = rng.choice([1, 2, 3, 7])
            c = rng.choice([1, 2, 3])
            x = torch.rand(b, 2 * c, dtype=dtype).view(b, 2, c).transpose(1, 2)   # einops-like
            if rng.random() < 0.5:
                x = x.contiguous()
        out.append(x)
    return out


def _torch_ok(f):
    try:
        f()
        return True
    except RuntimeError:
        return False


def test_claims_match_torch(torch):
    layouts = [x for _, x in torch_layouts(torch, 300, seed=1234)] + _complex_layouts(torch, 300, seed=99)
    for x in layouts:
        text = explain(x)
        desc = f"shape={tuple(x.shape)} strides={x.stride()} off={x.storage_offset()} dtype={x.dtype}\n{text}"
        if x.dim() and x.shape[-1] == 2:
            assert accepts(text, "torch.view_as_complex") == _torch_ok(lambda: torch.view_as_complex(x)), desc
        else:   # not listed: torch refuses for the shape alone
            assert not has_op(text, "torch.view_as_complex") and not _torch_ok(lambda: torch.view_as_complex(x)), desc
        assert accepts(text, "x.view(-1)") == _torch_ok(lambda: x.view(-1)), desc
        assert accepts(text, "C kernel") == x.is_contiguous(), desc
        if x.dim() == 4:
            assert accepts(text, "channels_last kernel") == x.is_contiguous(memory_format=torch.channels_last), desc
        if x.dim() == 5:
            assert accepts(text, "channels_last_3d kernel") == x.is_contiguous(
                memory_format=torch.channels_last_3d), desc
        if 0 < x.numel() <= 5000:   # overlap claim vs every address
            addrs = {sum(i * st for i, st in zip(idx, x.stride())) for idx in itertools.product(*map(range, x.shape))}
            assert field(text, "overlapping").startswith("YES" if len(addrs) < x.numel() else "no"), desc
        fmts = field(text, "torch formats")
        assert (f"{OK} contiguous" in fmts) == x.is_contiguous(), desc
        # pylayout's own fix: "zero-copy view" <=> copy=False succeeds
        block = op_block(text, "torch.view_as_complex") if has_op(text, "torch.view_as_complex") else ""
        if "fix: pylayout.view_as_complex(x) (zero-copy view)" in block:
            z = pl.view_as_complex(x, copy=False)
            if x.numel():
                assert z.data_ptr() == x.data_ptr(), desc
        elif "packs a copy" in block:
            with pytest.raises(ValueError):
                pl.view_as_complex(x, copy=False)
            z = pl.view_as_complex(x)
            # bit patterns, not values: x may be uninitialised memory holding NaNs
            assert same_bits(torch.view_as_real(z), x), desc


def test_claims_match_numpy(torch, np):
    rng = random.Random(7)
    arrays = []
    for _, x in torch_layouts(torch, 300, seed=4321):
        a = x.numpy()
        if a.ndim and rng.random() < 0.3:
            d = rng.randrange(a.ndim)
            a = np.flip(a, axis=d)                      # negative strides
        arrays.append(a)
    for a in arrays:
        text = explain(a)
        desc = f"shape={a.shape} strides={a.strides}\n{text}"
        try:
            np.reshape(a, -1, copy=False)
            ok = True
        except ValueError:
            ok = False
        assert accepts(text, "a.reshape(-1, copy=False)") == ok, desc
        flags = field(text, "numpy flags")
        assert flags.startswith(f"C {OK if a.flags.c_contiguous else NO}  F {OK if a.flags.f_contiguous else NO}"), desc
