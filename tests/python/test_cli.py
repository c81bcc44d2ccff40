"""python -m pylayout demo / info / bench / --version run and say what they should."""
import io
import os
import re
import subprocess
import sys
import time

import pytest

import pylayout


def run(*args, env=None):
    proc = subprocess.run([sys.executable, "-m", "pylayout", *args], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def hiding(tmp_path, *modules):
    """An environment in which `import m` fails for each of `modules` (shadowed by a module that raises)."""
    for name in modules:
        (tmp_path / f"{name}.py").write_text("raise ImportError('hidden for this test')\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))


def test_version():
    assert run("--version").strip() == f"pylayout {pylayout.__version__}"


def test_info_prints_pylayouts_own_facts_before_importing_peers(tmp_path):
    # a torch that takes 30 s to import: info must have printed pylayout's facts before it starts
    (tmp_path / "torch.py").write_text("import time\ntime.sleep(30)\n__version__ = 'slow'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
               PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "pylayout", "info"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        start, first = time.monotonic(), proc.stdout.readline()
        assert "version" in first and time.monotonic() - start < 20, first
    finally:
        proc.kill()
        proc.wait()


def test_info_reports_build_and_peers():
    out = run("info")
    for key in ("version", "dlpack_version", "openmp", "simd", "num_threads", "numpy", "torch"):
        assert key in out


def stories(out):
    """{title: body} of the demo's sections."""
    parts = re.split(r"^== (.+?) =+$", out, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def check_speed_figures_agree(out):
    """Story 3 quotes the speed table's first row: the same measurement, and the thread count."""
    story = stories(out)["Story 3: layouts and speed"]
    m = re.search(r"best of (\d+) on (\d+) threads? \(pylayout.*?\): pylayout [\d.]+ ms \(([\d.]+) GB/s\)", story)
    assert m, story
    table = stories(out)["Speed (GB/s, this machine, now; full table: python -m pylayout bench)"]
    assert f"best of {m.group(1)} runs each, {m.group(2)} thread" in table
    row = re.search(r"^  NCHW->channels_last .*?f32(?: \(into\))?\s+([\d.]+)", table, flags=re.M)
    assert row and abs(float(row.group(1)) - float(m.group(3))) <= 0.051, (story, table)


def test_demo_runs_with_torch_and_numpy():
    torch = pytest.importorskip("torch", reason="the full demo needs torch")
    pytest.importorskip("numpy", reason="the full demo needs NumPy")
    out = run("demo")
    assert "skipped" not in out and "pylayout's own tensors do their part" not in out
    for claim in ("numpy -> pylayout -> numpy shares memory: True", "same data_ptr=True", "kept=True",
                  "kernel reads after pylayout.require(a): [0.0, 4.0, 8.0, 1.0]", "zero-copy=True",
                  "equal=True", "same object: True", "channels_last'): matches = True",
                  "gradient correct=True", "LayoutError: argument 'out'",
                  "pylayout.view_as_complex(same): (0, 3)"):
        assert claim in out, claim
    assert "equal=False" not in out
    assert "BufferError: the tensor has torch's conjugate bit set" in out
    # what it says about torch.view_as_complex is what the installed torch does
    einops_layout = torch.rand(336, 2, 1).transpose(1, 2).contiguous()
    try:
        torch.view_as_complex(einops_layout)
        assert "torch.view_as_complex(x) accepts it" in out
    except RuntimeError:
        assert "torch.view_as_complex(x): RuntimeError" in out
    with pytest.raises(RuntimeError):
        torch.view_as_complex(torch.empty_strided((0, 3, 2), (1, 3, 1)))
    assert "still refuses: an empty tensor with odd strides" in out
    check_speed_figures_agree(out)


def test_demo_without_torch_runs_numpy_parts(tmp_path):
    pytest.importorskip("numpy", reason="the demo's fallback part needs NumPy")
    out = run("demo", env=hiding(tmp_path, "torch"))
    assert "without torch: pylayout's own tensors do their part" in out
    assert "NumPy (4, 2) reversed" in out and "kernel reads after pylayout.require(a): [0.0, 4.0, 8.0, 1.0]" in out
    check_speed_figures_agree(out)


def test_demo_on_a_bare_install(tmp_path):
    """No torch, no NumPy: every story still shows pylayout doing its job, on its own tensors."""
    out = run("demo", env=hiding(tmp_path, "torch", "numpy"))
    assert "torch not installed, numpy not installed" in out and "skipped" not in out
    body = stories(out)
    assert len(body) == 7
    for claim, story in [("kernel reads after pylayout.require(a): [0.0, 4.0, 8.0, 1.0]", "Story 1"),
                         ("kernel reads (as is): [0.0, 1.0, 2.0, 3.0]", "Story 1"),
                         ("strides (2, 1, 1) (the einops layout)", "Story 2"),
                         ("zero-copy=True, z[1, 0] = (1+1.5j)", "Story 2"),
                         ("copy=False: ValueError", "Story 2"),
                         ("channels_last -> True", "Story 3"), ("equal=True", "Story 3"),
                         ("pylayout.empty((N, K, P, Q)) + NHWC kernel: matches the reference = False", "Story 4"),
                         ("format='channels_last'): matches = True", "Story 4"),
                         ("LayoutError: argument 'out'", "Story 4"), ("install torch", "Story 5")]:
        section = next(text for name, text in body.items() if name.startswith(story))
        assert claim in section, (claim, section)
    for name, text in body.items():
        assert len([line for line in text.splitlines() if line.strip()]) >= 1, name
    check_speed_figures_agree(out)


def test_bench_quick_runs():
    pytest.importorskip("torch", reason="the benchmark compares against torch")
    pytest.importorskip("numpy", reason="the benchmark compares against NumPy")
    proc = subprocess.run([sys.executable, "-m", "pylayout", "bench", "--quick", "--only", "2-D transpose"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "| 2-D transpose" in proc.stdout and "memcpy" in proc.stdout
    # not a terminal: no progress line, no carriage returns, only the table
    assert "\r" not in proc.stdout + proc.stderr and "rows" not in proc.stderr


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_bench_progress_on_a_terminal(capsys):
    from pylayout._bench import Progress

    term = FakeTerminal()
    progress = Progress(3, stream=term)
    progress.measuring("case A")
    assert term.getvalue().endswith("[0/3 rows, 0s so far] measuring case A")
    progress.start -= 120          # two minutes into the run ...
    progress.row("| case A | 1 |")
    assert capsys.readouterr().out == "| case A | 1 |\n"
    assert term.getvalue().endswith("[1/3 rows, 2m00s so far, about 4m00s left] measuring case A")
    progress.row("| case A | 2 |")
    progress.row("| case A | 3 |")
    progress.close()
    assert term.getvalue().endswith("\r\x1b[K"), "the progress line is erased at the end"
    capsys.readouterr()

    piped = io.StringIO()          # not a terminal: nothing but the rows
    quiet = Progress(2, stream=piped)
    quiet.measuring("case B")
    quiet.row("| case B | 1 |")
    quiet.close()
    assert piped.getvalue() == "" and capsys.readouterr().out == "| case B | 1 |\n"


# ------------------------------------------------ bench rows of issue 16

THREADS = sorted({1, os.cpu_count() or 1})
SPREAD = re.compile(r"^-?[\d.]+ \([\d.]+-[\d.]+\)$")


def bench(*args, env=None, timeout=600):
    pytest.importorskip("torch", reason="the benchmark compares against torch")
    pytest.importorskip("numpy", reason="the benchmark compares against NumPy")
    proc = subprocess.run([sys.executable, "-m", "pylayout", "bench", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def bench_rows(out, name, exact=False):
    """{thread count: {column: cell}} of the table rows whose first cell contains `name` (is `name`,
    with exact), each keyed by the header of its own table."""
    rows, header = {}, None
    for line in out.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("case", "size"):
            header = cells
        elif (cells[0] == name) if exact else (name in cells[0]):
            assert header is not None and len(cells) == len(header), line
            named = {}
            for column, cell in zip(header, cells):
                named.setdefault(column, cell)  # the first of equal names: convert's before into's
            if "into: pylayout" in header:  # the copies table: into's figures after convert's
                named["pylayout"] = cells[header.index("into: pylayout")]
            rows[int(named["thr"])] = named
    return rows


def figure(cell):
    """The number of a cell: the value, or the median of 'median (min-max)'."""
    return float(cell.split()[0])


def rounding_interval(cell):
    """The values a printed figure may stand for: half a unit of its last decimal either side."""
    text = cell.split()[0]
    half = 0.5 * 10.0 ** -(len(text.split(".")[1]) if "." in text else 0)
    return float(text) - half, float(text) + half


def assert_quotient(ratio, a, b, context):
    """The printed ratio is a / b for some values the printed a and b may stand for (each rounded
    to its own decimals, so 2.35 / 0.30 may print 7.94: 0.30 stands for 0.295-0.305)."""
    (r_lo, r_hi), (a_lo, a_hi), (b_lo, b_hi) = map(rounding_interval, (ratio, a, b))
    assert b_lo > 0, context
    assert r_hi >= a_lo / b_hi * (1 - 1e-9) and r_lo <= a_hi / b_lo * (1 + 1e-9), (ratio, a, b, context)


def test_a_printed_ratio_is_checked_to_the_rounding_of_its_figures():
    """The check the benchmark tests use: the CI run that printed 2.35 ms / 0.30 ms as 7.94 was
    right (0.30 was 0.296), and a ratio no rounding explains still fails."""
    assert_quotient("7.94", "2.35", "0.30", "")
    assert_quotient("0.0031", "0.0031", "1.00", "")
    for wrong in (("8.10", "2.35", "0.30"), ("7.60", "2.35", "0.30"), ("1.00", "1.00", "0.00")):
        with pytest.raises(AssertionError):
            assert_quotient(*wrong, "")


def check_memcpy_rows(out, names):
    """Each named row at every thread count, with a memcpy measured at that thread count and
    the ratio to it."""
    assert "memcpy at N threads: one C memcpy cut into N slices that an OpenMP team copies at once" in out
    for name in names:
        rows = bench_rows(out, name)
        assert sorted(rows) == THREADS, (name, out)
        for n, row in rows.items():
            memcpy = next(v for k, v in row.items() if k.startswith("memcpy") and "thr threads" in k)
            assert figure(memcpy) > 0 and figure(row["/ memcpy"]) > 0, (name, n, row)
            if " (" not in memcpy:  # one run: the ratio is exactly these two figures' (to their rounding)
                assert_quotient(row["/ memcpy"], row["pylayout"], memcpy, (name, n, row))


def test_bench_three_channel_rows():
    out = bench("--quick", "--only", "C=3")
    check_memcpy_rows(out, ["NCHW->NHWC C=3 f32", "NCHW->NHWC C=3 u8", "NHWC->NCHW u8 C=3"])


def test_bench_rows_build_the_tensor_their_name_gives(torch):
    """Each copy row's name states the shape it times.  A row's builder that
    read a loop variable late timed another row's tensor (until issue 16's
    third session the "8192x8192 uint8" row timed 4096x4096 and the "C=3 u8"
    row a 64-channel image): every builder binds what it uses."""
    from pylayout._bench import copy_cases

    def tuples(name):
        return [tuple(int(v) for v in m.split(",") if v.strip()) for m in re.findall(r"\(([\d, ]+)\)", name)]

    for quick in (True, False):
        for case in copy_cases(quick):
            if not quick and "2-D transpose" not in case.name and "C=3" not in case.name:
                continue  # full size: only the rows a builder bug hit, the rest are large
            make = case.make
            with torch.device("meta"):  # shapes only: nothing allocated
                x = make()
            dims = tuple(x.shape)
            named = tuples(case.name)
            ok = (dims in named or (len(dims) == 2 and f"{dims[0]}x{dims[1]}" in case.name)
                  or any(sorted(t) == sorted(dims) for t in named)  # a permute names the shape it permutes
                  or "::2" in case.name and dims[:-1] + (2 * dims[-1],) in named
                  or "0]" in case.name and any(t[:-1] == dims for t in named)  # one channel, one coordinate
                  or ":3]" in case.name and any(sorted(t[:-1] + (3,)) == sorted(dims) for t in named))  # groups
            assert ok, f"{case.name!r} builds a tensor of shape {dims}"


def test_bench_figures_never_round_a_positive_value_to_zero():
    """A copy a busy machine stalled reads as a small figure with its digits, not 0.00: the
    tables' ratios and the tests below need every measured figure above zero."""
    from pylayout._bench import fig, num
    assert [num(v) for v in (0.0, 1.234, 12.0, 0.01, 0.0031, 0.00999, 4.2e-7)] == \
        ["0.00", "1.23", "12.00", "0.01", "0.0031", "0.0100", "0.00000042"]
    assert num(0.0031, 1) == "0.0031" and num(0.03, 1) == "0.030" and num(-0.004) == "-0.0040"
    assert fig([0.004]) == "0.0040" and fig([0.004, 2.0, 3.0]) == "2.00 (0.0040-3.00)"
    assert all(figure(fig([v])) > 0 for v in (1e-9, 3e-5, 0.004))


def test_bench_goal_rows_with_spread():
    out = bench("--quick", "--runs", "2", "--only", "complex no-view", "--only", "in-cache",
                "--only", "permute 5-D", "--only", "uint8", "--only", "1 KB")
    assert "median (min-max) of 2 runs" in out
    check_memcpy_rows(out, ["complex no-view", "in-cache 2-D transpose 64 KB", "in-cache 2-D transpose 256 KB",
                            "in-cache 2-D transpose 1 MB", "in-cache 2-D transpose, dst rows off their lines",
                            "permute 5-D", "2-D transpose 1024x1024 uint8"])
    for name, ref in (("1 KB torch tensor", "torch .contiguous()"), ("1 KB NumPy array", "np.ascontiguousarray")):
        rows = bench_rows(out, name)
        assert sorted(rows) == THREADS, out
        for row in rows.values():
            assert row["reference"] == ref
            for column in ("pylayout µs", "reference µs", "pylayout / reference"):
                assert SPREAD.match(row[column]), (name, column, row[column])
    for row in bench_rows(out, "permute 5-D").values():
        for column in ("convert: pylayout", "memcpy (thr threads)", "/ memcpy", "x torch"):
            assert SPREAD.match(row[column]), (column, row[column])
    for size in (" 64 KB", " 256 KB", " 1 MB", ", dst rows off their lines"):
        for row in bench_rows(out, f"in-cache 2-D transpose{size}").values():
            for column in ("pylayout, NumPy operands", "/ memcpy, NumPy operands",
                           "pylayout, NumPy 16 B off a line", "/ memcpy, off a line"):
                assert SPREAD.match(row[column]), (size, column, row[column])
    if THREADS != [1]:
        line = [x for x in out.splitlines() if x.startswith("multi-thread memcpy, CPU time / wall time")]
        assert len(line) == 1, out
        ratio = re.search(r"median ([\d.]+), min ([\d.]+), max ([\d.]+)", line[0])
        assert ratio or "none of its copies took 100 µs" in line[0], line[0]
        if ratio:
            median, low, high = map(float, ratio.groups())
            assert 0 < low <= median <= high <= THREADS[-1] * 1.05, line[0]


def test_bench_after_a_torch_op():
    """The section that times copies right after a parallel torch op: a row per size and wait
    policy, each ratio the quotient of the figures beside it, and no other section."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("the section compares 1 and 2 threads")
    out = bench("--quick", "--only", "after a torch op")
    assert "## Right after a torch op" in out and "## Transposes that fit in cache" not in out
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0].endswith("MiB"):
            rows[cells[0], cells[1]] = cells[2:]
    assert sorted(rows) == [(s, p) for s in ("1 MiB", "4 MiB") for p in ("OMP_WAIT_POLICY=passive", "default")]
    for (size, policy), (pl1, pl2, ratio, quiet, torch2, x_torch) in rows.items():
        assert min(map(figure, (pl1, pl2, quiet, torch2))) > 0, (size, policy)
        assert_quotient(ratio, pl2, pl1, (size, policy))
        assert_quotient(x_torch, torch2, pl2, (size, policy))


def test_bench_child_processes_run_this_pylayout_without_the_settings_they_measure(monkeypatch):
    """The sections that time fresh processes (after a torch op, oversubscribed) start them with
    this pylayout first on the path and without the settings the section sets itself; a child
    that fails raises with its stderr rather than printing a row."""
    from pylayout import _bench
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    monkeypatch.setenv("PYLAYOUT_NUM_THREADS", "1")
    env = _bench._child_env("OMP_WAIT_POLICY", "PYLAYOUT_NUM_THREADS")
    assert "OMP_WAIT_POLICY" not in env and "PYLAYOUT_NUM_THREADS" not in env
    code = ("import json, os, pylayout; print(json.dumps([os.path.dirname(pylayout.__file__), "
            "os.environ.get('OMP_WAIT_POLICY')]))")
    where, policy = _bench._child_json(code, env, "test")
    assert os.path.samefile(where, os.path.dirname(pylayout.__file__)) and policy is None
    with pytest.raises(RuntimeError, match=r"test child failed:\n(.|\n)*ZeroDivisionError"):
        _bench._child_json("1 / 0", env, "test")


def test_bench_memcpy_contention_pools_long_copies_only():
    """The run's closing CPU time / wall time leaves out copies under 100 µs, whose
    wake-up cost would read as contention, and pools the rest to a millisecond
    each, so a fast machine's short copies still give ratios."""
    _bench = pytest.importorskip("pylayout._bench", reason="the benchmark needs NumPy and torch")
    M = _bench.Memcpy
    M.reset()
    M.record(cpu=2e-6, wall=2e-5, number=10)  # 2 µs copies: left out
    assert M.timed and M.cpu_wall == [] and M._pool == [0.0, 0.0]
    for _ in range(3):
        M.record(cpu=6e-4, wall=3e-4, number=1)  # 300 µs copies, pooled
    assert M.cpu_wall == [] and M._pool[1] == pytest.approx(9e-4)
    M.record(cpu=4e-4, wall=2e-4, number=2)  # 100 µs each: the pool passes 1 ms
    assert M.cpu_wall == [pytest.approx(2.0)] and M._pool == [0.0, 0.0]
    M.record(cpu=3e-4, wall=2e-4)
    M.flush()  # the run's end takes what is left
    assert M.cpu_wall == [pytest.approx(2.0), pytest.approx(1.5)]
    M.reset()
    assert M.cpu_wall == [] and not M.timed


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_bench_memcpy_reference_copies_every_byte_and_no_other(threads):
    """The benchmark's N-thread memcpy (_core._memcpy, an OpenMP team without
    the GIL): every byte of src lands in dst, whatever the slices' edges, and
    nothing past dst's ends is written."""
    for size in (0, 1, 63, 64 * threads - 1, 64 * threads, 64 * threads + 1, 4096 * threads + 17, (1 << 20) + 5):
        src = bytes((i * 7 + 3) % 251 for i in range(size))
        buf = bytearray(b"\xaa" * (size + 128))
        dst = memoryview(buf)[64:64 + size]
        cpu = pylayout._core._memcpy(dst, src, threads)
        assert bytes(dst) == src, size
        assert buf[:64] == b"\xaa" * 64 and buf[64 + size:] == b"\xaa" * 64, size
        assert cpu >= 0.0


def test_bench_memcpy_reference_refuses_what_it_cannot_copy():
    memcpy = pylayout._core._memcpy
    with pytest.raises(ValueError, match="one size"):
        memcpy(bytearray(5), b"abcd", 1)
    for threads in (0, -1, 4097):
        with pytest.raises(ValueError, match="threads"):
            memcpy(bytearray(4), b"abcd", threads)
    buf = bytearray(16)
    with pytest.raises(ValueError, match="overlap"):
        memcpy(memoryview(buf)[4:12], memoryview(buf)[:8], 2)
    with pytest.raises(TypeError):
        memcpy(b"abcd", bytearray(4), 1)  # dst must be writable
    assert bytes(buf) == bytes(16)


def test_bench_sweep_prints_a_table(tmp_path):
    out = bench("--sweep", "--quick", "--max-size", "256K", env=hiding(tmp_path, "matplotlib"))
    for size in ("4 KB", "16 KB", "64 KB", "256 KB"):
        rows = bench_rows(out, size, exact=True)
        assert sorted(rows) == THREADS, (size, out)
        for row in rows.values():
            for column in ("pylayout", "torch", "numpy", "memcpy (thr threads)", "/ memcpy"):
                assert figure(row[column]) > 0, (size, column, row)
    assert "1 MB" not in out
    lines = [line for line in out.splitlines() if "--plot" in line and "matplotlib" in line]
    assert len(lines) == 1, out


def test_bench_sweep_without_matplotlib_says_how_to_get_the_plot(tmp_path):
    png = tmp_path / "sweep.png"
    out = bench("--sweep", "--quick", "--max-size", "16K", "--plot", str(png), env=hiding(tmp_path, "matplotlib"))
    assert bench_rows(out, "16 KB", exact=True) and not png.exists()
    assert len([line for line in out.splitlines() if "matplotlib is not installed" in line]) == 1, out


def test_bench_sweep_writes_the_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot is drawn with matplotlib, an optional dependency")
    png = tmp_path / "plots" / "sweep.png"
    out = bench("--sweep", "--quick", "--max-size", "16K", "--plot", str(png))
    assert f"plot written to {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_options_that_need_sweep():
    proc = subprocess.run([sys.executable, "-m", "pylayout", "bench", "--plot", "x.png"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "--sweep" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "pylayout", "bench", "--runs", "0"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "--runs" in proc.stderr


@pytest.mark.parametrize("only, function", [("C=3", "contiguous"), ("NHWC->NCHW u8", "copy_into"),
                                            ("in-cache", "copy_into"), ("1 KB", "contiguous"),
                                            ("complex no-view", "view_as_complex"), (None, "copy_into")])
def test_bench_refuses_to_time_a_wrong_result(monkeypatch, capsys, only, function):
    """A row whose pylayout result is wrong raises before any timing (only=None: the sweep)."""
    pytest.importorskip("torch", reason="the benchmark compares against torch")
    pytest.importorskip("numpy", reason="the benchmark compares against NumPy")
    from pylayout import _bench

    real = getattr(pylayout, function)

    def wrong(*args, **kwargs):
        out = real(*args, **kwargs)
        if function == "copy_into":
            out = args[0]
        out[(0,) * out.ndim] += 1  # one element off, in place whatever the strides
        return out

    monkeypatch.setattr(pylayout, function, wrong)
    with pytest.raises(AssertionError, match="differs"):
        if only is None:
            _bench.run(quick=True, sweep=True, max_size="16K")
        else:
            _bench.run(quick=True, only=only)
    capsys.readouterr()
