#!/usr/bin/env bash
# hptt_compare.sh - pylayout against HPTT (github.com/springer13/hptt) and
# memcpy, side by side in one process, on the transposes tools/bench_copy.c
# times.  A benchmark for people, never run by tests or CI; no HPTT code
# lives in this repository.
#
#   tools/hptt_compare.sh HPTT_DIR [BUILD_DIR] [RUNS]
#
# HPTT_DIR: a checkout of HPTT.  Its lib/libhptt.a is built first if absent,
#   with its Makefile's AVX flags minus -march=native:
#   make lib/libhptt.a CXX=g++ CXX_FLAGS="-O3 -std=c++11 -DNDEBUG -fopenmp -mavx -DHPTT_ARCH_AVX"
#   (HPTT has no AVX-512 kernels; it writes with streaming stores when beta = 0).
# BUILD_DIR: pylayout's meson build directory (default: build next to tools/).
# RUNS: timed runs per figure, best kept (default 7), as bench_copy.
#
# Each line: GB/s (tensor bytes / best time) of pylayout_copy, of HPTT's
# plan->execute() (float, row-major, alpha 1, beta 0, ESTIMATE plan made
# before timing; HPTT_SELECTION=measure makes it auto-tune instead), and of
# memcpy of the same bytes (2 threads: halves), at 1 and 2 threads, with
# pylayout / HPTT and pylayout / memcpy.  Both results are checked against a
# plain loop, element by element.  uint8 transposes are left out: HPTT has no 1-byte type.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
hptt=${1:?usage: tools/hptt_compare.sh HPTT_DIR [BUILD_DIR] [RUNS]}
build=${2:-$here/build}
runs=${3:-7}
hptt=$(cd "$hptt" && pwd)
build=$(cd "$build" && pwd)

if [[ ! -f "$hptt/lib/libhptt.a" ]]; then
    echo "building $hptt/lib/libhptt.a (a few minutes)" >&2
    make -C "$hptt" lib/libhptt.a CXX=g++ \
        CXX_FLAGS="-O3 -std=c++11 -DNDEBUG -fopenmp -mavx -DHPTT_ARCH_AVX" >&2
fi
lib=$(ls "$build"/src/libpylayout.so* 2>/dev/null | head -n1 || true)
[[ -n "$lib" ]] || { echo "no libpylayout.so in $build/src: run ninja -C $build" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/driver.cpp" <<'EOF'
#include <hptt.h>
#include <omp.h>
#include <pylayout.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <class F> static double best_of(int runs, F f)
{
    f();
    double best = 1e30;
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        f();
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

static void par_memcpy(char *d, const char *s, size_t n, int threads)
{
#pragma omp parallel num_threads(threads)
    {
        size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        size_t lo = n / nt * t, hi = t + 1 == nt ? n : n / nt * (t + 1);
        memcpy(d + lo, s + lo, hi - lo);
    }
}

/* B = A.permute(perm), row-major float32, both dense. */
static void run_case(const char *name, std::vector<int> size, std::vector<int> perm, int runs, bool measure)
{
    const int nd = (int)size.size();
    size_t n = 1;
    for (int s : size)
        n *= (size_t)s;
    float *a = nullptr, *b = nullptr, *c = nullptr;
    if (posix_memalign((void **)&a, 64, n * 4) || posix_memalign((void **)&b, 64, n * 4) ||
        posix_memalign((void **)&c, 64, n * 4)) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(i % 1000003);
    memset(b, 1, n * 4);
    memset(c, 2, n * 4);
    /* pylayout: dst dense in B's shape; src the strided view of A */
    int64_t astr[PYLAYOUT_MAX_NDIM], shape[PYLAYOUT_MAX_NDIM], sstr[PYLAYOUT_MAX_NDIM];
    int64_t st = 1;
    for (int d = nd - 1; d >= 0; d--) {
        astr[d] = st;
        st *= size[d];
    }
    for (int d = 0; d < nd; d++) {
        shape[d] = size[perm[d]];
        sstr[d] = astr[perm[d]];
    }
    DLDataType f32 = {kDLFloat, 32, 1};
    DLTensor src = {a, {kDLCPU, 0}, nd, f32, shape, sstr, 0};
    DLTensor dst = {c, {kDLCPU, 0}, nd, f32, shape, nullptr, 0};
    for (int threads = 1; threads <= 2; threads++) {
        auto plan = hptt::create_plan(perm.data(), nd, 1.0f, a, size.data(), nullptr, 0.0f, b, nullptr,
                                      measure ? hptt::MEASURE : hptt::ESTIMATE, threads, nullptr, true);
        pylayout_set_num_threads(threads);
        double th = best_of(runs, [&] { plan->execute(); });
        double tp = best_of(runs, [&] {
            if (pylayout_copy(&src, &dst) != PYLAYOUT_OK) {
                fprintf(stderr, "pylayout_copy: %s\n", pylayout_last_error());
                exit(1);
            }
        });
        double tm = best_of(runs, [&] { par_memcpy((char *)c, (const char *)a, n * 4, threads); });
        pylayout_copy(&src, &dst); /* memcpy above overwrote it */
        /* both against a plain loop over dst */
        size_t bad_p = 0, bad_h = 0;
        int64_t idx[PYLAYOUT_MAX_NDIM] = {0};
        for (size_t i = 0; i < n; i++) {
            int64_t off = 0;
            for (int d = 0; d < nd; d++)
                off += idx[d] * sstr[d];
            bad_p += memcmp(c + i, a + off, 4) != 0;
            bad_h += memcmp(b + i, a + off, 4) != 0;
            for (int d = nd - 1; d >= 0 && ++idx[d] == shape[d]; d--)
                idx[d] = 0;
        }
        if (bad_p || bad_h)
            fprintf(stderr, "%s threads=%d: wrong elements: pylayout %zu, HPTT %zu of %zu\n", name, threads,
                    bad_p, bad_h, n);
        double gb = (double)n * 4 / 1e9;
        printf("%-36s threads=%d  pylayout %6.2f  HPTT %6.2f  memcpy %6.2f GB/s  vs HPTT %.2f  vs memcpy %.2f%s\n",
               name, threads, gb / tp, gb / th, gb / tm, th / tp, tm / tp, bad_p || bad_h ? "  WRONG RESULTS" : "");
    }
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    const char *sel = getenv("HPTT_SELECTION");
    bool measure = sel != nullptr && strcmp(sel, "measure") == 0;
    printf("best of %d; HPTT plans by %s\n", runs, measure ? "MEASURE" : "ESTIMATE");
    run_case("NCHW (32,64,112,112) -> channels_last", {32, 64, 112, 112}, {0, 2, 3, 1}, runs, measure);
    run_case("8192x8192 transpose", {8192, 8192}, {1, 0}, runs, measure);
    run_case("permute 5-D (27,28^4) by (2,3,1,4,0)", {27, 28, 28, 28, 28}, {2, 3, 1, 4, 0}, runs, measure);
    return 0;
}
EOF
g++ -O2 -std=c++14 -fopenmp -I"$hptt/include" -I"$here/include" -I"$build/include" \
    "$work/driver.cpp" "$hptt/lib/libhptt.a" "$lib" -Wl,-rpath,"$(dirname "$lib")" -o "$work/driver"
"$work/driver" "$runs"
