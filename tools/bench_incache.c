/*
 * bench_incache.c - times float32 2-D transposes that fit in cache
 * (64 KiB - 2 MiB) against memcpy of the same bytes, the kernel alone: no
 * Python.  Each figure is the best, over `rounds` batches, of the mean time
 * per call in a batch of calls on the same buffers (as pylayout/_bench.py
 * does through Python), each batch after one untimed call; both buffers sit
 * 16 bytes past a line, as NumPy's small arrays do.  A benchmark, not a
 * test.
 *
 *   build/tools/bench_incache [rounds] [threads]          the default shapes
 *   build/tools/bench_incache [rounds] [threads] R C ...  R x C sources
 *
 * BENCH_OFFSET=n puts both buffers n bytes past a line instead of 16 (0:
 * on lines, as torch's buffers are); BENCH_DOFF=n moves dst n bytes more
 * (its page offset relative to src); BENCH_PITCH=n puts the src rows n
 * elements apart instead of C (n >= C: a view of a wider matrix), which
 * shows what row strides that are multiples of 256 bytes cost in L2 (see
 * docs/benchmarks.md, session 43).
 *
 * A third figure, "lines", times moving the same cache lines as the
 * transpose without transposing them: for each 16 x 16 block of src, its
 * 16 row pieces of 64 bytes go to the 16 dst rows the block's columns
 * become, as they are, in the plainest block order (src column blocks
 * outer).  It reads and writes exactly the transpose's lines, in cache,
 * with no shuffle at all: what the access pattern alone costs, beside
 * memcpy's sequential walk (docs/benchmarks.md, session 47).  It covers
 * the whole 16 x 16 blocks of the shape, is timed per byte it moves, and
 * runs on the calling thread alone, as the memcpy does.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pylayout.h>

#include "bench_util.h"

static double now(void) { return bench_now(); }

static void *xalloc(size_t n) { return bench_alloc(n, 4096); }

/* One 64-byte piece, src to dst, neither aligned: one vector where the CPU
 * has AVX-512 (the pieces the transposer moves), else the compiler's copy. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx512f"))) static void move_lines_512(char *d, const char *s, int64_t rows, int64_t cols,
                                                              int64_t spitch, int64_t dpitch)
{
    for (int64_t j = 0; j + 16 <= cols; j += 16)
        for (int64_t i = 0; i + 16 <= rows; i += 16)
            for (int64_t k = 0; k < 16; k++)
                _mm512_storeu_ps((float *)(d + ((j + k) * dpitch + i) * 4),
                                 _mm512_loadu_ps((const float *)(s + ((i + k) * spitch + j) * 4)));
}
#endif

static void move_lines_plain(char *d, const char *s, int64_t rows, int64_t cols, int64_t spitch, int64_t dpitch)
{
    for (int64_t j = 0; j + 16 <= cols; j += 16)
        for (int64_t i = 0; i + 16 <= rows; i += 16)
            for (int64_t k = 0; k < 16; k++)
                memcpy(d + ((j + k) * dpitch + i) * 4, s + ((i + k) * spitch + j) * 4, 64);
}

/* The "lines" reference above: the 64-byte pieces of the whole 16 x 16
 * blocks of an R x C float32 src (rows spitch elements apart) moved to
 * where its dense C x R transpose puts them, untransposed. */
static void move_lines(char *d, const char *s, int64_t R, int64_t C, int64_t spitch)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) {
        move_lines_512(d, s, R, C, spitch, R);
        return;
    }
#endif
    move_lines_plain(d, s, R, C, spitch, R);
}

