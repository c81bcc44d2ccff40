"""A correct user script that calls every public pylayout function on NumPy arrays and torch tensors.

tests/python/test_typing.py runs it (so it is correct), then checks it with
``mypy --strict`` and basedpyright in strict mode: zero errors, and every
``assert_type`` holds, so the types are useful rather than Any.
"""
from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
import torch
from torch.utils.dlpack import from_dlpack
from typing_extensions import assert_type

import pylayout as pl
import pylayout.torch as plt

# ------------------------------------------------------------ NumPy arrays keep their kind and dtype
a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
c = pl.contiguous(a.transpose(2, 0, 1))
assert_type(c, np.ndarray[tuple[int, int, int], np.dtype[np.float32]])
assert c.flags.c_contiguous
f = pl.contiguous(a, "fortran")
assert f.flags.f_contiguous and f.dtype == np.float32
o = pl.to_order(a, (2, 0, 1))
assert_type(o, np.ndarray[tuple[int, int, int], np.dtype[np.float32]])
assert o.strides == (12, 4, 24)
k = pl.canonicalize(np.zeros((4, 2, 1), dtype=np.float32).transpose(0, 2, 1))
assert k.strides == (8, 8, 4)
r = pl.require(a.T, "contiguous", name="weight", mode="convert")
assert_type(r, np.ndarray[tuple[int, int, int], np.dtype[np.float32]])

pairs = np.arange(8, dtype=np.float32).reshape(4, 2)
z = pl.view_as_complex(pairs)
assert_type(z, np.ndarray[tuple[int, ...], np.dtype[np.complex64]])
p64 = pairs.astype(np.float64)
z128 = pl.view_as_complex(p64, copy=None)
assert_type(z128, np.ndarray[tuple[int, ...], np.dtype[np.complex128]])
p16 = pairs.astype(np.float16)
half = pl.view_as_complex(p16)   # NumPy has no complex32
assert_type(half, pl.Tensor)
back = pl.view_as_real(z)
assert_type(back, np.ndarray[tuple[int, ...], np.dtype[np.float32]])
assert back.shape == (4, 2)
packed = pl.pack_complex(np.ones(3), np.zeros(3))
assert_type(packed, np.ndarray[tuple[int], np.dtype[np.complex128]])
re, im = pl.unpack_complex(packed, copy=False)
assert_type(re, np.ndarray[tuple[int], np.dtype[np.float64]])
assert float(re.sum()) == 3.0 and float(im.sum()) == 0.0
out = np.empty(3, dtype=np.complex128)
assert_type(pl.pack_complex(np.ones(3), np.ones(3), out=out), np.ndarray[tuple[int], np.dtype[np.complex128]])
dst = np.zeros((3, 2))
assert_type(pl.copy_into(dst.T, np.ones((2, 3))), np.ndarray[tuple[int, int], np.dtype[np.float64]])
assert float(dst.sum()) == 6.0

# ------------------------------------------------------------ torch tensors stay torch tensors
x = torch.randn(2, 3, 4, 5)
y = pl.contiguous(x, torch.channels_last)
assert_type(y, torch.Tensor)
assert y.is_contiguous(memory_format=torch.channels_last)
assert pl.contiguous(y, "channels_last") is y
assert_type(pl.to_order(x, [0, 2, 3, 1]), torch.Tensor)
assert_type(pl.canonicalize(x), torch.Tensor)
assert_type(pl.require(x, torch.channels_last, mode="convert"), torch.Tensor)
t2 = torch.rand(336, 2, 1).transpose(1, 2).contiguous()
zt = pl.view_as_complex(t2)
assert_type(zt, torch.Tensor)
assert zt.data_ptr() == t2.data_ptr()
assert_type(pl.view_as_real(zt), torch.Tensor)
assert_type(pl.pack_complex(torch.ones(4), torch.zeros(4)), torch.Tensor)
tre, tim = pl.unpack_complex(zt)
assert_type(tre, torch.Tensor)
assert_type(pl.copy_into(torch.empty(2, 3), torch.ones(2, 3)), torch.Tensor)
w = torch.randn(4, 3, 2, 2, requires_grad=True)
assert_type(plt.contiguous(w, torch.channels_last), torch.Tensor)
assert_type(plt.view_as_complex(torch.randn(5, 2)), torch.Tensor)
assert_type(pl.empty((2, 3, 4, 5), torch.float32, format="channels_last", device="meta"), torch.Tensor)
assert_type(plt.empty((2, 3), order=(1, 0), device=torch.device("meta")), torch.Tensor)

# ------------------------------------------------------------ pylayout's own tensors stay pylayout.Tensor
e = pl.empty((2, 3, 4, 5), "float32", format="channels_last")
assert_type(e, pl.Tensor)
assert_type(pl.contiguous(e), pl.Tensor)
assert_type(pl.to_order(e, (0, 1, 2, 3)), pl.Tensor)
assert_type(pl.from_dlpack(a), pl.Tensor)
t = pl.from_dlpack(x[:, :, ::2])
shape: tuple[int, ...] = t.shape
strides: tuple[int, ...] = t.strides
dtype: str = t.dtype
assert from_dlpack(t).data_ptr() == x.data_ptr()
assert np.from_dlpack(pl.empty((2, 2), torch.float64)).dtype == np.float64

# ------------------------------------------------------------ queries
is_cl: bool = pl.is_contiguous(e, "channels_last")
assert is_cl and pl.is_contiguous(x) and not pl.is_contiguous(a.T, format="C")
assert pl.is_dense(a.T)
fmt = pl.suggest_format(y)
assert_type(fmt, Literal["contiguous", "channels_last", "channels_last_3d"])
assert fmt == "channels_last"

# ------------------------------------------------------------ guards keep the decorated signature


@pl.requires(x="contiguous", out="channels_last", mode="raise")
def my_op(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    return (x * scale).unsqueeze(0).expand(2, *x.shape).contiguous(memory_format=torch.channels_last)


assert_type(my_op(torch.ones(3, 4, 5), scale=2.0), torch.Tensor)
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    pl.require(np.ones((2, 3)).T, mode="warn")
try:
    pl.require(np.ones((2, 3)).T, mode="raise")
except pl.LayoutError as err:
    assert "not contiguous" in str(err)
assert issubclass(pl.LayoutWarning, UserWarning)

# ------------------------------------------------------------ explanations and build facts
text: str = pl.explain(t2)
assert "view_as_complex" in text
picture = pl.layout(x)   # a notebook renders it as HTML (_repr_html_)
assert "memory offset" in str(picture)
n: int = pl.get_num_threads()
pl.set_num_threads(n)
limit: int = pl.cache_info()["limit"]
pl.set_cache_limit(limit)
facts: dict[str, Any] = pl.info()
version: str = pl.__version__
dlpack: tuple[int, int] = pl.DLPACK_VERSION
print(f"pylayout {version} (DLPack {dlpack[0]}.{dlpack[1]}), {n} threads, torch {facts['torch']}: ok")
