/*
 * check_incache.c - Check tests of the cached 4-byte tile transposes
 * (pl_tile4_* in copy_x86.c: AVX-512 16x16 blocks, AVX2 8x8, SSE2 4x4, and
 * the strips of 32 dst rows of PL_DEFINE_TILE_STRIPS in kernels.h) through
 * pylayout_copy, on 2-D float32 transposes that fit in cache.
 *
 * Each case transposes an R x C src (rows SP elements apart) into a C x R
 * dst (rows DP elements apart), both at byte offsets off their cache lines
 * (or on them), and compares every element with the naive answer; every
 * other byte of the dst buffer (before, between the rows, after) must come
 * back untouched.  Sources are random bytes, so NaN payloads must survive
 * bit-exact.  The sizes are chosen for the kernels' edges: dst rows a
 * multiple of 1 KiB apart (the strips) and not, tiles thinner than 16 (the
 * AVX-512 tile hands them to the AVX2 one) and than 8, strips whose last
 * one is short, and ragged 16x16 blocks.  Registered once per PYLAYOUT_SIMD
 * path in tests/c/meson.build; runs at 1 and 2 threads.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pylayout.h>

#include "check_util.h"

#define GUARD 256
#define SENTINEL 0xA5

typedef struct {
    int64_t rows, cols; /* of src; dst is cols x rows */
    int64_t sp, dp;     /* src and dst row strides in elements (0: dense) */
} tcase2;

/* The index of the first of n bytes at p that is not SENTINEL, or n. */
static size_t first_written(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] == SENTINEL)
        i++;
    return i;
}

/* Runs one transpose with src at byte offset soff and dst at doff from
 * 64-byte aligned buffers, and checks dst and every byte around it; `times`
 * times on the same buffers, dst's bytes reset before each. */
static void run_times(const tcase2 *c, size_t soff, size_t doff, unsigned seed, int times)
{
    const int64_t R = c->rows, C = c->cols;
    const int64_t sp = c->sp ? c->sp : C, dp = c->dp ? c->dp : R;
    const size_t sbytes = (size_t)(R * sp) * 4 + soff, dspan = (size_t)((C - 1) * dp + R) * 4;
    const size_t dtotal = (GUARD + doff + dspan + GUARD + 63) / 64 * 64;
    unsigned char *sbuf = aligned_alloc(64, (sbytes + 63) / 64 * 64);
    unsigned char *dbuf = aligned_alloc(64, dtotal);
    ck_assert_ptr_nonnull(sbuf);
    ck_assert_ptr_nonnull(dbuf);
    test_fill(sbuf, sbytes, &seed);

    const int64_t shape[2] = {C, R}, sstr[2] = {1, sp}, dstr[2] = {dp, 1};
    const DLDataType f32 = {kDLFloat, 32, 1};
    DLTensor s = dl_make(sbuf, 2, shape, sstr, f32, soff);
    DLTensor d = dl_make(dbuf, 2, shape, dstr, f32, GUARD + doff);
    for (int k = 0; k < times; k++) {
        memset(dbuf, SENTINEL, dtotal);
        ck_assert_int_eq(pylayout_copy(&s, &d), PYLAYOUT_OK);

        const unsigned char *src = sbuf + soff, *dst = dbuf + GUARD + doff;
        size_t at = first_written(dbuf, GUARD + doff);
        ck_assert_msg(at == GUARD + doff, "copy %d: byte %zu before dst written", k, GUARD + doff - at);
        at = first_written(dst + dspan, dtotal - (GUARD + doff + dspan));
        ck_assert_msg(at == dtotal - (GUARD + doff + dspan), "copy %d: byte %zu after dst written", k, at);
        for (int64_t j = 0; j < C; j++) {
            const unsigned char *row = dst + j * dp * 4;
            for (int64_t i = 0; i < R; i++)
                if (memcmp(row + i * 4, src + (i * sp + j) * 4, 4) != 0)
                    ck_abort_msg("copy %d of %lld x %lld (sp %lld, dp %lld, soff %zu, doff %zu): dst[%lld][%lld] "
                                 "differs",
                                 k, (long long)R, (long long)C, (long long)sp, (long long)dp, soff, doff,
                                 (long long)j, (long long)i);
            if (j + 1 < C) {
                const size_t pad = (size_t)(dp - R) * 4;
                ck_assert_msg(first_written(row + R * 4, pad) == pad, "copy %d: padding after dst row %lld written",
                              k, (long long)j);
            }
        }
    }
    free(sbuf);
    free(dbuf);
}

static void run_one(const tcase2 *c, size_t soff, size_t doff, unsigned seed) { run_times(c, soff, doff, seed, 1); }

