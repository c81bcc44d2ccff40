"""Exact NumPy arrays, without __dlpack__ (issue 16, 1 KB calls).

pylayout reads an exact numpy.ndarray through the buffer protocol instead of
its __dlpack__, and makes contiguous()'s C- and Fortran-order results with
numpy.empty.  Where NumPy's C ABI is one pylayout knows (src/_core_numpy.c)
it reads the array's fields instead of its buffer, and contiguous() of a
small one makes its result with NumPy's C; _core._numpy_abi(False) turns
that off, so the tests with the `path` fixture run both ways.  These tests hold the paths
to NumPy itself (the oracle) on generated layouts and every dtype, to the
DLPack path they replaced (the same array behind a DLPack-only wrapper), and
check what they must never do: leak an export or a reference, write into a
read-only array, accept what the DLPack path refuses, or trust a NumPy ABI
they were not written for.  Nothing here is timed."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pylayout as pl
from _producers import DLPackOnly  # the path every producer but an exact ndarray takes
from test_boundary import in_child  # a crash or a hang fails the test, with the child's output
from pylayout import _core

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture(params=["numpy ABI", "buffer"])
def path(request):
    """Exact ndarrays read through NumPy's C ABI, or through their buffer
    (and contiguous()'s small results made by numpy.empty)."""
    _core._numpy_abi(request.param == "numpy ABI")
    yield request.param
    _core._numpy_abi(True)


def layouts(rng, ndim, dtype):
    """Dense, permuted, sliced, reversed, offset and broadcast views of a random array."""
    shape = tuple(int(s) for s in rng.integers(1, 7, size=ndim))
    base = np.asarray((rng.standard_normal(shape) * 50).astype(dtype) if dtype is not np.bool_
                      else rng.random(shape) > 0.5)
    yield base
    if ndim == 0:
        return
    yield base.transpose(tuple(rng.permutation(ndim)))
    yield np.asfortranarray(base)
    yield base[(slice(None, None, 2),) + (slice(None),) * (ndim - 1)]
    yield base[(slice(None, None, -1),) * ndim]
    yield np.broadcast_to(base[(slice(0, 1),) + (slice(None),) * (ndim - 1)], shape)
    big = np.zeros(tuple(s + 1 for s in shape), dtype=dtype)
    yield big[(slice(1, None),) * ndim]  # starts one element in: off its line


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 4])
def test_contiguous_and_fortran_match_numpy(dtype, ndim, path):
    rng = np.random.default_rng(ndim * 31 + DTYPES.index(dtype))
    for x in layouts(rng, ndim, dtype):
        for fmt, oracle, flag in (("contiguous", np.ascontiguousarray, "c_contiguous"),
                                  ("F", np.asfortranarray, "f_contiguous")):
            want = oracle(x)
            for got in (pl.contiguous(x, fmt), _core.to_format(x, fmt)):
                assert type(got) is np.ndarray and got.dtype == x.dtype and got.shape == x.shape
                assert getattr(got.flags, flag) and (got.flags.writeable or got is x)
                assert got.tobytes(order="A") == want.tobytes(order="A")
                if getattr(x.flags, flag) and x.ndim > 0:
                    assert got is x  # already in the format: no copy, as NumPy
                elif got is not x:
                    assert not np.shares_memory(got, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_buffer_path_matches_the_dlpack_path(dtype, path):
    rng = np.random.default_rng(7 + DTYPES.index(dtype))
    for x in layouts(rng, 3, dtype):
        for fmt in ("contiguous", "fortran", "channels_last" if x.ndim == 4 else "C"):
            ours = pl.contiguous(x, fmt)
            via_dlpack = np.from_dlpack(pl.contiguous(DLPackOnly(x), fmt))
            assert ours.strides == via_dlpack.strides and np.array_equal(ours, via_dlpack)
        assert pl.to_order(x, (2, 0, 1)).strides == np.from_dlpack(pl.to_order(DLPackOnly(x), (2, 0, 1))).strides


def test_strides_of_size_one_dims_are_the_arrays_own(path):
    # NumPy's buffer export rewrites them for contiguous arrays; DLPack and pylayout keep them
    a = np.zeros((4, 1, 2), np.float32).transpose(1, 0, 2)
    assert _core.canonical_strides(a) == _core.canonical_strides(DLPackOnly(a))
    assert _core.complex_view_strides(a) == _core.complex_view_strides(DLPackOnly(a)) == (2, 2, 1)
    e = np.zeros((3, 0, 2), np.float32).transpose(2, 1, 0)
    assert _core.canonical_strides(e) == _core.canonical_strides(DLPackOnly(e))


def test_channels_last_and_to_order_still_come_back_as_ndarrays(path):
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    c = pl.contiguous(a, "channels_last")
    assert type(c) is np.ndarray and np.array_equal(c, a) and c.strides == (240, 4, 60, 12)
    o = pl.to_order(a, (3, 2, 1, 0))
    assert type(o) is np.ndarray and o.flags.f_contiguous and np.array_equal(o, a)


@pytest.mark.parametrize("make", [
    lambda: np.arange(6, dtype=">f4").reshape(2, 3).T,          # byte-swapped
    lambda: np.zeros((3, 2), dtype=np.longdouble).T,           # no DLPack type
    lambda: np.zeros((3, 2), dtype="M8[s]").T,                 # no buffer at all
    lambda: np.zeros(4, dtype=[("a", "u1"), ("f", "<f4")])["f"],  # strides not whole elements
])
def test_what_dlpack_refuses_is_still_refused_the_same_way(make, path):
    x = make()
    with pytest.raises(Exception) as ours:
        pl.contiguous(x)
    with pytest.raises(Exception) as dl:
        pl.contiguous(DLPackOnly(x))
    assert type(ours.value) is type(dl.value) and str(ours.value) == str(dl.value)


def test_no_export_or_reference_is_left_behind(path):
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    d = np.empty((8, 8), np.float32)
    before = sys.getrefcount(a), sys.getrefcount(d)
    for _ in range(100):
        pl.contiguous(a.T)
        pl.contiguous(a)
        _core.convert_or_route(a.T, "F")
        pl.copy_into(d, a.T)
        pl.is_contiguous(a)
        with pytest.raises(ValueError):
            pl.copy_into(d, np.zeros((4, 4), np.float32))
    assert (sys.getrefcount(a), sys.getrefcount(d)) == before
    a.resize((4, 16))  # refuses while anything still holds an export of a
    d.resize((64,))


def test_copy_into_writes_numpy_dst_and_refuses_read_only(path):
    rng = np.random.default_rng(3)
    for dtype in DTYPES:
        for x in layouts(rng, 3, dtype):
            dst = np.zeros(x.shape, dtype=dtype)
            guard = np.zeros(dst.size + 16, dtype=dtype)
            view = guard[8:8 + dst.size].reshape(x.shape)
            assert pl.copy_into(dst, x) is dst and np.array_equal(dst, x)
            pl.copy_into(view.T, x.T)
            assert np.array_equal(view, x) and not guard[:8].any() and not guard[8 + dst.size:].any()
    ro = np.zeros((4, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        pl.copy_into(ro, np.ones((4, 4), np.float32))
    assert not ro.any()


def test_copy_into_refuses_arrays_numpy_warns_about_writing(path):
    """np.broadcast_arrays' results are writable but NumPy warns on a write
    and its buffer export calls them read-only: pylayout does not write them."""
    base = np.zeros(4, np.float32)
    a, _ = np.broadcast_arrays(base, np.zeros((1, 4), np.float32))  # (1, 4) over base's memory
    assert memoryview(a).readonly  # (reading a.flags.writeable would warn)
    # the buffer path takes this size-1-dim array through __dlpack__, which
    # calls it writable, and its phase-2 check asks the buffer: "changed"
    with pytest.raises((ValueError, BufferError), match="read-only|changed"):
        pl.copy_into(a, np.ones((1, 4), np.float32))
    assert not base.any()


def test_copy_into_refuses_overlap_between_numpy_views(path):
    a = np.arange(32, dtype=np.float64)
    with pytest.raises(ValueError, match="overlaps"):
        pl.copy_into(a[1:17].reshape(4, 4), a[:16].reshape(4, 4).T)
    assert np.array_equal(a, np.arange(32, dtype=np.float64))


def test_subclasses_still_take_the_dlpack_path(path):
    class Sub(np.ndarray):
        pass

    m = np.arange(6, dtype=np.float32).reshape(2, 3).view(Sub).T
    c = pl.contiguous(m)
    assert type(c) is np.ndarray and c.flags.c_contiguous and np.array_equal(c, np.asarray(m))


def test_a_static_type_named_like_ndarray_is_not_taken_for_it():
    fake = type("numpy.ndarray", (), {})  # a class: heap type, whatever its name
    with pytest.raises(TypeError, match="DLPack producer"):
        pl.contiguous(fake())
    assert type(pl.contiguous(np.zeros((2, 3)).T)) is np.ndarray


def test_a_replaced_numpy_empty_is_not_trusted():
    # in a child: the extension looks numpy.empty up once, on first use
    code = textwrap.dedent("""
        import numpy as np, pylayout as pl
        pl._core._numpy_abi(False)  # the general path: the ABI's never calls numpy.empty
        real = np.empty
        fakes = [lambda shape, dtype, *o: real((3,), dtype),             # wrong shape
                 lambda shape, dtype, *o: real(shape, dtype)[..., None],  # wrong rank
                 lambda shape, dtype, *o: np.broadcast_to(real(1, dtype), shape),  # read-only
                 lambda shape, dtype, *o: [0] * 4,                        # not an array
                 lambda shape, dtype, *o: np.matrix(real(shape, dtype))]  # a subclass
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        calls = []
        np.empty = lambda *args: calls.append(1) or fakes[len(calls) - 1](*args)  # looked up once: one stand-in
        for i in range(len(fakes)):
            c = pl.contiguous(a.T)
            assert len(calls) == i + 1, "numpy.empty was not asked"
            assert type(c) is np.ndarray and c.shape == (4, 3) and (c == a.T).all(), i
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr



def test_small_arrays_take_numpy_abi_and_call_no_python():
    """The ABI path is taken for every plain dtype, and from the first
    conversion on it calls no Python function: not numpy.empty (replaced
    here by one that would fail), nor anything a profiler sees, from
    pylayout.contiguous itself down."""
    assert in_child("""
        import sys, numpy as np, pylayout as pl
        from pylayout import _core
        assert _core._numpy_abi(None) is False      # not looked for before an ndarray comes
        _core.convert_or_route(np.zeros((2, 3), np.float32).T, "contiguous")  # finds NumPy's table: once
        assert _core._numpy_abi(None) is True       # (an import, on NumPy 1: Python, before any field is read)
        np.empty = None                             # the general path would fail on it
        seen = []
        for dtype in (np.bool_, np.int8, np.uint16, np.int32, np.uint64, np.float16, np.float32, np.float64,
                      np.complex64, np.complex128, np.dtype("<i8"), np.dtype("long"), np.dtype("longlong")):
            x = (np.arange(24) % 5).astype(dtype).reshape(2, 3, 4).transpose(2, 0, 1)
            sys.setprofile(lambda frame, event, arg: seen.append((event, frame.f_code.co_name)))
            c = _core.convert_or_route(x, "contiguous")
            f = _core.convert_or_route(x, "F")
            c2, f2 = pl.contiguous(x), pl.contiguous(x, "F")   # the public function: C, no frame either
            sys.setprofile(None)
            assert c2.flags.c_contiguous and f2.flags.f_contiguous and (c2 == x).all() and (f2 == x).all()
            assert _core._numpy_abi(None) is True, dtype
            assert c.flags.c_contiguous and f.flags.f_contiguous and c.dtype is x.dtype and f.dtype is x.dtype
            assert (c == x).all() and (f == x).all() and c.flags.writeable and f.flags.writeable
        assert [e for e in seen if e[0] == "call"] == [], seen   # no Python function ran
        print("ok")
    """).strip().endswith("ok")


@pytest.mark.parametrize("make", [
    lambda: np.arange(6, dtype=">f4").reshape(2, 3).T,                       # byte-swapped
    lambda: np.frombuffer(bytearray(25), np.float32, 6, 1).reshape(2, 3).T,  # unaligned
    lambda: np.zeros((3, 2), dtype=np.longdouble).T,                         # no DLPack type
    lambda: np.zeros((3, 2), dtype="M8[s]").T,                               # no buffer at all
    lambda: np.zeros(4, dtype=[("a", "u1"), ("f", "<f4")])["f"],             # strides not whole elements
    lambda: np.float32(3).reshape(()),                                       # 0-d
    lambda: np.zeros((0, 3), np.float32).T,                                  # empty
    lambda: np.zeros((3, 2, 1), np.float32).transpose(2, 0, 1),              # size-1 dims: dense already
    lambda: np.zeros((128, 128), np.float32).T,                              # 64 KB: pylayout allocates
    lambda: np.broadcast_to(np.arange(3.0), (4, 3)),                         # stride 0
    lambda: np.zeros((3, 2), np.dtype((np.int32, [("r", "u1"), ("g", "u1"), ("b", "u1"), ("a", "u1")]))).T,
    lambda: np.zeros((3, 2), np.dtype(np.float32, metadata={"unit": "m"})).T,  # not NumPy's own float32
    lambda: np.zeros((3, 2), np.dtype("int64").newbyteorder("=")).T,         # an equal copy of int64
])
def test_numpy_abi_answers_as_the_general_path(make):
    """What the ABI path declines (or takes) comes out exactly as the
    general path has it: the same values, strides, flags and dtype, or the
    same refusal; x itself where x is already in the format."""
    def outcome(x, fmt):
        try:
            r = _core.convert_or_route(x, fmt)
        except Exception as e:  # noqa: BLE001  # the refusal is what is compared
            return type(e), str(e)
        return r is x, type(r), r.dtype, r.shape, r.strides, r.flags.writeable, r.tobytes(order="A")
    for fmt in ("contiguous", "F"):
        x = make()
        try:
            _core._numpy_abi(False)
            general = outcome(x, fmt)
        finally:
            _core._numpy_abi(True)
        assert outcome(x, fmt) == general


ABI_TABLE = """
    import ctypes, sys, numpy as np, pylayout as pl
    from pylayout import _core
    VERSION = ctypes.CFUNCTYPE(ctypes.c_uint)(lambda: {version})
    table = (ctypes.c_void_p * 100)()
    table[0] = ctypes.cast(VERSION, ctypes.c_void_p).value
    table[2] = id({array_type})
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    import numpy._core._multiarray_umath as m
    m._ARRAY_API = new(ctypes.addressof(table), None, None)   # before pylayout first looks
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = pl.contiguous(a.T)
    assert (c == a.T).all() and c.flags.c_contiguous
    assert _core._numpy_abi(None) is False   # the general path answered
    print("ok")
"""


@pytest.mark.parametrize("version, array_type", [
    ("3 << 24", "np.ndarray"),    # an ABI whose layout pylayout does not know
    ("2 << 24", "np.matrix"),     # a table whose array type is not the ndarray converted
])
def test_an_unknown_numpy_abi_is_not_used(version, array_type):
    """pylayout reads NumPy's table only when NumPy's ABI version is one
    whose fields it declares and the table's array type is the ndarray in
    hand; otherwise it takes the general path (which a wrong table would
    crash, not just miscount)."""
    assert in_child(ABI_TABLE.format(version=version, array_type=array_type)).strip().endswith("ok")
