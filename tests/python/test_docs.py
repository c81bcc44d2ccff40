"""The docs run: every docstring example, and the README's Python quickstart."""
import doctest
import pathlib
import re

import pytest

import pylayout

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_docstring_examples():
    pytest.importorskip("numpy", reason="the docstring examples use NumPy")
    result = doctest.testmod(pylayout, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 5, "the public functions should carry runnable examples"
    assert result.failed == 0


def _readme_python_blocks():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_quickstart_runs_and_says_true():
    pytest.importorskip("torch", reason="the README quickstart uses torch")
    pytest.importorskip("numpy", reason="the README quickstart uses NumPy")
    blocks = _readme_python_blocks()
    assert blocks, "README.md should contain a Python quickstart"
    namespace: dict = {}  # the README reads top to bottom: later blocks use earlier names
    checked = 0
    for block in blocks:
        lines = block.splitlines()
        code = []
        for line in lines:
            # "expr   # value" lines: check that expr evaluates to value.
            m = re.match(r"^(?!\w+ = )(.+?)\s+#\s*(True|False|\(.*\)|'[^']*'|torch\.Size\(.*\))", line)
            if m:
                expr, want = m.group(1), m.group(2)
                exec("\n".join(code), namespace)
                code = []
                got = eval(expr, namespace)
                assert got == eval(want, namespace), f"README line {line!r}: got {got!r}"
                checked += 1
            else:
                code.append(line)
        exec("\n".join(code), namespace)
    assert checked >= 10, f"only {checked} README claims were checked"
