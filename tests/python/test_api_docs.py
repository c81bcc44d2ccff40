"""Every function of the C extension describes itself: a real signature
(inspect.signature, from __text_signature__) and a docstring whose example
runs (doctest)."""
from __future__ import annotations

import doctest
import inspect

import pytest

import pylayout as pl
from pylayout import _core

C_FUNCTIONS = [name for name in dir(_core) if callable(getattr(_core, name)) and not name.startswith("__")
               and not isinstance(getattr(_core, name), type)]


def test_the_list_is_complete():
    for name in ("from_dlpack", "is_contiguous", "is_dense", "suggest_format", "empty", "set_num_threads",
                 "get_num_threads", "set_cache_limit", "cache_info", "contiguous", "to_order", "copy_into",
                 "view_as_complex", "view_as_real", "canonicalize", "pack_complex", "unpack_complex",
                 "format_strides", "order_strides", "build_info", "_to_type", "to_format", "copy_core"):
        assert name in C_FUNCTIONS, name


@pytest.mark.parametrize("name", C_FUNCTIONS)
def test_signature_and_docstring(name):
    fn = getattr(_core, name)
    sig = inspect.signature(fn)  # raises ValueError without __text_signature__
    assert fn.__doc__ and fn.__doc__.strip(), f"{name} has no docstring"
    if not name.startswith("_"):
        assert ">>>" in fn.__doc__, f"{name}'s docstring has no example"
    if name in ("is_contiguous", "contiguous"):
        assert "memory_format" in sig.parameters
    if name in ("contiguous", "to_order", "from_dlpack"):
        assert sig.parameters["copy"].kind is inspect.Parameter.KEYWORD_ONLY


def test_public_names_are_the_c_functions_with_their_signatures():
    assert inspect.signature(pl.is_contiguous) == inspect.signature(_core.is_contiguous)
    assert inspect.signature(pl.from_dlpack).parameters["x"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


def test_the_examples_run():
    pytest.importorskip("numpy", reason="the examples use NumPy (CI installs it)")
    result = doctest.testmod(_core, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 40 and result.failed == 0, result
