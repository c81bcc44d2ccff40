"""examples/layout_tour.ipynb runs headlessly, top to bottom, against the built pylayout.

Needs nbclient, nbformat and ipykernel (skipped with a reason when missing)
and torch (the notebook tours torch tensors).  The kernel gets this
process's environment, PYTHONPATH included, so it imports the same
pylayout as the test (meson points PYTHONPATH at the build directory); an
extra cell appended at run time checks that.
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


def test_notebook_has_no_stored_outputs():
    nbformat = pytest.importorskip("nbformat", reason="nbformat reads the notebook and is not installed")
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and any(c.cell_type == "markdown" for c in nb.cells)
    for c in code:
        assert c.outputs == [] and c.execution_count is None, "commit the notebook without outputs"


def test_notebook_runs(tmp_path, torch):
    nbformat = pytest.importorskip("nbformat", reason="nbformat reads the notebook and is not installed")
    nbclient = pytest.importorskip("nbclient", reason="nbclient executes the notebook and is not installed")
    pytest.importorskip("ipykernel", reason="ipykernel provides the python3 kernel and is not installed")

    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    n_cells = len(nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell("import pylayout\nprint('PYLAYOUT_FILE=' + pylayout.__file__)"))
    env = dict(os.environ)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", allow_errors=False,
        resources={"metadata": {"path": str(tmp_path)}},   # the kernel's cwd
    )
    try:
        client.execute(env=env)   # passed through to KernelManager.start_kernel
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"a notebook cell raised:\n{e}")

    errors = [c for c in nb.cells if c.cell_type == "code"
              and any(o.get("output_type") == "error" for o in c.get("outputs", []))]
    assert not errors, [_outputs_text(c) for c in errors]

    text = "\n".join(_outputs_text(c) for c in nb.cells[:n_cells] if c.cell_type == "code")
    assert "same memory as x: True" in text
    assert "torch agrees: True" in text
    assert "no second copy: True" in text
    assert "zero-copy: True" in text
    assert "shape (336, 1, 2) strides (2, 1, 1)" in text
    assert "dim 1 (size 1) has stride 1" in text            # explain() on the einops tensor
    assert "pylayout.view_as_complex(x)" in text
    assert "<table" in text and "memory order" in text       # layout() rendered as HTML
    assert "overlapping" in text and "YES" in text           # print(layout(expanded))

    # the kernel imported the same (built) pylayout as this test
    last = _outputs_text(nb.cells[-1])
    assert f"PYLAYOUT_FILE={pylayout.__file__}" in last, last
