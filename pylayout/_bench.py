"""python -m pylayout bench: pylayout against torch, NumPy and memcpy.

Every figure in a row is measured in the same run, at the same thread count.
Bandwidth is counted as bytes of the tensor moved once (read + written =
2x that in traffic, for every contestant alike).  "memcpy" is np.copyto of a
contiguous array of the same bytes (NumPy copies on one thread), between
buffers allocated by torch and written before timing, like the tensors converted (an untouched source would
read the kernel's shared zero page from cache and flatter memcpy).  Ratios
are pylayout's speed over theirs.  Conversions that allocate pay for faulting in
their output's pages; copies into a preallocated output show the kernels.
"""
from __future__ import annotations

import gc
import os
import platform
import random
import sys
import time
from typing import Any, TextIO

import pylayout as pl

np: Any
torch: Any
try:
    import numpy as np
except ImportError:  # pragma: no cover - NumPy is an optional peer
    np = None
try:
    import torch
except ImportError:  # pragma: no cover - torch is an optional peer
    torch = None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def best_time(fn, repeat: int, min_time: float = 0.0) -> float:
    """Best wall time of `fn()` over `repeat` runs (at least one warm-up)."""
    fn()
    best = float("inf")
    start = time.perf_counter()
    n = 0
    while n < repeat or (time.perf_counter() - start) < min_time:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        n += 1
    return best


def per_call_ns(fn, number: int) -> float:
    """Best of 5 batches of `number` calls, in ns per call."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / number)
    return best


def bytes_pair(nbytes: int):
    """Source and destination of `nbytes` for the memcpy baselines: torch
    allocations (the same allocator, page size and alignment as the tensors
    converted), both written so no page is unmapped or the shared zero page."""
    src = torch.empty(nbytes, dtype=torch.uint8).fill_(1)
    dst = torch.empty(nbytes, dtype=torch.uint8).fill_(2)
    return src, dst


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Rows done / total and an estimate of the time left, on stderr while it is a terminal.

    Rows take 5-35 s each.  ``row(line)`` prints a finished table row on stdout
    and redraws the progress line in place below it; off a terminal (a pipe, a
    log file, CI) nothing extra is written, so the output is just the table.
    """

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total, self.done, self.label = total, 0, ""
        self.stream = sys.stderr if stream is None else stream
        self.active = total > 0 and self.stream.isatty()
        self.start = time.perf_counter()

    def measuring(self, label: str) -> None:
        self.label = label
        self._draw()

    def row(self, line: str) -> None:
        self._clear()
        print(line, flush=True)
        self.done += 1
        self._draw()

    def close(self) -> None:
        self._clear()

    def _clear(self) -> None:
        if self.active:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def _draw(self) -> None:
        if not self.active or self.done >= self.total:
            return
        elapsed = time.perf_counter() - self.start
        text = f"[{self.done}/{self.total} rows, {_duration(elapsed)} so far"
        if self.done:
            text += f", about {_duration(elapsed / self.done * (self.total - self.done))} left"
        self.stream.write("\r\x1b[K" + text + "]" + (f" measuring {self.label}" if self.label else ""))
        self.stream.flush()


def set_threads(n: int) -> None:
    pl.set_num_threads(n)
    if torch is not None:
        torch.set_num_threads(n)


# ------------------------------------------------------------- exchange


def bench_exchange(quick: bool) -> list[str]:
    lines = ["## DLPack exchange overhead (ns per call, small tensor)", ""]
    number = 2000 if quick else 20000
    rows = []
    if torch is not None:
        t = torch.zeros(4, 4)
        p = pl.from_dlpack(t)
        imp = per_call_ns(lambda: pl.from_dlpack(t), number)
        ref = per_call_ns(lambda: torch.from_dlpack(t), number)
        rows.append(("import torch -> pylayout: pl.from_dlpack(t)", imp, "torch.from_dlpack(t)", ref))
        exp = per_call_ns(lambda: pl._core._to_type(p, torch.Tensor), number)
        rows.append(("export pylayout -> torch (exchange API)", exp, "torch.from_dlpack(t)", ref))
        exp2 = per_call_ns(lambda: torch.from_dlpack(p), number)
        rows.append(("export pylayout -> torch: torch.from_dlpack(p)", exp2, "torch.from_dlpack(t)", ref))
    if np is not None:
        a = np.zeros((4, 4), dtype=np.float32)
        imp = per_call_ns(lambda: pl.from_dlpack(a), number)
        ref = per_call_ns(lambda: np.from_dlpack(a), number)
        rows.append(("import numpy -> pylayout: pl.from_dlpack(a)", imp, "np.from_dlpack(a)", ref))
        p = pl.from_dlpack(a)
        exp = per_call_ns(lambda: np.from_dlpack(p), number)
        rows.append(("export pylayout -> numpy: np.from_dlpack(p)", exp, "np.from_dlpack(a)", ref))
    lines.append(f"| operation | pylayout ns | reference | reference ns | pylayout / reference |")
    lines.append("|---|---:|---|---:|---:|")
    for name, ours, refname, ref in rows:
        lines.append(f"| {name} | {ours:.0f} | {refname} | {ref:.0f} | {ours / ref:.2f} |")
    return lines


