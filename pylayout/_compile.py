"""torch.compile and pylayout.contiguous and pylayout.copy_into, which are C
functions.

torch.compile (Dynamo) cannot trace into C.  It traces their Python halves
instead (pylayout._contiguous, pylayout._copy_into): the same functions in
Python, with the same signatures.  For that,
torch.compiler.substitute_in_graph must register each.  Registering
imports torch._dynamo, which takes most of a second.  So pylayout registers
only when torch._dynamo itself is imported: at once if it already is,
otherwise from a one-time import hook.  The hook runs right after
torch._dynamo's module has run, before anything can be compiled.  pylayout
itself never imports torch.
"""
from __future__ import annotations

import sys
import warnings
from importlib.abc import MetaPathFinder
from typing import Any, Callable

DYNAMO = "torch._dynamo"

_pending: list[tuple[Callable[..., Any], Callable[..., Any]]] = []
_registered: set[int] = set()  # ids of the C functions done: once each, also when pylayout is reloaded


def trace_in_python(original: Callable[..., Any], traceable: Callable[..., Any]) -> None:
    """Have torch.compile trace `traceable` wherever code calls `original`:
    registered now if torch._dynamo is imported, else right after it is."""
    _pending.append((original, traceable))
    if DYNAMO in sys.modules:
        _register()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


def _register() -> None:
    import torch

    while _pending:
        original, traceable = _pending.pop(0)
        if id(original) in _registered:
            continue
        try:
            torch.compiler.substitute_in_graph(original)(traceable)
        except Exception as e:  # a torch without substitute_in_graph, or one that changed it
            warnings.warn(f"pylayout could not register pylayout.{original.__name__} with torch.compile ({e!r}): "
                          "compiled code that calls it will break its graph there", RuntimeWarning, stacklevel=2)
        else:
            _registered.add(id(original))


class _AfterImport(MetaPathFinder):
    """Finds torch._dynamo with the other finders, once, and hands back their
    spec with a loader that runs the module and then registers."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != DYNAMO:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _ThenRegister(spec.loader)
        return spec


class _ThenRegister:
    """A module's own loader (anything else asked of it goes to that loader),
    whose exec_module runs the module and then registers."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _register()
