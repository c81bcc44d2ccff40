"""python -m pylayout {demo,info,bench}"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pylayout", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run pylayout on built-in example tensors")
    sub.add_parser("info", help="versions, DLPack, OpenMP, SIMD path, threads")
    bench = sub.add_parser("bench", help="benchmark against torch, NumPy and memcpy")
    bench.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    bench.add_argument("--only", default=None, help="run only cases whose name contains this")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run
        return run()
    if args.command == "info":
        from . import info
        for key, value in info().items():
            print(f"{key:>14}: {value if value is not None else 'not installed'}")
        return 0
    from ._bench import run
    return run(quick=args.quick, only=args.only)


if __name__ == "__main__":
    sys.exit(main())