# ---------------------------------------------------------------- copies


class Case:
    def __init__(self, name, make, pl_fn, torch_fn=None, np_fn=None):
        self.name, self.make, self.pl_fn, self.torch_fn, self.np_fn = name, make, pl_fn, torch_fn, np_fn


def _np_of(x):
    return x.numpy() if torch is not None and isinstance(x, torch.Tensor) else x


def copy_cases(quick: bool) -> list[Case]:
    s = 8 if quick else 1  # shrink factor for --quick
    cl: Any = torch.channels_last if torch else "channels_last"
    cl3: Any = torch.channels_last_3d if torch else "channels_last_3d"
    cases = []

    def nchw(shape, dtype=None):
        return lambda: torch.randn(*shape, dtype=dtype or torch.float32)

    def nhwc(shape):
        return lambda: torch.randn(*shape).contiguous(memory_format=cl)

    for nchw_shape in [(64, 256, 56, 56), (32, 64, 112, 112)]:
        shp: tuple[int, ...] = (max(1, nchw_shape[0] // s),) + nchw_shape[1:]
        cases.append(Case(f"NCHW->channels_last f32 {shp}", nchw(shp),
                          lambda x: pl.contiguous(x, cl),
                          lambda x: x.contiguous(memory_format=cl),
                          lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))))
        cases.append(Case(f"channels_last->NCHW f32 {shp}", nhwc(shp),
                          lambda x: pl.contiguous(x),
                          lambda x: x.contiguous(),
                          lambda a: np.ascontiguousarray(a)))
    shp = (max(1, 8 // s), 64, 32, 56, 56)
    cases.append(Case(f"NCDHW->channels_last_3d f32 {shp}", nchw(shp),
                      lambda x: pl.contiguous(x, cl3),
                      lambda x: x.contiguous(memory_format=cl3),
                      lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 4, 1))))
    for n in (8192, 12800):
        n //= s
        for dt in (torch.float32, torch.float64):
            cases.append(Case(f"2-D transpose {n}x{n} {str(dt)[6:]}",
                              lambda n=n, dt=dt: torch.randn(n, n, dtype=dt).t(),
                              pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    rng = random.Random(1234)
    target = (64 << 20) // s // 4  # float32 elements in ~64 MB
    for ndim in range(3, 7):
        side = max(2, round(target ** (1 / ndim)))
        shape = [side] * ndim
        shape[0] = max(1, target // side ** (ndim - 1))
        perm = list(range(ndim))
        while perm == sorted(perm):
            rng.shuffle(perm)
        cases.append(Case(f"permute {ndim}-D {tuple(shape)} by {tuple(perm)}",
                          lambda shape=shape, perm=perm: torch.randn(*shape).permute(*perm),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    n = 8192 // s
    cases.append(Case(f"2-D transpose {n}x{n} uint8",
                      lambda: torch.randint(0, 255, (n, n), dtype=torch.uint8).t(),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    cases.append(Case(f"2-D transpose {n}x{n} float16",
                      lambda: torch.randn(n, n, dtype=torch.float16).t(),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    shp = (max(1, 32 // s), 64, 112, 224)
    cases.append(Case(f"sliced input [..., ::2] f32 {shp}",
                      lambda: torch.randn(*shp)[..., ::2],
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    n = 4096 // s
    cases.append(Case(f"identity copy {n}x{n} f32 (memcpy path)",
                      lambda: torch.randn(n, n), lambda x: pl.from_dlpack(x, copy=True),
                      lambda x: x.clone(), np.copy))
    return cases


def _gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def bench_copies(quick: bool, only: str | None) -> list[str]:
    """Each case twice: converting (every contestant allocates its output, as
    .contiguous() does) and copying into a preallocated output of the target
    layout (kernel bandwidth, comparable with memcpy)."""
    if torch is None or np is None:
        return ["## Copies", "", "skipped: the copy benchmark compares against torch and NumPy; install both."]
    repeat = 2 if quick else 5
    # Best of at least `repeat` runs over at least min_time seconds: the first
    # runs on fresh buffers of a VM often come in well below steady state.
    min_time = 0.0 if quick else 0.4
    nthreads = [1, os.cpu_count() or 1] if (os.cpu_count() or 1) > 1 else [1]
    lines = [
        "## Layout conversions (GB/s of tensor bytes moved; x = pylayout's speed over the other's)",
        "",
        "convert: pylayout.contiguous / to_order vs torch .contiguous(fmt) vs np.ascontiguousarray, each allocating its",
        "output.  into: pylayout.copy_into vs torch dst.copy_(x) vs np.copyto(dst, x) into a preallocated output; "
        "memcpy: np.copyto of the same bytes, contiguous (one thread).",
        "",
        "| case | thr | convert: pylayout | torch | numpy | x torch | x numpy "
        "| into: pylayout | torch | numpy | memcpy | / memcpy | x torch | x numpy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    cases = [case for case in copy_cases(quick) if not only or only in case.name]
    progress = Progress(len(cases) * len(nthreads))
    for case in cases:
        progress.measuring(case.name)
        x = case.make()
        a = _np_of(x)
        nbytes = x.numel() * x.element_size()
        src_t, dst_t = bytes_pair(nbytes)
        src_np, dst_np = src_t.numpy(), dst_t.numpy()
        # correctness first: a benchmark of a wrong answer is worthless
        ours = case.pl_fn(x)
        ours_t = ours if isinstance(ours, torch.Tensor) else torch.from_dlpack(ours)
        if not torch.equal(ours_t, x):
            raise AssertionError(f"{case.name}: pylayout's result differs from its input")
        dst = case.torch_fn(x).clone(memory_format=torch.preserve_format)  # the target layout, preallocated
        dst_a = dst.numpy()
        pl.copy_into(dst, x)
        if not torch.equal(dst, x):
            raise AssertionError(f"{case.name}: copy_into's result differs from its input")
        del ours, ours_t
        for n in nthreads:
            set_threads(n)
            fns = [lambda: case.pl_fn(x), lambda: case.torch_fn(x), lambda: case.np_fn(a),
                   lambda: pl.copy_into(dst, x), lambda: dst.copy_(x), lambda: np.copyto(dst_a, a),
                   lambda: np.copyto(dst_np, src_np)]
            times = [best_time(f, repeat, min_time) for f in fns]
            conv, into = times[:3], times[3:]
            c = [_gbps(nbytes, t) for t in conv]
            i = [_gbps(nbytes, t) for t in into]
            lines.append(
                f"| {case.name} | {n} | {c[0]:.2f} | {c[1]:.2f} | {c[2]:.2f} | {c[0] / c[1]:.2f} | {c[0] / c[2]:.2f} "
                f"| {i[0]:.2f} | {i[1]:.2f} | {i[2]:.2f} | {i[3]:.2f} | {i[0] / i[3]:.2f} | {i[0] / i[1]:.2f} "
                f"| {i[0] / i[2]:.2f} |"
            )
            progress.row(lines[-1])
        del x, a, dst, dst_a, src_np, dst_np, src_t, dst_t
        gc.collect()
    progress.close()
    set_threads(os.cpu_count() or 1)
    return lines


def bench_small(quick: bool) -> list[str]:
    if torch is None:
        return []
    lines = ["## Small tensors (µs per call, transposed input -> contiguous)", "",
             "| size | threads | pylayout | torch .contiguous() | numpy ascontiguousarray | pylayout / torch |",
             "|---|---:|---:|---:|---:|---:|"]
    number = 500 if quick else 5000
    for nbytes in (1024, 64 * 1024):
        side = int((nbytes // 4) ** 0.5)
        x = torch.randn(side, side).t()
        a = x.numpy()
        for n in sorted({1, os.cpu_count() or 1}):
            set_threads(n)
            ours = per_call_ns(lambda: pl.contiguous(x), number) / 1000
            theirs = per_call_ns(lambda: x.contiguous(), number) / 1000
            npy = per_call_ns(lambda: np.ascontiguousarray(a), number) / 1000
            lines.append(f"| {side}x{side} f32 ({nbytes // 1024} KB) | {n} | {ours:.2f} | {theirs:.2f} "
                         f"| {npy:.2f} | {ours / theirs:.2f} |")
    set_threads(os.cpu_count() or 1)
    return lines


def bench_complex(quick: bool, only: str | None) -> list[str]:
    """pack_complex of two planar float32 tensors, and view_as_complex of a
    layout no view exists for, against torch and NumPy."""
    if torch is None or np is None:
        return ["## Complex packing", "", "skipped: needs torch and NumPy."]
    repeat = 2 if quick else 5
    n = (64 << 20) // 4 // (8 if quick else 1)  # elements in 64 MB of float32 (per plane)
    re, im = torch.randn(n), torch.randn(n)
    re_a, im_a = re.numpy(), im.numpy()
    out = torch.empty(n, dtype=torch.complex64)
    src_t, dst_t = bytes_pair(2 * n * 4)  # memcpy of the bytes written: the complex output
    src_np, dst_np = src_t.numpy(), dst_t.numpy()
    if not torch.equal(pl.pack_complex(re, im), torch.complex(re, im)):
        raise AssertionError("pack_complex differs from torch.complex")
    # (n, 2) viewed through a transpose: no complex view exists, both must pack
    # its 2n floats into n complex64, the same bytes as the cases above
    x = torch.randn(2, n).t()
    if not torch.equal(pl.view_as_complex(x), torch.view_as_complex(x.contiguous())):
        raise AssertionError("view_as_complex differs from torch")
    lines = ["## Complex packing (GB/s of the complex output; x = pylayout's speed over the other's)", "",
             "| case | thr | pylayout | torch | numpy | memcpy | / memcpy | x torch | x numpy |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    nbytes = 2 * n * 4
    cases = [
        (f"pack_complex 2 x {n * 4 >> 20} MB f32 (allocating)", lambda: pl.pack_complex(re, im),
         lambda: torch.complex(re, im), lambda: re_a + 1j * im_a),
        (f"pack_complex into out= (preallocated)", lambda: pl.pack_complex(re, im, out=out),
         lambda: torch.complex(re, im, out=out), None),
        (f"view_as_complex, not viewable ({n}, 2) transposed", lambda: pl.view_as_complex(x),
         lambda: torch.view_as_complex(x.contiguous()), None),
    ]
    cases = [case for case in cases if not only or only in case[0]]
    progress = Progress(len(cases) * len({1, os.cpu_count() or 1}))
    for name, ours, theirs, npy in cases:
        progress.measuring(name)
        for t in sorted({1, os.cpu_count() or 1}):
            set_threads(t)
            g = [_gbps(nbytes, best_time(f, repeat)) if f else float("nan")
                 for f in (ours, theirs, npy, lambda: np.copyto(dst_np, src_np))]
            lines.append(f"| {name} | {t} | {g[0]:.2f} | {g[1]:.2f} | {g[2]:.2f} | {g[3]:.2f} | {g[0] / g[3]:.2f} "
                         f"| {g[0] / g[1]:.2f} | {g[0] / g[2]:.2f} |")
            progress.row(lines[-1])
    progress.close()
    set_threads(os.cpu_count() or 1)
    return lines


# --------------------------------------------------------- oversubscribed

OVERSUBSCRIBED_SIZES = (256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20)


def oversubscribed_child(sizes, reps: int) -> dict:
    """In a fresh process: per size, the median of `reps` calls of a float32
    transposed -> contiguous conversion for pylayout and torch at 1 and 2
    threads, each after two warm-up calls.  Seconds.  Not interleaved call by
    call: threads a 2-thread call leaves spinning would slow the 1-thread call
    after it and flatter the ratio."""
    import statistics

    out: dict[str, dict[str, float]] = {}
    for nbytes in sizes:
        n = int((nbytes // 4) ** 0.5)
        x = torch.randn(n, n).t()
        if not torch.equal(pl.contiguous(x), x):
            raise AssertionError(f"{n}x{n}: pylayout's result differs from its input")
        fns = {"pl1": (pl.set_num_threads, 1, lambda: pl.contiguous(x)),
               "pl2": (pl.set_num_threads, 2, lambda: pl.contiguous(x)),
               "torch1": (torch.set_num_threads, 1, lambda: x.contiguous()),
               "torch2": (torch.set_num_threads, 2, lambda: x.contiguous())}
        out[str(nbytes)] = row = {}
        for key, (setter, threads, fn) in fns.items():
            setter(threads)
            fn()
            fn()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            row[key] = statistics.median(times)
    return out


def _busy_loops(count: int):
    """`count` unpinned processes that each keep a core busy, the way any
    other job shares a machine."""
    import subprocess
    import sys

    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def bench_oversubscribed(quick: bool) -> list[str]:
    """1 vs 2 threads with all cores but one kept busy by other processes, in
    several fresh processes one after another: where the scheduler puts the
    threads differs between processes and stays for a process's life."""
    if torch is None:
        return ["## Oversubscribed", "", "skipped: the section compares against torch; install it."]
    import json
    import subprocess
    import sys

    nproc, reps = (3, 7) if quick else (8, 21)
    cores = os.cpu_count() or 1
    nbusy = max(1, cores - 1)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(pl.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg_root, os.environ.get("PYTHONPATH", "")]))
    env.pop("PYLAYOUT_NUM_THREADS", None)
    code = ("import json, sys; from pylayout._bench import oversubscribed_child; "
            f"print(json.dumps(oversubscribed_child({list(OVERSUBSCRIBED_SIZES)}, {reps})))")
    busy = _busy_loops(nbusy)
    runs = []
    try:
        time.sleep(0.5)
        for _ in range(nproc):
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(f"oversubscribed child failed:\n{proc.stderr}")
            runs.append(json.loads(proc.stdout))
    finally:
        for b in busy:
            b.kill()
            b.wait()
    lines = [f"## Oversubscribed: {nbusy} busy process{'es' if nbusy > 1 else ''} on {cores} cores "
             f"(ms, median of {reps} calls, transposed float32 -> contiguous)", "",
             f"`python -c 'while True: pass'` x {nbusy}, unpinned, runs throughout; each row's figures come from "
             f"{nproc} fresh processes one after another (min-max over them).  2/1: the 2-thread time over the "
             "1-thread time in the same process.", "",
             "| size | pylayout 1 thr | pylayout 2 thr | pylayout 2/1 per process | worst 2/1 "
             "| torch 1 thr | torch 2 thr | torch worst 2/1 |",
             "|---|---:|---:|---|---:|---:|---:|---:|"]
    worst = 0.0
    for nbytes in OVERSUBSCRIBED_SIZES:
        rows = [r[str(nbytes)] for r in runs]

        def span(key):
            v = [1e3 * r[key] for r in rows]
            return f"{min(v):.3f}-{max(v):.3f}"

        ratios = [r["pl2"] / r["pl1"] for r in rows]
        tratios = [r["torch2"] / r["torch1"] for r in rows]
        worst = max(worst, max(ratios))
        size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
        lines.append(f"| {size} | {span('pl1')} | {span('pl2')} | {' '.join(f'{q:.2f}' for q in ratios)} "
                     f"| {max(ratios):.2f} | {span('torch1')} | {span('torch2')} | {max(tratios):.2f} |")
    lines += ["", f"worst pylayout 2-thread / 1-thread ratio, any size, any process: **{worst:.2f}** "
              "(goal: at most 1.25)"]
    return lines


def run(quick: bool = False, only: str | None = None) -> int:
    info = pl.info()
    header = [
        "# pylayout benchmark",
        "",
        f"- machine: {cpu_model()}, {os.cpu_count()} logical cores, {platform.machine()}",
        f"- pylayout {info['version']} (SIMD path {info['simd']}, OpenMP {'on' if info['openmp'] else 'off'}), "
        f"torch {info['torch']}, numpy {info['numpy']}, python {platform.python_version()}",
        f"- command: python -m pylayout bench{' --quick' if quick else ''}{f' --only {only!r}' if only else ''}",
        "",
    ]
    print("\n".join(header), flush=True)
    if only == "oversubscribed":
        print("\n".join(bench_oversubscribed(quick)), flush=True)
        return 0
    if not only:
        for section in (bench_exchange, bench_small):
            print("\n".join(section(quick)) + "\n", flush=True)
    bench_copies(quick, only)
    print(flush=True)
    bench_complex(quick, only)
    if not only:
        print(flush=True)
        print("\n".join(bench_oversubscribed(quick)), flush=True)
    return 0
