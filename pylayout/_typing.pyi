"""Types that pylayout's signatures share.  Type checkers only: there is no runtime module.

pylayout's Python files import these names under ``if TYPE_CHECKING:`` and
write the annotations that use them as strings.
"""
from typing import Any, Literal, ParamSpec, Protocol, TypeVar

import numpy as np
import torch

# A format by name ("C" and "F" are NumPy's order letters) or torch's own memory_format object.
FormatName = Literal["contiguous", "channels_last", "channels_last_3d", "fortran", "C", "F"]
Format = FormatName | torch.memory_format
# What suggest_format answers: torch's suggest_memory_format, by name.
SuggestedFormat = Literal["contiguous", "channels_last", "channels_last_3d"]
# require() / @requires: convert silently, convert with a LayoutWarning, or raise LayoutError.
Mode = Literal["convert", "warn", "raise"]
# A dtype by name ("float32", "complex64", ...), or torch's or NumPy's dtype objects.
DTypeLike = str | torch.dtype | np.dtype[Any] | type[np.generic]

class SupportsDLPack(Protocol):
    """Any DLPack producer: torch tensors, NumPy arrays, pylayout.Tensor, CuPy, JAX, ..."""
    def __dlpack__(self) -> object: ...

_ShapeT = TypeVar("_ShapeT", bound=tuple[int, ...])
_DTypeT = TypeVar("_DTypeT", bound=np.dtype[Any])
_DLPackT = TypeVar("_DLPackT", bound=SupportsDLPack)
_P = ParamSpec("_P")
_R = TypeVar("_R")
