/*
 * check_nomem.c - copies whose scratch buffer cannot be had.  A few copy
 * routes take a buffer from the heap once per range of units (plan.c,
 * pl_run_range): the staged uint8 blocks (PL_STAGED_BUFFER_BYTES, the
 * AVX2 table's tile_stream_staged) and the planes of 3- to 8-element
 * groups (two of PL_PLANES_BUFFER_BYTES).  Where malloc fails they fall
 * back, to the streaming tile and to two small stack buffers; a copy must
 * then give the same bytes and write nothing else.  White-box: this links
 * the core library itself with -Wl,--wrap=malloc (tests/c/meson.build), so
 * the library's malloc calls come here, and refuses the one size a case
 * names.  Each case also runs with nothing refused and checks that the
 * route under test asked for its buffer (else the case would test
 * nothing), at 1 and 2 threads.
 *
 * A refusal under RLIMIT_AS does not reach these calls: a buffer of
 * 100-200 KiB comes from the arena's free memory (docs/benchmarks.md,
 * session 63), hence the wrap.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "cpu_features.h"
#include "internal.h"
#include "kernels.h"

/* The heap buffers plan.c asks for (see there). */
#define STAGED_BYTES ((size_t)PL_STAGED_BUFFER_BYTES)
#define PLANES_BYTES ((size_t)2 * PL_PLANES_BUFFER_BYTES)

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);

static atomic_size_t watched;        /* the size counted, 0: none */
static atomic_bool refusing;         /* refuse that size */
static atomic_int asked, refused;    /* calls of that size, refused ones */

void *__wrap_malloc(size_t n)
{
    const size_t w = atomic_load(&watched);
    if (w != 0 && n == w) {
        atomic_fetch_add(&asked, 1);
        if (atomic_load(&refusing)) {
            atomic_fetch_add(&refused, 1);
            return NULL;
        }
    }
    return __real_malloc(n);
}

static void watch(size_t n, bool refuse)
{
    atomic_store(&refusing, refuse);
    atomic_store(&asked, 0);
    atomic_store(&refused, 0);
    atomic_store(&watched, n);
}

#define GUARD 64
#define FILL 0xA5

/* One copy of a uint8 tensor: src `shape` with strides `ss` (elements)
 * over sbuf, into a dense dst of `dshape` in the order `ds`, dst placed
 * doff bytes past a line with GUARD bytes of FILL on each side.  Returns
 * the dst buffer (guards included) for the caller to check. */
typedef struct {
    int ndim;
    int64_t shape[4], ss[4], ds[4];
    size_t doff;
} copy_spec;

static unsigned char *run_copy(const copy_spec *c, const unsigned char *sbuf, size_t dbytes)
{
    unsigned char *dbuf = aligned_alloc(64, (dbytes + 2 * GUARD + c->doff + 63) / 64 * 64);
    ck_assert_ptr_nonnull(dbuf);
    memset(dbuf, FILL, dbytes + 2 * GUARD + c->doff);
    int64_t shape[4], ss[4], ds[4];
    memcpy(shape, c->shape, sizeof shape);
    memcpy(ss, c->ss, sizeof ss);
    memcpy(ds, c->ds, sizeof ds);
    DLTensor src = {.data = (void *)sbuf, .device = {kDLCPU, 0}, .ndim = c->ndim,
                    .dtype = {kDLUInt, 8, 1}, .shape = shape, .strides = ss};
    DLTensor dst = src;
    dst.data = dbuf + GUARD + c->doff;
    dst.strides = ds;
    ck_assert_int_eq(pylayout_copy(&src, &dst), PYLAYOUT_OK);
    return dbuf;
}

/* dst element at idx: each element's byte, by its offsets in src and dst */
static void check_copy(const copy_spec *c, const unsigned char *sbuf, const unsigned char *dbuf, size_t dbytes)
{
    const unsigned char *d = dbuf + GUARD + c->doff;
    for (size_t i = 0; i < GUARD + c->doff; i++)
        ck_assert_msg(dbuf[i] == FILL, "byte %zu before dst was written", i);
    for (size_t i = 0; i < GUARD; i++)
        ck_assert_msg(d[dbytes + i] == FILL, "byte %zu past dst was written", i);
    int64_t idx[4] = {0, 0, 0, 0};
    const int64_t n = c->shape[0] * c->shape[1] * (c->ndim > 2 ? c->shape[2] : 1);
    for (int64_t e = 0; e < n; e++) {
        int64_t so = 0, dof = 0;
        for (int k = 0; k < c->ndim; k++) {
            so += idx[k] * c->ss[k];
            dof += idx[k] * c->ds[k];
        }
        if (d[dof] != sbuf[so])
            ck_abort_msg("element %lld: dst byte %lld is %u, src byte %lld is %u", (long long)e, (long long)dof,
                         d[dof], (long long)so, sbuf[so]);
        for (int k = c->ndim - 1; k >= 0 && ++idx[k] == c->shape[k]; k--)
            idx[k] = 0;
    }
}

