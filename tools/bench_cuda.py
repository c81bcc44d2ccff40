"""pylayout on CUDA tensors against torch's own calls, per call.

    python tools/bench_cuda.py LABEL

Off the CPU pylayout decides the layout and torch moves the bytes, so the
figures to read are the host's time per call (the Python thread's cost,
what a training loop pays for a small tensor) and the GPU's time per call
(CUDA events), each beside torch's own call for the same result, measured
in one process.  Needs a CUDA device; CI has none, so these figures come
from a lent GPU machine (docs/benchmarks.md, session 21).  LABEL tags each
line, to compare builds run one after the other.
"""
import sys
import time

import torch

import pylayout as pl


def gpu_us(fn, reps):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1000


def host_us(fn, reps):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / reps * 1e6


def main(label):
    if not torch.cuda.is_available():
        sys.exit("bench_cuda.py needs a CUDA device")
    for shape in [(16, 16), (8, 3, 32, 32), (64, 3, 224, 224), (32, 64, 128, 128)]:
        x = torch.randn(*shape, device="cuda")
        reps = 2000 if x.numel() < 1e5 else 200
        cases = [("permute", lambda: pl.contiguous(x.transpose(0, -1)), lambda: x.transpose(0, -1).contiguous())]
        if x.dim() == 4:
            cases += [("channels_last", lambda: pl.contiguous(x, "channels_last"),
                       lambda: x.contiguous(memory_format=torch.channels_last)),
                      ("is_contiguous cl", lambda: pl.is_contiguous(x, "channels_last"),
                       lambda: x.is_contiguous(memory_format=torch.channels_last)),
                      ("pack_complex", lambda: pl.pack_complex(x, x), lambda: torch.complex(x, x))]
        for name, ours, theirs in cases:
            print(f"{label:4s} {str(shape):18s} {name:17s} "
                  f"host us/call pl {host_us(ours, reps):7.1f} torch {host_us(theirs, reps):6.1f} | "
                  f"gpu us/call pl {gpu_us(ours, reps):8.1f} torch {gpu_us(theirs, reps):8.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
