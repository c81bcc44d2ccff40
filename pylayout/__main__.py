"""pylayout's command line: demo, info, bench.

Run as ``python -m pylayout COMMAND`` or, after ``pip install .``, as the
``pylayout COMMAND`` console script.
"""
import argparse
import os
import sys
from typing import Optional, Sequence


def _prog() -> str:
    """The name the user typed: `pylayout` for the console script, else `python -m pylayout`."""
    base = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "pylayout" if base.startswith("pylayout") else "python -m pylayout"


def _info() -> int:
    """pylayout's own facts first (instant), then the peers, whose import can take seconds."""
    from . import _core

    facts = dict(_core.build_info())
    for key, value in facts.items():
        print(f"{key:>14}: {value}", flush=True)
    from . import info

    for key, value in info().items():
        if key not in facts:
            print(f"{key:>14}: {value if value is not None else 'not installed'}", flush=True)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    from . import __version__

    parser = argparse.ArgumentParser(prog=_prog(), description="Tensor memory layouts over DLPack.")
    parser.add_argument("--version", action="version", version=f"pylayout {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run pylayout on built-in example tensors")
    sub.add_parser("info", help="versions, DLPack, OpenMP, SIMD path, threads, peers")
    bench = sub.add_parser("bench", help="benchmark against torch, NumPy and memcpy")
    bench.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    bench.add_argument("--only", action="append", default=None, metavar="TEXT",
                       help="run only cases whose name contains TEXT (repeat for several; 'oversubscribed' runs "
                            "that section alone)")
    bench.add_argument("--runs", type=int, default=1, metavar="N",
                       help="measure everything N times; print median (min-max) per figure")
    bench.add_argument("--sweep", action="store_true",
                       help="cost versus size of a 2-D float32 transpose, 4 KB to 1 GB (64 MB with --quick)")
    bench.add_argument("--max-size", default=None, metavar="SIZE",
                       help="largest --sweep size, e.g. 256K, 64M, 1G")
    bench.add_argument("--plot", nargs="?", const="docs/bench_sweep.png", default=None, metavar="PATH",
                       help="with --sweep: draw the table as a PNG (needs matplotlib; PATH defaults to "
                            "docs/bench_sweep.png)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run

        return run()
    if args.command == "info":
        return _info()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if (args.max_size or args.plot) and not args.sweep:
        parser.error("--max-size and --plot go with --sweep")
    from ._bench import run as bench_run

    return bench_run(quick=args.quick, only=args.only, runs=args.runs, sweep=args.sweep,
                     max_size=args.max_size, plot=args.plot)


if __name__ == "__main__":
    sys.exit(main())