/* The case with nothing refused (its route must ask for `bytes`), then
 * with that size refused, at 1 and 2 threads: both results checked.
 * Returns false where the route did not ask (the caller says why that may
 * be allowed). */
static bool run_refused(const copy_spec *c, size_t bytes, size_t sbytes, size_t dbytes)
{
    unsigned char *sbuf = aligned_alloc(64, (sbytes + 63) / 64 * 64);
    ck_assert_ptr_nonnull(sbuf);
    for (size_t i = 0; i < sbytes; i++)
        sbuf[i] = (unsigned char)(i * 131 + (i >> 11) * 7 + 1);
    bool asked_all = true;
    for (int threads = 1; threads <= 2; threads++) {
        ck_assert_int_eq(pylayout_set_num_threads(threads), PYLAYOUT_OK);
        for (int refuse = 0; refuse <= 1; refuse++) {
            watch(bytes, refuse);
            unsigned char *dbuf = run_copy(c, sbuf, dbytes);
            atomic_store(&watched, 0);
            asked_all &= atomic_load(&asked) > 0;
            ck_assert_int_eq(atomic_load(&refused), refuse ? atomic_load(&asked) : 0);
            check_copy(c, sbuf, dbuf, dbytes);
            free(dbuf);
        }
    }
    free(sbuf);
    return asked_all;
}

/* uint8 2048 x 2048 read transposed (src rows 2 KiB apart, 4 MiB: past
 * the streaming threshold), dst on a line and 16 bytes into one (the
 * split that streams the rest), 4160 x 2048 (64 rows past the blocks)
 * and 2048 x 2111 (dst rows 2 KiB apart, 63 columns past them).  On
 * the AVX2 table these take the staged 256 x 256 blocks; without their
 * buffer, the streaming tile. */
START_TEST(test_staged_without_buffer)
{
    const bool staged = _pylayout_kernels_get()->tile_stream_staged[PL_SIZE1] != NULL;
    static const struct {
        int64_t r, c;
        size_t doff;
    } shapes[] = {{2048, 2048, 0}, {2048, 2048, 16}, {4160, 2048, 0}, {2048, 2111, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t R = shapes[i].r, C = shapes[i].c;
        /* src R x C, row-major; dst C x R, row-major: dst[j][i] = src[i][j] */
        const copy_spec c = {.ndim = 2, .shape = {C, R}, .ss = {1, C}, .ds = {R, 1}, .doff = shapes[i].doff};
        const bool asked_all = run_refused(&c, STAGED_BYTES, (size_t)(R * C), (size_t)(R * C));
        ck_assert_msg(asked_all || !staged, "%lld x %lld (dst +%zu): the staged blocks never asked for their buffer",
                      (long long)R, (long long)C, shapes[i].doff);
    }
    if (!staged)
        printf("check_nomem: this SIMD path has no staged uint8 blocks: their fallback is checked on the AVX2 "
               "run (a CPU without AVX2 never takes that route)\n");
}
END_TEST

/* uint8 images (H, W, C) transposed to (W, H, C), C = 5 and 7: groups of
 * C bytes packed in both, moved as C planes (plan.c, pl_choose_planes),
 * in copies of 64 KiB and more through two heap buffers; without them,
 * through two 4 KiB buffers on the stack, the units cut into sub-blocks. */
START_TEST(test_planes_without_buffer)
{
    static const int64_t shapes[][3] = {{720, 1280, 5}, {333, 517, 7}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t H = shapes[i][0], W = shapes[i][1], C = shapes[i][2];
        const copy_spec c = {.ndim = 3, .shape = {W, H, C}, .ss = {C, W * C, 1}, .ds = {H * C, C, 1}, .doff = 0};
        const bool asked_all = run_refused(&c, PLANES_BYTES, (size_t)(H * W * C), (size_t)(H * W * C));
        ck_assert_msg(asked_all, "(%lld, %lld, %lld) to (W, H, C) never asked for the planes' buffers", (long long)H,
                      (long long)W, (long long)C);
    }
}
END_TEST

int main(void)
{
    if (simd_path_absent("check_nomem"))
        return 77;
    const tcase_spec cases[] = {
        TCASE("nomem", TEST(test_staged_without_buffer), TEST(test_planes_without_buffer)),
    };
    return run_suite(SUITE_OF("nomem", cases, 240));
}