typedef struct {
    const tcase2 *cases;
    int ncases;
    const size_t *offsets; /* pairs of (src, dst) byte offsets */
    int noffsets;
} case_set;

static void run_set(int threads, void *ctx)
{
    const case_set *set = ctx;
    for (int i = 0; i < set->ncases; i++)
        for (int o = 0; o < set->noffsets; o++)
            run_one(&set->cases[i], set->offsets[2 * o], set->offsets[2 * o + 1],
                    (unsigned)(i * 977 + o * 13 + threads));
}

/* Both on lines; both 16 bytes off (NumPy's small arrays); different
 * element offsets; dst off by bytes (no whole elements). */
static const size_t offsets[] = {0, 0, 16, 16, 4, 60, 48, 12, 0, 3};
#define NOFFSETS 5

/* Square transposes from 16 to 512 elements: powers of two (dst rows a
 * multiple of 1 KiB apart from 256 on: the strips), their neighbours, and
 * sizes that leave every ragged 16x16 and 8x8 block. */
START_TEST(test_square)
{
    static const int64_t ns[] = {16, 17, 31, 32, 33, 47, 63, 64, 65, 96, 127, 128, 129, 200, 255, 256, 257, 362, 512};
    tcase2 cases[sizeof ns / sizeof ns[0]];
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
        cases[k] = (tcase2){ns[k], ns[k], 0, 0};
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offsets, NOFFSETS};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Dst rows 1, 2, 3 and 4 KiB apart (strips of 32, 16, 32 and 8 rows) with
 * C cut so the last 64-row tile is 1 .. 63 rows: a single strip, a short
 * last strip joining the one before, exactly two; and thin tiles along i
 * (R < 16 and < 8) with the same dst rows, padded. */
