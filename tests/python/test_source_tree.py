"""`import pylayout` from the source tree: README's `pip install . && python -m pylayout demo`.

Python puts the current directory first on sys.path, so in the root of a
clone `python -m pylayout` finds the source folder, which has no compiled
extension.  These tests copy the source package into a temporary "clone" and
run Python there: with a built pylayout elsewhere on sys.path (the one
`pip install .` put in place; here meson's build directory) the source
package hands over to it; with none, the import fails with one line that says
what to run.  A real fresh clone and `pip install .` is .ci/run's job.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import pylayout

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILT = pathlib.Path(pylayout.__file__).resolve().parent.parent   # where the tests import pylayout from


def test_the_suite_imports_the_build_meson_made():
    """Under `meson test`, pylayout must come from the build directory (PYTHONPATH), sources and
    extension alike, never from a pylayout installed elsewhere."""
    if "MESON_TEST_ITERATION" not in os.environ:
        pytest.skip("only meaningful under meson test, which points PYTHONPATH at the build directory")
    build = pathlib.Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]).resolve()
    assert BUILT == build, f"imported {pylayout.__file__}, not the build in {build}"
    assert pathlib.Path(pylayout._core.__file__).resolve().parent == build / "pylayout"
    for name in ("_explain", "_guards", "_demo", "_bench", "_source_tree", "__main__", "torch"):
        assert (build / "pylayout" / f"{name}.py").is_file(), f"{name}.py is not staged in the build"


@pytest.fixture()
def clone(tmp_path):
    """A directory laid out like the clone's root: pylayout/ with sources and meson.build, no _core."""
    shutil.copytree(ROOT / "pylayout", tmp_path / "pylayout")
    assert (tmp_path / "pylayout" / "meson.build").is_file()
    assert not [p for p in (tmp_path / "pylayout").iterdir()
                if p.name.startswith("_core.") and p.suffix in (".so", ".pyd")], "the source tree has no extension"
    return tmp_path


def python(cwd, *args, pythonpath=None, no_site=False):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    cmd = [sys.executable] + (["-S"] if no_site else []) + list(args)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_built_package_is_found_from_the_clone_root(clone):
    assert (BUILT / "pylayout").resolve() != (ROOT / "pylayout").resolve(), "tests must import a built pylayout"
    proc = python(clone, "-m", "pylayout", "--version", pythonpath=BUILT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"pylayout {pylayout.__version__}"
    code = ("import sys, pylayout; "
            "print(pylayout.__file__); print(sorted(m for m in sys.modules if m.startswith('pylayout'))); "
            "print(pylayout.contiguous(pylayout.empty((2, 3), order=(1, 0))).strides)")
    proc = python(clone, "-c", code, pythonpath=BUILT)
    assert proc.returncode == 0, proc.stderr
    file, modules, kind = proc.stdout.splitlines()
    assert pathlib.Path(file).resolve() == (BUILT / "pylayout" / "__init__.py").resolve()
    assert "pylayout._source_tree" not in modules          # nothing of the source tree stays loaded
    assert kind == "(3, 1)"


def test_the_demo_module_comes_from_the_built_package(clone):
    proc = python(clone, "-c", "import pylayout.__main__ as m; print(m.__file__)", pythonpath=BUILT)
    assert proc.returncode == 0, proc.stderr
    assert pathlib.Path(proc.stdout.strip()).resolve() == (BUILT / "pylayout" / "__main__.py").resolve()


def test_without_a_build_one_line_says_what_to_run(clone):
    for args in (["-m", "pylayout", "demo"], ["-c", "import pylayout"]):
        proc = python(clone, *args, no_site=True)   # no site-packages: no installed pylayout to hand over to
        assert proc.returncode != 0
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError: pylayout is being imported from its source tree at "), proc.stderr
        assert str(clone / "pylayout") in last and "`pip install .`" in last
        assert "circular" not in proc.stderr


def test_a_broken_installed_package_keeps_its_own_error(clone):
    (clone / "pylayout" / "meson.build").unlink()     # not the source tree: no hand-over, no advice
    proc = python(clone, "-c", "import pylayout", pythonpath=BUILT)
    assert proc.returncode != 0
    assert "source tree" not in proc.stderr and "_core" in proc.stderr
