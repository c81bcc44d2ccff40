/*
 * check_interleave.c - Check tests of the thin transposes (plan.c's
 * PL_THIN units, interleave_x86.c and kernels_portable.c's zip / unzip),
 * through pylayout_copy only.
 *
 * A thin transpose has a side of P = 2 to 8 elements: NCHW -> NHWC with
 * 3 channels is a batch of 3-plane interleaves ("zip"), NHWC -> NCHW their
 * inverse ("unzip").  Every case copies a (batch, long, P) or (batch, P,
 * long) tensor between a planar layout (planes padded apart) and a packed
 * one, into a buffer of sentinel bytes, and compares the whole buffer with
 * a naive reference: every element, and nothing written outside them.
 * Registered once per SIMD path (PYLAYOUT_SIMD in tests/c/meson.build).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pylayout.h>

#include "check_util.h"

#define SENTINEL 0xAB
#define GUARD 64 /* sentinel bytes before and after every dst */

static DLDataType dtype_of_size(size_t itemsize)
{
    DLDataType dt = {kDLUInt, (uint8_t)(8 * itemsize), 1};
    if (itemsize == 16) {
        dt.code = kDLComplex;
        dt.bits = 128;
    }
    return dt;
}

/* One case: a (batch, P, n) tensor whose planes are `pad` elements longer
 * than n, and its packed (batch, n, P) counterpart; zip copies planar ->
 * packed, unzip packed -> planar.  soff / doff: extra bytes before src's
 * and dst's first element (not multiples of 64: unaligned rows). */
typedef struct thin_case {
    int zip;
    int P;
    size_t is;
    int64_t batch, n, pad;
    size_t soff, doff;
} thin_case;

/* Strides (elements) of the planar and packed layouts, as a 3-D tensor of
 * shape (batch, P, n). */
static void planar_strides(const thin_case *c, int64_t st[3])
{
    st[2] = 1;
    st[1] = c->n + c->pad;
    st[0] = c->P * st[1];
}
static void packed_strides(const thin_case *c, int64_t st[3])
{
    st[2] = c->P;
    st[1] = 1;
    st[0] = c->P * c->n;
}

static void run_case(const thin_case *c, unsigned *seed)
{
    const int64_t shape[3] = {c->batch, c->P, c->n};
    int64_t pl_st[3], pk_st[3];
    planar_strides(c, pl_st);
    packed_strides(c, pk_st);
    const int64_t *sst = c->zip ? pl_st : pk_st, *dst_st = c->zip ? pk_st : pl_st;
    const size_t selems = (size_t)(c->zip ? pl_st[0] * c->batch : pk_st[0] * c->batch);
    const size_t delems = (size_t)(c->zip ? pk_st[0] * c->batch : pl_st[0] * c->batch);
    const size_t sbytes = c->soff + selems * c->is, dbytes = GUARD + c->doff + delems * c->is + GUARD;

    unsigned char *sbuf = malloc(sbytes), *dbuf = malloc(dbytes), *want = malloc(dbytes);
    ck_assert_ptr_nonnull(sbuf);
    ck_assert_ptr_nonnull(dbuf);
    ck_assert_ptr_nonnull(want);
    test_fill(sbuf, sbytes, seed);
    memset(dbuf, SENTINEL, dbytes);
    memset(want, SENTINEL, dbytes);

    /* the naive reference: every index, element by element */
    const size_t dstart = GUARD + c->doff;
    int64_t idx[3] = {0, 0, 0};
    do {
        int64_t so = 0, d = 0;
        for (int k = 0; k < 3; k++) {
            so += idx[k] * sst[k];
            d += idx[k] * dst_st[k];
        }
        memcpy(want + dstart + (size_t)d * c->is, sbuf + c->soff + (size_t)so * c->is, c->is);
    } while (next_index(idx, 3, shape));

    DLTensor s = dl_make(sbuf, 3, shape, sst, dtype_of_size(c->is), c->soff);
    DLTensor t = dl_make(dbuf, 3, shape, dst_st, dtype_of_size(c->is), dstart);
    ck_assert_int_eq(pylayout_copy(&s, &t), PYLAYOUT_OK);
    if (memcmp(dbuf, want, dbytes) != 0) {
        size_t i = 0;
        while (dbuf[i] == want[i])
            i++;
        ck_abort_msg("%s P=%d itemsize=%zu batch=%lld n=%lld pad=%lld soff=%zu doff=%zu: byte %zd (from dst's "
                     "first element) is %#x, want %#x",
                     c->zip ? "zip" : "unzip", c->P, c->is, (long long)c->batch, (long long)c->n,
                     (long long)c->pad, c->soff, c->doff, (ptrdiff_t)i - (ptrdiff_t)dstart, dbuf[i], want[i]);
    }
    free(sbuf);
    free(dbuf);
    free(want);
}

