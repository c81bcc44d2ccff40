/*
 * bench_copy.c - times pylayout_copy against memcpy of the same bytes.
 * A benchmark, not a test.  GB/s = tensor bytes / seconds (the same
 * definition for memcpy), best of N runs; "ratio" = pylayout / memcpy at the
 * same thread count.  memcpy with 2 threads splits the buffer in halves.
 *
 * Built by meson as a benchmark (tools/meson.build):
 *   meson test -C build --benchmark                 both figures below
 *   build/tools/bench_copy [runs]                   (default 7 runs per figure)
 *   build/tools/bench_copy threshold                (1 vs 2 threads for small copies)
 *   build/tools/bench_copy 9 "permute 5-D"          only the cases whose name contains that
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <pylayout.h>

#include "bench_util.h"

static double now(void) { return bench_now(); }

static void *xalloc(size_t n) { return bench_alloc(n, 64); }

static void par_memcpy(void *dst, const void *src, size_t n, int threads)
{
#ifdef _OPENMP
    if (threads > 1) {
#pragma omp parallel num_threads(threads)
        {
            size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
            size_t lo = n / nt * t, hi = t + 1 == nt ? n : n / nt * (t + 1);
            memcpy((char *)dst + lo, (const char *)src + lo, hi - lo);
        }
        return;
    }
#else
    (void)threads;
#endif
    memcpy(dst, src, n);
}

static double best_memcpy(void *dst, const void *src, size_t n, int threads, int runs)
{
    double best = 1e30;
    par_memcpy(dst, src, n, threads);
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        par_memcpy(dst, src, n, threads);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

static double best_copy(const DLTensor *src, DLTensor *dst, int runs)
{
    double best = 1e30;
    if (pylayout_copy(src, dst) != PYLAYOUT_OK) {
        fprintf(stderr, "pylayout_copy failed: %s\n", pylayout_last_error());
        exit(1);
    }
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        pylayout_copy(src, dst);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

/* Runs one case at 1 and 2 threads and prints a line for each. */
static const char *only; /* run only the cases whose name contains this */

static void bench_case_t(const char *name, int ndim, int64_t *shape, int64_t *sstrides, int64_t *dstrides,
                         int runs, size_t itemsize, int64_t src_span)
{
    if (only != NULL && strstr(name, only) == NULL)
        return;
    DLDataType f32 = {kDLFloat, 32, 1};
    if (itemsize == 1)
        f32 = (DLDataType){kDLUInt, 8, 1};
    size_t n = itemsize;
    for (int d = 0; d < ndim; d++)
        n *= (size_t)shape[d];
    /* src_span: elements the source spans (a sliced source is larger) */
    size_t sn = src_span > 0 ? (size_t)src_span * itemsize : n;
    void *a = xalloc(sn), *b = xalloc(n);
    DLTensor src = {a, {kDLCPU, 0}, ndim, f32, shape, sstrides, 0};
    DLTensor dst = {b, {kDLCPU, 0}, ndim, f32, shape, dstrides, 0};
    for (int threads = 1; threads <= 2; threads++) {
        pylayout_set_num_threads(threads);
        double tm = best_memcpy(b, a, n, threads, runs);
        double tc = best_copy(&src, &dst, runs);
        printf("%-36s threads=%d  %8.1f MB  pylayout %6.2f GB/s  memcpy %6.2f GB/s  ratio %.2f\n", name, threads,
               (double)n / 1e6, (double)n / tc / 1e9, (double)n / tm / 1e9, tm / tc);
    }
    free(a);
    free(b);
}

static void bench_case(const char *name, int ndim, int64_t *shape, int64_t *sstrides, int64_t *dstrides,
                       int runs)
{
    bench_case_t(name, ndim, shape, sstrides, dstrides, runs, 4, 0);
}