START_TEST(test_strips)
{
    const tcase2 cases[] = {
        {256, 65, 0, 0},   {256, 79, 0, 0},  {256, 80, 0, 0},   {256, 95, 0, 0},  {256, 96, 0, 0},
        {256, 97, 0, 0},   {256, 127, 0, 0}, {512, 100, 0, 0},  {512, 33, 0, 0},  {256, 20, 0, 0},
        {12, 300, 0, 256}, {7, 200, 0, 256}, {15, 70, 0, 512},  {16, 70, 0, 256}, {40, 130, 0, 256},
        {100, 64, 128, 256}, {1024, 70, 0, 0}, {1024, 17, 0, 0}, {40, 130, 0, 1024}, {300, 90, 0, 768},
        {512, 47, 0, 0},
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offsets, NOFFSETS};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Rectangles and padded rows that are not powers of two (whole tiles, no
 * strips on the AVX2 and SSE2 paths), and src rows a power of two apart
 * (4 KiB multiples: the AVX-512 tile hands those to the AVX2 one). */
START_TEST(test_rect)
{
    const tcase2 cases[] = {
        {300, 70, 0, 0},    {70, 300, 0, 0},  {129, 257, 0, 0},  {33, 1000, 0, 0}, {1000, 33, 0, 0},
        {200, 200, 512, 0}, {96, 96, 100, 99}, {100, 1024, 0, 0}, {97, 2048, 0, 0}, {40, 64, 1024, 0},
        {130, 512, 0, 0},
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offsets, NOFFSETS};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Copies of 1 MiB and more (under the 4 MiB streaming threshold), which
 * may run on 2 threads: chunks of whole tiles, each its own strips. */
START_TEST(test_parallel)
{
    const tcase2 cases[] = {{512, 512, 0, 0}, {724, 362, 0, 0}, {1024, 300, 0, 0}};
    static const size_t offs[] = {16, 16, 0, 4};
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 2};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* The same copy K times back to back into K fresh dst buffers, then every
 * one checked: at 2 threads, a run of 1 MiB-and-up copies (each 20-40 us
 * alone) engages the team from its second copy on (PL_ENGAGE_RUN_NS in
 * threads.c), with the split it keeps from copy to copy (the caller's
 * share first, less what it ran alone before engaging). */
#define REPEATS 6
static void run_repeated(const tcase2 *c, size_t soff, size_t doff, unsigned seed)
{
    const int64_t R = c->rows, C = c->cols;
    const size_t sbytes = (size_t)(R * C) * 4 + soff, dspan = (size_t)(R * C) * 4;
    const size_t dtotal = (GUARD + doff + dspan + GUARD + 63) / 64 * 64;
    unsigned char *sbuf = aligned_alloc(64, (sbytes + 63) / 64 * 64);
    unsigned char *dbuf[REPEATS];
    ck_assert_ptr_nonnull(sbuf);
    test_fill(sbuf, sbytes, &seed);
    const int64_t shape[2] = {C, R}, sstr[2] = {1, C}, dstr[2] = {R, 1};
    const DLDataType f32 = {kDLFloat, 32, 1};
    DLTensor s = dl_make(sbuf, 2, shape, sstr, f32, soff);
    DLTensor d[REPEATS];
    for (int k = 0; k < REPEATS; k++) {
        dbuf[k] = aligned_alloc(64, dtotal);
        ck_assert_ptr_nonnull(dbuf[k]);
        memset(dbuf[k], SENTINEL, dtotal);
        d[k] = dl_make(dbuf[k], 2, shape, dstr, f32, GUARD + doff);
    }
    for (int k = 0; k < REPEATS; k++)
        ck_assert_int_eq(pylayout_copy(&s, &d[k]), PYLAYOUT_OK);
    const unsigned char *src = sbuf + soff;
    for (int k = 0; k < REPEATS; k++) {
        const unsigned char *dst = dbuf[k] + GUARD + doff;
        ck_assert_msg(first_written(dbuf[k], GUARD + doff) == GUARD + doff, "copy %d: bytes before dst written", k);
        ck_assert_msg(first_written(dst + dspan, dtotal - (GUARD + doff + dspan)) == dtotal - (GUARD + doff + dspan),
                      "copy %d: bytes after dst written", k);
        for (int64_t j = 0; j < C; j++)
            for (int64_t i = 0; i < R; i++)
                if (memcmp(dst + (j * R + i) * 4, src + (i * C + j) * 4, 4) != 0)
                    ck_abort_msg("copy %d of %lld x %lld (soff %zu, doff %zu): dst[%lld][%lld] differs", k,
                                 (long long)R, (long long)C, soff, doff, (long long)j, (long long)i);
        free(dbuf[k]);
    }
    free(sbuf);
}

static void run_repeated_set(int threads, void *ctx)
{
    (void)ctx;
    static const tcase2 cases[] = {{512, 512, 0, 0}, {724, 362, 0, 0}, {600, 520, 0, 0}, {1024, 256, 0, 0}};
    static const size_t offs[] = {0, 0, 16, 16, 4, 60};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        for (int o = 0; o < 3; o++)
            run_repeated(&cases[i], offs[2 * o], offs[2 * o + 1], (unsigned)(i * 31 + o * 7 + threads));
}

START_TEST(test_repeated)
{
    at_1_and_2_threads(run_repeated_set, NULL);
}
END_TEST

/* The same copy three times on the same src and dst, dst's bytes reset
 * before each: a copy that repeats the one before it walks the wrapped
 * tiles' units and blocks last first (plan.c, pl_repeats), so the second
 * runs them backwards and the third forwards again.  Dense dst rows of 512
 * bytes to 4 KiB (the wrapped tiles), on a line or starting 1 to 15
 * elements before one (the wraps), dst row counts that leave a short last
 * block and 1 MiB copies that go parallel at 2 threads; rows on a line
 * that are not a multiple of 2 KiB apart take them on AVX-512 only.  Dense
 * dst rows that are not a whole number of lines long (R not a multiple of
 * 16: every row starts at its own place in a line, its stores straddle
 * lines) take them too: up to 1 MiB, and up to 2 MiB on AVX-512 where src
 * rows are a multiple of 2 KiB apart (700 x 512). */
static void run_again_set(int threads, void *ctx)
{
    (void)ctx;
    static const tcase2 cases[] = {{128, 128, 0, 0}, {144, 77, 0, 0},  {256, 200, 0, 0},  {512, 512, 0, 0},
                                   {512, 17, 0, 0},  {1024, 70, 0, 0}, {1024, 256, 0, 0}, {128, 130, 512, 0},
                                   {320, 320, 0, 0}, {130, 130, 0, 0}, {129, 300, 0, 0},  {260, 496, 0, 0},
                                   {500, 500, 0, 0}, {1000, 200, 0, 0}, {700, 512, 0, 0}, {250, 33, 0, 0}};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        for (int o = 0; o < NOFFSETS; o++)
            run_times(&cases[i], offsets[2 * o], offsets[2 * o + 1], (unsigned)(i * 53 + o * 5 + threads), 3);
}

START_TEST(test_again)
{
    at_1_and_2_threads(run_again_set, NULL);
}
END_TEST

static Suite *incache_suite(void)
{
    const tcase_spec cases[] = {
        TCASE("f32", TEST(test_square), TEST(test_strips), TEST(test_rect), TEST(test_parallel), TEST(test_repeated),
              TEST(test_again)),
    };
    return SUITE_OF("incache", cases, 300);
}

int main(void)
{
    if (simd_path_absent("check_incache"))
        return 77;
    return run_suite(incache_suite());
}
