"""python -m pylayout bench: pylayout against torch, NumPy and memcpy.

Every figure in a row is measured in the same run, at the same thread count.
Bandwidth is counted as bytes of the tensor moved once (read + written =
2x that in traffic, for every contestant alike).  "memcpy" is np.copyto of a
contiguous array of the same bytes **at the row's thread count**: at 1 thread
on the calling thread, at N threads one C memcpy cut into N slices that an
OpenMP team copies at once, without the GIL (pylayout._core._memcpy; the CPU
time / wall time of those copies is printed at the end as the check).  Its buffers are allocated by
torch and written before timing, like the tensors converted (an untouched
source would read the kernel's shared zero page from cache and flatter
memcpy).  Ratios are pylayout's speed over theirs.  Conversions that allocate
pay for faulting in their output's pages; copies into a preallocated output
show the kernels.

``--runs N`` repeats every measurement N times and prints each figure as
``median (min-max)``; ratios are taken run by run (both figures of a ratio
come from the same run) before their median and spread.
"""
from __future__ import annotations

import functools
import gc
import math
import os
import platform
import random
import statistics
import sys
import time
from typing import Any, Callable, TextIO

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


def num(v: float, digits: int = 2) -> str:
    """v with `digits` decimals, or with two significant digits where those decimals would round
    a positive figure to zero: a copy the scheduler stalled on a busy machine reads 0.0031, not
    0.00, which no ratio could be taken of."""
    if v == 0 or v != v or abs(v) >= 10.0 ** -digits:
        return f"{v:.{digits}f}"
    return f"{v:.{min(12, 1 - math.floor(math.log10(abs(v))))}f}"


def fig(values: list[float], digits: int = 2) -> str:
    """One figure: the value of a single run, or `median (min-max)` over several runs; '-' where
    a contestant has no such operation."""
    if not values or any(v != v for v in values):  # NaN: not measured
        return "-"
    if len(values) == 1:
        return num(values[0], digits)
    return f"{num(statistics.median(values), digits)} ({num(min(values), digits)}-{num(max(values), digits)})"


def per_run(a: list[float], b: list[float]) -> list[float]:
    """a / b run by run: the two figures of each ratio come from the same run."""
    return [x / y for x, y in zip(a, b)]


def selected(name: str, only: list[str] | None) -> bool:
    return not only or any(text in name for text in only)


def threads_to_measure() -> list[int]:
    cores = os.cpu_count() or 1
    return [1, cores] if cores > 1 else [1]


class Memcpy:
    """A memcpy of contiguous bytes at a given thread count.

    At 1 thread the calling thread copies with np.copyto; at N threads one
    call of pylayout._core._memcpy cuts the bytes into N slices on 64-byte
    boundaries that an OpenMP team copies at once, with the GIL released.
    Either way one Python call a copy, as pylayout's copies are timed.  Every
    multi-thread call records the team's CPU time / wall time in
    `Memcpy.cpu_wall`, near N when its threads ran at once, lower when other
    processes held the cores.

    The N-thread memcpy was N Python threads each calling np.copyto on a
    slice until session 41: between copies they queue for the GIL, and on a
    lent 16-core machine they kept about 3 cores busy (a 154 MB copy at 42-47
    GB/s, which pylayout's threads copied transposed at 134-159).  On the
    2-core dev VM the C reference is the stronger one too (GB/s, 2 threads,
    Python threads / C: 64 KB 25-30 / 27, 256 KB 37-38 / 58, 1 MB 72-81 / 84,
    64 MB 24-26 / 25).  A weaker reference flatters every ratio against it.
    """

    cpu_wall: list[float] = []
    _pool: list[float] = [0.0, 0.0]  # CPU seconds, wall seconds not yet in cpu_wall
    timed = False  # whether a multi-thread copy was timed since reset()

    def __init__(self, nbytes: int = 0, src: Any = None, dst: Any = None) -> None:
        if src is None:
            src_t, dst_t = bytes_pair(nbytes)
            src, dst = src_t.numpy(), dst_t.numpy()
        self.src, self.dst = src, dst  # 1-D uint8 arrays of the same size

    def fn(self, threads: int, number: int = 1):
        """A callable that copies the bytes `number` times at `threads` threads."""
        d, s = self.dst, self.src
        if threads <= 1:
            if number == 1:
                return lambda: np.copyto(d, s)

            def serial():
                for _ in range(number):
                    np.copyto(d, s)
            return serial
        copy = pl._core._memcpy

        def parallel():
            w0 = time.perf_counter()
            cpu = 0.0
            for _ in range(number):
                cpu += copy(d, s, threads)
            Memcpy.record(cpu, time.perf_counter() - w0, number)
        return parallel

    @classmethod
    def record(cls, cpu: float, wall: float, number: int = 1) -> None:
        """Take a timed call of `number` copies into `cpu_wall`.  Copies under 100 µs
        are left out: the team's wake-up and the call's own cost, outside the CPU time,
        weigh on them (2 threads on the dev VM: 64 KB 0.68, 1 MB 1.63, 4 MB 1.87,
        16 MB 1.95).  The rest are pooled until they cover a millisecond, and each
        pool adds one ratio.  Until session 44 a ratio took one call of over a
        millisecond, and a quick run on a faster CI machine ended with none."""
        cls.timed = True
        if wall < 1e-4 * number:
            return
        cls._pool[0] += cpu
        cls._pool[1] += wall
        if cls._pool[1] >= 1e-3:
            cls.flush()

    @classmethod
    def flush(cls) -> None:
        if cls._pool[1] > 0:
            cls.cpu_wall.append(cls._pool[0] / cls._pool[1])
        cls._pool[:] = [0.0, 0.0]

    @classmethod
    def reset(cls) -> None:
        cls.cpu_wall.clear()
        cls._pool[:] = [0.0, 0.0]
        cls.timed = False


def measure(fns, runs: int, repeat: int, min_time: float = 0.0, number: int = 1) -> list[list[float]]:
    """Seconds per call of each of `fns`, one list of `runs` values per contestant.  Each run
    times every contestant in turn (best of `repeat` calls of fn, each doing `number` calls), so
    the contestants of a run are measured seconds apart and a slow patch of the machine shows up
    as spread instead of tilting one ratio."""
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for i, f in enumerate(fns):
            out[i].append(float("nan") if f is None else best_time(f, repeat, min_time) / number)
    return out


def batched(fn, number: int):
    if number == 1:
        return fn

    def loop():
        for _ in range(number):
            fn()
    return loop


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
    """A copy to time.  dst_off: the preallocated output of the "into" columns
    starts that many bytes past a cache line (as NumPy's large buffers start 16
    bytes into one); None: torch's own allocation, on a line."""

    def __init__(self, name, make, pl_fn, torch_fn=None, np_fn=None, dst_off=None):
        self.name, self.make, self.pl_fn, self.torch_fn, self.np_fn = name, make, pl_fn, torch_fn, np_fn
        self.dst_off = dst_off


