"""pylayout's types, as a user's type checker sees them.

tests/typing/user_script.py calls every public function on NumPy arrays and
torch tensors and asserts (assert_type) what comes back: it must run, and
`mypy --strict` and basedpyright in strict mode must report zero errors.
tests/typing/wrong_script.py holds mistakes the types must catch: both
checkers must flag exactly its lines marked `# E`.  `mypy -p pylayout` checks
the package itself.  Skipped, with the reason, where mypy or basedpyright is not
installed (`pip install mypy==2.4.1 basedpyright==1.40.2`, as .ci/run does).
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import pylayout

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = HERE.parent / "typing"
USER, WRONG = "user_script.py", "wrong_script.py"
PACKAGE_ROOT = pathlib.Path(pylayout.__file__).resolve().parent.parent   # where the built pylayout is


def expected_error_lines(name):
    lines = (SCRIPTS / name).read_text().splitlines()
    return {i for i, line in enumerate(lines, 1) if re.search(r"\S.*#\s*E:", line)}


def _mypy(workdir):
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull,
           "--no-error-summary", "--show-error-codes", USER, WRONG]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=600, env=_env())
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    errors = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"(\w+\.py):(\d+): error: (.*)", line)
        if m:
            errors.setdefault(m.group(1), {})[int(m.group(2))] = m.group(3)
    return errors, proc.stdout


def _pyright(workdir):
    config = {"typeCheckingMode": "strict", "extraPaths": [str(PACKAGE_ROOT)],
              "pythonPath": sys.executable, "include": [USER, WRONG]}
    (workdir / "pyrightconfig.json").write_text(json.dumps(config))
    exe = shutil.which("basedpyright")
    cmd = ([exe] if exe else [sys.executable, "-m", "basedpyright"]) + ["--outputjson"]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=600, env=_env())
    report = json.loads(proc.stdout)
    errors = {}
    for d in report["generalDiagnostics"]:
        if d["severity"] == "error":
            name = pathlib.Path(d["file"]).name
            errors.setdefault(name, {})[d["range"]["start"]["line"] + 1] = d["message"]
    return errors, json.dumps(report["generalDiagnostics"], indent=1)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), env.get("PYTHONPATH", "")])
    return env


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    pytest.importorskip("mypy", reason="mypy checks pylayout's types and is not installed")
    if not shutil.which("basedpyright"):
        pytest.importorskip("basedpyright", reason="basedpyright checks pylayout's types and is not installed")
    pytest.importorskip("torch", reason="the typing scripts use torch")
    pytest.importorskip("numpy", reason="the typing scripts use NumPy")
    workdir = tmp_path_factory.mktemp("typing")
    for name in (USER, WRONG):
        shutil.copy(SCRIPTS / name, workdir / name)
    with ThreadPoolExecutor(2) as pool:   # the two checkers each take ~10-20 s: run them side by side
        mypy, pyright = pool.submit(_mypy, workdir), pool.submit(_pyright, workdir)
        return {"mypy": mypy.result(), "basedpyright": pyright.result()}


def test_user_script_runs():
    pytest.importorskip("torch", reason="the typing scripts use torch")
    pytest.importorskip("numpy", reason="the typing scripts use NumPy")
    proc = subprocess.run([sys.executable, str(SCRIPTS / USER)], capture_output=True, text=True,
                          timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith(": ok")


@pytest.mark.slow
@pytest.mark.parametrize("checker", ["mypy", "basedpyright"])
def test_user_script_has_no_type_errors(checked, checker):
    errors, log = checked[checker]
    assert not errors.get(USER), f"{checker} --strict on a correct user script:\n{log}"


@pytest.mark.slow
@pytest.mark.parametrize("checker", ["mypy", "basedpyright"])
def test_wrong_script_errors_are_caught(checked, checker):
    errors, log = checked[checker]
    want = expected_error_lines(WRONG)
    assert len(want) >= 8
    assert set(errors.get(WRONG, {})) == want, f"{checker}: errors on lines {sorted(errors.get(WRONG, {}))}, " \
                                               f"expected on {sorted(want)}:\n{log}"


@pytest.mark.slow
def test_mypy_on_the_package():
    pytest.importorskip("mypy", reason="mypy checks pylayout's types and is not installed")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
                           "-p", "pylayout"], cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=600,
                          env=_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
