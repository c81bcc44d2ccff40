"""The docs run: every docstring example, the README's Python blocks (in order, in one namespace,
with their own imports), and a check that every other README block is run somewhere."""
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


def _readme_blocks():
    """[(language, text)] of every fenced block in README.md, in order."""
    blocks, lang, lines = [], None, []
    for line in (ROOT / "README.md").read_text().splitlines():
        if lang is None and line.startswith("```"):
            lang, lines = line[3:].strip(), []
        elif lang is not None and line.strip() == "```":
            blocks.append((lang, "\n".join(lines)))
            lang = None
        elif lang is not None:
            lines.append(line)
    assert lang is None, "README.md has an unclosed code block"
    return blocks


def test_every_readme_block_is_run_somewhere():
    """Python blocks run above; the C block is compiled against the installed library by
    tests/c/test_readme_c.sh (meson test readme-c); .ci/run runs the sh blocks verbatim from
    the clone's root.  A new block of another kind would go untested: fail instead."""
    blocks = _readme_blocks()
    langs = [lang for lang, _ in blocks]
    assert set(langs) <= {"python", "c", "sh", ""}, langs
    assert [b + "\n" for lang, b in blocks if lang == "python"] == _readme_python_blocks()
    c = [b for lang, b in blocks if lang == "c"]
    assert len(c) == 1, "test_readme_c.sh compiles the first ```c block only"
    assert 'prints "' in c[0], "test_readme_c.sh checks the output the block's comment promises"
    sh = [b for lang, b in blocks if lang == "sh"]
    assert len(sh) == 2, "the front door and the C install commands, both run by .ci/run"
    front = [line for line in sh[0].splitlines() if line and not line.startswith("#")]
    assert front == ["pip install . && python -m pylayout demo",
                     "meson setup --reconfigure build && meson test -C build --print-errorlogs"]
    assert "-Dpython=disabled" in sh[1] and "cc prog.c" in sh[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'readme_sh "python -m pylayout demo"' in ci and 'readme_sh "-Dpython=disabled"' in ci
    plain = [b for lang, b in blocks if lang == ""]
    assert len(plain) == 1 and "include/pylayout.h" in plain[0], "only the file tree is a plain block"