static const size_t sizes[] = {1, 2, 4, 8, 16};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Ragged lengths 1..70 (around every kernel's step of 32 / itemsize), both
 * directions, every P and element size, offsets off the cache lines. */
static void ragged_at(int threads, void *ctx)
{
    (void)threads;
    const int is_i = *(const int *)ctx;
    unsigned seed = 1234u + (unsigned)is_i;
    for (int zip = 0; zip <= 1; zip++)
        for (int P = 2; P <= 8; P++)
            for (int64_t n = 1; n <= 70; n++) {
                thin_case c = {zip, P, sizes[is_i], 1 + (int64_t)test_rand(&seed, 3), n,
                               (int64_t)test_rand(&seed, 3), sizes[is_i] * test_rand(&seed, 5) + test_rand(&seed, 2) * 3,
                               sizes[is_i] * test_rand(&seed, 5) + test_rand(&seed, 2) * 7};
                run_case(&c, &seed);
            }
}
START_TEST(test_ragged)
{
    int is_i = _i;
    at_1_and_2_threads(ragged_at, &is_i);
}
END_TEST

/* Long rows: large primes (a ragged last step, units cut across threads),
 * a batch of them, and copies above the 4 MiB streaming threshold. */
static void long_at(int threads, void *ctx)
{
    (void)threads;
    const int is_i = *(const int *)ctx;
    const size_t is = sizes[is_i];
    unsigned seed = 99u + (unsigned)is_i;
    const int64_t lens[] = {1009, 65537, 50176};
    for (int zip = 0; zip <= 1; zip++)
        for (int P = 2; P <= 8; P++)
            for (int l = 0; l < 3; l++) {
                thin_case c = {zip, P, is, l == 2 ? 3 : 1, lens[l], l == 1 ? 5 : 0, is * (size_t)l + 1, 16};
                run_case(&c, &seed);
            }
    /* above PL_STREAM_MIN_BYTES: 4.2 MiB and more of dst */
    for (int zip = 0; zip <= 1; zip++)
        for (int P = 3; P <= 8; P += 5) {
            const int64_t n = (int64_t)(4400009 / ((size_t)P * is)) | 1;
            thin_case c = {zip, P, is, 1, n, 0, 24, 40};
            run_case(&c, &seed);
        }
}
START_TEST(test_long)
{
    int is_i = _i;
    at_1_and_2_threads(long_at, &is_i);
}
END_TEST

/* The C = 3 image case as users meet it: NCHW -> NHWC and back, uint8 and
 * float32, a 4-D copy the engine canonicalises to a batch of thin ones. */
static void image_at(int threads, void *ctx)
{
    (void)threads;
    (void)ctx;
    unsigned seed = 7u;
    const size_t iss[] = {1, 4};
    for (int k = 0; k < 2; k++) {
        const size_t is = iss[k];
        const int64_t shape[4] = {3, 3, 61, 67};
        int64_t nchw[4] = {3 * 61 * 67, 61 * 67, 67, 1}, nhwc[4] = {3 * 61 * 67, 1, 67 * 3, 3};
        for (int dir = 0; dir < 2; dir++) {
            const int64_t *ss = dir ? nhwc : nchw, *ds = dir ? nchw : nhwc;
            const size_t bytes = (size_t)(3 * 3 * 61 * 67) * is;
            unsigned char *sb = malloc(bytes + 1), *db = malloc(bytes + 2 * GUARD), *want = malloc(bytes + 2 * GUARD);
            ck_assert_ptr_nonnull(sb);
            ck_assert_ptr_nonnull(db);
            ck_assert_ptr_nonnull(want);
            test_fill(sb, bytes + 1, &seed);
            memset(db, SENTINEL, bytes + 2 * GUARD);
            memset(want, SENTINEL, bytes + 2 * GUARD);
            int64_t idx[4] = {0, 0, 0, 0};
            do {
                int64_t so = 0, d = 0;
                for (int q = 0; q < 4; q++) {
                    so += idx[q] * ss[q];
                    d += idx[q] * ds[q];
                }
                memcpy(want + GUARD + d * (int64_t)is, sb + 1 + so * (int64_t)is, is);
            } while (next_index(idx, 4, shape));
            DLTensor s = dl_make(sb, 4, shape, ss, dtype_of_size(is), 1);
            DLTensor t = dl_make(db, 4, shape, ds, dtype_of_size(is), GUARD);
            ck_assert_int_eq(pylayout_copy(&s, &t), PYLAYOUT_OK);
            ck_assert_msg(memcmp(db, want, bytes + 2 * GUARD) == 0, "image itemsize %zu dir %d differs", is, dir);
            free(sb);
            free(db);
            free(want);
        }
    }
}
START_TEST(test_image)
{
    at_1_and_2_threads(image_at, NULL);
}
END_TEST

static Suite *interleave_suite(void)
{
    const tcase_spec cases[] = {
        TCASE("ragged", LOOP(test_ragged, NSIZES)),
        TCASE("long", LOOP(test_long, NSIZES)),
        TCASE("image", TEST(test_image)),
    };
    return SUITE_OF("interleave", cases, 300);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print-simd") == 0)
        return print_simd();
    if (argc > 0 && argv[0] != NULL && simd_run_repeats_best("check_interleave", argv[0]))
        return 77;
    return run_suite(interleave_suite());
}