def _off_line(like, offset: int):
    """A contiguous torch tensor shaped and typed like `like`, over a NumPy
    buffer that starts `offset` bytes past a cache line."""
    nbytes = like.numel() * like.element_size()
    raw = np.empty(nbytes + 128, np.uint8)
    lo = (-raw.ctypes.data) % 64 + offset
    return torch.from_numpy(raw[lo:lo + nbytes]).view(like.dtype).view(like.shape)


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

    def to_nhwc(x):
        return pl.contiguous(x, cl)

    def torch_to_nhwc(x):
        return x.contiguous(memory_format=cl)

    def np_to_nhwc(a):
        return np.ascontiguousarray(a.transpose(0, 2, 3, 1))

    for nchw_shape in [(64, 256, 56, 56), (32, 64, 112, 112)]:
        shp: tuple[int, ...] = (max(1, nchw_shape[0] // s),) + nchw_shape[1:]
        cases.append(Case(f"NCHW->channels_last f32 {shp}", nchw(shp), to_nhwc, torch_to_nhwc, np_to_nhwc))
        cases.append(Case(f"channels_last->NCHW f32 {shp}", nhwc(shp),
                          lambda x: pl.contiguous(x),
                          lambda x: x.contiguous(),
                          lambda a: np.ascontiguousarray(a)))
    # 3-channel images: the dst-innermost extent is 3, a 3-plane interleave (issue 16)
    shp = (max(1, 64 // s), 3, 224, 224)
    cases.append(Case(f"NCHW->NHWC C=3 f32 {shp}", nchw(shp), to_nhwc, torch_to_nhwc, np_to_nhwc))
    cases.append(Case(f"NCHW->NHWC C=3 u8 {shp}",
                      lambda shp=shp: torch.randint(0, 256, shp, dtype=torch.uint8), to_nhwc, torch_to_nhwc, np_to_nhwc))
    # the DataLoader direction: decoded HWC uint8 images to a model's CHW, as
    # torch.from_numpy(hwc).permute(2, 0, 1).contiguous() does per image
    hwc = (shp[0], 224, 224, 3)
    cases.append(Case(f"NHWC->NCHW u8 C=3 {hwc} -> {shp}",
                      lambda hwc=hwc: torch.randint(0, 256, hwc, dtype=torch.uint8).permute(0, 3, 1, 2),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # 5-8 channels: thin interleaves too (plan.c's pl_thin_wins)
    shp8 = (max(1, 32 // s), 8, 224, 224)
    cases.append(Case(f"NCHW->NHWC C=8 u8 {shp8}",
                      lambda shp=shp8: torch.randint(0, 256, shp, dtype=torch.uint8), to_nhwc, torch_to_nhwc,
                      np_to_nhwc))
    hwc8 = (shp8[0], 224, 224, 5)
    cases.append(Case(f"NHWC->NCHW float16 C=5 {hwc8}",
                      lambda hwc=hwc8: torch.randn(*hwc, dtype=torch.float16).permute(0, 3, 1, 2),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # 9-15 channels (multispectral bands): AVX-512's thin-side blocks
    shp12 = (shp8[0], 12, 224, 224)
    cases.append(Case(f"NCHW->NHWC C=12 u8 {shp12}",
                      lambda shp=shp12: torch.randint(0, 256, shp, dtype=torch.uint8), to_nhwc, torch_to_nhwc,
                      np_to_nhwc))
    hwc12 = (shp8[0], 224, 224, 12)
    cases.append(Case(f"NHWC->NCHW C=12 u8 {hwc12}",
                      lambda hwc=hwc12: torch.randint(0, 256, hwc, dtype=torch.uint8).permute(0, 3, 1, 2),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
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
        # full size, 5-D: (27, 28, 28, 28, 28) by (2, 3, 1, 4, 0), the row of issue 16's goal table
        side = max(2, round(target ** (1 / ndim)))
        shape = [side] * ndim
        shape[0] = max(1, target // side ** (ndim - 1))
        perm = list(range(ndim))
        while perm == sorted(perm):
            rng.shuffle(perm)
        cases.append(Case(f"permute {ndim}-D {tuple(shape)} by {tuple(perm)}",
                          lambda shape=shape, perm=perm: torch.randn(*shape).permute(*perm),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
        if ndim == 5:
            # the same in float16: src runs of 56 bytes into dst rows of 54 bytes,
            # close together, which keep the tiles (plan.c's pl_fused, short_b)
            cases.append(Case(f"permute {ndim}-D {tuple(shape)} by {tuple(perm)} float16",
                              lambda shape=shape, perm=perm: torch.randn(*shape).half().permute(*perm),
                              pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    n = 8192 // s
    cases.append(Case(f"2-D transpose {n}x{n} uint8",
                      lambda n=n: torch.randint(0, 255, (n, n), dtype=torch.uint8).t(),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # a photo's size: dst rows of 3000 bytes are not whole cache lines apart, so
    # their runs cannot stream (the cached-store bands of tile_bytes_x86.c)
    rows, cols = 4000 // s, 3000 // s
    cases.append(Case(f"2-D transpose {rows}x{cols} uint8 (dst rows off lines)",
                      lambda rows=rows, cols=cols: torch.randint(0, 255, (cols, rows), dtype=torch.uint8).t(),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # exactly 4 MiB into a NumPy-style buffer (16 bytes into a line): its first
    # 12 columns go on their own, the rest streams as any larger copy does
    m = 1024 // s
    cases.append(Case(f"2-D transpose {m}x{m} f32 into a buffer 16 B into a line",
                      lambda m=m: torch.randn(m, m).t(), pl.contiguous, lambda x: x.contiguous(),
                      np.ascontiguousarray, dst_off=16))
    # a weight matrix's transpose whose rows lie 4 KiB apart, src and dst
    # 16 bytes into a line as NumPy's buffers are: the split's tiles, not
    # the wrapped ones (plan.c's pl_src_lines_crowded)
    r = max(128, 256 // s)
    cases.append(Case(f"2-D transpose 1024x{r} f32 (src rows 4 KiB apart), buffers 16 B into a line",
                      lambda r=r: torch.randn(r * 1024 + 4)[4:].view(r, 1024).t(), pl.contiguous,
                      lambda x: x.contiguous(), np.ascontiguousarray, dst_off=16))
    # a weight matrix's transpose on torch's buffers (on lines), rows 2 and 4
    # KiB apart, 2 MB: past a core's L2 on most CPUs, the wrapped tiles
    # (plan.c's PL_WRAP_MAX_CROWDED_BYTES)
    cases.append(Case("2-D transpose 512x1024 f32 (rows 2 and 4 KiB apart, on lines)",
                      lambda: torch.randn(1024, 512).t(), pl.contiguous, lambda x: x.contiguous(),
                      np.ascontiguousarray))
    # a 2 MB byte matrix (a mask, a quantized weight) into rows a page apart:
    # streamed under 4 MB (plan.c's PL_STREAM_MIN_CROWDED_NARROW_BYTES)
    cases.append(Case("2-D transpose 512x4096 uint8 (dst rows 4 KiB apart)",
                      lambda: torch.randint(0, 255, (4096, 512), dtype=torch.uint8).t(), pl.contiguous,
                      lambda x: x.contiguous(), np.ascontiguousarray))
    # a matrix whose width is not a multiple of 16 floats, 34 MB: dst rows 12000
    # bytes apart, every other one 32 bytes into a line, so its runs stream only
    # their whole lines (plan.c's tile_runs, copy_x86.c's pl_stile4_avx512_off)
    w = 3000 // s
    cases.append(Case(f"2-D transpose {w}x{w} f32 (dst rows off their lines)",
                      lambda w=w: torch.randn(w, w).t(), pl.contiguous, lambda x: x.contiguous(),
                      np.ascontiguousarray))
    # 4-8 MB of float32 or float64, dst rows whole lines and not a power of two
    # apart: cached tiles, source and result in L3 (plan.c's PL_STREAM_MIN_WIDE_BYTES)
    for k, dt in ((1200, torch.float32), (800, torch.float64)):
        cases.append(Case(f"2-D transpose {k}x{k} {str(dt)[6:]} (in L3)",
                          lambda k=k, dt=dt: torch.randn(k, k, dtype=dt).t(),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # a float16 weight matrix of 10 MiB (Gemma 2 2B's width), past the streaming
    # threshold and in L3: 256-byte runs of each dst row on AVX-512 (plan.c's
    # pl_stream_runs_max_bytes), whole lines one at a time elsewhere
    k = 2304 // s
    cases.append(Case(f"2-D transpose {k}x{k} float16 (in L3)",
                      lambda k=k: torch.randn(k, k, dtype=torch.float16).t(),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # a float16 weight matrix: dst rows 2 KiB apart, a power of two (tile strips)
    cases.append(Case(f"2-D transpose {m}x{m} float16 (rows 2 KiB apart)",
                      lambda m=m: torch.randn(m, m, dtype=torch.float16).t(),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    cases.append(Case(f"2-D transpose {n}x{n} float16",
                      lambda n=n: torch.randn(n, n, dtype=torch.float16).t(),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # attention heads, (B,H,S,D) -> (B,S,H,D): rows of D elements, one src
    # stream per head (plan.c's small rows); ViT-B's 4.6 MB in L3, row
    # copies up to 8 MiB a thread, streamed past it (pl_group_streams)
    for shp, dt in (((4, 12, 2048 // s, 64), torch.float32), ((64 // s, 64, 64, 64), torch.uint8),
                    ((max(1, 8 // s), 12, 197, 64), torch.float32), ((4, 12, 512 // s, 64), torch.float16)):
        cases.append(Case(f"attention heads {shp} {str(dt)[6:]} by (0, 2, 1, 3)",
                          lambda shp=shp, dt=dt: torch.randn(*shp).to(dt).permute(0, 2, 1, 3),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # units of a few short rows far apart in src (3 planes' rows to
    # (N, H, C, W)): units along src's dense dim (plan.c's pl_row_block_dim)
    shp = (64 // s, 3, 64, 64)
    cases.append(Case(f"image rows to (N, H, C, W) {shp} uint8 by (0, 2, 1, 3)",
                      lambda shp=shp: torch.randint(0, 255, shp, dtype=torch.uint8).permute(0, 2, 1, 3),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # src groups of B elements packed along N into dst groups of A along it,
    # (A, N, B) -> (B, N, A): small matrices between batch layouts, 3.7 MB in
    # cache and 25 MB past it, each unit through an L1 buffer's planes
    # (plan.c's pl_regroup)
    for gshp, gdt in (((4, 65536 // s, 7), torch.float16), ((3, (2 << 20) // s, 4), torch.uint8)):
        cases.append(Case(f"regrouped {gshp} {str(gdt)[6:]} by (2, 1, 0)",
                          lambda shp=gshp, dt=gdt: torch.randn(*shp).to(dt).permute(2, 1, 0),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # permutes that keep the last dim, 0.4-3 MB, source and result in cache:
    # rows of 64-392 bytes, each unit's rows through the row kernel
    # (rows_x86.c, plan.c's PL_ROWS_KERNEL_MAX_BYTES)
    for rshp, rdt, rorder in (((max(1, 32 // s), 128, 12, 64), torch.uint8, (0, 2, 1, 3)),
                              ((4096 // s, 8, 8, 4), torch.float16, (1, 0, 2, 3)),
                              ((max(1, 16 // s), 512, 7, 7), torch.float64, (1, 0, 2, 3)),
                              ((128 // s, 32, 32, 3), torch.uint8, (1, 0, 2, 3))):
        cases.append(Case(f"rows in cache {rshp} {str(rdt)[6:]} by {rorder}",
                          lambda shp=rshp, dt=rdt, order=rorder: torch.randn(*shp).to(dt).permute(*order),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # matrices transposed into rows a multiple of a page apart (1024 float32,
    # 2048 float16 or 4096 uint8 wide), 0.5-1 MB, from the caches: each unit
    # through an L1 buffer, copied out in runs (plan.c's
    # PL_FUSE_CROWDED_DST_RUN_BYTES); and a uint8 matrix whose own rows are,
    # gathered into L1 (PL_FUSE_CROWDED_SRC_GATHER_BYTES)
    for what, pshp, pdt in (("rows", (1024, 128 // s), torch.float32), ("rows", (2048, 256 // s), torch.float16),
                            ("rows", (4096, max(64, 128 // s)), torch.uint8),
                            ("src rows", (max(64, 128 // s), 4096), torch.uint8)):
        cases.append(Case(f"{what} a page apart {pshp} {str(pdt)[6:]} .t()",
                          lambda shp=pshp, dt=pdt: torch.randn(*shp).to(dt).t(),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # element groups: a contiguous innermost dim of 2-16 bytes moved as one
    # element (plan.c): complex pairs and RGBA pixels transposed
    m = 2048 // s
    for shp, dt, what in (((m, m, 2), torch.float32, "complex pairs"), ((m, m, 4), torch.uint8, "RGBA pixels")):
        cases.append(Case(f"{what} transposed {shp} {str(dt)[6:]} by (1, 0, 2)",
                          lambda shp=shp, dt=dt: torch.randn(*shp).to(dt).permute(1, 0, 2),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # transposes of groups: a contiguous innermost dim of 32 bytes or more,
    # rows far apart in src, past 8 MiB a thread read in src order and
    # streamed (plan.c's pl_group_streams)
    m = 1024 // s
    for shp in ((m, m, 16), (2 * m, 2 * m, 8)):
        cases.append(Case(f"groups of {shp[2] * 4} B transposed {shp} f32 by (1, 0, 2)",
                          lambda shp=shp: torch.randn(*shp).permute(1, 0, 2),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # batches of small matrices transposed: rotation matrices and 4 x 4
    # transforms, 7 x 7 feature maps; each matrix one run of bytes in both
    # tensors, a byte shuffle of each (block_perm_x86.c, plan.c's
    # pl_copy_blocks)
    nm = (1 << 21) // s
    for shp, dt, what in (((nm, 3, 3), torch.float32, "rotation matrices"),
                          ((nm // 2, 4, 4), torch.float32, "4 x 4 transforms"),
                          ((nm, 3, 3), torch.uint8, "3 x 3 byte matrices"),
                          ((max(1, 64 // s), 512, 7, 7), torch.float32, "7 x 7 feature maps")):
        cases.append(Case(f"batched small transposes, {what} {shp} {str(dt)[6:]} .transpose(-1, -2)",
                          lambda shp=shp, dt=dt: torch.randn(*shp).to(dt).transpose(-1, -2),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # 7 x 7 feature maps to (N, H, C, W): groups of 7 elements transposed
    # across a short dim, as rows of groups (plan.c's pl_short_side_rows)
    shp = (max(1, 64 // s), 512, 7, 7)
    cases.append(Case(f"feature maps to (N, H, C, W) {shp} float32 by (0, 2, 1, 3)",
                      lambda shp=shp: torch.randn(*shp).permute(0, 2, 1, 3),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # an RGB image transposed: groups of 3 elements, through planes in L1
    # (plan.c's pl_plane_dims); an HD frame, 6 MB, in registers on AVX-512
    # and AVX2 (copy_x86.c's tile3: copies that stay in cache)
    m = 2048 // s
    for dt in (torch.uint8, torch.float32):
        cases.append(Case(f"RGB image transposed ({m}, {m}, 3) {str(dt)[6:]} by (1, 0, 2)",
                          lambda m=m, dt=dt: torch.randn(m, m, 3).to(dt).permute(1, 0, 2),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # groups of 6 and 12 bytes of narrower elements: 3 elements of 2 or 4
    # bytes in registers (plan.c's pl_three_wider)
    for c in (6, 12):
        cases.append(Case(f"{c}-channel pixels transposed ({m // 2}, {m // 2}, {c}) uint8 by (1, 0, 2)",
                          lambda m=m, c=c: torch.randn(m // 2, m // 2, c).to(torch.uint8).permute(1, 0, 2),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    h, w = 1080 // s, 1920 // s
    cases.append(Case(f"RGB image transposed ({h}, {w}, 3) uint8 by (1, 0, 2)",
                      lambda h=h, w=w: torch.randn(h, w, 3).to(torch.uint8).permute(1, 0, 2),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # all dims reversed (NumPy's a.T of a 3-D array): a short dim contiguous
    # in one tensor only, through planes (plan.c's pl_plane_dims); of 4- and
    # 8-byte elements in registers (copy_x86.c's tile_split, packed in src,
    # and tile_zip, packed in dst), groups under 64 bytes (a line)
    m = 2048 // s
    for shp, dt in (((m, m, 3), torch.uint8), ((h, w, 3), torch.uint8), ((m // 2, m // 2, 4), torch.float32),
                    ((4, m // 2, m // 2), torch.float32), ((8, m // 2, m // 2), torch.float32),
                    ((m // 2, m // 2, 4), torch.float64)):
        cases.append(Case(f"all dims reversed {shp} {str(dt)[6:]} by (2, 1, 0)",
                          lambda shp=shp, dt=dt: torch.randn(*shp).to(dt).permute(2, 1, 0),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # every dim reversed (np.asfortranarray's copy, x.permute(3, 2, 1, 0)) of
    # tensors whose innermost dims are short: each short side read or
    # written together with the dims that continue it (plan.c's pl_fused)
    for shp, dt in (((4096 // s, 8, 8, 4), torch.uint8), ((max(1, 16 // s), 512, 7, 7), torch.uint8),
                    ((max(1, 32 // s), 128, 12, 64), torch.uint8), ((4096 // s, 8, 8, 4), torch.float32)):
        cases.append(Case(f"short dims reversed {shp} {str(dt)[6:]} by (3, 2, 1, 0)",
                          lambda shp=shp, dt=dt: torch.randn(*shp).to(dt).permute(3, 2, 1, 0),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # dst rows shorter than 256 bytes and off their lines, from many src rows:
    # whole rows built in L1 and streamed out a batch at a time (plan.c's
    # PL_RUNS_MIN_SRC_ROWS); and long rows off their lines, in 256-byte runs
    # whose src is prefetched
    for label, shp, dt, order in (("short rows off their lines", (100, 60000 // s), torch.float16, (1, 0)),
                                  ("short rows off their lines", (50, 100000 // s), torch.float32, (1, 0)),
                                  ("short rows off their lines", (100, 200, 300 // s), torch.float16, (1, 2, 0)),
                                  ("rows off their lines in 256-byte runs", (3000 // s, 3000), torch.float16, (1, 0))):
        cases.append(Case(f"{label} {shp} {str(dt)[6:]} by {order}",
                          lambda shp=shp, dt=dt, order=order: torch.randn(*shp).to(dt).permute(*order),
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # a source broadcast along the last dim: rows filled (plan.c's pl_fill_row)
    shp = (max(1, 16 // s), 3, 224, 224)
    cases.append(Case(f"broadcast rows x[..., :1].expand {shp} f32",
                      lambda shp=shp: torch.randn(*shp)[..., :1].expand(*shp),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    shp = (max(1, 32 // s), 64, 112, 224)
    cases.append(Case(f"sliced input [..., ::2] f32 {shp}",
                      lambda shp=shp: torch.randn(*shp)[..., ::2],
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # one channel of an interleaved image, one coordinate of points: steps of
    # 3 and 4 elements (gather_x86.c's shuffles of k loads a vector)
    h, w = 1080 // s, 1920 // s
    for c in (3, 4):
        cases.append(Case(f"image channel img[..., 0] ({h}, {w}, {c}) uint8 (step {c})",
                          lambda h=h, w=w, c=c: torch.randint(0, 256, (h, w, c), dtype=torch.uint8)[..., 0],
                          pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    npts = (1 << 22) // s
    cases.append(Case(f"point coordinate pts[:, 0] ({npts}, 3) f32 (step 3)",
                      lambda npts=npts: torch.randn(npts, 3)[:, 0],
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    # groups of a few bytes with gaps between them: an RGBA frame without its
    # alpha, the xyz of xyzw points (group_gather_x86.c's shuffles)
    cases.append(Case(f"RGBA -> RGB img[..., :3] ({h}, {w}, 4) uint8",
                      lambda h=h, w=w: torch.randint(0, 256, (h, w, 4), dtype=torch.uint8)[..., :3],
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    cases.append(Case(f"RGBA HWC -> RGB CHW img[..., :3].permute(2, 0, 1) ({h}, {w}, 4) uint8",
                      lambda h=h, w=w: torch.randint(0, 256, (h, w, 4), dtype=torch.uint8)[..., :3].permute(2, 0, 1),
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    cases.append(Case(f"point xyz pts[:, :3] ({npts}, 4) f32",
                      lambda npts=npts: torch.randn(npts, 4)[:, :3],
                      pl.contiguous, lambda x: x.contiguous(), np.ascontiguousarray))
    n = 4096 // s
    cases.append(Case(f"identity copy {n}x{n} f32 (memcpy path)",
                      lambda n=n: torch.randn(n, n), lambda x: pl.from_dlpack(x, copy=True),
                      lambda x: x.clone(), np.copy))
    return cases


def _gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def _gbps_all(nbytes, times):
    return [[_gbps(nbytes, t) for t in ts] for ts in times]


def bench_copies(quick: bool, only: list[str] | None, runs: int = 1) -> list[str]:
    """Each case twice: converting (every contestant allocates its output, as
    .contiguous() does) and copying into a preallocated output of the target
    layout (kernel bandwidth, comparable with memcpy at the same thread count)."""
    if torch is None or np is None:
        return ["## Copies", "", "skipped: the copy benchmark compares against torch and NumPy; install both."]
    cases = [case for case in copy_cases(quick) if selected(case.name, only)]
    if not cases:
        return []
    repeat = 2 if quick else 5
    # Best of at least `repeat` runs over at least min_time seconds: the first
    # runs on fresh buffers of a VM often come in well below steady state.
    min_time = 0.0 if quick else 0.4
    nthreads = threads_to_measure()
    lines = [
        "## Layout conversions (GB/s of tensor bytes moved; x = pylayout's speed over the other's)",
        "",
        "convert: pylayout.contiguous / to_order vs torch .contiguous(fmt) vs np.ascontiguousarray, each allocating its",
        "output.  into: pylayout.copy_into vs torch dst.copy_(x) vs np.copyto(dst, x) into a preallocated output "
        "(NumPy copies on one thread at any thread count); memcpy: np.copyto of the same bytes, contiguous, "
        "at the row's thread count (at thr threads an OpenMP team copies 1/thr of the bytes each, without the "
        "GIL: see its CPU time / wall time at the end).",
        "",
        "| case | thr | convert: pylayout | torch | numpy | x torch | x numpy "
        "| into: pylayout | torch | numpy | memcpy (thr threads) | / memcpy | x torch | x numpy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    progress = Progress(len(cases) * len(nthreads))
    for case in cases:
        progress.measuring(case.name)
        x = case.make()
        a = _np_of(x)
        nbytes = x.numel() * x.element_size()
        memcpy = Memcpy(nbytes)
        # correctness first: a benchmark of a wrong answer is worthless
        ours = case.pl_fn(x)
        ours_t = ours if isinstance(ours, torch.Tensor) else torch.from_dlpack(ours)
        if not torch.equal(ours_t, x):
            raise AssertionError(f"{case.name}: pylayout's result differs from its input")
        dst = case.torch_fn(x).clone(memory_format=torch.preserve_format)  # the target layout, preallocated
        if case.dst_off is not None:
            dst = _off_line(dst, case.dst_off)
        if ours_t.stride() != dst.stride():
            raise AssertionError(f"{case.name}: pylayout's result has strides {ours_t.stride()}, "
                                 f"torch's {dst.stride()}")
        dst_a = dst.numpy()
        dst.zero_()
        pl.copy_into(dst, x)
        if not torch.equal(dst, x):
            raise AssertionError(f"{case.name}: copy_into's result differs from its input")
        del ours, ours_t
        # the memcpy of a case under MEMCPY_BATCH_BYTES copies its bytes k times a call
        k = max(1, MEMCPY_BATCH_BYTES // max(1, nbytes))
        for n in nthreads:
            set_threads(n)
            fns = [lambda: case.pl_fn(x), lambda: case.torch_fn(x), lambda: case.np_fn(a),
                   lambda: pl.copy_into(dst, x), lambda: dst.copy_(x), lambda: np.copyto(dst_a, a),
                   memcpy.fn(n, k)]
            times = measure(fns, runs, repeat, min_time)
            times[6] = [t / k for t in times[6]]
            g = _gbps_all(nbytes, times)
            c, i = g[:3], g[3:]
            lines.append(
                f"| {case.name} | {n} | {fig(c[0])} | {fig(c[1])} | {fig(c[2])} | {fig(per_run(c[0], c[1]))} "
                f"| {fig(per_run(c[0], c[2]))} | {fig(i[0])} | {fig(i[1])} | {fig(i[2])} | {fig(i[3])} "
                f"| {fig(per_run(i[0], i[3]))} | {fig(per_run(i[0], i[1]))} | {fig(per_run(i[0], i[2]))} |"
            )
            progress.row(lines[-1])
        del x, a, dst, dst_a, memcpy
        gc.collect()
    progress.close()
    set_threads(os.cpu_count() or 1)
    return lines


def _flipped_last(shape: tuple[int, ...], dt: str, modulo: int = 0, dims: tuple[int, ...] = (-1,)) -> Any:
    """np.arange over `shape` (mod `modulo` when set) as `dt`, the dims `dims` (by default the
    last) reversed."""
    values = np.arange(int(np.prod(shape)))
    if modulo:
        values = values % modulo
    return np.flip(values.astype(dt).reshape(shape), dims)


def numpy_view_cases(quick: bool) -> list[tuple[str, Callable[[], Any]]]:
    """NumPy views that torch cannot hold (negative strides): (name, make)."""
    s = 4 if quick else 1
    n = 2048 // s
    cases: list[tuple[str, Callable[[], Any]]] = []
    for dt in ("uint8", "float32"):
        cases.append((f"flipped rows a[:, ::-1] ({n}, {n}) {dt}", functools.partial(_flipped_last, (n, n), dt)))
        shp = (max(1, 16 // s), 3, 256, 256)
        cases.append((f"NCHW batch flipped horizontally x[..., ::-1] {shp} {dt}",
                      functools.partial(_flipped_last, shp, dt)))
    h, w = 1080 // s, 1920 // s
    cases.append((f"HWC image BGR as RGB img[..., ::-1] ({h}, {w}, 3) uint8",
                  functools.partial(_flipped_last, (h, w, 3), "uint8", 251)))
    cases.append((f"HWC image flipped horizontally np.fliplr(img) ({h}, {w}, 3) uint8",
                  functools.partial(_flipped_last, (h, w, 3), "uint8", 251, (1,))))
    cases.append((f"HWC image rotated by 180 degrees img[::-1, ::-1] ({h}, {w}, 3) uint8",
                  functools.partial(_flipped_last, (h, w, 3), "uint8", 251, (0, 1))))
    cases.append(("HWC crop flipped horizontally np.fliplr(img) (224, 224, 3) uint8",
                  functools.partial(_flipped_last, (224, 224, 3), "uint8", 251, (1,))))
    cases.append((f"HWC image flipped horizontally np.fliplr(img) ({h // 2}, {w // 2}, 3) float32",
                  functools.partial(_flipped_last, (h // 2, w // 2, 3), "float32", 0, (1,))))
    cases.append((f"rotated by 90 degrees np.rot90(a) ({n}, {n}) float32",
                  lambda: np.rot90(_flipped_last((n, n), "float32", 0, ()))))
    cases.append((f"HWC image rotated by 90 degrees np.rot90(img) ({h}, {w}, 3) uint8",
                  lambda: np.rot90(_flipped_last((h, w, 3), "uint8", 251, ()))))
    cases.append((f"HWC image flipped into CHW img[:, ::-1].transpose(2, 0, 1) ({h}, {w}, 3) uint8",
                  lambda: _flipped_last((h, w, 3), "uint8", 251, (1,)).transpose(2, 0, 1)))
    nf = max(1, 16 // s)
    cases.append((f"4-D a.T (np.asfortranarray's copy) ({nf}, 64, 56, 56) float32",
                  lambda: _flipped_last((nf, 64, 56, 56), "float32", 0, ()).T))
    return cases


def bench_numpy_views(quick: bool, only: list[str] | None, runs: int = 1) -> list[str]:
    """copy_into from NumPy views torch cannot hold, against np.copyto and memcpy."""
    if np is None:
        return []
    cases = [(name, make) for name, make in numpy_view_cases(quick) if selected(name, only)]
    if not cases:
        return []
    repeat, min_time = (2, 0.0) if quick else (5, 0.4)
    lines = [
        "## NumPy views torch cannot hold (GB/s of tensor bytes moved)",
        "",
        "pylayout.copy_into vs np.copyto(dst, view) into a preallocated contiguous array (NumPy on one thread); "
        "memcpy: np.copyto of the same bytes, contiguous, at the row's thread count.",
        "",
        "| case | thr | pylayout | numpy | memcpy (thr threads) | / memcpy | x numpy |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    nthreads = threads_to_measure()
    progress = Progress(len(cases) * len(nthreads))
    for name, make in cases:
        progress.measuring(name)
        view = make()
        dst = np.empty(view.shape, view.dtype)
        pl.copy_into(dst, view)
        if not np.array_equal(dst, view):  # correctness first
            raise AssertionError(f"{name}: copy_into's result differs from its input")
        memcpy = Memcpy(view.nbytes)
        for n in nthreads:
            set_threads(n)
            fns = [lambda: pl.copy_into(dst, view), lambda: np.copyto(dst, view), memcpy.fn(n)]
            g = _gbps_all(view.nbytes, measure(fns, runs, repeat, min_time))
            lines.append(f"| {name} | {n} | {fig(g[0])} | {fig(g[1])} | {fig(g[2])} | {fig(per_run(g[0], g[2]))} "
                         f"| {fig(per_run(g[0], g[1]))} |")
            progress.row(lines[-1])
        del view, dst, memcpy
        gc.collect()
    progress.close()
    set_threads(os.cpu_count() or 1)
    return lines


def view_into_cases(quick: bool) -> list[tuple[str, Callable[[], tuple[Any, Any]]]]:
    """Copies into a view of another buffer: (name, make) with make() -> (dst, src),
    torch tensors whose bases' other bytes must stay as they are."""
    s = 4 if quick else 1
    h, w, npts, n = 1080 // s, 1920 // s, (1 << 22) // s, 2048 // s

    def u8(*shape):
        return torch.randint(0, 256, shape, dtype=torch.uint8)

    return [
        (f"RGB between RGBA images b[..., :3] = a[..., :3] ({h}, {w}, 4) uint8",
         lambda: (u8(h, w, 4)[..., :3], u8(h, w, 4)[..., :3])),
        (f"one channel between images b[..., 0] = a[..., 0] ({h}, {w}, 3) uint8",
         lambda: (u8(h, w, 3)[..., 0], u8(h, w, 3)[..., 0])),
        (f"RGB into RGBA rgba[..., :3] = rgb ({h}, {w}, 4) uint8", lambda: (u8(h, w, 4)[..., :3], u8(h, w, 3))),
        (f"xyz between point clouds q[:, :3] = p[:, :3] ({npts}, 4) f32",
         lambda: (torch.randn(npts, 4)[:, :3], torch.randn(npts, 4)[:, :3])),
        (f"every other column y[:, ::2] = x[:, ::2] ({n}, {n}) f32",
         lambda: (torch.randn(n, n)[:, ::2], torch.randn(n, n)[:, ::2])),
        (f"RGB channel into RGBA rgba[..., 0] = rgb[..., 0] ({h}, {w}) uint8",
         lambda: (u8(h, w, 4)[..., 0], u8(h, w, 3)[..., 0])),
        (f"every third into every other y[:, ::2] = x[:, ::3] ({n}, {n}) f16",
         lambda: (torch.randn(n, n).half()[:, ::2], torch.randn(n, 3 * n // 2).half()[:, ::3])),
    ]


def bench_views_into(quick: bool, only: list[str] | None, runs: int = 1) -> list[str]:
    """copy_into a view of another buffer (groups with gaps on both sides, or in
    dst only), against torch's copy_, np.copyto and memcpy of the moved bytes."""
    if torch is None or np is None:
        return []
    cases = [(name, make) for name, make in view_into_cases(quick) if selected(name, only)]
    if not cases:
        return []
    repeat, min_time = (2, 0.0) if quick else (5, 0.4)
    lines = [
        "## Copies into views of other buffers (GB/s of tensor bytes moved)",
        "",
        "pylayout.copy_into(dst, src) vs torch dst.copy_(src) vs np.copyto(dst, src) (NumPy on one thread), where "
        "dst is a view of a larger buffer whose other bytes (an alpha channel, a fourth coordinate) must stay as "
        "they are; memcpy: np.copyto of the bytes moved, contiguous, at the row's thread count.",
        "",
        "| case | thr | pylayout | torch | numpy | memcpy (thr threads) | / memcpy | x torch | x numpy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    nthreads = threads_to_measure()
    progress = Progress(len(cases) * len(nthreads))
    for name, make in cases:
        progress.measuring(name)
        dst, src = make()
        base = dst._base if dst._base is not None else dst
        want = base.clone()
        want.as_strided(dst.shape, dst.stride(), dst.storage_offset()).copy_(src)
        pl.copy_into(dst, src)
        if not torch.equal(base, want):  # correctness first, the bytes between groups included
            raise AssertionError(f"{name}: copy_into's result differs from torch's")
        dst_a, src_a = dst.numpy(), src.numpy()
        nbytes = src.numel() * src.element_size()
        memcpy = Memcpy(nbytes)
        for nt in nthreads:
            set_threads(nt)
            fns = [lambda: pl.copy_into(dst, src), lambda: dst.copy_(src), lambda: np.copyto(dst_a, src_a),
                   memcpy.fn(nt)]
            g = _gbps_all(nbytes, measure(fns, runs, repeat, min_time))
            lines.append(f"| {name} | {nt} | {fig(g[0])} | {fig(g[1])} | {fig(g[2])} | {fig(g[3])} "
                         f"| {fig(per_run(g[0], g[3]))} | {fig(per_run(g[0], g[1]))} | {fig(per_run(g[0], g[2]))} |")
            progress.row(lines[-1])
        del dst, src, base, want, dst_a, src_a, memcpy
        gc.collect()
    progress.close()
    set_threads(os.cpu_count() or 1)
    return lines


# The in-cache rows: (name, src rows, cols), the goal rows square with sides
# a power of two, then a 1 MB transpose whose dst rows (2000 bytes) are not
# a whole number of lines long, so each starts at its own place in a line
# (the wrapped tiles' straddling stores, session 43).
IN_CACHE_CASES = (
    ("in-cache 2-D transpose 64 KB f32", 128, 128),
    ("in-cache 2-D transpose 256 KB f32", 256, 256),
    ("in-cache 2-D transpose 1 MB f32", 512, 512),
    ("in-cache 2-D transpose, dst rows off their lines, 1 MB f32", 500, 500),
)

# The layout table's memcpy copies smaller tensors several times a call, at
# least this many bytes in all: one 2-thread memcpy of 0.5 MB a call took
# the pool's hand-off time, 20-27 GB/s, flattering every 2-thread ratio
# against it 3-4x, and was too short for its CPU time / wall time to be
# recorded.  Batched it read 65-87 GB/s (1 thread: 87-97): its threads still
# take turns at the GIL between copies, which that CPU time / wall time
# line (0.04-0.17) now shows.
MEMCPY_BATCH_BYTES = 8 << 20


def _checked_transpose(rows: int, cols: int, what: str):
    """A (rows, cols) float32 tensor read transposed (x, over `base`), its NumPy
    view, and a contiguous output that pylayout.copy_into filled and that was
    checked against x: what each 2-D transpose row times, correct first."""
    base = torch.randn(cols, rows)
    x = base.t()
    dst = torch.empty(rows, cols)
    pl.copy_into(dst, x)
    if not torch.equal(dst, x):
        raise AssertionError(f"{what}: copy_into's result differs from its input")
    return base, x, x.numpy(), dst, dst.numpy()


def _into_contestants(x, a, dst, dst_a, memcpy, threads: int, number: int) -> list:
    """pylayout.copy_into, torch's copy_, np.copyto and memcpy of the same bytes
    at `threads` threads, each as a batch of `number` calls."""
    return [batched(lambda: pl.copy_into(dst, x), number), batched(lambda: dst.copy_(x), number),
            batched(lambda: np.copyto(dst_a, a), number), memcpy.fn(threads, number)]


def bench_in_cache(quick: bool, only: list[str] | None, runs: int = 1) -> list[str]:
    """2-D float32 transposes small enough to stay in cache, into a preallocated
    output, called many times on the same buffers; the reference is memcpy of the
    same bytes, equally in cache.  Every figure includes its Python call."""
    if torch is None or np is None:
        return []
    names = [(name, rows, cols) for name, rows, cols in IN_CACHE_CASES if selected(name, only)]
    if not names:
        return []
    lines = ["## Transposes that fit in cache (GB/s; each figure one call after another on the same buffers)", "",
             "pylayout.copy_into vs torch dst.copy_(x) vs np.copyto(dst, x), float32 transposed -> contiguous "
             "into a preallocated output; memcpy: the same bytes, also in cache, at the row's thread count "
             "(np.copyto at 1 thread, an OpenMP team at thr).  Calls are timed in batches (calls per batch in "
             "the case name); every figure includes its Python call, which at 64 KB is a large part of it: see "
             "µs/call.  The 'NumPy operands' columns "
             "time pylayout.copy_into on the same memory as NumPy arrays (x.numpy(), dst.numpy()): NumPy "
             "operands, as the memcpy's are, cost pylayout a shorter call than torch tensors (no autograd "
             "routing, guards or version bump).  The 'off a line' columns time it on NumPy arrays whose src "
             "and dst start 16 bytes past a cache line, as NumPy's own buffers of 1 MB and more do (torch's "
             "start on a line).  A pylayout copy that repeats the one before it on the same buffers walks "
             "its blocks in the other order (src/plan.c, pl_repeats), so every other call here runs backwards "
             "and starts on what the last one left in cache; copies of other buffers run forwards.",
             "",
             "| case | thr | pylayout | torch | numpy | memcpy in cache (thr threads) | / memcpy | x torch | x numpy "
             "| pylayout µs/call | pylayout, NumPy operands | / memcpy, NumPy operands "
             "| pylayout, NumPy 16 B off a line | / memcpy, off a line |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    repeat = 3 if quick else 7
    batch_bytes = (16 << 20) if quick else (128 << 20)
    for name, rows, cols in names:
        nbytes = rows * cols * 4
        base, x, a, dst, dst_a = _checked_transpose(rows, cols, name)
        a_off, dst_off = _off_line(base, 16).copy_(base).numpy().T, _off_line(dst, 16).numpy()
        pl.copy_into(dst_off, a_off)
        if not np.array_equal(dst_off, a_off):
            raise AssertionError(f"{name}: copy_into's result differs from its input, 16 bytes off a line")
        memcpy = Memcpy(nbytes)
        number = max(4, batch_bytes // nbytes)
        name = f"{name} ({rows}x{cols}, {number} calls per batch)"
        for n in threads_to_measure():
            set_threads(n)
            fns = _into_contestants(x, a, dst, dst_a, memcpy, n, number)
            fns.append(batched(lambda: pl.copy_into(dst_a, a), number))
            fns.append(batched(lambda: pl.copy_into(dst_off, a_off), number))
            times = measure(fns, runs, repeat, number=number)
            g = _gbps_all(nbytes, times)
            lines.append(f"| {name} | {n} | {fig(g[0])} | {fig(g[1])} | {fig(g[2])} | {fig(g[3])} "
                         f"| {fig(per_run(g[0], g[3]))} | {fig(per_run(g[0], g[1]))} | {fig(per_run(g[0], g[2]))} "
                         f"| {fig([t * 1e6 for t in times[0]])} | {fig(g[4])} | {fig(per_run(g[4], g[3]))} "
                         f"| {fig(g[5])} | {fig(per_run(g[5], g[3]))} |")
            print(lines[-1], flush=True)
    set_threads(os.cpu_count() or 1)
    return lines


def bench_small(quick: bool, only: list[str] | None, runs: int = 1) -> list[str]:
    """Per-call time of small transposed -> contiguous conversions: for torch
    tensors against torch, for NumPy arrays against NumPy (pylayout returns the
    caller's type, so both sides hand back the same kind of object)."""
    if torch is None or np is None:
        return []
    rows = []
    for nbytes in (1024, 64 * 1024):
        label = f"{nbytes // 1024} KB"
        side = int((nbytes // 4) ** 0.5)
        x = torch.randn(side, side).t()
        a = np.ascontiguousarray(x.numpy()).T  # its own buffer: NumPy's allocation, not torch's
        rows.append((f"{label} torch tensor {side}x{side} f32 transposed -> contiguous", x,
                     lambda x=x: pl.contiguous(x), "torch .contiguous()", lambda x=x: x.contiguous()))
        rows.append((f"{label} NumPy array {side}x{side} f32 transposed -> contiguous", a,
                     lambda a=a: pl.contiguous(a), "np.ascontiguousarray", lambda a=a: np.ascontiguousarray(a)))
    rows = [row for row in rows if selected(row[0], only)]
    if not rows:
        return []
    lines = ["## Small tensors (µs per call, transposed input -> contiguous, output allocated)", "",
             "| case | thr | pylayout µs | reference | reference µs | pylayout / reference |",
             "|---|---:|---:|---|---:|---:|"]
    number = 500 if quick else 5000
    for name, src, ours, refname, ref in rows:
        out: Any = ours()
        if type(out) is not type(src):
            raise AssertionError(f"{name}: pylayout returned {type(out).__name__}, not {type(src).__name__}")
        good = (torch.equal(out, src) and out.is_contiguous()) if isinstance(src, torch.Tensor) else (
            np.array_equal(out, src) and out.flags.c_contiguous)
        if not good:
            raise AssertionError(f"{name}: pylayout's result differs from its input or is not contiguous")
        for n in threads_to_measure():
            set_threads(n)
            t = [[v / 1000 for v in vals] for vals in
                 ([per_call_ns(f, number) for _ in range(runs)] for f in (ours, ref))]
            lines.append(f"| {name} | {n} | {fig(t[0])} | {refname} | {fig(t[1])} | {fig(per_run(t[0], t[1]))} |")
    set_threads(os.cpu_count() or 1)
    return lines


def bench_complex(quick: bool, only: list[str] | None, runs: int = 1) -> list[str]:
    """pack_complex of two planar float32 tensors, and view_as_complex of a
    layout no view exists for, against torch and NumPy."""
    if torch is None or np is None:
        return ["## Complex packing", "", "skipped: needs torch and NumPy."]
    repeat = 2 if quick else 5
    n = (64 << 20) // 4 // (8 if quick else 1)  # elements in 64 MB of float32 (per plane)
    nbytes = 2 * n * 4
    names = [f"pack_complex 2 x {n * 4 >> 20} MB f32 (allocating)", "pack_complex into out= (preallocated)",
             f"complex no-view: view_as_complex of ({n}, 2) transposed, a 2-wide interleave of {nbytes >> 20} MB"]
    if not any(selected(name, only) for name in names):
        return []
    re, im = torch.randn(n), torch.randn(n)
    re_a, im_a = re.numpy(), im.numpy()
    out = torch.empty(n, dtype=torch.complex64)
    memcpy = Memcpy(nbytes)  # memcpy of the bytes written: the complex output
    if not torch.equal(pl.pack_complex(re, im), torch.complex(re, im)):
        raise AssertionError("pack_complex differs from torch.complex")
    # (n, 2) viewed through a transpose: no complex view exists, both must pack
    # its 2n floats into n complex64, the same bytes as the cases above
    x = torch.randn(2, n).t()
    if not torch.equal(pl.view_as_complex(x), torch.view_as_complex(x.contiguous())):
        raise AssertionError("view_as_complex differs from torch")
    lines = ["## Complex packing (GB/s of the complex output; x = pylayout's speed over the other's)", "",
             "memcpy: a copy of the output's bytes at the row's thread count (np.copyto at 1 thread; at thr "
             "threads an OpenMP team copies 1/thr of the bytes each, without the GIL).", "",
             "| case | thr | pylayout | torch | numpy | memcpy (thr threads) | / memcpy | x torch | x numpy |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    cases = [
        (names[0], lambda: pl.pack_complex(re, im), lambda: torch.complex(re, im), lambda: re_a + 1j * im_a),
        (names[1], lambda: pl.pack_complex(re, im, out=out), lambda: torch.complex(re, im, out=out), None),
        (names[2], lambda: pl.view_as_complex(x), lambda: torch.view_as_complex(x.contiguous()), None),
    ]
    cases = [case for case in cases if selected(case[0], only)]
    progress = Progress(len(cases) * len(threads_to_measure()))
    for name, ours, theirs, npy in cases:
        progress.measuring(name)
        for t in threads_to_measure():
            set_threads(t)
            g = _gbps_all(nbytes, measure([ours, theirs, npy, memcpy.fn(t)], runs, repeat))
            lines.append(f"| {name} | {t} | {fig(g[0])} | {fig(g[1])} | {fig(g[2])} | {fig(g[3])} "
                         f"| {fig(per_run(g[0], g[3]))} | {fig(per_run(g[0], g[1]))} | {fig(per_run(g[0], g[2]))} |")
            progress.row(lines[-1])
    progress.close()
    set_threads(os.cpu_count() or 1)
    return lines


# ------------------------------------------------------------------ sweep


def parse_size(text: str) -> int:
    """'4096', '64K', '64KB', '16M', '1G' -> bytes (powers of 1024)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    return int(float(t[:-1] if scale > 1 else t) * scale)


def size_label(nbytes: int) -> str:
    for shift, unit in ((30, "GB"), (20, "MB"), (10, "KB")):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def sweep_sizes(quick: bool, max_size: int | None) -> list[int]:
    """4 KB up to max_size (default 1 GB, 64 MB with --quick): every power of 2, every power of 4 with --quick."""
    top = max_size if max_size else ((64 << 20) if quick else (1 << 30))
    sizes, s = [], 4096
    while s <= top:
        sizes.append(s)
        s *= 4 if quick else 2
    return sizes


SWEEP_CONTESTANTS = ("pylayout", "torch", "numpy", "memcpy")


def bench_sweep(quick: bool, runs: int = 1, max_size: int | None = None) -> tuple[list[str], dict]:
    """Cost versus size of a 2-D float32 transpose into a preallocated output.
    Returns the table and {threads: {contestant: [(nbytes, [GB/s per run])]}} for the plot."""
    if torch is None or np is None:
        return ["## Sweep", "", "skipped: the sweep compares against torch and NumPy; install both."], {}
    nthreads = threads_to_measure()
    lines = ["## Cost versus size: 2-D float32 transpose, transposed -> contiguous, into a preallocated output "
             "(GB/s of tensor bytes)", "",
             "pylayout.copy_into vs torch dst.copy_(x) vs np.copyto(dst, x) (NumPy copies on one thread); memcpy: "
             "np.copyto of the same bytes (the source's and output's own buffers) at the row's thread count.  "
             "Small sizes are timed in batches of calls on the same buffers, so they run in cache and include "
             "each call's fixed cost.", "",
             "| size | shape | thr | pylayout | torch | numpy | memcpy (thr threads) | / memcpy | x torch | x numpy |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    data: dict[int, dict[str, list]] = {n: {c: [] for c in SWEEP_CONTESTANTS} for n in nthreads}
    notes = []
    for nbytes in sweep_sizes(quick, max_size):
        need = 2 * nbytes + (256 << 20)
        avail = mem_available()
        if avail is not None and need > avail:
            notes.append(f"skipped {size_label(nbytes)}: source and output need {need / 2**30:.1f} GiB with "
                         f"headroom, {avail / 2**30:.1f} GiB available")
            print(notes[-1], flush=True)
            continue
        elems = nbytes // 4
        rows = 1 << ((elems.bit_length() - 1) // 2)
        cols = elems // rows
        base, x, a, dst, dst_a = _checked_transpose(rows, cols, f"sweep {size_label(nbytes)} ({rows}x{cols})")
        memcpy = Memcpy(src=base.view(torch.uint8).reshape(-1).numpy(), dst=dst.view(torch.uint8).reshape(-1).numpy())
        number = max(1, ((4 << 20) if quick else (32 << 20)) // nbytes)
        repeat = 2 if quick or nbytes >= (256 << 20) else 5
        min_time = 0.0 if quick else 0.1
        for n in nthreads:
            set_threads(n)
            fns = _into_contestants(x, a, dst, dst_a, memcpy, n, number)
            g = _gbps_all(nbytes, measure(fns, runs, repeat, min_time, number))
            for c, vals in zip(SWEEP_CONTESTANTS, g):
                data[n][c].append((nbytes, vals))
            lines.append(f"| {size_label(nbytes)} | {rows}x{cols} | {n} | {fig(g[0])} | {fig(g[1])} | {fig(g[2])} "
                         f"| {fig(g[3])} | {fig(per_run(g[0], g[3]))} | {fig(per_run(g[0], g[1]))} "
                         f"| {fig(per_run(g[0], g[2]))} |")
            print(lines[-1], flush=True)
        del base, x, a, dst, dst_a, memcpy
        gc.collect()
    set_threads(os.cpu_count() or 1)
    return lines + ([""] + notes if notes else []), data


def plot_sweep(data: dict, path: str, title: str) -> None:
    """One panel per thread count: log-x size, GB/s, one line per contestant (the median;
    the band is the min-max over runs when there are several)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nthreads = sorted(data)
    figure, axes = plt.subplots(1, len(nthreads), figsize=(5.2 * len(nthreads), 4.2), sharey=True, squeeze=False)
    for ax, n in zip(axes[0], nthreads):
        for name in SWEEP_CONTESTANTS:
            points = data[n][name]
            if not points:
                continue
            sizes = [p[0] for p in points]
            med = [statistics.median(p[1]) for p in points]
            line, = ax.plot(sizes, med, marker="o", markersize=3, label=name)
            if any(len(p[1]) > 1 for p in points):
                ax.fill_between(sizes, [min(p[1]) for p in points], [max(p[1]) for p in points],
                                color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_xscale("log", base=2)
        ticks = [s for s in (4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30)
                 if data[n]["pylayout"] and s <= data[n]["pylayout"][-1][0]]
        ax.set_xticks(ticks, [size_label(s).replace(" ", "") for s in ticks])
        ax.set_xlabel("tensor size (log scale)")
        ax.set_title(f"{n} thread{'s' if n > 1 else ''}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("GB/s (tensor bytes / time)")
    axes[0][0].legend()
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)


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

    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def _child_env(*unset: str) -> dict[str, str]:
    """The environment of a section's child process: this pylayout first on its
    path, and the settings in `unset` (what the section sets or measures itself)
    removed."""
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(pl.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg_root, os.environ.get("PYTHONPATH", "")]))
    for key in unset:
        env.pop(key, None)
    return env


def _child_json(code: str, env: dict[str, str], what: str) -> Any:
    """Run `code` in a fresh Python with `env` and return the JSON it prints;
    a child that fails raises, with its stderr."""
    import json
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} child failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def bench_oversubscribed(quick: bool) -> list[str]:
    """1 vs 2 threads with all cores but one kept busy by other processes, in
    several fresh processes one after another: where the scheduler puts the
    threads differs between processes and stays for a process's life."""
    if torch is None:
        return ["## Oversubscribed", "", "skipped: the section compares against torch; install it."]
    nproc, reps = (3, 7) if quick else (8, 21)
    cores = os.cpu_count() or 1
    nbusy = max(1, cores - 1)
    env = _child_env("PYLAYOUT_NUM_THREADS")
    code = ("import json; from pylayout._bench import oversubscribed_child; "
            f"print(json.dumps(oversubscribed_child({list(OVERSUBSCRIBED_SIZES)}, {reps})))")
    busy = _busy_loops(nbusy)
    runs = []
    try:
        time.sleep(0.5)
        for _ in range(nproc):
            runs.append(_child_json(code, env, "oversubscribed"))
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


# ------------------------------------------------------- after a torch op

AFTER_TORCH_TITLE = "after a torch op"
AFTER_TORCH_SIZES = (1 << 20, 4 << 20, 16 << 20)
AFTER_TORCH_OP_BYTES = 16 << 20


def after_torch_child(sizes, reps: int) -> dict:
    """In a fresh process: per size, the median of `reps` float32 transposes
    into a preallocated output, each right after an in-place torch add over
    AFTER_TORCH_OP_BYTES: pylayout at 1 and 2 threads and torch at 2 after
    the add at 2 threads (whose OpenMP workers then wait for torch's next
    region, spinning unless OMP_WAIT_POLICY=passive), and pylayout at 2
    threads after the same add on 1 thread (the same caches, no pool
    spinning).  Seconds."""
    import statistics

    other = torch.zeros(AFTER_TORCH_OP_BYTES // 4)
    out: dict[str, dict[str, float]] = {}
    for nbytes in sizes:
        n = int((nbytes // 4) ** 0.5)
        x, dst = torch.randn(n, n).t(), torch.empty(n, n)
        pl.copy_into(dst, x)
        if not torch.equal(dst, x):
            raise AssertionError(f"{n}x{n}: pylayout's result differs from its input")
        fns = {"pl1": (1, 2, lambda: pl.copy_into(dst, x)), "pl2": (2, 2, lambda: pl.copy_into(dst, x)),
               "torch2": (2, 2, lambda: dst.copy_(x)), "pl2_quiet": (2, 1, lambda: pl.copy_into(dst, x))}
        out[str(nbytes)] = row = {}
        for key, (threads, op_threads, fn) in fns.items():
            pl.set_num_threads(threads)
            times = []
            for _ in range(reps + 2):  # the first two warm up
                torch.set_num_threads(op_threads)
                other.add_(1)
                torch.set_num_threads(threads)
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            row[key] = statistics.median(times[2:])
    return out


def bench_after_torch(quick: bool, only: list[str] | None) -> list[str]:
    """pylayout's 1- and 2-thread copies right after a parallel torch op, in a
    fresh process with libgomp's default wait policy and in one with
    OMP_WAIT_POLICY=passive (read when the process starts)."""
    if not selected(AFTER_TORCH_TITLE, only):
        return []
    if torch is None or (os.cpu_count() or 1) < 2:
        return [f"## Right {AFTER_TORCH_TITLE}", "", "skipped: the section needs torch and 2 cores."]
    sizes = AFTER_TORCH_SIZES[:2] if quick else AFTER_TORCH_SIZES
    reps = 5 if quick else 41
    base = _child_env("PYLAYOUT_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    code = ("import json; from pylayout._bench import after_torch_child; "
            f"print(json.dumps(after_torch_child({list(sizes)}, {reps})))")
    policies = {"default": base, "OMP_WAIT_POLICY=passive": dict(base, OMP_WAIT_POLICY="passive")}
    lines = [f"## Right {AFTER_TORCH_TITLE} (µs, median of {reps} calls, float32 transposed -> contiguous, "
             "into a preallocated output)", "",
             f"Before every timed call, torch adds 1 in place to {AFTER_TORCH_OP_BYTES >> 20} MiB of float32 at 2 "
             "threads.  libgomp's threads then wait for torch's next parallel region spinning, a few ms by "
             "default, on the core a second pylayout thread would use; torch's own next op finds them awake.  "
             "'after a 1-thread add': the same add on 1 thread (the same caches, no thread left spinning).  "
             "Each wait policy in its own fresh process (libgomp reads it at start-up); --runs does not "
             "apply here.", "",
             "| size | wait policy | pylayout 1 thr | pylayout 2 thr | pylayout 2/1 | pylayout 2 thr, after a "
             "1-thread add | torch 2 thr | x torch |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    results = {policy: _child_json(code, env, AFTER_TORCH_TITLE) for policy, env in policies.items()}
    for nbytes in sizes:
        for policy in policies:
            r = {k: 1e6 * v for k, v in results[policy][str(nbytes)].items()}
            size = f"{nbytes >> 20} MiB"
            lines.append(f"| {size} | {policy} | {r['pl1']:.1f} | {r['pl2']:.1f} | {r['pl2'] / r['pl1']:.2f} "
                         f"| {r['pl2_quiet']:.1f} | {r['torch2']:.1f} | {r['torch2'] / r['pl2']:.2f} |")
    return lines


def _command(quick, only, runs, sweep, max_size, plot) -> str:
    words = ["python -m pylayout bench"] + (["--sweep"] if sweep else []) + (["--quick"] if quick else [])
    words += [f"--only {o!r}" for o in only or []]
    words += [f"--max-size {max_size}"] if max_size else []
    words += [f"--plot {plot}"] if plot else []
    words += [f"--runs {runs}"] if runs > 1 else []
    return " ".join(words)


def run(quick: bool = False, only: str | list[str] | None = None, runs: int = 1, sweep: bool = False,
        max_size: str | int | None = None, plot: str | None = None) -> int:
    if isinstance(only, str):
        only = [only]
    if runs < 1:
        raise ValueError("runs must be at least 1")
    info = pl.info()
    header = [
        "# pylayout benchmark",
        "",
        f"- machine: {cpu_model()}, {os.cpu_count()} logical cores, {platform.machine()}",
        f"- pylayout {info['version']} (SIMD path {info['simd']}, OpenMP {'on' if info['openmp'] else 'off'}), "
        f"torch {info['torch']}, numpy {info['numpy']}, python {platform.python_version()}",
        f"- command: {_command(quick, only, runs, sweep, max_size, plot)}",
        "- memcpy at N threads: one C memcpy cut into N slices that an OpenMP team copies at once, without "
        "the GIL (np.copyto at 1 thread); its CPU time / wall time is checked at the end",
    ]
    if runs > 1:
        header.append(f"- each figure: median (min-max) of {runs} runs; ratios taken within each run")
    if hasattr(os, "getloadavg"):
        header.append("- load average at the start (1/5/15 min): " + " ".join(f"{v:.2f}" for v in os.getloadavg())
                      + f" on {os.cpu_count()} cores (other processes' load makes every figure noisier)")
    print("\n".join(header) + "\n", flush=True)
    Memcpy.reset()
    try:
        if sweep:
            max_bytes = parse_size(str(max_size)) if max_size else None
            _, data = bench_sweep(quick, runs, max_bytes)  # prints its rows and notes as it goes
            title = (f"2-D float32 transpose into a preallocated output: {cpu_model()}, {os.cpu_count()} cores"
                     + (f", median of {runs} runs" if runs > 1 else ""))
            try:
                import matplotlib  # noqa: F401
                have_mpl = True
            except ImportError:
                have_mpl = False
            if plot and data and have_mpl:
                plot_sweep(data, plot, title)
                print(f"\nplot written to {plot}", flush=True)
            elif plot and data:
                print("\nno plot: matplotlib is not installed (pip install matplotlib, "
                      "or pip install 'pylayout[bench]')", flush=True)
            elif data:
                print("\nfor a PNG of this table add --plot [PATH] (default docs/bench_sweep.png; needs matplotlib)",
                      flush=True)
        elif only == ["oversubscribed"]:
            print("\n".join(bench_oversubscribed(quick)), flush=True)
            return 0
        else:
            if not only:
                print("\n".join(bench_exchange(quick)) + "\n", flush=True)
            small = bench_small(quick, only, runs)
            if small:
                print("\n".join(small) + "\n", flush=True)
            for section in (bench_copies, bench_numpy_views, bench_views_into, bench_in_cache, bench_complex):
                if section(quick, only, runs):
                    print(flush=True)
            after = bench_after_torch(quick, only)
            if after:
                print("\n".join(after) + "\n", flush=True)
            if not only:
                print("\n".join(bench_oversubscribed(quick)), flush=True)
    finally:
        set_threads(os.cpu_count() or 1)
    if hasattr(os, "getloadavg"):
        print("\nload average at the end (1/5/15 min): " + " ".join(f"{v:.2f}" for v in os.getloadavg()), flush=True)
    Memcpy.flush()
    if Memcpy.cpu_wall:
        ratios = Memcpy.cpu_wall
        print(f"\nmulti-thread memcpy, CPU time / wall time over {len(ratios)} stretches of its copies of 100 µs "
              f"or more: median {num(statistics.median(ratios))}, min {num(min(ratios))}, max {num(max(ratios))} "
              f"(= the thread count when all of its threads ran at once; lower: other processes held cores, "
              f"and every multi-thread figure of the run is suspect)", flush=True)
    elif Memcpy.timed:
        print("\nmulti-thread memcpy, CPU time / wall time: none of its copies took 100 µs, too short to "
              "tell whether its threads ran at once", flush=True)
    return 0