/* Small copies: where does a second thread start to pay? */
static void bench_threshold(void)
{
    DLDataType f32 = {kDLFloat, 32, 1};
    printf("%10s  %14s %14s  %14s %14s\n", "bytes", "memcpy 1t us", "memcpy 2t us", "transp 1t us", "transp 2t us");
    for (size_t bytes = 16 << 10; bytes <= (8u << 20); bytes *= 2) {
        int64_t side = 1;
        while ((size_t)((side + 1) * (side + 1)) * 4 <= bytes)
            side++;
        size_t n = (size_t)(side * side) * 4;
        void *a = xalloc(n), *b = xalloc(n);
        int64_t shape[2] = {side, side}, tstr[2] = {1, side};
        DLTensor src = {a, {kDLCPU, 0}, 2, f32, shape, tstr, 0};
        DLTensor dst = {b, {kDLCPU, 0}, 2, f32, shape, NULL, 0};
        int runs = (int)(200000000 / n) + 5;
        double m1 = best_memcpy(b, a, n, 1, runs), m2 = best_memcpy(b, a, n, 2, runs);
        pylayout_set_num_threads(1);
        double t1 = best_copy(&src, &dst, runs);
        pylayout_set_num_threads(2);
        double t2 = best_copy(&src, &dst, runs);
        printf("%10zu  %14.2f %14.2f  %14.2f %14.2f\n", n, m1 * 1e6, m2 * 1e6, t1 * 1e6, t2 * 1e6);
        free(a);
        free(b);
    }
}

int main(int argc, char **argv)
{
    bool openmp = false;
    const char *simd = "?";
    pylayout_build_info(&openmp, &simd);
    printf("pylayout %s: openmp=%s simd=%s\n", PYLAYOUT_VERSION_STRING, openmp ? "yes" : "no", simd);
    if (argc > 1 && strcmp(argv[1], "threshold") == 0) {
        bench_threshold();
        return 0;
    }
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1)
        runs = 1;
    only = argc > 2 ? argv[2] : NULL;

    /* NCHW float32 -> channels_last (NHWC strides) */
    int64_t nchw[4] = {32, 64, 112, 112};
    int64_t nchw_str[4] = {64 * 112 * 112, 112 * 112, 112, 1};
    int64_t nhwc_str[4] = {112 * 112 * 64, 1, 112 * 64, 64};
    bench_case("NCHW (32,64,112,112) -> channels_last", 4, nchw, nchw_str, nhwc_str, runs);

    /* 8192 x 8192 float32 transpose (power-of-two leading dimension) */
    int64_t sq[2] = {8192, 8192}, tr[2] = {1, 8192};
    bench_case("8192x8192 transpose", 2, sq, tr, NULL, runs);

    /* 256 MB identity copy */
    int64_t id[2] = {8192, 8192};
    bench_case("8192x8192 identity (256 MB)", 2, id, NULL, NULL, runs);

    /* torch.randn(27,28,28,28,28).permute(2,3,1,4,0) -> contiguous */
    int64_t p5[5] = {28, 28, 28, 28, 27};
    int64_t p5_str[5] = {28 * 28, 28, 28 * 28 * 28, 1, 28 * 28 * 28 * 28};
    bench_case("permute 5-D (27,28^4) by (2,3,1,4,0)", 5, p5, p5_str, NULL, runs);

    /* torch.randn(32,64,112,224)[..., ::2] -> contiguous */
    int64_t sl[4] = {32, 64, 112, 112};
    int64_t sl_str[4] = {64 * 112 * 224, 112 * 224, 224, 2};
    bench_case_t("sliced [..., ::2] (32,64,112,224)", 4, sl, sl_str, NULL, runs, 4, (int64_t)32 * 64 * 112 * 224);

    /* uint8 8192 x 8192 transpose */
    bench_case_t("8192x8192 uint8 transpose", 2, sq, tr, NULL, runs, 1, 0);

    /* attention heads: torch.randn(B,H,S,D).permute(0,2,1,3) -> contiguous (B,S,H,D) */
    int64_t ah[4] = {4, 2048, 12, 64};
    int64_t ah_str[4] = {12 * 2048 * 64, 64, 2048 * 64, 1};
    bench_case("heads (4,12,2048,64) by (0,2,1,3)", 4, ah, ah_str, NULL, runs);
    int64_t ah8[4] = {64, 64, 64, 64};
    int64_t ah8_str[4] = {64 * 64 * 64, 64, 64 * 64, 1};
    bench_case_t("heads uint8 (64,64,64,64) by (0,2,1,3)", 4, ah8, ah8_str, NULL, runs, 1, 0);
    return 0;
}
