#!/usr/bin/env bash
# .ci/reliability.sh - the reliability checks of docs/reliability.md.
#
# Run from anywhere after .ci/run (which installs the dependencies and builds
# ./build); .ci/run calls it last.  Sections:
#   a. ASan+UBSan build in build-asan; the Check suites there
#   b. the pytest suite against the ASan-built extension (ASan preloaded)
#   c. valgrind memcheck: already done by .ci/run on ./build (not repeated)
#   d. a 60 s fuzz run of the C core on the committed corpus (tests/fuzz/run.sh)
#   e. the peak-RSS check of a 1 GiB conversion (tools/peak_rss.py)
# Every section runs even if an earlier one failed; the exit status is
# non-zero if any failed.  About 20 minutes on 2 cores (session 59, in CI's
# fresh clone: a 3.8, b 12.1 with pytest-xdist, d 3.6, e 0.3).
#
# Environment: PYTHON (default python3), PL_FUZZ_SECONDS (default 60),
# PYLAYOUT_STRESS_SECONDS (the threads stress test, default 30).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
FUZZ_SECONDS=${PL_FUZZ_SECONDS:-60}
declare -a summary=()
failed=0

section() { printf '\n=== reliability %s\n' "$*"; }
run_section() { # name, command...
    local name=$1 start rc
    shift
    start=$(date +%s)
    # In a subshell with errexit on: a failing step inside a section (a
    # setup or build before its tests) fails the section, and the outer
    # script still goes on to the next one.
    set +e
    (set -e; "$@")
    rc=$?
    set -e
    local took=$(( $(date +%s) - start ))
    if [ "$rc" -eq 0 ]; then
        summary+=("$name: ok (${took}s)")
    else
        summary+=("$name: FAILED rc=$rc (${took}s)")
        failed=1
    fi
}

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# ---------------------------------------------------------------- a
asan_c() {
    if [ -d build-asan ]; then
        meson setup --reconfigure build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
    else
        meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
    fi
    ninja -C build-asan >/dev/null
    # Leak checking on: the C suites free everything they allocate.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        meson test -C build-asan --suite c --no-rebuild --print-errorlogs
}
section "a: ASan+UBSan build (build-asan), Check suites"
run_section "a asan+ubsan C suites" asan_c

# ---------------------------------------------------------------- b
asan_py() {
    local libasan libstdcxx
    libasan=$(gcc -print-file-name=libasan.so)
    libstdcxx=$(gcc -print-file-name=libstdc++.so)
    [ -f "$libasan" ] || { echo "libasan.so not found (gcc -print-file-name)"; return 1; }
    # The extension is ASan-instrumented but python3 is not, so the runtime
    # must come first (LD_PRELOAD).  libstdc++ is preloaded too: ASan resolves
    # its __cxa_throw interceptor at start-up, and without libstdc++ loaded
    # by then torch's first C++ exception aborts ("real___cxa_throw != 0").
    # detect_leaks=0: CPython and torch keep allocations alive at exit by
    # design.  With both, torch imports and every test file runs.
    # allocator_may_return_null=1: the MemoryError tests ask for absurd sizes,
    # which pylayout must turn into MemoryError, not an ASan abort.
    # With pytest-xdist (which .ci/run installs) one worker per core: the
    # suite is mostly one Python process waiting on its own children, and
    # two workers take it from about 29 to 13 minutes on 2 cores.
    local workers=()
    if "$PY" -c 'import xdist' 2>/dev/null; then
        workers=(-n "$(nproc)")
    else
        echo "pytest-xdist not installed: the suite runs in one process (pip install pytest-xdist)"
    fi
    (cd build-asan &&
        LD_PRELOAD="$libasan $libstdcxx" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 \
        PYTHONPATH="$PWD" PYTHONDONTWRITEBYTECODE=1 \
        "$PY" -m pytest "$OLDPWD/tests/python" -ra -p no:cacheprovider -q "${workers[@]}")
}
section "b: pytest against the ASan-built extension"
run_section "b asan+ubsan pytest" asan_py

section "c: valgrind memcheck"
echo "valgrind memcheck of the Check suites runs in .ci/run on ./build; not repeated here"
summary+=("c valgrind: in .ci/run")

# ---------------------------------------------------------------- d
section "d: fuzzing the C core for ${FUZZ_SECONDS}s (tests/fuzz/run.sh)"
if ! command -v clang >/dev/null; then
    echo "clang not found: installing it (for libFuzzer)"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev libomp-14-dev >/dev/null || true
fi
run_section "d fuzz ${FUZZ_SECONDS}s" bash tests/fuzz/run.sh "$FUZZ_SECONDS"

# ---------------------------------------------------------------- e
section "e: peak RSS of a 1 GiB conversion (tools/peak_rss.py)"
run_section "e peak rss" env PYTHONPATH="$PWD/build" "$PY" tools/peak_rss.py

section "summary"
for line in "${summary[@]}"; do echo "  $line"; done
if [ "$failed" -eq 0 ]; then
    echo "reliability: ALL OK"
else
    echo "reliability: FAILED (see the sections above)"
fi
exit "$failed"
