"""What `import pylayout` does when it finds the source tree instead of a build.

A newcomer runs ``pip install . && python -m pylayout demo`` in the root of a
fresh clone.  Python puts the current directory first on ``sys.path``, so it
finds the source folder ``pylayout/`` (no compiled ``_core``) before the
package pip just installed.  Rather than fail there with a misleading
"circular import", ``pylayout/__init__.py`` calls ``hand_over()``:

- if another pylayout with a built extension is on ``sys.path`` (the one pip
  installed), that package is imported in place of the source folder: the
  README's command works verbatim from the clone's root, and runs exactly the
  code ``pip install .`` put in place;
- otherwise it raises one ImportError line that says what happened and what
  to run instead (as NumPy does when imported from its source tree).

Only a folder with a ``meson.build`` beside ``__init__.py`` counts as the
source tree: an installed package or meson's staged build directory never
has one, so a broken install still fails with its real error.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType

__all__ = ["hand_over"]


def _same_dir(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _installed_elsewhere(name: str, source_dir: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of a package `name` on sys.path, other than `source_dir`, that has a built _core."""
    parent = os.path.dirname(source_dir)
    others = [p for p in sys.path if not _same_dir(p or os.curdir, parent)]
    spec = importlib.machinery.PathFinder.find_spec(name, others)
    if spec is None or not spec.submodule_search_locations:
        return None
    locations = list(spec.submodule_search_locations)
    if any(_same_dir(d, source_dir) for d in locations):
        return None
    if importlib.machinery.PathFinder.find_spec(name + "._core", locations) is None:
        return None
    return spec


def hand_over(name: str, init_file: str, error: ImportError) -> ModuleType:
    """Replace the source-tree package `name` by an installed build, and return its _core.

    Called from the source package's ``__init__`` when ``from . import _core``
    failed with `error`.  Raises ImportError (one line, the fix included) when
    this is not the source tree or no built pylayout is installed.
    """
    source_dir = os.path.dirname(os.path.abspath(init_file))
    if not os.path.isfile(os.path.join(source_dir, "meson.build")):
        raise error  # an installed or staged package that is broken: keep the real error
    spec = _installed_elsewhere(name, source_dir)
    if spec is None or spec.loader is None:
        raise ImportError(
            f"pylayout is being imported from its source tree at {source_dir}, which has no built "
            "extension: run `pip install .` first (then `python -m pylayout demo` works here too)"
        ) from None
    module = importlib.util.module_from_spec(spec)
    # The import system returns whatever sys.modules holds for `name` once
    # the source __init__ finishes, so the installed package takes its place.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    sys.modules.pop(__name__, None)  # this helper belongs to the source tree, not to the installed package
    return sys.modules[name + "._core"]
