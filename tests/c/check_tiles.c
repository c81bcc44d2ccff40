/*
 * check_tiles.c - Check tests of the transpose tile kernels through
 * pylayout_copy: 1-, 4- and 8-byte 2-D transposes (the AVX-512, AVX2, SSE2
 * and portable tiles, cached and streaming) and 4-byte permutes with thin,
 * ragged tiles like (27,28,28,28,28).permute(2,3,1,4,0), and transposes
 * into dense dst rows that start before a line (the wrapped tiles), or
 * lie a multiple of a page apart (through L1 buffers); and row copies,
 * permutes that keep the last dim (the row kernels).
 *
 * Every copy is compared with a naive reference; the destination sits at
 * a byte offset off its cache lines (or on one) inside a buffer whose
 * guard bytes on both sides must come back untouched.  Registered once per
 * PYLAYOUT_SIMD path in tests/c/meson.build; runs at 1 and 2 threads.
 *
 * The AVX-512 1-byte streaming kernel (src/tile_bytes_x86.c) is also
 * compiled into this test and called directly, where the CPU has AVX-512
 * BW: pylayout_copy only ever hands it one 256-row band of at most 4096
 * columns, and the direct calls reach what plans never do (several bands,
 * the prefetch and the pipeline running from one band into the next, dst
 * rows with gaps between them).
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pylayout.h>

#include "check_util.h"

/* The kernel itself, with its statics (a no-op off x86-64 GCC / clang). */
#include "../../src/tile_bytes_x86.c"

#define GUARD 192
#define SENTINEL 0xA5

/* One copy: a src view of `shape` with element strides `sstr` over a dense
 * buffer of `selems` elements, into a row-major dst of the same shape. */
typedef struct copy_case {
    int32_t ndim;
    int64_t shape[5];
    int64_t sstr[5];
    int64_t selems;
    size_t itemsize;
} copy_case;

static DLDataType dtype_of(size_t itemsize)
{
    /* 16 bytes: complex128 (DLPack has no 128-bit unsigned int) */
    DLDataType dt = {itemsize == 4 ? kDLFloat : itemsize == 16 ? kDLComplex : kDLUInt, (uint8_t)(8 * itemsize), 1};
    return dt;
}

/* Copies c from a src at byte offset soff into a dst at byte offset doff
 * (both from 64-byte aligned buffers) and checks every byte of dst and its
 * guards. */
static void run_case(const copy_case *c, size_t soff, size_t doff, unsigned seed)
{
    const size_t is = c->itemsize;
    int64_t n = 1, dstr[5];
    for (int d = c->ndim - 1; d >= 0; d--) {
        dstr[d] = n;
        n *= c->shape[d];
    }
    size_t sbytes = (size_t)c->selems * is + soff, dbytes = (size_t)n * is;
    size_t dtotal = (GUARD + doff + dbytes + GUARD + 63) / 64 * 64;
    unsigned char *sbuf = aligned_alloc(64, (sbytes + 63) / 64 * 64);
    unsigned char *dbuf = aligned_alloc(64, dtotal);
    ck_assert_ptr_nonnull(sbuf);
    ck_assert_ptr_nonnull(dbuf);
    test_fill(sbuf, sbytes, &seed);
    memset(dbuf, SENTINEL, dtotal);

    DLTensor s = dl_make(sbuf, c->ndim, c->shape, c->sstr, dtype_of(is), soff);
    DLTensor d = dl_make(dbuf, c->ndim, c->shape, dstr, dtype_of(is), GUARD + doff);
    ck_assert_int_eq(pylayout_copy(&s, &d), PYLAYOUT_OK);

    /* the expected buffer: the guards, and the reference's copy between them */
    unsigned char *expect = malloc(dtotal);
    ck_assert_ptr_nonnull(expect);
    memset(expect, SENTINEL, dtotal);
    DLTensor e = d;
    e.data = expect;
    ref_copy_elements(&s, &e, is);
    if (memcmp(dbuf, expect, dtotal) != 0) {
        size_t i = 0;
        while (dbuf[i] == expect[i])
            i++;
        if (i < GUARD + doff)
            ck_abort_msg("byte %zu before dst written", GUARD + doff - i);
        if (i >= GUARD + doff + dbytes)
            ck_abort_msg("byte %zu after dst written", i - (GUARD + doff + dbytes));
        int64_t idx[5] = {0, 0, 0, 0, 0}, flat = (int64_t)((i - GUARD - doff) / is);
        for (int k = c->ndim - 1; k >= 0; k--) {
            idx[k] = flat % c->shape[k];
            flat /= c->shape[k];
        }
        ck_abort_msg("element (%lld,%lld,%lld,%lld,%lld) differs (ndim %d, itemsize %zu, soff %zu, doff %zu)",
                     (long long)idx[0], (long long)idx[1], (long long)idx[2], (long long)idx[3], (long long)idx[4],
                     c->ndim, is, soff, doff);
    }
    free(expect);
    free(sbuf);
    free(dbuf);
}

/* The transpose of a rows x cols row-major matrix, as a copy case. */
static copy_case transpose_case(int64_t rows, int64_t cols, size_t itemsize)
{
    copy_case c = {.ndim = 2, .shape = {cols, rows}, .sstr = {1, cols}, .selems = rows * cols, .itemsize = itemsize};
    return c;
}

/* x of `shape` (row-major), permuted by perm, as a copy case. */
static copy_case permute_case(int32_t ndim, const int64_t *shape, const int *perm, size_t itemsize)
{
    copy_case c = {.ndim = ndim, .itemsize = itemsize, .selems = 1};
    int64_t str[5], acc = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        str[d] = acc;
        acc *= shape[d];
    }
    c.selems = acc;
    for (int d = 0; d < ndim; d++) {
        c.shape[d] = shape[perm[d]];
        c.sstr[d] = str[perm[d]];
    }
    return c;
}

typedef struct {
    const copy_case *cases;
    int ncases;
    const size_t *offsets; /* pairs of (src, dst) byte offsets */
    int noffsets;
} case_set;

static void run_set(int threads, void *ctx)
{
    const case_set *set = ctx;
    for (int i = 0; i < set->ncases; i++)
        for (int o = 0; o < set->noffsets; o++)
            run_case(&set->cases[i], set->offsets[2 * o], set->offsets[2 * o + 1],
                     (unsigned)(i * 131 + o * 7 + threads));
}

static const size_t offsets_small[] = {0, 0, 1, 0, 0, 1, 3, 17, 64, 40, 5, 63};

/* uint8 transposes of every size 1..70 by a few, and primes: ragged edges
 * of the 16x16 and 64-row blocks. */
