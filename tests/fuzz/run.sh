#!/usr/bin/env bash
# tests/fuzz/run.sh - build and run the libFuzzer harness of pylayout's C core.
#
#   tests/fuzz/run.sh              # 60 s (what CI runs, via .ci/reliability.sh)
#   tests/fuzz/run.sh 3600         # the long run: one hour
#   tests/fuzz/run.sh --standalone 60   # force the fallback driver (no libFuzzer)
#
# What it fuzzes: tests/fuzz/fuzz_copy.c (see its header): pylayout_copy,
# pack/unpack_complex, convert, views and the layout queries on random
# DLTensors, with every buffer exactly sized so that ASan catches any access
# outside it, results checked against a naive odometer reference, and failed
# calls checked to leave every byte untouched.
#
# Build: meson, in $PL_FUZZ_BUILD/meson, with -Dfuzz=enabled (meson.options):
# the core library built once (src/meson.build) instrumented for coverage,
# ASan + UBSan over everything, tests/fuzz/meson.build linking the harness.
# With OpenMP where the compiler has it (clang: Debian's libomp-14-dev, which
# .ci/run installs), so that large inputs run the parallel team; without it
# the core compiles serially and run.sh says so.  If the compiler cannot link libFuzzer (gcc, or no
# libclang-rt-*-dev), meson builds the harness with -DPL_FUZZ_STANDALONE into
# a driver that replays the corpus and then feeds random inputs for the same
# time: weaker, but CI still fuzzes.  --standalone builds it with gcc.

# Time is split over the SIMD kernel paths: 1/2 with the best one the CPU
# has (avx512 or avx2 on x86-64), 1/6 each with PYLAYOUT_SIMD=avx2, =sse2
# and =scalar.
#
# Inputs: the committed seed corpus tests/fuzz/corpus (read-only here) plus
# a scratch corpus in $PL_FUZZ_BUILD/corpus (default build-fuzz/corpus) that
# grows across runs.  A finding stops the run with exit status 1 and leaves
# the input in build-fuzz/artifacts/; reproduce it with
#     build-fuzz/meson-clang/tests/fuzz/fuzz_copy build-fuzz/artifacts/crash-...
# and, once fixed, add it to tests/fuzz/corpus (name it after the bug).
# To refresh the seed corpus after long runs (keep it under 200 KB):
#     build-fuzz/meson-clang/tests/fuzz/fuzz_copy -merge=1 /tmp/newseeds tests/fuzz/corpus build-fuzz/corpus
#
# Environment: CC_FUZZ (default clang), PL_FUZZ_BUILD (default build-fuzz),
# PL_FUZZ_JOBS (parallel libFuzzer workers for long runs, default 1),
# PL_FUZZ_CFLAGS (extra compiler flags, e.g. -fno-sanitize=alignment to look
# past a known finding while it is being fixed).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

standalone=0
if [ "${1:-}" = "--standalone" ]; then
    standalone=1
    shift
fi
total=${1:-60}
OUT=${PL_FUZZ_BUILD:-$ROOT/build-fuzz}
CC=${CC_FUZZ:-clang}
JOBS=${PL_FUZZ_JOBS:-1}
mkdir -p "$OUT/corpus" "$OUT/artifacts"

if [ "$standalone" = 1 ]; then
    CC=${CC_FUZZ:-gcc}
    BUILD="$OUT/meson-standalone"
else
    command -v "$CC" >/dev/null || { echo "run.sh: $CC not found, falling back to gcc and the standalone driver"; CC=gcc; }
    BUILD="$OUT/meson-$(basename "$CC")"
fi
setup=(-Dfuzz=enabled -Dpython=disabled -Dtests=disabled -Dinstall_c_library=false -Dopenmp=auto
       -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false
       "-Dc_args=-fno-omit-frame-pointer -fno-sanitize-recover=undefined ${PL_FUZZ_CFLAGS:-}")
if [ -f "$BUILD/build.ninja" ]; then
    CC=$CC meson setup --reconfigure "$BUILD" "${setup[@]}" >"$OUT/build.log" 2>&1
else
    CC=$CC meson setup "$BUILD" "${setup[@]}" >"$OUT/build.log" 2>&1
fi || { tail -20 "$OUT/build.log"; exit 2; }
meson compile -C "$BUILD" fuzz_copy >>"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 2; }
bin="$BUILD/tests/fuzz/fuzz_copy"
if nm "$bin" 2>/dev/null | grep LLVMFuzzerRunDriver >/dev/null; then  # no -q: pipefail would see nm's SIGPIPE
    mode=libfuzzer
else
    mode=standalone
fi
openmp=without
grep -qiE "dependency openmp.* found: YES" "$BUILD/meson-logs/meson-log.txt" && openmp=with
echo "run.sh: built $bin ($mode, $CC, meson -Dfuzz=enabled, $openmp OpenMP), fuzzing for ${total}s"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

t_best=$(( total / 2 )); t_avx2=$(( total / 6 )); t_sse=$(( total / 6 ))
t_scalar=$(( total - t_best - t_avx2 - t_sse ))
status=0
for spec in "best:$t_best" "avx2:$t_avx2" "sse2:$t_sse" "scalar:$t_scalar"; do
    simd=${spec%%:*}; t=${spec#*:}
    [ "$t" -gt 0 ] || continue
    if [ "$simd" = best ]; then unset PYLAYOUT_SIMD; else export PYLAYOUT_SIMD=$simd; fi
    echo "--- fuzz_copy: ${t}s, SIMD path: $simd"
    if [ "$mode" = libfuzzer ]; then
        extra=()
        [ "$JOBS" -gt 1 ] && extra=(-jobs="$JOBS" -workers="$JOBS")
        "$bin" -max_total_time="$t" -max_len=1024 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$OUT/artifacts/" "${extra[@]}" "$OUT/corpus" tests/fuzz/corpus 2>"$OUT/fuzz-$simd.log" ||
            status=$?
        grep -E "^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)|ERROR|SUMMARY|runtime error|check failed" \
            "$OUT/fuzz-$simd.log" || true
        grep -E "^#[0-9]+ +DONE" "$OUT/fuzz-$simd.log" | tail -1 || true
    else
        "$bin" -t "$t" tests/fuzz/corpus "$OUT/corpus" || status=$?
    fi
    if [ "$status" != 0 ]; then
        echo "run.sh: FINDING with SIMD path $simd (exit $status); log: $OUT/fuzz-$simd.log, inputs: $OUT/artifacts/"
        [ "$mode" = libfuzzer ] && tail -40 "$OUT/fuzz-$simd.log"
        exit 1
    fi
done
unset PYLAYOUT_SIMD
echo "run.sh: no findings in ${total}s ($mode)"
