#!/usr/bin/env python3
"""Peak-memory check: pylayout's conversions allocate the output and nothing else.

Each scenario runs in a fresh process (so ru_maxrss / VmHWM start clean):

  1. measure the baseline RSS after importing pylayout (and torch, for the
     torch scenarios) -- the interpreter's own footprint;
  2. allocate a ~1 GB float32 input (NumPy or torch) and fill it;
  3. convert it (NCHW -> channels_last via pylayout.contiguous, or a 2-D
     transpose via pylayout.contiguous(x.T));
  4. read the peak RSS (VmHWM) and require

        peak <= baseline + input + output + 5% of (input + output) + ALLOWANCE

     where ALLOWANCE (default 64 MiB) covers allocator slack and the
     per-thread stacks of the OpenMP team.

Run:  PYTHONPATH=build python3 tools/peak_rss.py [--gb 1.0] [--allowance-mb 64]
Exits 1 if any scenario exceeds its bound, printing the figures either way.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SCENARIOS = [
    ("numpy", "channels_last"),
    ("numpy", "transpose"),
    ("torch", "channels_last"),
    ("torch", "transpose"),
]


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(lib: str, kind: str, gb: float) -> dict:
    """Runs one scenario in this (fresh) process and returns the figures in bytes."""
    import numpy as np

    import pylayout as pl

    if lib == "torch":
        import torch
    # warm up pylayout's code paths (and OpenMP's team) on something small
    small = np.ones((2, 3, 8, 8), np.float32)
    pl.contiguous(small, "channels_last")
    pl.contiguous(small.reshape(6, 64).T)
    baseline = _status_kib("VmRSS") * 1024
    n_elems = int(gb * 2**30) // 4
    if kind == "channels_last":
        c, h, w = 64, 128, 128
        n = max(1, n_elems // (c * h * w))
        shape = (n, c, h, w)
    else:
        cols = 16384
        shape = (max(1, n_elems // cols), cols)
    if lib == "numpy":
        x = np.empty(shape, np.float32)
        x[...] = 1.5  # touch every page
    else:
        x = torch.empty(shape, dtype=torch.float32)
        x.fill_(1.5)
    in_bytes = x.nbytes if lib == "numpy" else x.numel() * x.element_size()
    after_input = _status_kib("VmRSS") * 1024
    if kind == "channels_last":
        y = pl.contiguous(x, "channels_last")
    else:
        y = pl.contiguous(x.T)
    out_bytes = y.nbytes if lib == "numpy" else y.numel() * y.element_size()
    peak = _status_kib("VmHWM") * 1024
    ok_type = type(y) is type(x)
    return dict(lib=lib, kind=kind, shape=list(shape), baseline=baseline, after_input=after_input,
                input=in_bytes, output=out_bytes, peak=peak, same_type=ok_type)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=1.0, help="input size in GiB (default 1)")
    ap.add_argument("--allowance-mb", type=float, default=64.0, help="fixed allowance in MiB (default 64)")
    ap.add_argument("--child", nargs=2, metavar=("LIB", "KIND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.gb)))
        return 0

    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    allowance = int(args.allowance_mb * 2**20)
    failed = False
    mib = 2**20
    print(f"peak_rss: {args.gb:g} GiB float32 inputs; bound = baseline + input + output + 5% + "
          f"{args.allowance_mb:g} MiB")
    print(f"{'scenario':<24}{'baseline':>10}{'input':>10}{'output':>10}{'peak':>10}{'bound':>10}{'extra':>10}  result")
    for lib, kind in SCENARIOS:
        name = f"{lib}/{kind}"
        if lib == "torch" and not have_torch:
            print(f"{name:<24}  skipped: torch is not installed")
            continue
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--gb", str(args.gb), "--child", lib, kind],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name:<24}  FAILED: child exited {r.returncode}\n{r.stderr[-2000:]}")
            failed = True
            continue
        d = json.loads(r.stdout.strip().splitlines()[-1])
        data = d["input"] + d["output"]
        bound = d["baseline"] + data + data * 0.05 + allowance
        extra = d["peak"] - d["baseline"] - data
        ok = d["peak"] <= bound and d["same_type"]
        failed |= not ok
        print(f"{name:<24}{d['baseline'] / mib:>9.0f}M{d['input'] / mib:>9.0f}M{d['output'] / mib:>9.0f}M"
              f"{d['peak'] / mib:>9.0f}M{bound / mib:>9.0f}M{extra / mib:>9.1f}M  {'ok' if ok else 'OVER'}"
              + ("" if d["same_type"] else " (result type differs from input)"))
    print("peak_rss: " + ("FAILED" if failed else "ok: no temporaries beyond the output"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