START_TEST(test_u8_ragged)
{
    copy_case cases[70 * 6];
    int n = 0;
    const int64_t others[] = {1, 7, 16, 31, 64, 67};
    for (int64_t r = 1; r <= 70; r++)
        for (int k = 0; k < 6; k++)
            cases[n++] = transpose_case(r, others[(k + (int)r) % 6], 1);
    case_set set = {cases, n, offsets_small, 6};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* uint8 transposes with one side of 9-15 and the other of 16 or more:
 * the AVX-512 thin-side blocks (copy_x86.c's pl_tile1_thin_side_avx512)
 * and the SSE2 and AVX2 ones in overlapping halves (pl_tile1_halves_*),
 * both ways round, below and above the streaming threshold (cached tiles,
 * and the streaming tile that hands them over), long sides that end
 * mid-block, src rows 3 bytes apart (overlapping: every row read with a
 * masked load), and the other paths' tiles on the same cases. */
START_TEST(test_u8_thin_sides)
{
    copy_case cases[7 * 4 * 2 + 5];
    int n = 0;
    const int64_t longs[] = {16, 17, 40, 1000};
    for (int64_t c = 9; c <= 15; c++)
        for (int k = 0; k < 4; k++) {
            cases[n++] = transpose_case(longs[k], c, 1); /* short b: NHWC -> NCHW */
            cases[n++] = transpose_case(c, longs[k], 1); /* short a: NCHW -> NHWC */
        }
    cases[n++] = transpose_case(400009, 12, 1);
    cases[n++] = transpose_case(12, 400009, 1);
    cases[n++] = transpose_case(300001, 15, 1);
    cases[n++] = transpose_case(9, 500001, 1);
    cases[n++] = (copy_case){.ndim = 2, .shape = {9, 100}, .sstr = {1, 3}, .selems = 99 * 3 + 9, .itemsize = 1};
    case_set set = {cases, n, offsets_small, 6};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Sizes around the 256-row and 128-column blocks of the streaming kernel,
 * still under the streaming threshold (cached tiles). */
START_TEST(test_u8_medium)
{
    const copy_case cases[] = {
        transpose_case(255, 129, 1), transpose_case(256, 128, 1), transpose_case(257, 131, 1),
        transpose_case(509, 521, 1), transpose_case(1024, 1000, 1), transpose_case(97, 1031, 1),
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offsets_small, 6};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Above PL_STREAM_MIN_BYTES (4 MiB): the streaming tiles, with dst on a
 * line (the staged 256-row kernel), off it by bytes (the split that
 * aligns dst first), and sizes that leave every kind of edge. */
START_TEST(test_u8_streaming)
{
    static const size_t offs[] = {0, 0, 3, 16, 1, 63};
    const copy_case cases[] = {
        transpose_case(2304, 2304, 1), /* 256-row and 128-column multiples */
        transpose_case(2333, 2111, 1), /* primes-ish: every edge */
        transpose_case(4500, 1000, 1),
        transpose_case(700, 6100, 1),
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 3};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Above the streaming threshold with rows a multiple of 2 KiB apart and
 * dst rows whole lines: on AVX2, blocks of 256 x 256 bytes staged through
 * a heap buffer (copy_x86.c, pl_stile1_staged_avx2), in units of up to 16
 * blocks down a and more across where a has fewer.  Blocks down and
 * across (the next block's prefetch going down, then across), 64 rows
 * past the last block, 63 columns past it, a unit of 64 rows with no
 * whole block, a single block down; src off its lines, dst off by bytes
 * (the split that streams the rest). */
START_TEST(test_u8_staged)
{
    static const size_t offs[] = {0, 0, 1, 0, 16, 0, 37, 3, 0, 16};
    const copy_case cases[] = {
        transpose_case(2048, 2048, 1),  /* 8 x 8 blocks: units 8 down, 2 across */
        transpose_case(1088, 4096, 1),  /* src rows a page apart; 64 rows past 4 blocks */
        transpose_case(2048, 2111, 1),  /* dst rows 2 KiB apart; 63 columns past 8 blocks */
        transpose_case(4160, 2048, 1),  /* units of 16 blocks down, then one of 64 rows */
        transpose_case(320, 20480, 1),  /* one block down and 64 rows, 16 across a unit */
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 5};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* 1- and 2-byte transposes under PL_STREAM_MIN_BYTES whose rows are a
 * multiple of 2 KiB apart (plan.c, PL_STREAM_MIN_CROWDED_NARROW_BYTES):
 * dst rows a page apart stream from 1.5 MiB at either thread count, other
 * crowded rows at 1 thread only; dst on a line and off it by bytes, ragged
 * edges. */
START_TEST(test_narrow_crowded_streaming)
{
    static const size_t offs[] = {0, 0, 3, 16, 2, 62};
    const copy_case cases[] = {
        transpose_case(4096, 400, 1), /* dst rows a page apart, 1.6 MiB */
        transpose_case(2048, 801, 1), /* dst rows 2 KiB apart */
        transpose_case(777, 4096, 1), /* src rows a page apart, 3.0 MiB */
        transpose_case(2048, 450, 2), /* dst rows a page apart, 1.8 MiB */
        transpose_case(1000, 1024, 2), /* src rows 2 KiB apart, 2.0 MiB */
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 3};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Above PL_STREAM_MIN_BYTES with dst rows whole lines (rows a multiple of
 * 64), so the AVX-512 path runs tile_bytes_x86.c on whole 256-row bands:
 * columns past the last 64 (32 + 8, 36, 5, 7), a second 4096-column tile
 * along b, 64 rows past the last band, src off its lines (with src rows a
 * multiple of 64 bytes apart or not), and dst off its line by a few bytes
 * (the split that streams the rest, whose first tile is then 48 or 61
 * rows short of a band). */
START_TEST(test_u8_streaming_bands)
{
    static const size_t offs[] = {0, 0, 1, 0, 17, 16, 5, 3};
    const copy_case cases[] = {
        transpose_case(1088, 4200, 1), /* 4 bands + 64 rows; tiles of 4096 + 104 columns */
        transpose_case(2560, 1700, 1), /* 10 bands; 26 blocks + 32 + 4 columns */
        transpose_case(1280, 3333, 1), /* 5 bands; 52 blocks + 5 columns */
        transpose_case(4160, 1031, 1), /* 16 bands + 64 rows */
        transpose_case(1024, 4160, 1), /* src rows whole lines apart: with soff, columns up to a line first */
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

#if defined(PYLAYOUT_HAVE_X86_KERNELS)
/* One direct call of _pylayout_stile1_bands_avx512: nbands * 256 rows of
 * nb columns, src rows ssa bytes apart from soff bytes past a line, dst
 * rows dsb apart (a multiple of 64, with a gap past each row's written
 * bytes).  Every written byte against the source, every other byte of the
 * dst buffer (gaps and guards) untouched. */
static void run_bands(int64_t nbands, int64_t nb, int64_t ssa, size_t soff, int64_t dsb, unsigned seed)
{
    const int64_t rows = nbands * PL_BYTE_BAND;
    const size_t sbytes = (size_t)(rows * ssa) + soff, dbytes = (size_t)(nb * dsb) + 2 * GUARD;
    unsigned char *sbuf = aligned_alloc(64, (sbytes + 63) / 64 * 64);
    unsigned char *dbuf = aligned_alloc(64, (dbytes + 63) / 64 * 64);
    ck_assert_ptr_nonnull(sbuf);
    ck_assert_ptr_nonnull(dbuf);
    test_fill(sbuf, sbytes, &seed);
    memset(dbuf, SENTINEL, dbytes);
    const unsigned char *src = sbuf + soff;
    unsigned char *dst = dbuf + GUARD; /* GUARD is a multiple of 64 */
    _pylayout_stile1_bands_avx512((const char *)src, ssa, (char *)dst, dsb, nbands, nb);
    _mm_sfence();
    for (int64_t j = 0; j < nb; j++) {
        const unsigned char *d = dst + j * dsb;
        for (int64_t i = 0; i < rows; i++)
            if (d[i] != src[i * ssa + j])
                ck_abort_msg("dst[%lld][%lld] differs (nbands %lld, nb %lld, ssa %lld, soff %zu, dsb %lld)",
                             (long long)j, (long long)i, (long long)nbands, (long long)nb, (long long)ssa, soff,
                             (long long)dsb);
        for (int64_t i = rows; i < dsb; i++)
            if (d[i] != SENTINEL)
                ck_abort_msg("gap byte %lld of dst row %lld written", (long long)i, (long long)j);
    }
    for (size_t i = 0; i < GUARD; i++)
        if (dbuf[i] != SENTINEL || dst[nb * dsb + (int64_t)i] != SENTINEL)
            ck_abort_msg("guard byte %zu %s dst written", i, dbuf[i] != SENTINEL ? "before" : "after");
    free(sbuf);
    free(dbuf);
}

/* The kernel's edges, called directly: column counts below, at and past
 * the 16- and 64-column steps (0 whole blocks, 1, 2: the pipeline's
 * prologue and epilogue alone), several bands (the prefetch and the next
 * block's staging crossing into the next band), src rows that are not
 * whole lines or 8192 apart, dst rows with gaps. */
START_TEST(test_u8_bands_direct)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) {
        printf("test_u8_bands_direct: no AVX-512 BW on this CPU, skipped\n");
        return;
    }
    static const int64_t nbs[] = {0, 1, 15, 16, 17, 63, 64, 65, 100, 127, 128, 129, 192, 200, 256, 320, 1000};
    unsigned seed = 7;
    for (int64_t nbands = 1; nbands <= 3; nbands++)
        for (size_t k = 0; k < sizeof nbs / sizeof nbs[0]; k++) {
            const int64_t nb = nbs[k];
            run_bands(nbands, nb, nb + 3, 1, nbands * PL_BYTE_BAND, seed++);
            run_bands(nbands, nb, nb < 64 ? 64 : nb, 0, nbands * PL_BYTE_BAND + 128, seed++);
        }
    /* power-of-two src rows (all in one L1 set), more bands than the
     * pipeline's two buffers, a dst row per 8 KiB */
    run_bands(5, 4096 + 48 + 5, 8192, 0, 8192, seed++);
    run_bands(2, 4096, 8192, 13, 4096 + 512, seed++);
    /* src rows a multiple of 64 bytes apart but off their lines (NumPy's
     * 16 bytes): the columns up to the next line go first, then blocks;
     * fewer columns than that */
    run_bands(2, 1000, 1024, 16, 512 + 64, seed++);
    run_bands(1, 30, 1024, 40, 256, seed++);
    run_bands(3, 20, 192, 50, 768, seed++);
    run_bands(1, 64 + 128 + 7, 256, 63, 256, seed++);
}
END_TEST
#endif

/* 4-byte permutes of the (27,28,28,28,28) by (2,3,1,4,0) kind: 27 x 28
 * tiles whose dst rows are 108 bytes, small and above the streaming
 * threshold, and 2-D float transposes of ragged sizes. */
START_TEST(test_f32_permute_5d)
{
    static const int perm[5] = {2, 3, 1, 4, 0};
    static const int64_t s1[5] = {27, 28, 3, 4, 28}, s2[5] = {5, 6, 7, 6, 7}, s3[5] = {27, 28, 12, 12, 28},
                         s4[5] = {3, 29, 5, 2, 31};
    const copy_case cases[] = {
        permute_case(5, s1, perm, 4), permute_case(5, s2, perm, 4), permute_case(5, s3, perm, 4),
        permute_case(5, s4, perm, 4), transpose_case(27, 28, 4),    transpose_case(70, 61, 4),
    };
    static const size_t offs[] = {0, 0, 4, 12, 8, 60};
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 3};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* float32 / float64 transposes into dense dst rows of 512 B - 4 KiB that
 * start whole elements before a line (the wrapped tiles, tile_wrap in
 * kernels.h): every head h from one element to a line less one, units
 * whose last block of rows is shifted back (ragged column counts, fewer
 * rows than a block, exactly one block), several units at 2 threads, a
 * batch of transposes, and around the rule: rows of 448 bytes, 8 KiB
 * (wrapped: a multiple of 2 KiB, PL_WRAP_MAX_CROWDED_ROW_BYTES), 16 KiB,
 * or 2560 bytes in a copy past 1 MiB, rows 4 KiB apart in a copy of 1.6
 * MiB (wrapped up to PL_WRAP_MAX_CROWDED_BYTES), src rows a page apart
 * (off their lines: the split; on them, or 4092 bytes apart: wrapped), dst
 * off by bytes (cached tiles), and dst on a line (the same tiles with no
 * wrap where rows are a multiple of 2 KiB apart, the cached tiles
 * elsewhere).  At 1 thread on AVX2, where src rows start on lines, the
 * blocks go in groups of 2 x 2 (tile_wrap_one): ragged block counts on
 * both sides leave groups partly empty. */
START_TEST(test_wrapped)
{
    static const int perm[3] = {0, 2, 1};
    static const int64_t b32[3] = {3, 28, 128}, b64[3] = {5, 17, 64};
    const copy_case cases[] = {
        transpose_case(128, 16, 4),  transpose_case(128, 17, 4),  transpose_case(144, 31, 4),
        transpose_case(256, 100, 4), transpose_case(512, 47, 4),  transpose_case(1024, 130, 4),
        transpose_case(256, 15, 4),  transpose_case(512, 512, 4), transpose_case(112, 40, 4),
        transpose_case(2048, 20, 4), transpose_case(640, 640, 4), transpose_case(64, 8, 8),
        transpose_case(64, 9, 8),    transpose_case(128, 1024, 4), transpose_case(130, 1023, 4),
        transpose_case(64, 512, 8),  transpose_case(72, 1024, 8),
        transpose_case(72, 33, 8),   transpose_case(256, 100, 8), transpose_case(512, 7, 8),
        transpose_case(2048, 100, 4), transpose_case(1024, 77, 8), transpose_case(4096, 20, 4),
        transpose_case(1024, 400, 4),
        permute_case(3, b32, perm, 4), permute_case(3, b64, perm, 8),
    };
    static const size_t offs[] = {0, 4, 0, 8, 4, 12, 0, 16, 16, 32, 8, 48, 12, 56, 0, 60, 3, 5, 0, 0, 16, 0};
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 11};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* float32 / float64 transposes above PL_STREAM_MIN_BYTES (and of rows a
 * multiple of 2 KiB apart past 2 MiB at 1 thread: plan.c,
 * PL_STREAM_MAX_CROWDED_CACHED_BYTES): the AVX-512
 * 256-byte-run kernels (dst rows a multiple of 64 bytes, so every row
 * starts on a line), with partial 64- / 32-row runs, columns past the last
 * staged block and past the last 16 / 8, a second page-wide tile along b,
 * dst off its line by whole elements (the split that streams the rest)
 * and by bytes (cached tiles), and rows that are not whole lines. */
START_TEST(test_f32_streaming)
{
    static const size_t offs[] = {0, 0, 4, 16, 12, 3, 0, 48};
    const copy_case cases[] = {
        transpose_case(1040, 1300, 4), /* 16 rows past the last run; 276-column second tile */
        transpose_case(1024, 1037, 4), /* whole runs; 13-column second tile */
        transpose_case(1088, 1031, 4),
        transpose_case(1001, 1100, 4), /* dst rows not whole lines: runs through a buffer, lines streamed */
        transpose_case(1500, 900, 4),  /* 5.1 MiB, dst rows 6000 bytes apart: three lines' offsets */
        transpose_case(70001, 15, 4),  /* dst rows off their lines, thinner than a block */
        transpose_case(1536, 500, 4),  /* 2.9 MiB, dst rows 3 x 2 KiB apart: streamed at 1 thread */
        transpose_case(2048, 333, 4),  /* 2.6 MiB, dst rows 8 KiB apart */
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

START_TEST(test_f64_streaming)
{
    static const size_t offs[] = {0, 0, 8, 16, 8, 56, 1, 5};
    const copy_case cases[] = {
        transpose_case(808, 700, 8), /* 8 rows past the last run; 188-column second tile */
        transpose_case(768, 780, 8),
        transpose_case(520, 1213, 8),
        transpose_case(733, 800, 8), /* dst rows not whole lines: runs through a buffer */
        transpose_case(700, 900, 8),  /* 4.8 MiB, dst rows 5600 bytes apart */
        transpose_case(1024, 333, 8), /* 2.6 MiB, dst rows 8 KiB apart: streamed at 1 thread */
        transpose_case(300, 1024, 8), /* 2.3 MiB, src rows 8 KiB apart */
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* 2-byte transposes above PL_STREAM_MIN_BYTES whose dst rows are not whole
 * lines apart: 256-byte runs built in L1 by the cached tile, then streamed
 * row by row (plan.c's stream_runs), on every SIMD path; ragged edges, a
 * second page-wide tile along b, dst on a line and off it by bytes. */
START_TEST(test_f16_streaming_off_lines)
{
    static const size_t offs[] = {0, 0, 2, 16, 1, 62};
    const copy_case cases[] = {
        transpose_case(1501, 1503, 2), /* 4.3 MiB, dst rows 3002 bytes apart */
        transpose_case(1100, 2500, 2), /* dst rows 2200 bytes apart, 2500 dst rows */
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 3};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* 2-byte transposes above PL_STREAM_MIN_BYTES whose dst rows are whole
 * lines apart and that fit in half of L3 (plan.c's
 * pl_stream_runs_max_bytes): on AVX-512, 256-byte runs of four 32x32
 * blocks from src staged through an L1 buffer (copy_x86.c's
 * pl_rstile2_avx512); elsewhere, and where L3 is smaller, the line-at-a-
 * time streaming tiles.  Units whose last rows make one shorter run (96
 * and 64 of 128) or go to the line tile (32), 128-column blocks ragged
 * (2000 and 3900 columns: the rest of a unit straight from src, then 16
 * and 12 by MOVE2D), a second unit along b of 52 columns, dst rows a
 * page apart; dst on a line, src and dst off by bytes. */
START_TEST(test_f16_streaming_runs)
{
    static const size_t offs[] = {0, 0, 2, 0, 16, 64, 1, 2};
    const copy_case cases[] = {
        transpose_case(1120, 2000, 2), /* 4.3 MiB: the last unit one run of 96 rows */
        transpose_case(1056, 2100, 2), /* the last unit's 32 rows by the line tile; units of 2048 and 52 */
        transpose_case(1088, 3900, 2), /* 8.1 MiB: a last run of 64 rows */
        transpose_case(2048, 1100, 2), /* dst rows 4 KiB apart */
    };
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Transposes above PL_STREAM_MIN_BYTES into dst rows shorter than a
 * 256-byte run and off their lines, from 48 src rows or more (plan.c's
 * PL_RUNS_MIN_SRC_ROWS): whole rows built in L1 by the cached tile in
 * batches of a multiple of 32 rows, each batch streamed out as one block
 * (dense rows) or row by row (rows apart) while the next one's src is
 * prefetched; on every SIMD path.  Rows of 2 and 4 bytes from 48 to 127
 * elements (96 to 254 bytes), a ragged last batch and page-wide tile, dst
 * on a line and off it by elements and by bytes (the block's partial first
 * and last lines stored), a 3-D permute whose outer dst dims merge, two
 * reversed 3-D ones (rows apart), and 47 rows (the cached tiles). */
START_TEST(test_short_rows_streaming)
{
    static const int rot[3] = {1, 2, 0}, rev[3] = {2, 1, 0};
    static const int64_t maps[3] = {60, 210, 170}, apart2[3] = {60, 100, 360}, apart4[3] = {50, 90, 240};
    const copy_case cases[] = {
        transpose_case(100, 21011, 2), /* rows of 200 bytes, 64 a batch */
        transpose_case(127, 16600, 2), /* 254 bytes: the longest */
        transpose_case(48, 43700, 2),  /* 96 bytes, 160 a batch */
        transpose_case(50, 21000, 4),  /* float32, 200 bytes */
        transpose_case(63, 16700, 4),  /* float32, 252 bytes */
        permute_case(3, maps, rot, 2), /* dst (210, 170, 60): rows of 120 bytes */
        permute_case(3, apart2, rev, 2), /* dst rows of 120 bytes, 12000 apart: streamed one by one */
        permute_case(3, apart4, rev, 4), /* float32 rows of 200 bytes, 18000 apart */
        transpose_case(47, 44700, 2),  /* 47 src rows: the cached tiles */
    };
    static const size_t offs[] = {0, 0, 2, 16, 0, 6, 3, 62};
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Transposes whose dst rows are a multiple of a page apart, from the
 * caches (plan.c's PL_FUSE_CROWDED_DST_RUN_BYTES): each unit transposed into
 * an L1 buffer and copied out a dst run at a time.  1-, 2- and 4-byte
 * elements, dst rows of 4 and 8 KiB, ragged src widths (units of 32, 64 or
 * 128 bytes of each src row and a rest), a batch of such transposes, 2-byte
 * ones past the narrow crowded streaming threshold (1.5 MiB), src rows 2
 * KiB apart (gathered first), and cases that keep the tiles: src rows a
 * page apart too, src rows shorter than a line.  And the mirror case,
 * uint8 src rows a page apart (gathered, then transposed into dst).  Dst
 * on a line and off it by elements and by bytes.  Each as planned for
 * Intel cores and for others (cpu_features.h, _pylayout_intel_cores). */
START_TEST(test_crowded_rows)
{
    static const int batch_perm[3] = {0, 2, 1};
    static const int64_t batch[3] = {3, 1024, 100}, batch_u8[3] = {2, 130, 4096};
    const copy_case cases[] = {
        transpose_case(4096, 128, 1), /* uint8 into rows of 4 KiB */
        transpose_case(4096, 77, 1),  /* a ragged last unit */
        transpose_case(8192, 70, 1),  /* rows of 8 KiB */
        transpose_case(2048, 130, 2), /* float16 */
        transpose_case(2048, 450, 2), /* 1.8 MiB: past where bytes stream */
        transpose_case(1024, 128, 4), /* float32 */
        transpose_case(1024, 333, 4), /* 1.3 MiB, ragged */
        transpose_case(2048, 61, 4),  /* rows of 8 KiB */
        transpose_case(1024, 512, 4), /* src rows 2 KiB apart: gathered */
        permute_case(3, batch, batch_perm, 4), /* (3, 100, 1024): a batch */
        transpose_case(1024, 1024, 1), /* src rows a page apart too: the tiles */
        transpose_case(4096, 40, 1),  /* src rows of 40 bytes: the tiles */
        /* uint8 src rows a page apart, dst rows not: gathered into L1, then
         * transposed into dst (PL_FUSE_CROWDED_SRC_GATHER_BYTES) */
        transpose_case(128, 4096, 1), transpose_case(77, 4096, 1), transpose_case(200, 8192, 1),
        transpose_case(300, 4096, 1), permute_case(3, batch_u8, batch_perm, 1),
        transpose_case(128, 4096, 2), /* float16: the tiles */
    };
    static const size_t offs[] = {0, 0, 16, 16, 4, 36, 2, 6, 3, 63};
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 5};
    /* as planned for Intel cores and for AMD's (PYLAYOUT_CORES): the routes
     * differ (float32 from 1 MiB, float16 from 1.5 MiB, uint8 src rows a
     * page apart), the bytes may not */
    const char *had = getenv("PYLAYOUT_CORES");
    char saved[16] = "";
    if (had != NULL)
        snprintf(saved, sizeof saved, "%s", had);
    static const char *const cores[] = {"amd", "intel"};
    for (int c = 0; c < 2; c++) {
        ck_assert_int_eq(setenv("PYLAYOUT_CORES", cores[c], 1), 0);
        at_1_and_2_threads(run_set, &set);
    }
    if (had != NULL)
        setenv("PYLAYOUT_CORES", saved, 1);
    else
        unsetenv("PYLAYOUT_CORES");
}
END_TEST

/* Row copies: permutes that keep the last dim, (A, B, n) by (1, 0, 2), whose
 * units copy rows of n elements (plan.c's PL_ROWS, the SIMD paths' row
 * kernels in rows_x86.c up to 4 KiB a row, memcpy past it).  Rows of 3 to
 * 9000 bytes around every move width (two overlapping moves of 2 to 32
 * bytes, a loop and its last move ending at the row's end), from 1-, 2-
 * and 4-byte elements, units of fewer rows than a group gather takes; src
 * and dst off their lines.  The 12 MB copy's rows of 64 bytes prefetch
 * their src where dst is off its lines (units of 8.7 KB, past 11 MiB: past
 * plan.c's pl_rows_cached_max_bytes on any machine). */
START_TEST(test_row_copies)
{
    static const int swap[3] = {1, 0, 2};
    static const int64_t shapes[][3] = {
        {5, 7, 3},  {4, 5, 5},  {6, 3, 7},  {5, 4, 13}, {3, 6, 21}, {7, 2, 31}, {5, 7, 33}, {9, 4, 47}, {6, 5, 63}, {7, 9, 64}, {5, 6, 65}, {4, 11, 96}, {3, 5, 127}, {6, 4, 128},
        {5, 3, 129}, {4, 7, 200}, {3, 4, 392}, {2, 5, 1000}, {3, 2, 4095}, {2, 3, 4096}, {3, 2, 4097},
        {2, 2, 9000},
    };
    enum { NSHAPES = sizeof shapes / sizeof shapes[0] };
    copy_case cases[NSHAPES + 8];
    int nc = 0;
    for (int i = 0; i < NSHAPES; i++)
        cases[nc++] = permute_case(3, shapes[i], swap, 1);
    static const int64_t wide2[][3] = {{6, 5, 17}, {5, 9, 32}, {4, 6, 49}, {3, 3, 1030}};
    static const int64_t wide4[][3] = {{7, 3, 9}, {5, 6, 25}, {4, 4, 98}, {3, 2, 1025}};
    for (int i = 0; i < 4; i++) {
        cases[nc++] = permute_case(3, wide2[i], swap, 2);
        cases[nc++] = permute_case(3, wide4[i], swap, 4);
    }
    static const size_t offs[] = {0, 0, 1, 3, 17, 40, 63, 5};
    case_set set = {cases, nc, offs, 4};
    at_1_and_2_threads(run_set, &set);

    static const int64_t far[3] = {136, 1400, 64}; /* 12.2 MB */
    const copy_case big = permute_case(3, far, swap, 1);
    static const size_t big_offs[] = {0, 0, 5, 17};
    case_set bigset = {&big, 1, big_offs, 2};
    at_1_and_2_threads(run_set, &bigset);
}
END_TEST

/* Row copies whose units take src's dense dim (plan.c's pl_row_block_dim):
 * (A, N, n) by (1, 0, 2) with A rows of n elements a unit, N long; tiles of
 * 2 KiB of src along N that end mid-dim, from 1-, 2-, 4- and 8-byte
 * elements; the attention permute of float16; copies the threads split,
 * and one of 3 rows a unit past 8 MiB; src and dst off their lines.  Their
 * units, and those of (A, N, n) where A rows of n are 2 KiB or more, take
 * several iterations of the loop outside them (pl_fold_rows): (4, 97, 500)
 * of 2-byte elements, (3, 301, 392) of 1 and 2 bytes, and the attention
 * permute end on a shorter fold. */
START_TEST(test_row_blocks)
{
    static const int swap[3] = {1, 0, 2}, heads[4] = {0, 2, 1, 3};
    static const int64_t shapes[][3] = {
        {3, 1000, 3}, {2, 777, 32}, {5, 130, 100}, {3, 301, 392}, {4, 97, 500}, {2, 1001, 7},
    };
    enum { NSHAPES = sizeof shapes / sizeof shapes[0] };
    copy_case cases[4 * NSHAPES + 1];
    int nc = 0;
    for (size_t e = 1; e <= 8; e *= 2)
        for (int i = 0; i < NSHAPES; i++)
            cases[nc++] = permute_case(3, shapes[i], swap, e);
    static const int64_t attn[4] = {2, 12, 77, 64};
    cases[nc++] = permute_case(4, attn, heads, 2);
    static const size_t offs[] = {0, 0, 1, 3, 17, 40, 63, 5};
    case_set set = {cases, nc, offs, 4};
    at_1_and_2_threads(run_set, &set);

    static const int64_t par[3] = {3, 20000, 32}, few[3] = {3, 140000, 32}; /* 1.9 and 13.4 MB */
    const copy_case big[] = {permute_case(3, par, swap, 1), permute_case(3, few, swap, 1)};
    static const size_t big_offs[] = {0, 0, 5, 17};
    case_set bigset = {big, 2, big_offs, 2};
    at_1_and_2_threads(run_set, &bigset);
}
END_TEST

/* Regrouped copies (plan.c's pl_regroup): src groups of B elements become
 * dst groups of A, both packed along one dim j, (A, J, B) -> (B, J, A) and
 * with an outer dim in either place: each unit unzipped from the A src rows
 * into an L1 buffer's planes, zipped into the B dst rows.  A and B of 2 to
 * 8, every element size (1 to 16 bytes: the thin kernels of the path, or
 * the portable ones), J of 8 (the least), 9 and ragged against the unit,
 * src and dst off their lines and off their elements; past 8 MiB on 1
 * thread (units that prefetch the next) and 2, and the 16-byte groups
 * that go to the streamed tiles there (pl_regroup_streams_wins). */
START_TEST(test_regroup)
{
    static const int rev[3] = {2, 1, 0}, outer_first[4] = {0, 3, 2, 1}, outer_mid[4] = {3, 2, 0, 1};
    static const int64_t ab[][2] = {{2, 2}, {3, 7}, {8, 8}, {5, 4}, {7, 3}, {4, 8}, {2, 8}, {8, 2}, {6, 5}};
    static const int64_t js[] = {8, 9, 333, 2049};
    enum { NAB = sizeof ab / sizeof ab[0], NJ = sizeof js / sizeof js[0] };
    copy_case cases[5 * NAB * NJ + 5 * 2];
    int nc = 0;
    for (size_t e = 1; e <= 16; e *= 2) {
        for (int i = 0; i < NAB; i++)
            for (int k = 0; k < NJ; k++) {
                const int64_t shape[3] = {ab[i][0], js[k], ab[i][1]};
                cases[nc++] = permute_case(3, shape, rev, e);
            }
        static const int64_t o1[4] = {3, 4, 100, 7}, o2[4] = {4, 50, 3, 2};
        cases[nc++] = permute_case(4, o1, outer_first, e);
        cases[nc++] = permute_case(4, o2, outer_mid, e);
    }
    static const size_t offs[] = {0, 0, 1, 3, 16, 40, 63, 5};
    case_set set = {cases, nc, offs, 4};
    at_1_and_2_threads(run_set, &set);

    static const int64_t u8[3] = {3, 420000, 7}, f32[3] = {2, 300000, 4}, c16[3] = {3, 60000, 4},
                         c16_tiles[3] = {4, 33000, 4}; /* 8.8, 9.6, 11.5 and 8.4 MB */
    const copy_case big[] = {permute_case(3, u8, rev, 1), permute_case(3, f32, rev, 4),
                             permute_case(3, c16, rev, 16), permute_case(3, c16_tiles, rev, 16)};
    static const size_t big_offs[] = {0, 0, 5, 17};
    case_set bigset = {big, 4, big_offs, 2};
    at_1_and_2_threads(run_set, &bigset);
}
END_TEST

/* Transposes of groups past the streaming threshold: a last dim contiguous
 * in both, of 32 bytes or more and a multiple of 16, whose rows lie far
 * apart in src (plan.c's pl_group_streams, the group_stream kernels), past
 * a quarter of L3 a thread, which is at most 8 MiB a thread: groups of 32,
 * 48, 64, 80, 256 and 66560 bytes from 1-, 2-, 4- and 8-byte elements,
 * just past 8 MiB on 1 thread, src rows a ragged number of groups long, dst
 * on a line, 16 and 48 bytes past it (streamed in narrower vectors), and 8
 * past it (no 16-byte streaming store fits: the ROWS copy); the attention
 * permute and 80-byte groups just past 16 MiB on 2 threads.  Also groups of
 * 24 bytes, which stay ROWS. */
START_TEST(test_group_streaming)
{
    static const int swap[3] = {1, 0, 2}, heads[4] = {0, 2, 1, 3};
    static const int64_t g32[3] = {523, 511, 8}, g48[3] = {433, 409, 12}, g64[3] = {362, 365, 64},
                         g80[3] = {331, 322, 10}, g256[3] = {181, 183, 64}, big[3] = {8, 16, 16640},
                         g24[3] = {400, 441, 6}, attn[4] = {8, 12, 1400, 64}, g80_2[3] = {460, 458, 10};
    const copy_case one[] = {
        permute_case(3, g32, swap, 4),  permute_case(3, g48, swap, 4),  permute_case(3, g64, swap, 1),
        permute_case(3, g80, swap, 8),  permute_case(3, g256, swap, 4), permute_case(3, big, swap, 4),
        permute_case(3, g24, swap, 4),
    };
    const copy_case two[] = {permute_case(4, attn, heads, 2), permute_case(3, g80_2, swap, 8)};
    static const size_t offs[] = {0, 0, 4, 16, 8, 48, 0, 8};
    case_set set1 = {one, (int)(sizeof one / sizeof one[0]), offs, 4};
    case_set set2 = {two, (int)(sizeof two / sizeof two[0]), offs, 4};
    int saved = 1;
    ck_assert_int_eq(pylayout_get_num_threads(&saved), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_set_num_threads(1), PYLAYOUT_OK);
    run_set(1, &set1);
    ck_assert_int_eq(pylayout_set_num_threads(2), PYLAYOUT_OK);
    run_set(2, &set2);
    ck_assert_int_eq(pylayout_set_num_threads(saved), PYLAYOUT_OK);
}
END_TEST

/* Transposes of groups of 3, 5, 6 and 7 elements of 1, 2, 4 and 8 bytes
 * (plan.c's pl_plane_dims: RGB pixels of an image transposed): each
 * unit unzipped into planes, the planes transposed, zipped again; or, for
 * groups of 3 elements of 1, 2 or 4 bytes on AVX-512 and AVX2, in
 * registers (the tile3 kernels, in blocks of 16 / 8 / 4 pixels, or 8 / 4 /
 * 2), which also take groups of 6 or 12 bytes of narrower elements as 3
 * wider ones there (plan.c's pl_three_wider: 6 and 12 uint8, 6 int16).  Sides that end mid-unit and mid-block, sides shorter than a block
 * (9 and 11 against AVX-512's 16 uint8 pixels; 129, a last unit 1 pixel
 * wide: the tile3 kernels' pixel by pixel fallback), under and over the
 * streaming threshold, src and dst off their lines. */
START_TEST(test_plane_groups)
{
    static const int swap[3] = {1, 0, 2};
    copy_case cases[4 * 4 * 2 + 4 * 2 + 5];
    int n = 0;
    const int64_t P[] = {3, 5, 6, 7};
    for (size_t e = 1; e <= 8; e *= 2) {
        for (int k = 0; k < 4; k++) {
            const int64_t small[3] = {37 + k, 130 - 7 * k, P[k]}, wide[3] = {20, 300, P[k]};
            cases[n++] = permute_case(3, small, swap, e);
            cases[n++] = permute_case(3, wide, swap, e);
        }
        const int64_t short_a[3] = {9, 140, 3}, short_b[3] = {129, 11, 3};
        cases[n++] = permute_case(3, short_a, swap, e);
        cases[n++] = permute_case(3, short_b, swap, e);
    }
    static const int64_t big1[3] = {1081, 1301, 3}, big4[3] = {700, 517, 3};
    cases[n++] = permute_case(3, big1, swap, 1);
    cases[n++] = permute_case(3, big4, swap, 4);
    static const int64_t u8_12[3] = {41, 129, 12}, u8_12_big[3] = {700, 517, 12}, u8_6_big[3] = {1081, 651, 6};
    cases[n++] = permute_case(3, u8_12, swap, 1);
    cases[n++] = permute_case(3, u8_12_big, swap, 1);
    cases[n++] = permute_case(3, u8_6_big, swap, 1);
    static const size_t offs[] = {0, 0, 1, 3, 16, 5, 7, 64};
    case_set set = {cases, n, offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* A short dim (2 to 8 elements) contiguous in one tensor only, the other
 * contiguous along another dim: a.T of an (H,W,C) image and its inverse
 * (plan.c's pl_plane_dims: planes with src's or dst's in place; 8 planes of
 * 2 bytes or more stay tile transposes), every element size, stack
 * sub-blocks and heap buffers, under other dims. */
START_TEST(test_short_dim_planes)
{
    static const int rev[3] = {2, 1, 0}, chw[4] = {3, 0, 2, 1}, nhwc[4] = {0, 3, 2, 1};
    copy_case cases[4 * 7 * 2 + 6];
    int n = 0;
    for (size_t e = 1; e <= 8; e *= 2)
        for (int64_t P = 2; P <= 8; P++) {
            const int64_t last[3] = {45 + P, 130 - 7 * P, P}, first[3] = {P, 21 + 9 * P, 67};
            cases[n++] = permute_case(3, last, rev, e); /* src's planes packed: unzipped */
            cases[n++] = permute_case(3, first, rev, e); /* dst's packed: zipped */
        }
    static const int64_t big_last[3] = {301, 257, 4}, big_first[3] = {3, 517, 141};
    static const int64_t nchw[4] = {5, 3, 37, 70}, nhwc_shape[4] = {3, 41, 67, 2};
    cases[n++] = permute_case(3, big_last, rev, 1);
    cases[n++] = permute_case(3, big_first, rev, 4);
    cases[n++] = permute_case(4, nchw, chw, 2);
    cases[n++] = permute_case(4, nchw, nhwc, 1);
    cases[n++] = permute_case(4, nhwc_shape, chw, 4);
    cases[n++] = permute_case(4, nhwc_shape, nhwc, 8);
    static const size_t offs[] = {0, 0, 1, 3, 16, 5, 7, 64};
    case_set set = {cases, n, offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* NumPy's a.T of 3-D arrays with a short dim of P = 2-15 elements at
 * either end, (H,W,P) or (P,H,W) by (2,1,0), every element size (more
 * than 8 go through planes only as float32 in registers), then
 * `extra` more cases, at 1 and 2 threads.  Units are 128 x 128 groups in
 * registers, so H = 133 leaves a last unit 5 groups long (thinner than a
 * block: element by element), W = 129 a last unit of one group a row (or
 * one dst row), and the others end mid-block (the last block shifted
 * back); several units along both sides. */
static void run_short_dim_grid(bool planes_first, const copy_case *extra, int nextra)
{
    static const int rev[3] = {2, 1, 0};
    static const int64_t hw[][2] = {{133, 129}, {37, 300}, {300, 41}, {16, 17}};
    static const int64_t P[] = {2, 3, 4, 5, 7, 8, 12, 15};
    copy_case cases[4 * 8 * 4 + 8];
    int n = 0;
    for (size_t e = 1; e <= 8; e *= 2)
        for (int k = 0; k < 8; k++)
            for (int s = 0; s < 4; s++) {
                const int64_t last[3] = {hw[s][0], hw[s][1], P[k]}, first[3] = {P[k], hw[s][0], hw[s][1]};
                cases[n++] = permute_case(3, planes_first ? first : last, rev, e);
            }
    ck_assert_int_le(n + nextra, (int)(sizeof cases / sizeof cases[0]));
    for (int k = 0; k < nextra; k++)
        cases[n++] = extra[k];
    static const size_t offs[] = {0, 0, 4, 8, 16, 24, 2, 64};
    case_set set = {cases, n, offs, 4};
    at_1_and_2_threads(run_set, &set);
}

/* Groups packed in src into planes in dst, (H,W,P) by (2,1,0), through
 * the transposes into planes in registers (tile_split: every element size
 * on AVX-512, bytes in 64 x 64 blocks or, thinner, 16 x 16 ones; 4 and 8
 * bytes on AVX2, groups under 64 bytes) or through planes (the rest; wider
 * groups of 2 bytes and float64 8s stay tile transposes).  The extra
 * shapes, over 1 MiB (so they go parallel) but of 2 x 2 units, are cut
 * into smaller units at 2 threads. */
START_TEST(test_split_planes)
{
    static const int rev[3] = {2, 1, 0};
    static const int64_t parallel4[3] = {150, 130, 7}, parallel8[3] = {130, 150, 7};
    const copy_case extra[] = {permute_case(3, parallel4, rev, 4), permute_case(3, parallel8, rev, 8)};
    run_short_dim_grid(false, extra, 2);
}
END_TEST

/* The inverse: src in planes into groups packed in dst, (P,H,W) by
 * (2,1,0) (NumPy's a.T of a CHW image), through the transposes out of
 * planes in registers (tile_zip: 4 and 8 bytes on AVX-512 and AVX2,
 * groups under 64 bytes) or through planes (the rest, and groups of 2-3
 * elements whose dst rows lie a multiple of 4 KiB apart: the first two
 * extra shapes).  The last two, over 1 MiB, are cut into smaller units at
 * 2 threads. */
START_TEST(test_zip_planes)
{
    static const int rev[3] = {2, 1, 0};
    static const int64_t crowded2[3] = {2, 512, 40}, crowded3[3] = {3, 512, 21};
    static const int64_t parallel4[3] = {7, 150, 130}, parallel8[3] = {5, 130, 210};
    const copy_case extra[] = {
        permute_case(3, crowded2, rev, 4), /* dst rows 4 KiB apart */
        permute_case(3, crowded3, rev, 8), /* 12 KiB */
        permute_case(3, parallel4, rev, 4),
        permute_case(3, parallel8, rev, 8),
    };
    run_short_dim_grid(true, extra, 4);
}
END_TEST

/* The same past the streaming threshold (8 MiB and more: plan.c,
 * pl_choose_planes), where dst rows a whole number of lines apart take the
 * streaming kernels (tile_zip_stream: 4 and 8 bytes on AVX-512 and AVX2):
 * dst rows ragged against a block (610, 520), groups of 3 to 15, dst on a
 * line (streamed) and off it by elements and by bytes (cached), and dst
 * rows not whole lines apart (601 x 28 bytes: tile_zip). */
START_TEST(test_zip_planes_streaming)
{
    static const int rev[3] = {2, 1, 0};
    static const int64_t s1[3] = {5, 704, 610}, s2[3] = {8, 520, 520}, s3[3] = {15, 400, 368};
    static const int64_t s4[3] = {4, 520, 520}, s5[3] = {3, 520, 704}, s6[3] = {7, 601, 512};
    const copy_case cases[] = {
        permute_case(3, s1, rev, 4), permute_case(3, s2, rev, 4), permute_case(3, s3, rev, 4),
        permute_case(3, s4, rev, 8), permute_case(3, s5, rev, 8), permute_case(3, s6, rev, 4),
    };
    static const size_t offs[] = {0, 0, 4, 64, 0, 8, 3, 5};
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Their mirror past the streaming threshold: (H,W,C) by (2,1,0) whose dst
 * rows and planes lie a whole number of lines apart take the streaming
 * transposes into planes (tile_split_stream: 2 bytes on AVX-512, 4 and 8
 * on AVX-512 and AVX2): units of rows ragged against the 32-row unit (400,
 * 976, 520 rows), columns ragged against a block (520 x 9, 517 x 3, 1100
 * x 5), groups of 3 to 15, dst on a line (streamed) and off it by
 * elements and by bytes (cached), and dst rows not whole lines apart (601
 * x 4 bytes: tile_split). */
START_TEST(test_split_planes_streaming)
{
    static const int rev[3] = {2, 1, 0};
    static const int64_t s1[3] = {528, 704, 6}, s2[3] = {976, 520, 5}, s3[3] = {400, 368, 15};
    static const int64_t s4[3] = {520, 520, 4}, s5[3] = {704, 517, 3}, s6[3] = {1024, 1100, 5};
    static const int64_t s7[3] = {601, 512, 7};
    const copy_case cases[] = {
        permute_case(3, s1, rev, 4), permute_case(3, s2, rev, 4), permute_case(3, s3, rev, 4),
        permute_case(3, s4, rev, 8), permute_case(3, s5, rev, 8), permute_case(3, s6, rev, 2),
        permute_case(3, s7, rev, 4),
    };
    static const size_t offs[] = {0, 0, 4, 64, 0, 8, 3, 5};
    case_set set = {cases, (int)(sizeof cases / sizeof cases[0]), offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

/* Small and medium float32 / float64 transposes (cached tiles), ragged. */
START_TEST(test_f32_f64_ragged)
{
    copy_case cases[2 * 40];
    int n = 0;
    const int64_t others[] = {1, 9, 16, 33, 64, 131};
    for (int64_t r = 1; r <= 40; r++) {
        cases[n++] = transpose_case(r * 3, others[r % 6], 4);
        cases[n++] = transpose_case(others[(r + 2) % 6], r * 5, 8);
    }
    static const size_t offs[] = {0, 0, 4, 8, 8, 60, 16, 3};
    case_set set = {cases, n, offs, 4};
    at_1_and_2_threads(run_set, &set);
}
END_TEST

static Suite *tiles_suite(void)
{
    const tcase_spec cases[] = {
        TCASE("u8", TEST(test_u8_ragged), TEST(test_u8_thin_sides), TEST(test_u8_medium), TEST(test_u8_streaming),
              TEST(test_u8_streaming_bands), TEST(test_u8_staged), TEST(test_narrow_crowded_streaming)),
#if defined(PYLAYOUT_HAVE_X86_KERNELS)
        TCASE("u8-direct", TEST(test_u8_bands_direct)),
#endif
        TCASE("f32", TEST(test_f32_permute_5d), TEST(test_f32_streaming), TEST(test_f32_f64_ragged)),
        TCASE("wrapped", TEST(test_wrapped)),
        TCASE("f64", TEST(test_f64_streaming)),
        TCASE("f16", TEST(test_f16_streaming_off_lines), TEST(test_f16_streaming_runs)),
        TCASE("short_rows", TEST(test_short_rows_streaming)),
        TCASE("crowded_rows", TEST(test_crowded_rows)),
        TCASE("rows", TEST(test_row_copies), TEST(test_row_blocks)),
        TCASE("regroup", TEST(test_regroup)),
        TCASE("groups", TEST(test_group_streaming), TEST(test_plane_groups), TEST(test_short_dim_planes),
              TEST(test_split_planes), TEST(test_zip_planes),
              TEST(test_split_planes_streaming), TEST(test_zip_planes_streaming)),
    };
    return SUITE_OF("tiles", cases, 300);
}

int main(void)
{
    if (simd_path_absent("check_tiles"))
        return 77;
    return run_suite(tiles_suite());
}