/* The src of R x C, transposed into a dense C x R dst. */
static void bench(int64_t R, int64_t C, int rounds)
{
    const char *off_env = getenv("BENCH_OFFSET"); /* bytes past a line; 16 unless set */
    const uint64_t offset = off_env != NULL ? (uint64_t)atoi(off_env) : 16;
    const char *doff_env = getenv("BENCH_DOFF"); /* extra dst offset (bytes) */
    const uint64_t doff = doff_env != NULL ? (uint64_t)atoi(doff_env) : 0;
    const char *pitch_env = getenv("BENCH_PITCH"); /* src row stride (elements) */
    const int64_t pitch = pitch_env != NULL && atoll(pitch_env) > C ? atoll(pitch_env) : C;
    const size_t bytes = (size_t)(R * C) * 4;
    char *a = xalloc((size_t)(R * pitch) * 4 + offset + 64), *b = xalloc(bytes + offset + doff + 64);
    int64_t shape[2] = {C, R}, sstr[2] = {1, pitch};
    DLDataType f32 = {kDLFloat, 32, 1};
    DLTensor src = {a, {kDLCPU, 0}, 2, f32, shape, sstr, offset};
    DLTensor dst = {b, {kDLCPU, 0}, 2, f32, shape, NULL, offset + doff};
    const int reps = (int)(20000000 / bytes) + 10;
    double tp = 1e30, tm = 1e30, tl = 1e30;
    for (int r = 0; r < rounds; r++) {
        /* k = -1, untimed: the first copy after the memcpy batch comes
         * alone, not in a run, so it would time the team's start-up on the
         * batch's mean (src/threads.c, PL_ENGAGE_RUN_NS) */
        double t0 = 0;
        for (int k = -1; k < reps; k++) {
            if (k == 0)
                t0 = now();
            if (pylayout_copy(&src, &dst) != PYLAYOUT_OK) {
                fprintf(stderr, "pylayout_copy: %s\n", pylayout_last_error());
                exit(1);
            }
        }
        double t = (now() - t0) / reps;
        tp = t < tp ? t : tp;
        for (int k = -1; k < reps; k++) {
            if (k == 0)
                t0 = now();
            memcpy(b + offset + doff, a + offset, bytes);
            __asm__ __volatile__("" : : "r"(b) : "memory");
        }
        t = (now() - t0) / reps;
        tm = t < tm ? t : tm;
        for (int k = -1; k < reps; k++) {
            if (k == 0)
                t0 = now();
            move_lines(b + offset + doff, a + offset, R, C, pitch);
            __asm__ __volatile__("" : : "r"(b) : "memory");
        }
        t = (now() - t0) / reps;
        tl = t < tl ? t : tl;
    }
    const double moved = (double)((R / 16 * 16) * (C / 16 * 16) * 4); /* the lines reference's bytes */
    if (pitch != C)
        printf("  (src rows %lld elements apart)\n", (long long)pitch);
    printf("%5lld x %-5lld %7.0f KiB  pylayout %8.2f us %6.1f GB/s  memcpy %7.2f us  ratio %.2f  lines %6.1f GB/s\n",
           (long long)R, (long long)C, bytes / 1024.0, tp * 1e6, bytes / tp / 1e9, tm * 1e6, tm / tp,
           moved > 0 ? moved / tl / 1e9 : 0.0);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 7;
    const int threads = argc > 2 ? atoi(argv[2]) : 1;
    bool openmp = false;
    const char *simd = "?";
    pylayout_build_info(&openmp, &simd);
    pylayout_set_num_threads(threads);
    printf("pylayout %s: simd=%s threads=%d, best of %d batches\n", PYLAYOUT_VERSION_STRING, simd, threads,
           rounds < 1 ? 1 : rounds);
    if (argc > 4) {
        for (int k = 3; k + 1 < argc; k += 2)
            bench(atoll(argv[k]), atoll(argv[k + 1]), rounds < 1 ? 1 : rounds);
        return 0;
    }
    static const int64_t shapes[][2] = {{128, 128}, {256, 256}, {362, 362}, {512, 512}, {724, 724},
                                        {1024, 128}, {512, 200}, {300, 300}, {96, 1000}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        bench(shapes[k][0], shapes[k][1], rounds < 1 ? 1 : rounds);
    return 0;
}
