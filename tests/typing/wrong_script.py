"""Mistakes that pylayout's types must catch.

Every line whose comment starts with "E:" is an error for mypy --strict and for
basedpyright (strict), and no other line is.  If the types degraded to Any, or
to a union of every kind, these lines would pass or others fail.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

import pylayout as pl

a = np.zeros((3, 2), dtype=np.float32)
x = torch.zeros(2, 3, 4, 5)

pl.contiguous(a).stride()  # E: an ndarray comes back, and it has no .stride()
pl.contiguous(x).flags  # E: a torch.Tensor comes back, and it has no .flags
pl.contiguous(pl.empty((2, 3))).stride  # E: a pylayout.Tensor has .strides, not .stride
pl.contiguous(x, "channels_lsat")  # E: not a format
pl.require(x, "channels_last", mode="strict")  # E: not a mode
z: npt.NDArray[np.float32] = pl.view_as_complex(a)  # E: complex64, not float32
n: int = pl.suggest_format(x)  # E: a format name


@pl.requires(x="contiguous")
def my_op(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    return x * scale


my_op(x, scale="2")  # E: @requires keeps the signature
s: str = my_op(x)  # E: and the return type
