"""examples/layout_tour.ipynb runs headlessly, top to bottom, against the built pylayout.

Needs nbclient, nbformat and ipykernel (skipped with a reason when missing)
and torch (the notebook tours torch tensors).  The kernel gets this
process's environment, PYTHONPATH included, so it imports the same
pylayout as the test (meson points PYTHONPATH at the build directory); an
extra cell appended at run time checks that.

The notebook is committed executed, outputs included, so that a reader on
GitHub sees them; a test checks the stored outputs say what a fresh run says.
After changing it, store a fresh run with:

    PYTHONPATH=build python3 tests/python/test_notebook.py --save
"""
from __future__ import annotations

import os
import pathlib

import pytest

import pylayout

NOTEBOOK = pathlib.Path(__file__).resolve().parents[2] / "examples" / "layout_tour.ipynb"


def _outputs_text(cell):
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            data = out.get("data", {})
            parts.append(data.get("text/plain", ""))
            parts.append(data.get("text/html", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "".join(parts)


def check_outputs(text):
    """What the tour's outputs must show, stored or fresh."""
    assert "same memory as x: True" in text
    assert "torch agrees: True" in text
    assert "no second copy: True" in text
    assert "zero-copy: True" in text
    assert "shape (336, 1, 2) strides (2, 1, 1)" in text
    assert "dim 1 (size 1) has stride 1" in text            # explain() on the einops tensor
    assert "pylayout.view_as_complex(x)" in text
    assert "<table" in text and "memory offset" in text       # layout() rendered as HTML
    assert "overlapping" in text and "YES" in text           # print(layout(expanded))
    assert "dim 1 \u2192 stride 1" in text                    # layout() of the channels_last tensor


def execute(nb, cwd):
    """Run `nb` in place in a fresh python3 kernel whose working directory is `cwd`."""
    import nbclient

    env = dict(os.environ)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", allow_errors=False,
        resources={"metadata": {"path": str(cwd)}},   # the kernel's cwd
    )
    client.execute(env=env)   # passed through to KernelManager.start_kernel


def test_notebook_is_stored_executed():
    """A reader on GitHub sees the outputs: every code cell ran, in order, without error."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat reads the notebook and is not installed")
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and any(c.cell_type == "markdown" for c in nb.cells)
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), \
        "store a fresh top-to-bottom run: PYTHONPATH=build python3 tests/python/test_notebook.py --save"
    for c in code:
        assert c.outputs, f"cell without output:\n{c.source}"
        assert not any(o.get("output_type") == "error" for o in c.outputs), _outputs_text(c)
    check_outputs("\n".join(_outputs_text(c) for c in code))
    assert any("text/html" in o.get("data", {}) for c in code for o in c.outputs), "layout() renders as HTML"


def test_notebook_runs(tmp_path, torch):
    nbformat = pytest.importorskip("nbformat", reason="nbformat reads the notebook and is not installed")
    nbclient = pytest.importorskip("nbclient", reason="nbclient executes the notebook and is not installed")
    pytest.importorskip("ipykernel", reason="ipykernel provides the python3 kernel and is not installed")

    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    n_cells = len(nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell("import pylayout\nprint('PYLAYOUT_FILE=' + pylayout.__file__)"))
    try:
        execute(nb, tmp_path)
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"a notebook cell raised:\n{e}")

    errors = [c for c in nb.cells if c.cell_type == "code"
              and any(o.get("output_type") == "error" for o in c.get("outputs", []))]
    assert not errors, [_outputs_text(c) for c in errors]
    check_outputs("\n".join(_outputs_text(c) for c in nb.cells[:n_cells] if c.cell_type == "code"))

    # the kernel imported the same (built) pylayout as this test
    last = _outputs_text(nb.cells[-1])
    assert f"PYLAYOUT_FILE={pylayout.__file__}" in last, last


if __name__ == "__main__":
    import sys
    import tempfile

    import nbformat

    if sys.argv[1:] != ["--save"]:
        sys.exit("usage: PYTHONPATH=build python3 tests/python/test_notebook.py --save")
    notebook = nbformat.read(str(NOTEBOOK), as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        execute(notebook, tmp)
    nbformat.write(notebook, str(NOTEBOOK))
    print(f"stored a fresh run of {NOTEBOOK}")
