"""Layout guards for operator entry and exit: require() and @requires(...)."""
from __future__ import annotations

import functools
import inspect
import warnings
from typing import TYPE_CHECKING, Any, Callable, overload

from . import _core

if TYPE_CHECKING:
    import numpy as np
    import torch

    from ._typing import Format, Mode, SupportsDLPack, _DTypeT, _P, _R, _ShapeT

__all__ = ["LayoutError", "LayoutWarning", "require", "requires"]

_MODES = ("convert", "warn", "raise")


class LayoutError(ValueError):
    """A tensor is not in the layout an operator requires (strict mode)."""


class LayoutWarning(UserWarning):
    """A tensor was converted to the layout an operator requires (warn mode)."""


def _format_label(fmt: object) -> str:
    return fmt if isinstance(fmt, str) else str(fmt).replace("torch.", "")


def _is_tensor(x: object) -> bool:
    return hasattr(x, "__dlpack__") or isinstance(x, _core.Tensor)


@overload
def require(  # type: ignore[overload-overlap]  # a torch tensor is also a DLPack producer
    x: torch.Tensor, format: Format = ..., *, name: str = ..., mode: Mode = ...
) -> torch.Tensor: ...
@overload
def require(  # type: ignore[overload-overlap]
    x: np.ndarray[_ShapeT, _DTypeT], format: Format = ..., *, name: str = ..., mode: Mode = ...
) -> np.ndarray[_ShapeT, _DTypeT]: ...
@overload
def require(x: SupportsDLPack, format: Format = ..., *, name: str = ..., mode: Mode = ...) -> _core.Tensor: ...
def require(x: SupportsDLPack, format: Format = "contiguous", *, name: str = "x", mode: Mode = "convert") -> Any:
    """Return `x` if it is dense in `format`, else a converted copy of the same kind.

    mode="convert" converts silently, "warn" converts and emits a
    LayoutWarning naming the argument, "raise" raises LayoutError instead
    (a strict mode for tests).  Torch tensors that require grad convert
    differentiably.

    >>> import numpy as np, pylayout as pl
    >>> a = np.zeros((3, 4), dtype=np.float32)
    >>> pl.require(a) is a
    True
    >>> pl.require(a.T, name="weight", mode="raise")
    Traceback (most recent call last):
    ...
    pylayout._guards.LayoutError: argument 'weight' is not contiguous ...
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    from . import contiguous, is_contiguous

    if is_contiguous(x, format):
        return x
    shape, strides = _describe(x)
    message = (f"argument {name!r} is not {_format_label(format)} (shape {shape}, strides {strides}); "
               f"pylayout.contiguous({name}, {_format_label(format)!r}) converts it")
    if mode == "raise":
        raise LayoutError(message)
    if mode == "warn":
        warnings.warn(LayoutWarning(message + "; converted"), stacklevel=3)
    return contiguous(x, format)


def _describe(x: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, element strides) of any tensor, without touching autograd."""
    stride = getattr(x, "stride", None)
    if callable(stride):  # torch: works on tensors that require grad
        return tuple(x.shape), tuple(stride())
    t = x if isinstance(x, _core.Tensor) else _core.from_dlpack(x)
    return t.shape, t.strides


def requires(*, mode: Mode = "convert", **formats: Format) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorator: bring a function's tensor arguments (and result) into layout.

    Each keyword names a parameter of the wrapped function and the format it
    needs ("contiguous", "channels_last", "channels_last_3d", "fortran" or a
    torch.memory_format).  Arguments already in layout pass through untouched
    (same object, same data_ptr); others are converted, or reported (see
    require() for mode).  The keyword ``out`` (or ``returns``), when it is not
    a parameter's name, applies to the return value (each element of a
    returned tuple).  A parameter that is itself named ``out`` is an output
    buffer: converting it would lose the kernel's writes, so it is only
    checked, and a wrong layout raises LayoutError whatever the mode.  The
    wrapper keeps the function's signature, for type checkers too.

    >>> import numpy as np, pylayout as pl
    >>> @pl.requires(a="contiguous", out="fortran")
    ... def kernel(a):
    ...     return a * 2
    >>> kernel(np.ones((2, 3)).T).flags.f_contiguous
    True
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")

    def decorate(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        params = inspect.signature(fn).parameters
        result_fmt = None
        for key in ("out", "returns"):
            if key in formats and key not in params:
                result_fmt = formats[key]
        inputs = {k: v for k, v in formats.items() if k in params}
        unknown = set(formats) - set(inputs) - ({"out", "returns"} if result_fmt is not None else set())
        if unknown:
            raise TypeError(f"{fn.__name__}() has no parameter(s) {sorted(unknown)}")
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            bound = sig.bind(*args, **kwargs)
            for name, fmt in inputs.items():
                if name not in bound.arguments or not _is_tensor(bound.arguments[name]):
                    continue
                value = bound.arguments[name]
                if name == "out":
                    require(value, fmt, name=name, mode="raise")
                else:
                    bound.arguments[name] = require(value, fmt, name=name, mode=mode)
            result: Any = fn(*bound.args, **bound.kwargs)   # converted below: the same kind comes back
            if result_fmt is None:
                return result
            label = f"return value of {fn.__name__}()"
            if isinstance(result, tuple):
                result = tuple(require(r, result_fmt, name=f"{label}[{i}]", mode=mode) if _is_tensor(r) else r
                               for i, r in enumerate(result))
                return result
            return require(result, result_fmt, name=label, mode=mode) if _is_tensor(result) else result

        return wrapper

    return decorate
