/*
 * check_copy.c - Check tests of pylayout_copy, pylayout_convert(_order), the
 * thread count and build info, through the public API only.
 *
 * Every copy is compared byte for byte (padding included) with a naive
 * reference that walks all indices; a randomized differential test covers
 * thousands of layouts.  Runs with CK_NOFORK: libgomp is not fork-safe.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include <check.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pylayout.h>

#include "check_util.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The L3 size plan.c reads (pl_l3_detect, _pylayout_l3_bytes), compiled
 * into this test so its sysfs parsing can run on a made-up tree. */
#include "../../src/cache_size.c"

extern char **environ;

/* This executable, for tests that run part of it again in a fresh process:
 * argv[0] as main got it (not /proc/self/exe, which is valgrind itself when
 * the suite runs under valgrind). */
static const char *self_path = "./check_copy";

#define SENTINEL 0xAB

/* ------------------------------------------------------------ helpers */

/* A tensor with its own shape/stride arrays and buffer. */
typedef struct tens {
    DLTensor t;
    int64_t shape[8];
    int64_t strides[8];
    unsigned char *buf;
    size_t bufsize;
} tens;

static DLDataType dtype_of_size(size_t itemsize)
{
    DLDataType dt = {kDLUInt, (uint8_t)(8 * itemsize), 1};
    switch (itemsize) {
    case 4: dt.code = kDLFloat; break;
    case 8: dt.code = kDLFloat; break;
    case 16: dt.code = kDLComplex; dt.bits = 128; break;
    default: break;
    }
    return dt;
}

/* Builds a tensor of `shape` whose dims are laid out in `perm` (perm[0]
 * outermost), each dim padded by steps[d] (>= 1), flipped where flip[d],
 * stride 0 where zero[d], at `misalign` extra bytes into its buffer.  The
 * buffer is filled with `fill` (or random bytes when fill < 0). */
static void tens_make(tens *x, int ndim, const int64_t *shape, const int *perm, const int *steps,
                      const int *flip, const int *zero, size_t itemsize, size_t misalign, int fill,
                      unsigned *seed)
{
    int64_t lo = 0, hi = 0;
    memset(x, 0, sizeof *x);
    memcpy(x->shape, shape, (size_t)ndim * sizeof *shape);
    layout_strides(ndim, shape, perm, steps, flip, zero, x->strides, &lo, &hi);
    x->bufsize = ((size_t)(hi - lo + 1) * itemsize + misalign + 16 + 63) / 64 * 64;
    x->buf = aligned_alloc(64, x->bufsize); /* so the streaming kernels run */
    ck_assert_ptr_nonnull(x->buf);
    if (fill >= 0)
        memset(x->buf, fill, x->bufsize);
    else
        test_fill(x->buf, x->bufsize, seed);
    x->t = dl_make(x->buf, ndim, x->shape, x->strides, dtype_of_size(itemsize), (uint64_t)(-lo) * itemsize + misalign);
}

static void tens_free(tens *x) { free(x->buf); }

static size_t itemsize_of(const DLTensor *t) { return (size_t)((t->dtype.bits + 7) / 8); }

/* Offset in bytes of element `idx`. */
static int64_t offset_of(const DLTensor *t, const int64_t *idx)
{
    int64_t off = (int64_t)t->byte_offset;
    int64_t step = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t s = t->strides ? t->strides[d] : step;
        off += idx[d] * s * (int64_t)itemsize_of(t);
        step *= t->shape[d];
    }
    return off;
}

static bool has_no_elements(const DLTensor *t)
{
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] == 0)
            return true;
    return false;
}

/* The naive reference copier: an odometer over every index. */
static void ref_copy(const DLTensor *src, DLTensor *dst) { ref_copy_elements(src, dst, itemsize_of(src)); }

/* Whether every element of a equals the same-index element of b. */
static int same_elements(const DLTensor *a, const DLTensor *b)
{
    int64_t idx[PYLAYOUT_MAX_NDIM] = {0};
    size_t is = itemsize_of(a);
    if (has_no_elements(a))
        return 1;
    do
        if (memcmp((const char *)a->data + offset_of(a, idx), (const char *)b->data + offset_of(b, idx), is) != 0)
            return 0;
    while (next_index(idx, a->ndim, a->shape));
    return 1;
}

/* Copies src into dst with pylayout and into a clone of dst with the
 * reference, and compares whole buffers (padding must stay untouched). */
static void check_against_ref(const DLTensor *src, tens *dst)
{
    unsigned char *expect = malloc(dst->bufsize);
    ck_assert_ptr_nonnull(expect);
    memcpy(expect, dst->buf, dst->bufsize);
    DLTensor ref = dst->t;
    ref.data = expect;
    ref_copy(src, &ref);
    pylayout_status st = pylayout_copy(src, &dst->t);
    ck_assert_msg(st == PYLAYOUT_OK, "pylayout_copy: %s (%s)", pylayout_strerror(st), pylayout_last_error());
    ck_assert_str_eq(pylayout_last_error(), "");
    ck_assert_msg(memcmp(expect, dst->buf, dst->bufsize) == 0, "copy differs from the reference");
    free(expect);
}

/* check_against_ref, then frees both tensors. */
static void check_and_free(tens *s, tens *d)
{
    check_against_ref(&s->t, d);
    tens_free(s);
    tens_free(d);
}

/* Copies a src of `shape` laid out in sperm into a dst laid out in dperm. */
static void check_perm(int ndim, const int64_t *shape, const int *sperm, const int *dperm, size_t itemsize)
{
    unsigned seed = 1234;
    tens s, d;
    tens_make(&s, ndim, shape, sperm, NULL, NULL, NULL, itemsize, 0, -1, &seed);
    tens_make(&d, ndim, shape, dperm, NULL, NULL, NULL, itemsize, 0, SENTINEL, &seed);
    check_and_free(&s, &d);
}

struct cases_fn {
    void (*fn)(void);
};

static void run_cases_fn(int threads, void *ctx)
{
    (void)threads;
    ((const struct cases_fn *)ctx)->fn();
}

static void check_both_thread_counts(void (*fn)(void))
{
    struct cases_fn c = {fn};
    at_1_and_2_threads(run_cases_fn, &c);
}

/* ----------------------------------------------------------- identity */

static void identity_cases(void)
{
    static const int64_t sizes[][2] = {{1, 1}, {3, 5}, {100, 37}, {1024, 1024}, {1, 300000}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t is = 1; is <= 16; is *= 2)
            check_perm(2, sizes[i], NULL, NULL, is);
}

START_TEST(test_identity) { check_both_thread_counts(identity_cases); }
END_TEST

START_TEST(test_identity_null_strides)
{
    unsigned seed = 7;
    int64_t shape[3] = {4, 5, 6};
    tens s, d;
    tens_make(&s, 3, shape, NULL, NULL, NULL, NULL, 4, 0, -1, &seed);
    tens_make(&d, 3, shape, NULL, NULL, NULL, NULL, 4, 0, SENTINEL, &seed);
    s.t.strides = NULL;
    d.t.strides = NULL;
    ck_assert_int_eq(pylayout_copy(&s.t, &d.t), PYLAYOUT_OK);
    ck_assert_int_eq(memcmp(s.buf, d.buf, 4 * 5 * 6 * 4), 0);
    tens_free(&s);
    tens_free(&d);
}
END_TEST

/* ---------------------------------------------------------- transpose */

static void transpose_cases(void)
{
    static const int64_t sizes[][2] = {{2, 3},     {8, 8},    {16, 16},  {17, 33},  {64, 64},   {65, 63},
                                       {256, 256}, {300, 77}, {3, 1000}, {1000, 3}, {512, 520}, {1024, 1024},
                                       {9, 12},    {12, 9},   {8, 20},   {23, 31},  {27, 28},   {5, 40},
                                       {20, 127},  {130, 17}};
    static const int rev[2] = {1, 0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t is = 1; is <= 16; is *= 2) {
            check_perm(2, sizes[i], NULL, rev, is);
            check_perm(2, sizes[i], rev, NULL, is);
        }
}

START_TEST(test_transpose_2d) { check_both_thread_counts(transpose_cases); }
END_TEST

/* Small-edge transposes in a deeper nest, as (27,28,28,28,28).permute(2,3,
 * 1,4,0) -> contiguous, scaled down: 27 x 28 tiles whose outer loops are
 * reordered to follow src (every element size; both thread counts). */
static void small_edge_cases(void)
{
    static const int64_t shape[5] = {27, 28, 6, 7, 28}, shape2[5] = {9, 5, 4, 6, 12};
    static const int perm[5] = {2, 3, 1, 4, 0};
    for (size_t is = 1; is <= 16; is *= 2) {
        check_perm(5, shape, NULL, perm, is);
        check_perm(5, shape2, NULL, perm, is);
        check_perm(5, shape, perm, NULL, is);
    }
}

START_TEST(test_transpose_small_edges) { check_both_thread_counts(small_edge_cases); }
END_TEST

/* Copies large enough (>= 4 MiB) for the streaming-store kernels, aligned
 * and misaligned, at both thread counts.  4- and 8-byte transposes with
 * dst rows on lines stream from 8 MiB (PL_STREAM_MIN_WIDE_BYTES in plan.c):
 * sq4 and sq8 stay under it (cached tiles), sq4w and sq8w go past it. */
static void large_cases(void)
{
    static const int64_t sq1[2] = {2048, 2113}, sq2[2] = {1472, 1475};
    static const int64_t sq4[2] = {1032, 1040}, sq8[2] = {737, 731};
    static const int64_t nchw[4] = {2, 64, 65, 130};
    static const int rev[2] = {1, 0}, nhwc[4] = {0, 2, 3, 1};
    unsigned seed = 99;
    check_perm(2, sq1, NULL, rev, 1);
    check_perm(2, sq2, NULL, rev, 2);
    check_perm(2, sq4, NULL, rev, 4);
    check_perm(2, sq8, NULL, rev, 8);
    static const int64_t sq4w[2] = {1440, 1488}, sq8w[2] = {1064, 1000}; /* rows of 90-133 lines */
    check_perm(2, sq4w, NULL, rev, 4);
    check_perm(2, sq8w, NULL, rev, 8);
    check_perm(4, nchw, NULL, nhwc, 4);
    static const int64_t ragged[3] = {70, 64, 960}; /* a = 70: a partial line per tile */
    static const int rperm[3] = {2, 1, 0};
    check_perm(3, ragged, NULL, rperm, 1);
    static const int64_t sq16[2] = {512, 520};
    for (size_t is = 4; is <= 16; is *= 4) { /* dst off 64-byte alignment: cached-store fallback */
        tens s, d;
        tens_make(&s, 2, is == 4 ? sq4 : sq16, NULL, NULL, NULL, NULL, is, 0, -1, &seed);
        tens_make(&d, 2, is == 4 ? sq4 : sq16, rev, NULL, NULL, NULL, is, is, SENTINEL, &seed);
        check_and_free(&s, &d);
    }
    /* dst 16 bytes into a line (NumPy's buffers), rows of one to five lines
     * past the streaming threshold: split at the line where the rest keeps
     * a stream run, whole rows in the cached tiles where it does not */
    static const int64_t full4[4] = {16, 64, 56, 56}, rows[][2] = {{16, 70000}, {32, 40000}, {68, 17000}, {80, 16000}};
    static const int rev4[4] = {3, 2, 1, 0};
    for (size_t is = 4; is <= 8; is *= 2) {
        tens s, d;
        tens_make(&s, 4, full4, NULL, NULL, NULL, NULL, is, 0, -1, &seed);
        tens_make(&d, 4, full4, rev4, NULL, NULL, NULL, is, 16, SENTINEL, &seed);
        check_and_free(&s, &d);
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            tens_make(&s, 2, rows[i], NULL, NULL, NULL, NULL, is, 0, -1, &seed);
            tens_make(&d, 2, rows[i], rev, NULL, NULL, NULL, is, 16, SENTINEL, &seed);
            check_and_free(&s, &d);
        }
    }
}

/* Tiles whose dst is one contiguous block that is not 64-byte aligned (a
 * dst-innermost dim of 27 from rows far apart, as in
 * (27,28,28,28,28).permute(2,3,1,4,0)): built in a buffer and streamed out,
 * with dst aligned and off by one element. */
static void buffered_stream_cases(void)
{
    static const int order[3] = {1, 2, 0};
    unsigned seed = 7;
    for (size_t is = 1; is <= 16; is *= 2) {
        const int64_t shape[3] = {27, (int64_t)(4200000 / (27 * 28 * is)) + 1, 28};
        for (int64_t off = 0; off <= (int64_t)is; off += (int64_t)is) {
            tens s, d;
            tens_make(&s, 3, shape, NULL, NULL, NULL, NULL, is, 0, -1, &seed);
            tens_make(&d, 3, shape, order, NULL, NULL, NULL, is, off, SENTINEL, &seed);
            check_and_free(&s, &d);
        }
    }
}

/* (27,28,28,28,28).permute(2,3,1,4,0) -> contiguous with the middle dim cut
 * to stay near 4 MiB, every element size: 27 x 28 tiles built in a buffer
 * and streamed out, whose outer loops run along src rows (each unit
 * prefetching the rows of the units after it, for sizes up to 8 bytes);
 * dst on a line, one element past it, and at the last whole element
 * before byte 60 of it; src likewise off by whole elements.  Then the
 * inverse permute, whose dst is the strided side. */
static void permute_5d_large_cases(void)
{
    static const int perm[5] = {2, 3, 1, 4, 0};
    unsigned seed = 27;
    for (size_t is = 1; is <= 16; is *= 2) {
        const int64_t mid = (int64_t)(4200000 / (27 * 28 * 28 * 28 * is)) + 1;
        const int64_t shape[5] = {27, 28, mid, 28, 28};
        const size_t offs[3] = {0, is, 60 / is * is};
        for (size_t o = 0; o < 3; o++) {
            tens s, d;
            tens_make(&s, 5, shape, NULL, NULL, NULL, NULL, is, is * o, -1, &seed);
            tens_make(&d, 5, shape, perm, NULL, NULL, NULL, is, offs[o], SENTINEL, &seed);
            check_and_free(&s, &d);
        }
    }
    static const int64_t inv[5] = {27, 28, 2, 28, 28};
    check_perm(5, inv, perm, NULL, 4);
}

/* Row copies of at least this machine's L3 (plan.c's pl_rows_stream):
 * rows of whole lines on lines, dense and every other one of src (streamed
 * stores), rows of 1040 bytes with dst 16 bytes into a line (streamed, the
 * ends of each row cached), and rows of whole lines with dst off its lines
 * (cached).  Where sysfs gives no L3 size nothing streams, and the copies
 * only check the cached path. */
static void rows_past_l3_cases(void)
{
    const int64_t l3 = _pylayout_l3_bytes();
    const int64_t bytes = (l3 > 0 && l3 <= ((int64_t)256 << 20) ? l3 : (int64_t)4 << 20) + ((int64_t)1 << 20);
    static const int every_other[2] = {2, 1};
    unsigned seed = 5;
    const struct {
        int64_t cols;
        const int *steps;
        size_t doff;
    } cases[] = {{64, NULL, 0}, {64, every_other, 0}, {260, NULL, 16}, {64, NULL, 16}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t shape[2] = {bytes / (cases[c].cols * 4) + 1, cases[c].cols};
        tens s, d;
        tens_make(&s, 2, shape, NULL, cases[c].steps, NULL, NULL, 4, 0, -1, &seed);
        tens_make(&d, 2, shape, NULL, NULL, NULL, NULL, 4, cases[c].doff, SENTINEL, &seed);
        check_and_free(&s, &d);
    }
}

START_TEST(test_transpose_large) { check_both_thread_counts(large_cases); }
END_TEST

START_TEST(test_rows_past_l3) { check_both_thread_counts(rows_past_l3_cases); }
END_TEST

START_TEST(test_transpose_buffered_stream) { check_both_thread_counts(buffered_stream_cases); }
END_TEST

START_TEST(test_permute_5d_large) { check_both_thread_counts(permute_5d_large_cases); }
END_TEST

/* ------------------------------------------------------ step-2 sources */

/* x[..., ::2] into a dense dst: the step-2 gather kernels, every element
 * size, lengths around each kernel's vector width, src and dst misaligned,
 * rows that fuse and rows that do not, and copies large enough to stream. */
static void step2_cases(void)
{
    unsigned seed = 4242;
    static const int64_t lens[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1031};
    static const int st1[1] = {2}, st2[2] = {1, 2}, st2b[2] = {2, 2}, st3[2] = {1, 3};
    for (size_t is = 1; is <= 16; is *= 2)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (size_t mis = 0; mis < 2; mis++) {
                tens s, d;
                int64_t shape1[1] = {lens[li]}, shape2[2] = {3, lens[li]};
                tens_make(&s, 1, shape1, NULL, st1, NULL, NULL, is, mis * (is > 1 ? is / 2 : 1), -1, &seed);
                tens_make(&d, 1, shape1, NULL, NULL, NULL, NULL, is, mis * is, SENTINEL, &seed);
                check_and_free(&s, &d);
                for (int k = 0; k < 3; k++) {
                    const int *st = k == 0 ? st2 : k == 1 ? st2b : st3;
                    tens_make(&s, 2, shape2, NULL, st, NULL, NULL, is, mis * is, -1, &seed);
                    tens_make(&d, 2, shape2, NULL, NULL, NULL, NULL, is, 0, SENTINEL, &seed);
                    check_and_free(&s, &d);
                }
            }
    /* >= 4 MiB: streaming stores; rows that do not fuse; a misaligned dst */
    static const int64_t big[2] = {5, (int64_t)1 << 18 | 13};
    for (size_t is = 1; is <= 16; is *= 2)
        for (size_t mis = 0; mis < 2; mis++) {
            tens s, d;
            tens_make(&s, 2, big, NULL, st2b, NULL, NULL, is, 0, -1, &seed);
            tens_make(&d, 2, big, NULL, NULL, NULL, NULL, is, mis * is, SENTINEL, &seed);
            check_and_free(&s, &d);
        }
}

START_TEST(test_step2) { check_both_thread_counts(step2_cases); }
END_TEST

/* ------------------------------------------------------ step-k sources */

/* x[..., ::k], 3 <= k <= 9, into a dense dst: the step-k gather kernels
 * (gather_x86.c; k = 9, and rows of fewer than 8 bytes, take the 2-D
 * loop), every element size, lengths around each kernel's vector width,
 * src and dst misaligned, 2-D rows that fuse into one and rows that do
 * not.  Each src buffer ends at the last byte of its last element, just
 * before an inaccessible page (guarded_alloc), so any load past it faults:
 * a plain one, and an AVX-512 masked one whose mask reaches past the end
 * (neither AddressSanitizer nor valgrind sees those). */
/* n bytes that end on the last byte of a page whose next page is
 * inaccessible: a load or store past them faults, masked or not (a masked
 * access never faults on its masked-off bytes, and ASan does not see
 * masked accesses at all).  guarded_free unmaps both. */
typedef struct {
    unsigned char *base;
    size_t len;
} guarded;

static unsigned char *guarded_alloc(size_t n, guarded *g)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (n + page - 1) / page * page;
    g->len = body + page;
    g->base = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(g->base != MAP_FAILED);
    ck_assert_int_eq(mprotect(g->base + body, page, PROT_NONE), 0);
    return g->base + body - n;
}

/* The same guard before the buffer instead: n bytes that start on the
 * first byte of a page whose previous page is inaccessible. */
static unsigned char *guarded_alloc_after(size_t n, guarded *g)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (n + page - 1) / page * page;
    g->len = body + page;
    g->base = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(g->base != MAP_FAILED);
    ck_assert_int_eq(mprotect(g->base, page, PROT_NONE), 0);
    return g->base + page;
}

static void guarded_free(guarded *g) { ck_assert_int_eq(munmap(g->base, g->len), 0); }

/* Copies a src of `shape` and element strides `sstrides` (all positive),
 * in a buffer of random bytes that ends at the last byte of its last
 * element and starts soff bytes before its first, into a dense dst doff
 * bytes into its buffer, and checks the copy against the reference. */
static void check_src_at_buffer_end(int ndim, const int64_t *shape, const int64_t *sstrides, size_t is, size_t soff,
                                    size_t doff, unsigned *seed)
{
    size_t span = 1;
    for (int k = 0; k < ndim; k++)
        span += (size_t)((shape[k] - 1) * sstrides[k]);
    span *= is;
    guarded g;
    unsigned char *buf = guarded_alloc(soff + span, &g);
    test_fill(buf, soff + span, seed);
    const DLTensor src = dl_make(buf, ndim, shape, sstrides, dtype_of_size(is), soff);
    tens d;
    tens_make(&d, ndim, shape, NULL, NULL, NULL, NULL, is, doff, SENTINEL, seed);
    check_against_ref(&src, &d);
    tens_free(&d);
    guarded_free(&g);
}

static void stepk_case(int ndim, const int64_t *shape, int k, int64_t row_pad, size_t is, size_t mis, unsigned *seed)
{
    const int64_t n = shape[ndim - 1];
    const int64_t row = (n - 1) * k + 1 + row_pad; /* elements from one src row's start to the next's */
    const int64_t sstrides[2] = {ndim == 2 ? row : k, k};
    check_src_at_buffer_end(ndim, shape, ndim == 2 ? sstrides : sstrides + 1, is, mis * (is > 1 ? is / 2 : 1),
                            mis * is, seed);
}

static void stepk_cases(void)
{
    unsigned seed = 977;
    static const int64_t lens[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1031};
    for (size_t is = 1; is <= 16; is *= 2)
        for (int k = 3; k <= 9; k++)
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
                for (size_t mis = 0; mis < 2; mis++) {
                    const int64_t shape1[1] = {lens[li]}, shape2[2] = {3, lens[li]};
                    stepk_case(1, shape1, k, 0, is, mis, &seed);
                    stepk_case(2, shape2, k, k - 1, is, mis, &seed); /* rows fuse: one row of 3n */
                    stepk_case(2, shape2, k, 1, is, mis, &seed);
                }
    /* 0.5 to 4 MiB of dst: the threads split the rows */
    const int64_t big[2] = {64, 8191};
    for (size_t is = 1; is <= 8; is *= 2)
        for (int k = 3; k <= 8; k += 5)
            stepk_case(2, big, k, 3, is, 1, &seed);
}

START_TEST(test_stepk) { check_both_thread_counts(stepk_cases); }
END_TEST

/* ---------------------------------------------------- groups of elements */

/* x[..., :c] of a src with C > c elements a group: groups of c * is bytes
 * with gaps between them, into a dense dst (RGBA to RGB, the xyz of
 * (N, 4) points): the group-gather kernels (group_gather_x86.c), also as
 * elements of c * is bytes at an odd step where that is 2, 4 or 8 bytes;
 * groups past 32 bytes, and copies under 256 bytes, keep their rows.
 * Group sizes 2 to 48 bytes, steps up to 16 groups' worth, lengths around
 * the vectors' periods, src and dst misaligned, rows that fuse into one
 * and rows that do not.  Each src buffer ends at the last byte of its
 * last group, as in stepk_case.  Each case also runs the other way
 * (groups_scatter_case), between groups on both sides at the same step
 * and at different ones (groups_move_case) and into planes
 * (groups_planes_case); groups packed in both, flipped in src, have their
 * own grid (groups_flip_case). */
static void groups_case(int64_t rows, int64_t n, int64_t c, int64_t C, int64_t row_pad, size_t is, size_t mis,
                        unsigned *seed)
{
    const int64_t shape[3] = {rows, n, c};
    const int64_t sstrides[3] = {n * C + row_pad, C, 1}; /* rows fuse where row_pad is 0 */
    check_src_at_buffer_end(3, shape, sstrides, is, mis * (is > 1 ? is / 2 : 1) + mis, mis * (is + 1), seed);
}

/* The inverse: a dense src into x[..., :c] of a dst with C > c elements a
 * group, whose bytes between groups must stay as they were (the scatter
 * kernels of group_gather_x86.c, AVX-512 VBMI; c = 1 writes one channel).
 * check_against_ref compares the whole dst buffer, which ends at the last
 * byte of its last group. */
static void groups_scatter_case(int64_t rows, int64_t n, int64_t c, int64_t C, int64_t row_pad, size_t is,
                                size_t mis, unsigned *seed)
{
    const int64_t shape[3] = {rows, n, c};
    tens s, d;
    tens_make(&s, 3, shape, NULL, NULL, NULL, NULL, is, mis * (is + 1), -1, seed);
    memset(&d, 0, sizeof d);
    memcpy(d.shape, shape, sizeof shape);
    const int64_t row = n * C + row_pad;
    d.strides[0] = row, d.strides[1] = C, d.strides[2] = 1;
    const size_t off = mis * (is > 1 ? is / 2 : 1) + mis;
    d.bufsize = off + (size_t)((rows - 1) * row + (n - 1) * C + c) * is;
    d.buf = malloc(d.bufsize);
    ck_assert_ptr_nonnull(d.buf);
    test_fill(d.buf, d.bufsize, seed);
    d.t = dl_make(d.buf, 3, d.shape, d.strides, dtype_of_size(is), off);
    check_and_free(&s, &d);
}

/* Groups with gaps on both sides: x[..., :c] of a (rows, n, Cs) buffer
 * into the same view of a (rows, n, Cd) one.  At the same step (Cs = Cd:
 * one RGBA image's RGB into another's) the masked moves of
 * group_gather_x86.c (AVX-512); at different steps (an RGB image's channel
 * into an RGBA one's) the staged copies of plan.c (gathered into a buffer,
 * then scattered; AVX-512 VBMI).  Both buffers end at the last byte of
 * their last group, before a guard page; check_against_ref compares dst's
 * whole: the bytes between its groups must stay as they were. */
static void groups_move_case(int64_t rows, int64_t n, int64_t c, int64_t Cs, int64_t Cd, int64_t row_pad, size_t is,
                             size_t mis, unsigned *seed)
{
    const int64_t shape[3] = {rows, n, c};
    const int64_t sstrides[3] = {n * Cs + row_pad, Cs, 1}, dstrides[3] = {n * Cd + row_pad, Cd, 1};
    const size_t sspan = (size_t)((rows - 1) * sstrides[0] + (n - 1) * Cs + c) * is;
    const size_t dspan = (size_t)((rows - 1) * dstrides[0] + (n - 1) * Cd + c) * is;
    const size_t soff = mis * (is > 1 ? is / 2 : 1) + mis, doff = mis * (is + 1);
    guarded gs, gd;
    unsigned char *sbuf = guarded_alloc(soff + sspan, &gs);
    test_fill(sbuf, soff + sspan, seed);
    const DLTensor src = dl_make(sbuf, 3, shape, sstrides, dtype_of_size(is), soff);
    tens d;
    memset(&d, 0, sizeof d);
    memcpy(d.shape, shape, sizeof shape);
    memcpy(d.strides, dstrides, sizeof dstrides);
    d.bufsize = doff + dspan;
    d.buf = guarded_alloc(d.bufsize, &gd);
    test_fill(d.buf, d.bufsize, seed);
    d.t = dl_make(d.buf, 3, d.shape, d.strides, dtype_of_size(is), doff);
    check_against_ref(&src, &d);
    guarded_free(&gd);
    guarded_free(&gs);
}

/* Groups packed in both, in the opposite order in src: x[:, ::-1] of a
 * (rows, n, c) buffer, the pixels of an HWC image flipped (group_flip of
 * group_gather_x86.c), or with its rows flipped too (rot: rotated by 180
 * degrees; rows without a pad then fuse into one).  src's buffer starts
 * on the first byte after an inaccessible page (low) or ends on the last
 * byte before one, so that a load past either end of it faults, masked or
 * not. */
static void groups_flip_case(int64_t rows, int64_t n, int64_t c, int64_t row_pad, bool rot, bool low, size_t is,
                             size_t mis, unsigned *seed)
{
    const int64_t shape[3] = {rows, n, c}, rs = n * c + row_pad;
    const int64_t sstrides[3] = {rot ? -rs : rs, -c, 1};
    const size_t span = (size_t)((rows - 1) * rs + n * c) * is;
    const size_t soff = low ? 0 : mis * (is > 1 ? is / 2 : 1) + mis;
    guarded g;
    unsigned char *buf = low ? guarded_alloc_after(span, &g) : guarded_alloc(soff + span, &g);
    test_fill(buf, soff + span, seed);
    /* element [0][0][0]: the last group of the first row (rot: of the last row) */
    const size_t first = soff + (size_t)((rot ? (rows - 1) * rs : 0) + (n - 1) * c) * is;
    const DLTensor src = dl_make(buf, 3, shape, sstrides, dtype_of_size(is), first);
    tens d;
    tens_make(&d, 3, shape, NULL, NULL, NULL, NULL, is, mis * (is + 1), SENTINEL, seed);
    check_against_ref(&src, &d);
    tens_free(&d);
    guarded_free(&g);
}

/* Groups with gaps into planes: x[:, :c].T of an (n, C) src into a dense
 * (c, n) dst, RGBA's RGB to CHW (plan.c's pl_unzip_gaps: the groups
 * gathered into a buffer, then unzipped). */
static void groups_planes_case(int64_t n, int64_t c, int64_t C, size_t is, size_t mis, unsigned *seed)
{
    const int64_t shape[2] = {c, n}, sstrides[2] = {1, C};
    check_src_at_buffer_end(2, shape, sstrides, is, mis * (is > 1 ? is / 2 : 1) + mis, mis * (is + 1), seed);
}

static void groups_cases(void)
{
    unsigned seed = 3301;
    static const int64_t groups[][2] = {{3, 4}, {2, 3}, {3, 5}, {3, 6}, {3, 8}, {6, 8}, {5, 8}, {4, 5},
                                        {7, 8}, {3, 11}, {5, 16}, {3, 16}, {5, 7}, {8, 12}, {3, 48}, {2, 100}};
    static const int64_t lens[] = {1, 5, 21, 86, 87, 171, 172, 1031};
    for (size_t is = 1; is <= 16; is *= 2)
        for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
            const int64_t c = groups[gi][0], C = groups[gi][1];
            if ((int64_t)is * c > 48)
                continue;
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
                for (size_t mis = 0; mis < 2; mis++) {
                    groups_case(1, lens[li], c, C, 0, is, mis, &seed);
                    groups_case(3, lens[li], c, C, 0, is, mis, &seed); /* rows fuse: one row of 3n groups */
                    groups_case(3, lens[li], c, C, 1, is, mis, &seed);
                    groups_scatter_case(1, lens[li], c, C, 0, is, mis, &seed);
                    groups_scatter_case(3, lens[li], c, C, 1, is, mis, &seed);
                    groups_scatter_case(2, lens[li], 1, C, 0, is, mis, &seed); /* one channel */
                    groups_move_case(1, lens[li], c, C, C, 0, is, mis, &seed);
                    groups_move_case(3, lens[li], c, C, C, 1, is, mis, &seed);
                    groups_move_case(2, lens[li], 1, C, C, 0, is, mis, &seed);
                    groups_move_case(1, lens[li], c, C, C + 1, 0, is, mis, &seed); /* different steps */
                    groups_move_case(3, lens[li], c, C + 2, C, 1, is, mis, &seed);
                    groups_move_case(2, lens[li], 1, C, 2 * C + 1, 0, is, mis, &seed);
                    groups_move_case(2, lens[li], 1, 2, C, 0, is, mis, &seed); /* x[:, ::2] into y[:, ::C] */
                    if (c >= 2 && c <= 8 && lens[li] >= 16)
                        groups_planes_case(lens[li] + 1365, c, C, is, mis, &seed);
                }
        }
    /* flipped: groups of 2 to 48 bytes, lengths around the 16- and
     * 64-byte vectors' groups */
    static const int64_t flips[] = {1, 2, 3, 5, 6, 7, 9, 11, 12, 13, 15, 16, 17, 21, 24, 31, 32, 33, 48};
    static const int64_t flip_lens[] = {1, 2, 4, 5, 6, 10, 11, 21, 22, 43, 64, 65, 86, 87, 171, 1031};
    for (size_t is = 1; is <= 16; is *= 2)
        for (size_t fi = 0; fi < sizeof flips / sizeof flips[0]; fi++) {
            const int64_t c = flips[fi];
            if ((int64_t)is * c > 48 || (int64_t)is * c < 2)
                continue;
            for (size_t li = 0; li < sizeof flip_lens / sizeof flip_lens[0]; li++)
                for (size_t mis = 0; mis < 2; mis++) {
                    groups_flip_case(1, flip_lens[li], c, 0, false, mis, is, mis, &seed);
                    groups_flip_case(3, flip_lens[li], c, 0, false, !mis, is, mis, &seed);
                    groups_flip_case(3, flip_lens[li], c, 1, true, mis, is, mis, &seed);
                    groups_flip_case(2, flip_lens[li], c, 0, true, !mis, is, mis, &seed); /* one row */
                }
        }
    /* 1 to 6 MiB of dst: the threads split the rows */
    for (size_t is = 1; is <= 4; is *= 2) {
        groups_flip_case(16, 65537, 3, 5, false, false, is, 1, &seed);
        groups_flip_case(16, 65537, 3, 5, true, true, is, 1, &seed);
    }
    groups_flip_case(1, 1 << 20, 3, 0, false, true, 1, 0, &seed);
    for (size_t is = 1; is <= 8; is *= 2)
        groups_case(16, 65537, 3, 4, 5, is, 1, &seed);
    groups_case(1, 1 << 20, 2, 3, 0, 1, 1, &seed);
    for (size_t is = 1; is <= 8; is *= 2)
        groups_planes_case((int64_t)1 << 19, 3, 4, is, 1, &seed);
    for (size_t is = 1; is <= 4; is *= 2)
        groups_scatter_case(16, 65537, 3, 4, 5, is, 1, &seed);
    groups_scatter_case(1, 1 << 20, 1, 3, 0, 1, 1, &seed);
    for (size_t is = 1; is <= 8; is *= 2) {
        groups_move_case(16, 65537, 3, 4, 4, 5, is, 1, &seed);
        groups_move_case(16, 65537, 3, 4, 6, 5, is, 1, &seed);
    }
    groups_move_case(1, 1 << 20, 1, 3, 3, 0, 1, 1, &seed);
    groups_move_case(1, 1 << 20, 1, 3, 4, 0, 1, 1, &seed);
}

START_TEST(test_groups) { check_both_thread_counts(groups_cases); }
END_TEST

/* ------------------------------------------------------- permutations */

static int next_perm(int *p, int n)
{
    int i = n - 2;
    while (i >= 0 && p[i] > p[i + 1])
        i--;
    if (i < 0)
        return 0;
    int j = n - 1;
    while (p[j] < p[i])
        j--;
    int t = p[i];
    p[i] = p[j];
    p[j] = t;
    for (int a = i + 1, b = n - 1; a < b; a++, b--) {
        t = p[a];
        p[a] = p[b];
        p[b] = t;
    }
    return 1;
}

START_TEST(test_permutations_3d_4d)
{
    static const int64_t shape3[3] = {9, 17, 40};
    static const int64_t shape4[4] = {5, 6, 7, 8};
    int p[4] = {0, 1, 2};
    do
        check_perm(3, shape3, NULL, p, 4);
    while (next_perm(p, 3));
    int q[4] = {0, 1, 2, 3};
    do {
        check_perm(4, shape4, NULL, q, 4);
        check_perm(4, shape4, q, NULL, 2);
    } while (next_perm(q, 4));
}
END_TEST

START_TEST(test_permutations_6d)
{
    static const int64_t shape[6] = {2, 3, 4, 5, 3, 9};
    int p[6] = {0, 1, 2, 3, 4, 5};
    int k = 0;
    do {
        if (k++ % 7 == 0) /* 103 of the 720 permutations */
            check_perm(6, shape, NULL, p, 8);
    } while (next_perm(p, 6));
}
END_TEST

/* --------------------------------------------------------- elem sizes */

START_TEST(test_element_sizes)
{
    static const int64_t shape[3] = {3, 70, 45};
    static const int perm[3] = {0, 2, 1};
    size_t is = (size_t)1 << _i; /* loop test: 1, 2, 4, 8, 16 */
    check_perm(3, shape, NULL, perm, is);
    check_perm(3, shape, perm, NULL, is);
}
END_TEST

/* --------------------------------------------------------- broadcast */

START_TEST(test_broadcast)
{
    unsigned seed = 11;
    static const int64_t shape[3] = {7, 130, 66};
    static const int zero_masks[][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 0}, {1, 1, 1}};
    static const int tperm[3] = {0, 2, 1};
    for (size_t m = 0; m < 5; m++)
        for (size_t is = 1; is <= 16; is *= 2)
            for (int t = 0; t < 2; t++) {
                tens s, d;
                tens_make(&s, 3, shape, NULL, NULL, NULL, zero_masks[m], is, 0, -1, &seed);
                tens_make(&d, 3, shape, t ? tperm : NULL, NULL, NULL, NULL, is, 0, SENTINEL, &seed);
                check_and_free(&s, &d);
            }
}
END_TEST

/* A source broadcast along dst's rows (the SIMD paths' fill kernels,
 * rows_x86.c; plan.c's pl_fill_row on the others): every row length from
 * 1 to 40 elements (the short rows' moves, each side of 16, 32 and 64
 * bytes), then past a 64-byte vector with ragged ends, every element size;
 * dst on its lines, off them by whole elements, and off its elements by a
 * byte (NumPy's arrays may be); src's elements off theirs too. */
START_TEST(test_broadcast_rows)
{
    unsigned seed = 13;
    static const int zero[2] = {0, 1};
    static const int64_t longer[] = {63, 64, 65, 100, 1000, 4099};
    for (int64_t i = 0; i < 40 + 6; i++)
        for (size_t is = 1; is <= 16; is *= 2)
            for (size_t mis = 0; mis < 3; mis++) {
                const int64_t shape[2] = {9, i < 40 ? i + 1 : longer[i - 40]};
                tens s, d;
                tens_make(&s, 2, shape, NULL, NULL, NULL, zero, is, mis == 2 ? 5 : 0, -1, &seed);
                tens_make(&d, 2, shape, NULL, NULL, NULL, NULL, is, mis == 2 ? 1 : mis * 3 * is, SENTINEL, &seed);
                check_and_free(&s, &d);
            }
}
END_TEST

/* --------------------------------------------------- negative strides */

/* A flipped innermost dim (NumPy's a[:, ::-1]: plan.c's reverse kernels):
 * rows of 1 to 70 elements (each side of the 32-byte steps and their tail)
 * and 1000, every element size, src and dst off their lines, and the row
 * flipped in dst instead (then dst is walked backwards: src reversed); then
 * short rows packed one after another (img[..., ::-1]). */
START_TEST(test_reversed_rows)
{
    unsigned seed = 14;
    static const int flip[2] = {0, 1}, both[2] = {1, 1};
    for (int64_t i = 0; i < 71; i++)
        for (size_t is = 1; is <= 16; is *= 2)
            for (int v = 0; v < 3; v++) {
                const int64_t shape[2] = {5, i < 70 ? i + 1 : 1000};
                tens s, d;
                tens_make(&s, 2, shape, NULL, NULL, v == 2 ? both : flip, NULL, is, v * is, -1, &seed);
                tens_make(&d, 2, shape, NULL, NULL, v == 1 ? flip : NULL, NULL, is, v * 3, SENTINEL, &seed);
                check_and_free(&s, &d);
            }
    /* rows of 2 to 16 bytes packed along the next dim: groups reversed
     * (BGR pixels as RGB), many per shuffle, ragged ends */
    for (size_t is = 1; is <= 8; is *= 2)
        for (int64_t P = 2; P * (int64_t)is <= 16; P++)
            for (int v = 0; v < 2; v++) {
                const int64_t shape[3] = {3, 331 + v, P};
                static const int flip3[3] = {0, 0, 1};
                tens s, d;
                tens_make(&s, 3, shape, NULL, NULL, flip3, NULL, is, v * is, -1, &seed);
                tens_make(&d, 3, shape, NULL, NULL, NULL, NULL, is, v * 5, SENTINEL, &seed);
                check_and_free(&s, &d);
            }
}
END_TEST

START_TEST(test_negative_strides)
{
    unsigned seed = 12;
    static const int64_t shape[3] = {5, 33, 40};
    static const int perm[3] = {2, 0, 1};
    for (int sf = 0; sf < 8; sf++)
        for (int df = 0; df < 8; df++) {
            int sflip[3] = {sf & 1, (sf >> 1) & 1, (sf >> 2) & 1};
            int dflip[3] = {df & 1, (df >> 1) & 1, (df >> 2) & 1};
            tens s, d;
            tens_make(&s, 3, shape, NULL, NULL, sflip, NULL, 4, 0, -1, &seed);
            tens_make(&d, 3, shape, (sf + df) % 2 ? perm : NULL, NULL, dflip, NULL, 4, 0, SENTINEL, &seed);
            check_and_free(&s, &d);
        }
}
END_TEST

/* Rotations by 90 degrees, a transpose whose src steps back along the dim
 * its tiles read (NumPy's np.rot90(a) = a[:, ::-1].T; plan.c runs it with
 * that dim backwards in both, dst's rows last first): every element size,
 * ragged edges, dst on and off its lines, past the streaming threshold;
 * the same of pixels of 3 to 8 elements (an HWC image rotated, through
 * planes), and an HWC image flipped into planes (img[:, ::-1] to CHW:
 * group_flip, then unzipped). */
static void rotation_cases(void)
{
    unsigned seed = 15;
    static const int64_t sizes[][2] = {{1, 9}, {5, 7}, {17, 33}, {64, 64}, {100, 300}, {1027, 517}};
    static const int t2[2] = {1, 0}, f2[2] = {1, 0}, f2b[2] = {1, 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t is = 1; is <= 16; is *= 2)
            for (int v = 0; v < 3; v++) {
                tens s, d;
                tens_make(&s, 2, sizes[i], t2, NULL, v == 2 ? f2b : f2, NULL, is, v * is, -1, &seed);
                tens_make(&d, 2, sizes[i], NULL, NULL, NULL, NULL, is, v == 1 ? 3 * is : 0, SENTINEL, &seed);
                check_and_free(&s, &d);
            }
    /* 4-12 MiB: streamed tiles, threads */
    static const int64_t big[][2] = {{2048, 1100}, {1031, 2049}};
    for (size_t i = 0; i < 2; i++)
        for (size_t is = 1; is <= 4; is *= 4) {
            tens s, d;
            tens_make(&s, 2, big[i], t2, NULL, f2, NULL, is, 0, -1, &seed);
            tens_make(&d, 2, big[i], NULL, NULL, NULL, NULL, is, i * 16, SENTINEL, &seed);
            check_and_free(&s, &d);
        }
    /* pixels of P elements: (W, H, P) from an (H, W, P) image with W
     * flipped, and (P, H, W) from one flipped along W */
    static const int t3[3] = {1, 0, 2}, f3[3] = {1, 0, 0}, c3[3] = {1, 2, 0}, fw[3] = {0, 0, 1};
    for (int64_t P = 2; P <= 8; P++)
        for (size_t is = 1; is <= 4; is *= 2)
            for (int v = 0; v < 2; v++) {
                const int64_t shape[3] = {37 + v * 64, 29 + v * 100, P}, planes[3] = {P, 29 + v * 100, 37 + v * 64};
                tens s, d;
                tens_make(&s, 3, shape, t3, NULL, f3, NULL, is, v * is, -1, &seed);
                tens_make(&d, 3, shape, NULL, NULL, NULL, NULL, is, v * 5 * is, SENTINEL, &seed);
                check_and_free(&s, &d);
                tens_make(&s, 3, planes, c3, NULL, fw, NULL, is, v * is, -1, &seed);
                tens_make(&d, 3, planes, NULL, NULL, NULL, NULL, is, v * 3 * is, SENTINEL, &seed);
                check_and_free(&s, &d);
            }
    /* every dim order and every set of flipped dims of a 4-D src whose
     * last dim is short: pixels, planes and flips mixed (the fuzzer found
     * elements flipped into packed groups of dst gone wrong) */
    for (size_t is = 1; is <= 4; is *= 2)
        for (int64_t P = 2; P <= 4; P++) {
            const int64_t shape4[4] = {5, 6, 37, P};
            int perm[4] = {0, 1, 2, 3};
            do
                for (int f = 0; f < 16; f++) {
                    const int flip4[4] = {f & 1, (f >> 1) & 1, (f >> 2) & 1, (f >> 3) & 1};
                    tens s, d;
                    tens_make(&s, 4, shape4, perm, NULL, flip4, NULL, is, 0, -1, &seed);
                    tens_make(&d, 4, shape4, NULL, NULL, NULL, NULL, is, is, SENTINEL, &seed);
                    check_and_free(&s, &d);
                }
            while (next_perm(perm, 4));
        }
    const int64_t image[3] = {1080, 1920, 3}, planes[3] = {3, 1080, 1920};
    tens s, d;
    tens_make(&s, 3, image, t3, NULL, f3, NULL, 1, 0, -1, &seed);
    tens_make(&d, 3, image, NULL, NULL, NULL, NULL, 1, 0, SENTINEL, &seed);
    check_and_free(&s, &d);
    tens_make(&s, 3, planes, c3, NULL, fw, NULL, 1, 0, -1, &seed);
    tens_make(&d, 3, planes, NULL, NULL, NULL, NULL, 1, 0, SENTINEL, &seed);
    check_and_free(&s, &d);
}

START_TEST(test_rotations) { check_both_thread_counts(rotation_cases); }
END_TEST

/* ------------------------------------------------------------- blocks */

/* A batch of blocks: dims 1.. of `shape` (ndim dims) dense in src in the
 * order `order` (order[0] = 0, the batch, outermost), flipped where bit d
 * of `flips` is set, into a dense dst mis bytes into its buffer (plan.c's
 * pl_copy_blocks, block_perm_x86.c: a batch of small matrices
 * transposed).  src's buffer starts on the first byte after an
 * inaccessible page (low) or ends on the last byte before one, so that a
 * load past either end of it faults, masked or not. */
static void blocks_case(int ndim, const int64_t *shape, const int *order, unsigned flips, size_t is, size_t mis,
                        bool low, unsigned *seed)
{
    int64_t sstrides[4], lo, hi;
    int flip[4] = {0};
    for (int d = 0; d < ndim; d++)
        flip[d] = (int)(flips >> d & 1);
    layout_strides(ndim, shape, order, NULL, flip, NULL, sstrides, &lo, &hi);
    const size_t span = (size_t)(hi - lo + 1) * is;
    guarded g;
    unsigned char *buf = low ? guarded_alloc_after(span, &g) : guarded_alloc(span, &g);
    test_fill(buf, span, seed);
    const DLTensor src = dl_make(buf, ndim, shape, sstrides, dtype_of_size(is), (uint64_t)(-lo) * is);
    tens d;
    tens_make(&d, ndim, shape, NULL, NULL, NULL, NULL, is, mis, SENTINEL, seed);
    check_against_ref(&src, &d);
    tens_free(&d);
    guarded_free(&g);
}

static void blocks_cases(void)
{
    unsigned seed = 4421;
    /* (N, m, n) from (N, n, m): batches of m x n matrices transposed, every
     * element size, blocks of 2 to 1024 bytes (past the shuffles' 256, where
     * 8- and 16-byte elements move one by one, and 4-byte ones past 80 on
     * AVX2) and past 1024, batches around
     * the superblocks, the inner dims flipped too */
    static const int64_t sides[] = {1, 2, 3, 4, 5, 7, 8, 9, 16};
    static const int64_t batches[] = {1, 2, 3, 5, 7, 21, 64, 65, 86};
    static const int swap[3] = {0, 2, 1};
    for (size_t is = 1; is <= 16; is *= 2)
        for (size_t mi = 0; mi < sizeof sides / sizeof *sides; mi++)
            for (size_t ni = 0; ni < sizeof sides / sizeof *sides; ni++) {
                const int64_t m = sides[mi], n = sides[ni];
                if ((int64_t)is * m * n > 1100 || m * n < 2)
                    continue;
                for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
                    const int64_t shape[3] = {batches[bi], m, n};
                    const size_t mis = bi % 3 == 0 ? 0 : bi % 3 == 1 ? 1 : is + 3;
                    blocks_case(3, shape, swap, 0, is, mis, bi % 2, &seed);
                    blocks_case(3, shape, swap, bi % 4 == 0 ? 2 : bi % 4 == 1 ? 4 : 6, is, mis, bi % 2 == 0, &seed);
                    blocks_case(3, shape, NULL, 4, is, mis, bi % 2, &seed); /* rows flipped: x[:, :, ::-1] */
                }
            }
    /* 3-D blocks in every dim order, every set of flipped dims */
    for (size_t is = 1; is <= 8; is *= 8)
        for (int v = 0; v < 2; v++) {
            const int64_t shape[4] = {v ? 67 : 5, 2, 3, v ? 5 : 4};
            int perm[3] = {1, 2, 3};
            do {
                const int order[4] = {0, perm[0], perm[1], perm[2]};
                for (unsigned f = 0; f < 16; f += 2)
                    blocks_case(4, shape, order, f, is, v * 5, f % 4 == 0, &seed);
            } while (next_perm(perm, 3));
        }
    /* 4-5 MiB of dst: the threads split the batch; dst on a line and off
     * it.  Past the L3 (as plan.c reads its size): streamed through a
     * buffer, in pieces of whole lines (7 x 7 float32: 16 blocks) */
    static const int64_t big[][3] = {{500000, 3, 3}, {300000, 4, 4}, {120000, 3, 3}, {24000, 7, 7}, {36000, 4, 4}};
    static const size_t big_is[] = {1, 2, 4, 4, 8};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        for (size_t mis = 0; mis < 2; mis++)
            blocks_case(3, big[i], swap, mis ? 2 : 0, big_is[i], mis * 20, mis, &seed);
    /* groups packed in both transposed across a short dim: rows of groups
     * where each is a move of 4 bytes or more, or a group gather (plan.c's
     * pl_short_side_rows), planes otherwise: 7 x 7 feature maps to
     * (N, H, C, W), (N, 64, 3, 3) by (0, 2, 1, 3) and its inverse */
    static const int64_t maps[][4] = {{3, 7, 40, 7}, {5, 3, 64, 3}, {2, 15, 100, 6}, {5, 64, 3, 3}, {9, 4, 8, 3}};
    static const int chw[4] = {0, 2, 1, 3};
    for (size_t is = 1; is <= 8; is *= 2)
        for (size_t i = 0; i < sizeof maps / sizeof *maps; i++) {
            tens s, d;
            tens_make(&s, 4, maps[i], chw, NULL, NULL, NULL, is, is, -1, &seed);
            tens_make(&d, 4, maps[i], NULL, NULL, NULL, NULL, is, 3 * is, SENTINEL, &seed);
            check_and_free(&s, &d);
        }
    static const int64_t pairs[3] = {2, 3000, 3}, big_maps[4] = {64, 7, 512, 7};
    static const int swap01[3] = {1, 0, 2};
    for (size_t is = 1; is <= 4; is *= 2) {
        tens s, d;
        tens_make(&s, 3, pairs, swap01, NULL, NULL, NULL, is, 0, -1, &seed);
        tens_make(&d, 3, pairs, NULL, NULL, NULL, NULL, is, is, SENTINEL, &seed);
        check_and_free(&s, &d);
        tens_make(&s, 4, big_maps, chw, NULL, NULL, NULL, is, 0, -1, &seed); /* 1.6-6.4 MiB: threads */
        tens_make(&d, 4, big_maps, NULL, NULL, NULL, NULL, is, 16, SENTINEL, &seed);
        check_and_free(&s, &d);
    }
    const int64_t l3 = _pylayout_l3_bytes();
    const int64_t past = (l3 > 0 && l3 <= ((int64_t)256 << 20) ? l3 : (int64_t)4 << 20) + ((int64_t)1 << 20);
    const int64_t past3[3] = {past / 36 + 1, 3, 3}, past7[3] = {past / 196 + 1, 7, 7};
    blocks_case(3, past3, swap, 0, 4, 20, false, &seed);
    blocks_case(3, past7, swap, 2, 4, 0, true, &seed);
}

START_TEST(test_blocks) { check_both_thread_counts(blocks_cases); }
END_TEST

/* ---------------------------------------------------- fused transposes */

/* Transposes whose tiles would take short rows a page or more apart, or src
 * rows of 16 bytes or less: each short side read or written together with
 * the dims that continue it in its tensor (plan.c's pl_fused), through L1
 * buffers.  np.asfortranarray of small-dimmed tensors, (N, C, 7, 7) feature
 * maps reversed.  Every order of each 4-D shape, every element size; the
 * reversals with every set of flipped dims (src rows gathered at negative
 * steps); src guarded on either side, dst off its lines. */
static void fused_cases(void)
{
    unsigned seed = 5150;
    static const int64_t shapes[][4] = {{8, 16, 64, 8}, {64, 8, 8, 4}, {16, 40, 7, 7}, {6, 33, 12, 20}, {12, 5, 70, 3}, {64, 8, 2, 2}};
    for (size_t is = 1; is <= 16; is *= 2)
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
            int perm[4] = {0, 1, 2, 3}, k = 0;
            do {
                const size_t mis = k % 3 == 0 ? 0 : k % 3 == 1 ? 1 : is + 3;
                blocks_case(4, shapes[i], perm, 0, is, mis, k % 2, &seed);
                k++;
            } while (next_perm(perm, 4));
        }
    static const int rev[4] = {3, 2, 1, 0};
    for (size_t is = 1; is <= 4; is *= 2)
        for (unsigned f = 1; f < 16; f++)
            blocks_case(4, shapes[f % 3], rev, f, is, f % 5, f % 2, &seed);
    /* two levels below a's tiled dim: dst rows of 2 elements 4 KiB apart */
    static const int64_t deep[4] = {40, 1024, 2, 2};
    for (size_t is = 1; is <= 16; is *= 2)
        blocks_case(4, deep, rev, is == 2 ? 1 : 0, is, is == 4 ? 5 : 0, is % 2, &seed);
    /* 3-D and 5-D reversals */
    static const int64_t s3[][3] = {{64, 64, 16}, {300, 20, 2}, {33, 130, 5}};
    static const int rev3[3] = {2, 1, 0};
    for (size_t is = 1; is <= 8; is *= 2)
        for (size_t i = 0; i < sizeof s3 / sizeof *s3; i++)
            blocks_case(3, s3[i], rev3, 0, is, is, i % 2, &seed);
    static const int64_t s5[5] = {4, 6, 5, 7, 3}, s5b[5] = {16, 3, 9, 2, 11};
    static const int rev5[5] = {4, 3, 2, 1, 0};
    for (size_t is = 1; is <= 16; is *= 2) {
        tens s, d;
        tens_make(&s, 5, is % 2 ? s5 : s5b, rev5, NULL, NULL, NULL, is, 0, -1, &seed);
        tens_make(&d, 5, is % 2 ? s5 : s5b, NULL, NULL, NULL, NULL, is, 7, SENTINEL, &seed);
        check_and_free(&s, &d);
    }
    /* 5-D permutes by (2,3,1,4,0), dst rows of 10 elements close together
     * (the goal table's 5-D permute, small): src runs of 16 bytes or less
     * fuse, longer ones keep the tiles (plan.c, pl_fused's short_b) */
    static const int64_t p5[][5] = {{16, 8, 12, 12, 10}, {16, 8, 12, 8, 10}}; /* dst's shape */
    static const int p5_src[5] = {4, 2, 0, 1, 3};                           /* src dense as (10, 12, 16, 8, n) */
    for (size_t is = 1; is <= 16; is *= 2)
        for (size_t i = 0; i < 2; i++) {
            tens s, d;
            tens_make(&s, 5, p5[i], p5_src, NULL, NULL, NULL, is, i * is, -1, &seed);
            tens_make(&d, 5, p5[i], NULL, NULL, NULL, NULL, is, 3 * i, SENTINEL, &seed);
            check_and_free(&s, &d);
        }
    /* 4-8 MiB: the threads split the units */
    static const int64_t big[][4] = {{256, 16, 256, 8}, {8192, 8, 8, 4}, {64, 512, 16, 7}};
    static const size_t big_is[] = {1, 4, 2};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        blocks_case(4, big[i], rev, 0, big_is[i], i * 16, i % 2, &seed);
}

START_TEST(test_fused) { check_both_thread_counts(fused_cases); }
END_TEST

/* -------------------------------------------------------- byte_offset */

START_TEST(test_byte_offset)
{
    unsigned seed = 13;
    static const int64_t shape[2] = {40, 24};
    static const int rev[2] = {1, 0};
    for (size_t mis = 0; mis < 8; mis++) {
        tens s, d;
        tens_make(&s, 2, shape, NULL, NULL, NULL, NULL, 4, mis, -1, &seed);
        tens_make(&d, 2, shape, rev, NULL, NULL, NULL, 4, 7 - mis, SENTINEL, &seed);
        ck_assert_uint_ge(s.t.byte_offset, mis);
        check_and_free(&s, &d);
    }
}
END_TEST

/* ----------------------------------------------------- size 0, size 1 */

START_TEST(test_size0_size1)
{
    unsigned seed = 14;
    static const int64_t shapes[][4] = {{3, 0, 4, 2}, {0, 0, 0, 0}, {1, 1, 5, 1}, {1, 1, 1, 1}, {1, 7, 1, 9}};
    static const int perm[4] = {3, 2, 1, 0};
    for (size_t i = 0; i < 5; i++) {
        tens s, d;
        tens_make(&s, 4, shapes[i], NULL, NULL, NULL, NULL, 8, 0, -1, &seed);
        tens_make(&d, 4, shapes[i], perm, NULL, NULL, NULL, 8, 0, SENTINEL, &seed);
        check_and_free(&s, &d);
    }
    /* empty tensors may have NULL data */
    int64_t shape[2] = {0, 3};
    DLTensor e = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
    DLTensor f = e;
    ck_assert_int_eq(pylayout_copy(&e, &f), PYLAYOUT_OK);
    /* 0-d tensors copy one element */
    float a = 1.5f, b = 0.0f;
    DLTensor sa = {&a, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, NULL, NULL, 0};
    DLTensor sb = {&b, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, NULL, NULL, 0};
    ck_assert_int_eq(pylayout_copy(&sa, &sb), PYLAYOUT_OK);
    ck_assert(b == 1.5f);
}
END_TEST

/* ------------------------------------------------------------- errors */

/* Expects `st` to be an error with a message, and dst untouched. */
static void expect_error(pylayout_status st, pylayout_status want, const tens *d)
{
    ck_assert_msg(st == want, "got %s, want %s", pylayout_strerror(st), pylayout_strerror(want));
    ck_assert_msg(pylayout_last_error()[0] != '\0', "no error message for %s", pylayout_strerror(st));
    if (d != NULL)
        for (size_t i = 0; i < d->bufsize; i++)
            ck_assert_msg(d->buf[i] == SENTINEL, "dst byte %zu written on error", i);
}

START_TEST(test_error_shape_mismatch)
{
    unsigned seed = 21;
    int64_t s1[3] = {4, 5, 6}, s2[3] = {4, 6, 5};
    tens s, d;
    tens_make(&s, 3, s1, NULL, NULL, NULL, NULL, 4, 0, -1, &seed);
    tens_make(&d, 3, s2, NULL, NULL, NULL, NULL, 4, 0, SENTINEL, &seed);
    expect_error(pylayout_copy(&s.t, &d.t), PYLAYOUT_ERR_SHAPE_MISMATCH, &d);
    d.t.ndim = 2;
    expect_error(pylayout_copy(&s.t, &d.t), PYLAYOUT_ERR_SHAPE_MISMATCH, &d);
    tens_free(&s);
    tens_free(&d);
}
END_TEST

START_TEST(test_error_itemsize_mismatch)
{
    unsigned seed = 22;
    int64_t shape[2] = {4, 5};
    tens s, d;
    tens_make(&s, 2, shape, NULL, NULL, NULL, NULL, 4, 0, -1, &seed);
    tens_make(&d, 2, shape, NULL, NULL, NULL, NULL, 8, 0, SENTINEL, &seed);
    expect_error(pylayout_copy(&s.t, &d.t), PYLAYOUT_ERR_DTYPE_MISMATCH, &d); /* other size: other dtype */
    /* same size, other dtype: refused, never a silent bit reinterpretation */
    tens_free(&d);
    tens_make(&d, 2, shape, NULL, NULL, NULL, NULL, 4, 0, SENTINEL, &seed);
    d.t.dtype.code = kDLInt;
    expect_error(pylayout_copy(&s.t, &d.t), PYLAYOUT_ERR_DTYPE_MISMATCH, &d);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "float32"));
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "int32"));
    tens_free(&s);
    tens_free(&d);
}
END_TEST

START_TEST(test_error_dst_overlaps_itself)
{
    unsigned seed = 23;
    int64_t shape[2] = {4, 5};
    int zero[2] = {1, 0};
    tens s, d;
    tens_make(&s, 2, shape, NULL, NULL, NULL, NULL, 4, 0, -1, &seed);
    tens_make(&d, 2, shape, NULL, NULL, NULL, zero, 4, 0, SENTINEL, &seed);
    expect_error(pylayout_copy(&s.t, &d.t), PYLAYOUT_ERR_OVERLAP, &d);
    d.strides[0] = 2; /* rows overlap: stride 2 < row length 5 */
    d.strides[1] = 1;
    expect_error(pylayout_copy(&s.t, &d.t), PYLAYOUT_ERR_OVERLAP, &d);
    tens_free(&s);
    tens_free(&d);
}
END_TEST

START_TEST(test_error_dst_aliases_src)
{
    unsigned seed = 24;
    int64_t shape[2] = {8, 8};
    tens d;
    tens_make(&d, 2, shape, NULL, NULL, NULL, NULL, 4, 0, SENTINEL, &seed);
    DLTensor s = d.t;
    expect_error(pylayout_copy(&s, &d.t), PYLAYOUT_ERR_OVERLAP, &d);
    int64_t sstrides[2] = {1, 8}; /* in-place transpose */
    s.strides = sstrides;
    expect_error(pylayout_copy(&s, &d.t), PYLAYOUT_ERR_OVERLAP, &d);
    int64_t half[2] = {4, 8}; /* overlapping halves */
    s.shape = half;
    s.strides = NULL;
    DLTensor dd = d.t;
    dd.shape = half;
    dd.strides = NULL;
    dd.byte_offset = 4 * 4 * 8 - 4;
    expect_error(pylayout_copy(&s, &dd), PYLAYOUT_ERR_OVERLAP, &d);
    dd.byte_offset = 4 * 4 * 8; /* adjacent, disjoint: fine */
    ck_assert_int_eq(pylayout_copy(&s, &dd), PYLAYOUT_OK);
    tens_free(&d);
}
END_TEST

/* Two views of one buffer: pylayout_copy must refuse every pair that
 * shares a byte (found byte by byte here) with OVERLAP, writing nothing;
 * it copies pairs whose bytes are apart, which must then hold what a copy
 * through a temporary gives, every other byte of the buffer untouched.
 * Interleaved views, whose spans overlap but whose elements do not, must
 * copy, as torch and NumPy copy them: x[:, 0] into x[:, 1], even rows
 * into odd ones, one channel into another, real parts into imaginary
 * ones.  It may refuse other pairs that are apart (its test is
 * conservative); the random ones count how many it copies. */
enum { VIEWS_BUF = 1536 };

static int64_t views_offset(int ndim, const int64_t *shape, const int64_t *st, int64_t i)
{
    int64_t o = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        o += i % shape[d] * st[d];
        i /= shape[d];
    }
    return o;
}

/* Returns whether pylayout_copy copied (true) or refused (false). */
static bool views_case(int ndim, const int64_t *shape, size_t is, const int64_t *ss, int64_t soff,
                       const int64_t *ds, int64_t doff, unsigned *seed)
{
    unsigned char buf[VIEWS_BUF], before[VIEWS_BUF], want[VIEWS_BUF];
    static unsigned char src_byte[VIEWS_BUF], dst_count[VIEWS_BUF];
    test_fill(buf, VIEWS_BUF, seed);
    memcpy(before, buf, VIEWS_BUF);
    memcpy(want, buf, VIEWS_BUF);
    memset(src_byte, 0, sizeof src_byte);
    memset(dst_count, 0, sizeof dst_count);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    bool share = false, dst_twice = false;
    for (int64_t i = 0; i < n; i++) {
        const int64_t so = soff + views_offset(ndim, shape, ss, i) * (int64_t)is;
        for (size_t b = 0; b < is; b++)
            src_byte[so + (int64_t)b] = 1;
    }
    for (int64_t i = 0; i < n; i++) {
        const int64_t so = soff + views_offset(ndim, shape, ss, i) * (int64_t)is;
        const int64_t o = doff + views_offset(ndim, shape, ds, i) * (int64_t)is;
        for (size_t b = 0; b < is; b++) {
            share |= src_byte[o + (int64_t)b] != 0;
            dst_twice |= dst_count[o + (int64_t)b]++ != 0;
            want[o + (int64_t)b] = before[so + (int64_t)b];
        }
    }
    DLDataType dt = dtype_of_size(is);
    DLTensor src = dl_make(buf, ndim, shape, ss, dt, (uint64_t)soff);
    DLTensor dst = dl_make(buf, ndim, shape, ds, dt, (uint64_t)doff);
    const pylayout_status st = pylayout_copy(&src, &dst);
    if (share || dst_twice) {
        ck_assert_msg(st == PYLAYOUT_ERR_OVERLAP, "views that share bytes: got %s", pylayout_strerror(st));
        ck_assert_msg(memcmp(buf, before, VIEWS_BUF) == 0, "refused views wrote");
        return false;
    }
    if (st == PYLAYOUT_ERR_OVERLAP) {
        ck_assert_msg(memcmp(buf, before, VIEWS_BUF) == 0, "refused views wrote");
        return false;
    }
    ck_assert_msg(st == PYLAYOUT_OK, "views apart: got %s", pylayout_strerror(st));
    ck_assert_msg(memcmp(buf, want, VIEWS_BUF) == 0, "views apart copied wrong");
    return true;
}

START_TEST(test_views_of_one_buffer)
{
    unsigned seed = 31;
    for (size_t is = 1; is <= 16; is *= 2) {
        const int64_t e = (int64_t)is;
        /* x[:, 0] into x[:, 1] of (n, C) and back, C = 2-4; a channel into
         * another; even rows into odd ones; real parts into imaginary */
        for (int64_t C = 2; C <= 4; C++) {
            const int64_t shape[1] = {20}, st[1] = {C};
            ck_assert(views_case(1, shape, is, st, 0, st, e, &seed));
            ck_assert(views_case(1, shape, is, st, (C - 1) * e, st, 0, &seed));
            const int64_t shape2[2] = {5, 4}, st2[2] = {4 * C, C}; /* a channel of an image */
            ck_assert(views_case(2, shape2, is, st2, 0, st2, (C - 1) * e, &seed));
        }
        const int64_t rows[2] = {4, 6}, even[2] = {12, 1};
        ck_assert(views_case(2, rows, is, even, 0, even, 6 * e, &seed));
        const int64_t flipped[2] = {12, -1}; /* odd rows flipped from even ones */
        ck_assert(views_case(2, rows, is, even, 0, flipped, 11 * e, &seed));
        /* true overlaps: refused */
        const int64_t three[2] = {6, 2}, st3[2] = {3, 1};
        ck_assert(!views_case(2, three, is, st3, 0, st3, e, &seed));
        const int64_t one[1] = {30}, unit[1] = {1};
        ck_assert(!views_case(1, one, is, unit, 0, unit, 7 * e, &seed));
    }
    /* random pairs: shapes of 1-3 dims of 1-6, strides -4..4 (src 0 too),
     * both at random offsets; half the pairs with the same strides, near */
    int copied = 0, apart = 0;
    for (int c = 0; c < 20000; c++) {
        const size_t is = (size_t)1 << test_rand(&seed, 5);
        const int ndim = 1 + (int)test_rand(&seed, 3);
        int64_t shape[3], ss[3], ds[3], slo = 0, shi = 0, dlo = 0, dhi = 0;
        const bool same = test_rand(&seed, 2) == 0;
        for (int d = 0; d < ndim; d++) {
            shape[d] = 1 + test_rand(&seed, 6);
            ss[d] = (int64_t)test_rand(&seed, 9) - 4;
            ds[d] = same ? ss[d] : (int64_t)test_rand(&seed, 9) - 4;
            if (ds[d] == 0)
                ds[d] = 1 + test_rand(&seed, 4);
            const int64_t sr = (shape[d] - 1) * ss[d], dr = (shape[d] - 1) * ds[d];
            *(sr < 0 ? &slo : &shi) += sr;
            *(dr < 0 ? &dlo : &dhi) += dr;
        }
        const int64_t e = (int64_t)is, room = VIEWS_BUF / e - (shi - slo) - 1, droom = VIEWS_BUF / e - (dhi - dlo) - 1;
        if (room <= 0 || droom <= 0)
            continue;
        const int64_t soff = (-slo + (int64_t)test_rand(&seed, (unsigned)(room < 64 ? room : 64))) * e;
        int64_t doff = same ? soff + (int64_t)test_rand(&seed, 4 * (unsigned)e) - 2 * e
                            : (-dlo + (int64_t)test_rand(&seed, (unsigned)(droom < 64 ? droom : 64))) * e;
        if (doff + dlo * e < 0 || doff + (dhi + 1) * e > VIEWS_BUF)
            continue;
        copied += views_case(ndim, shape, is, ss, soff, ds, doff, &seed);
        apart++;
    }
    ck_assert_msg(copied > 2000, "only %d of %d random pairs copied", copied, apart);
}
END_TEST

START_TEST(test_error_device)
{
    unsigned seed = 25;
    int64_t shape[2] = {4, 5};
    tens s, d;
    tens_make(&s, 2, shape, NULL, NULL, NULL, NULL, 4, 0, -1, &seed);
    tens_make(&d, 2, shape, NULL, NULL, NULL, NULL, 4, 0, SENTINEL, &seed);
    s.t.device.device_type = kDLCUDA;
    expect_error(pylayout_copy(&s.t, &d.t), PYLAYOUT_ERR_UNSUPPORTED_DEVICE, &d);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "cuda"));
    s.t.device.device_type = kDLCPU;
    d.t.device.device_type = kDLROCM;
    expect_error(pylayout_copy(&s.t, &d.t), PYLAYOUT_ERR_UNSUPPORTED_DEVICE, &d);
    pylayout_tensor *out = NULL;
    s.t.device.device_type = kDLCUDA;
    expect_error(pylayout_convert(&s.t, PYLAYOUT_FORMAT_CONTIGUOUS, &out), PYLAYOUT_ERR_UNSUPPORTED_DEVICE, NULL);
    ck_assert_ptr_null(out);
    tens_free(&s);
    tens_free(&d);
}
END_TEST

START_TEST(test_error_null_args)
{
    unsigned seed = 26;
    int64_t shape[2] = {4, 5};
    tens s, d;
    tens_make(&s, 2, shape, NULL, NULL, NULL, NULL, 4, 0, -1, &seed);
    tens_make(&d, 2, shape, NULL, NULL, NULL, NULL, 4, 0, SENTINEL, &seed);
    expect_error(pylayout_copy(NULL, &d.t), PYLAYOUT_ERR_INVALID_ARGUMENT, &d);
    expect_error(pylayout_copy(&s.t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT, &d);
    pylayout_tensor *out = NULL;
    int32_t order[2] = {1, 0};
    expect_error(pylayout_convert(NULL, PYLAYOUT_FORMAT_CONTIGUOUS, &out), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    expect_error(pylayout_convert(&s.t, PYLAYOUT_FORMAT_CONTIGUOUS, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    expect_error(pylayout_convert_order(NULL, order, &out), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    expect_error(pylayout_convert_order(&s.t, NULL, &out), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    expect_error(pylayout_convert_order(&s.t, order, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    ck_assert_ptr_null(out);
    /* a malformed tensor is rejected before anything is written */
    d.shape[1] = -1;
    expect_error(pylayout_copy(&s.t, &d.t), PYLAYOUT_ERR_INVALID_TENSOR, &d);
    d.shape[1] = 5;
    DLTensor bad = s.t;
    bad.data = NULL;
    expect_error(pylayout_copy(&bad, &d.t), PYLAYOUT_ERR_INVALID_TENSOR, &d);
    tens_free(&s);
    tens_free(&d);
}
END_TEST

/* ------------------------------------------------------------ convert */

static void check_converted(const DLTensor *src, pylayout_tensor *out, const int64_t *want_strides)
{
    const DLTensor *o = NULL;
    ck_assert_int_eq(pylayout_tensor_dltensor(out, &o), PYLAYOUT_OK);
    ck_assert_int_eq(o->ndim, src->ndim);
    for (int d = 0; d < o->ndim; d++) {
        ck_assert_int_eq(o->shape[d], src->shape[d]);
        ck_assert_int_eq(o->strides[d], want_strides[d]);
    }
    ck_assert_int_eq(o->dtype.code, src->dtype.code);
    ck_assert_int_eq(o->dtype.bits, src->dtype.bits);
    ck_assert(same_elements(src, o));
}

START_TEST(test_convert_formats)
{
    unsigned seed = 31;
    static const int64_t shape4[4] = {2, 5, 6, 7};
    static const int64_t shape5[5] = {2, 3, 4, 5, 6};
    static const int64_t shape3[3] = {3, 4, 5};
    static const int perm4[4] = {3, 1, 0, 2};
    tens s4, s5, s3;
    tens_make(&s4, 4, shape4, perm4, NULL, NULL, NULL, 4, 0, -1, &seed);
    tens_make(&s5, 5, shape5, NULL, NULL, NULL, NULL, 2, 0, -1, &seed);
    tens_make(&s3, 3, shape3, NULL, NULL, NULL, NULL, 8, 0, -1, &seed);
    static const pylayout_format fmts4[] = {PYLAYOUT_FORMAT_CONTIGUOUS, PYLAYOUT_FORMAT_CHANNELS_LAST,
                                            PYLAYOUT_FORMAT_FORTRAN};
    for (size_t i = 0; i < 3; i++) {
        pylayout_tensor *out = NULL;
        int64_t want[8];
        ck_assert_int_eq(pylayout_format_strides(4, shape4, fmts4[i], want), PYLAYOUT_OK);
        ck_assert_int_eq(pylayout_convert(&s4.t, fmts4[i], &out), PYLAYOUT_OK);
        check_converted(&s4.t, out, want);
        pylayout_tensor_release(out);
    }
    pylayout_tensor *out = NULL;
    int64_t want[8];
    ck_assert_int_eq(pylayout_format_strides(5, shape5, PYLAYOUT_FORMAT_CHANNELS_LAST_3D, want), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_convert(&s5.t, PYLAYOUT_FORMAT_CHANNELS_LAST_3D, &out), PYLAYOUT_OK);
    check_converted(&s5.t, out, want);
    pylayout_tensor_release(out);

    out = NULL;
    expect_error(pylayout_convert(&s3.t, PYLAYOUT_FORMAT_CHANNELS_LAST, &out), PYLAYOUT_ERR_FORMAT_RANK, NULL);
    ck_assert_ptr_null(out);
    expect_error(pylayout_convert(&s3.t, (pylayout_format)99, &out), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    ck_assert_ptr_null(out);
    tens_free(&s4);
    tens_free(&s5);
    tens_free(&s3);
}
END_TEST

START_TEST(test_convert_order)
{
    unsigned seed = 32;
    static const int64_t shape[4] = {3, 8, 9, 10};
    static const int32_t orders[][4] = {{0, 2, 3, 1}, {3, 2, 1, 0}, {1, 0, 3, 2}, {0, 1, 2, 3}};
    int sflip[4] = {0, 1, 0, 1};
    tens s;
    tens_make(&s, 4, shape, NULL, NULL, sflip, NULL, 1, 3, -1, &seed);
    for (size_t i = 0; i < 4; i++) {
        pylayout_tensor *out = NULL;
        int64_t want[8];
        ck_assert_int_eq(pylayout_order_strides(4, shape, orders[i], want), PYLAYOUT_OK);
        ck_assert_int_eq(pylayout_convert_order(&s.t, orders[i], &out), PYLAYOUT_OK);
        check_converted(&s.t, out, want);
        pylayout_tensor_release(out);
    }
    pylayout_tensor *out = NULL;
    static const int32_t bad[4] = {0, 0, 1, 2};
    expect_error(pylayout_convert_order(&s.t, bad, &out), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    ck_assert_ptr_null(out);
    tens_free(&s);
}
END_TEST

/* ------------------------------------------------------- threads/info */

START_TEST(test_threads)
{
    int n = 0, saved = 0;
    ck_assert_int_eq(pylayout_get_num_threads(&saved), PYLAYOUT_OK);
    ck_assert_int_ge(saved, 1);
    ck_assert_int_eq(pylayout_set_num_threads(3), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_get_num_threads(&n), PYLAYOUT_OK);
    bool openmp = false;
    const char *simd = NULL;
    ck_assert_int_eq(pylayout_build_info(&openmp, &simd), PYLAYOUT_OK);
    ck_assert_int_eq(n, openmp ? 3 : 1);
    expect_error(pylayout_set_num_threads(0), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    expect_error(pylayout_set_num_threads(-4), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    ck_assert_int_eq(pylayout_get_num_threads(&n), PYLAYOUT_OK);
    ck_assert_int_eq(n, openmp ? 3 : 1);
    ck_assert_str_eq(pylayout_last_error(), "");
    expect_error(pylayout_get_num_threads(NULL), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);

    /* The quiet setter: same setting, nothing printed, the limit reported. */
    bool clamped = true;
    int limit = 0;
    ck_assert_int_eq(pylayout_set_num_threads_quiet(1, &clamped, &limit), PYLAYOUT_OK);
    ck_assert(!clamped);
    ck_assert_int_ge(limit, 1);
    ck_assert_int_eq(pylayout_get_num_threads(&n), PYLAYOUT_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(pylayout_set_num_threads_quiet(1, NULL, NULL), PYLAYOUT_OK);
    expect_error(pylayout_set_num_threads_quiet(0, &clamped, &limit), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);

    /* The last copy's threads: 1 at a setting of 1 */
    int64_t shape[2] = {64, 64};
    unsigned seed = 3;
    tens s, d;
    tens_make(&s, 2, shape, NULL, NULL, NULL, NULL, 4, 0, -1, &seed);
    tens_make(&d, 2, shape, NULL, NULL, NULL, NULL, 4, 0, 0, &seed);
    ck_assert_int_eq(pylayout_copy(&s.t, &d.t), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_last_copy_threads(&n), PYLAYOUT_OK);
    ck_assert_int_eq(n, 1);
    expect_error(pylayout_last_copy_threads(NULL), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    tens_free(&s);
    tens_free(&d);
    ck_assert_int_eq(pylayout_set_num_threads(saved), PYLAYOUT_OK);
}
END_TEST

START_TEST(test_build_info)
{
    bool openmp = false;
    const char *simd = NULL;
    ck_assert_int_eq(pylayout_build_info(&openmp, &simd), PYLAYOUT_OK);
    ck_assert_ptr_nonnull(simd);
    ck_assert(strcmp(simd, "avx512") == 0 || strcmp(simd, "avx2") == 0 || strcmp(simd, "sse2") == 0 ||
              strcmp(simd, "scalar") == 0);
    const char *cap = getenv("PYLAYOUT_SIMD"); /* a cap is honoured */
    if (cap != NULL && (strcmp(cap, "scalar") == 0 || strcmp(cap, "sse2") == 0))
        ck_assert_str_eq(simd, cap);
    if (cap != NULL && strcmp(cap, "avx2") == 0)
        ck_assert(strcmp(simd, "avx512") != 0);
#ifdef _OPENMP
    ck_assert(openmp);
#endif
    expect_error(pylayout_build_info(NULL, &simd), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
    expect_error(pylayout_build_info(&openmp, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT, NULL);
}
END_TEST

/* A made-up cache folder: index<i>/level and index<i>/size files. */
static void write_cache_file(const char *root, int index, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/index%d", root, index);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/index%d/%s", root, index, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void remove_cache_tree(const char *root, int nindex)
{
    char path[256];
    for (int i = 0; i < nindex; i++) {
        snprintf(path, sizeof path, "%s/index%d/level", root, i);
        unlink(path);
        snprintf(path, sizeof path, "%s/index%d/size", root, i);
        unlink(path);
        snprintf(path, sizeof path, "%s/index%d", root, i);
        rmdir(path);
    }
    rmdir(root);
}

/* The L3 size behind plan.c's streaming threshold for 4- and 8-byte
 * transposes: found among the levels, its K / M suffix applied, 0 (the
 * plain threshold) for a missing tree, no level 3, garbage or a size that
 * would overflow; _pylayout_l3_bytes reads this machine's once. */
START_TEST(test_l3_size_from_sysfs)
{
    char root[] = "/tmp/pylayout-cache-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    const char *levels[] = {"1\n", "1\n", "2\n", "3\n"}, *sizes[] = {"48K\n", "32K\n", "1024K\n", "32768K\n"};
    for (int i = 0; i < 4; i++) {
        write_cache_file(root, i, "level", levels[i]);
        write_cache_file(root, i, "size", sizes[i]);
    }
    ck_assert_int_eq(pl_l3_detect(root), (int64_t)32 << 20);
    write_cache_file(root, 3, "size", "2M\n");
    ck_assert_int_eq(pl_l3_detect(root), (int64_t)2 << 20);
    write_cache_file(root, 3, "size", "4096\n");
    ck_assert_int_eq(pl_l3_detect(root), 4096);
    write_cache_file(root, 3, "size", "99999999999999999999K\n");
    ck_assert_int_eq(pl_l3_detect(root), 0);
    write_cache_file(root, 3, "size", "large\n");
    ck_assert_int_eq(pl_l3_detect(root), 0);
    write_cache_file(root, 3, "level", "2\n"); /* no level 3 */
    ck_assert_int_eq(pl_l3_detect(root), 0);
    write_cache_file(root, 3, "level", "x\n");
    ck_assert_int_eq(pl_l3_detect(root), 0);
    remove_cache_tree(root, 4);
    ck_assert_int_eq(pl_l3_detect(root), 0); /* no tree at all */

    const int64_t here = _pylayout_l3_bytes();
    ck_assert_int_ge(here, 0);
    ck_assert_int_eq(_pylayout_l3_bytes(), here);
    ck_assert_int_eq(pl_l3_detect("/sys/devices/system/cpu/cpu0/cache"), here);
}
END_TEST

/* ------------------------------------------------- randomized vs ref */

/* One random layout pair: ndim 0..6, sizes 0..7 with a few large dims so
 * tiles, SIMD blocks and the parallel path are reached. */
static void random_case(unsigned *seed, int big)
{
    int ndim = (int)test_rand(seed, 7);
    int64_t shape[8];
    int sperm[8], dperm[8], ssteps[8], dsteps[8], sflip[8], dflip[8], szero[8];
    size_t is = (size_t)1 << test_rand(seed, 5);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        shape[d] = test_rand(seed, 8);
        if (test_rand(seed, 10) == 0)
            shape[d] = 0 + (test_rand(seed, 20) == 0 ? 0 : 1); /* extra size-1 (and rarely size-0) dims */
        ssteps[d] = test_rand(seed, 4) == 0 ? 1 + (int)test_rand(seed, 3) : 1;
        dsteps[d] = test_rand(seed, 6) == 0 ? 2 : 1;
        sflip[d] = test_rand(seed, 5) == 0;
        dflip[d] = test_rand(seed, 6) == 0;
        szero[d] = test_rand(seed, 8) == 0;
    }
    if (ndim > 0 && big) { /* one or two large dims */
        int nbig = 1 + (int)test_rand(seed, 2);
        for (int k = 0; k < nbig; k++)
            shape[test_rand(seed, (unsigned)ndim)] = 8 + test_rand(seed, big > 1 ? 700 : 90);
    }
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    if (numel * (int64_t)is > (int64_t)4 << 20) { /* keep each case small */
        for (int d = 0; d < ndim; d++)
            if (shape[d] > 7)
                shape[d] = 7;
    }
    random_perm(sperm, ndim, seed);
    random_perm(dperm, ndim, seed);
    tens s, d;
    tens_make(&s, ndim, shape, sperm, ssteps, sflip, szero, is, test_rand(seed, 3) * is, -1, seed);
    tens_make(&d, ndim, shape, dperm, dsteps, dflip, NULL, is, test_rand(seed, 2) * is, SENTINEL, seed);
    check_and_free(&s, &d);
}

static void random_cases(int threads, void *ctx)
{
    (void)ctx;
    unsigned seed = 20240601u + (unsigned)threads;
    for (int i = 0; i < 3000; i++)
        random_case(&seed, i % 4 == 0 ? 1 : 0);
    for (int i = 0; i < 60; i++)
        random_case(&seed, 2);
}

START_TEST(test_random_vs_reference) { at_1_and_2_threads(random_cases, NULL); }
END_TEST

/* A thread count above what the machine runs: clamped, warned about once
 * on stderr, never fatal.  In a fresh process (this executable again, see
 * main), so that the warning is the first of its kind there. */
static int clamp_child(void)
{
    enum { N = 1024 };
    float *src = malloc(sizeof(float) * N * N), *dst = malloc(sizeof(float) * N * N);
    if (src == NULL || dst == NULL)
        return 2;
    for (int i = 0; i < N * N; i++)
        src[i] = (float)i;
    int64_t shape[2] = {N, N}, sstr[2] = {1, N};
    DLTensor s = {src, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, sstr, 0};
    DLTensor d = {dst, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
    int n = 0;
    for (int k = 0; k < 3; k++) {
        if (pylayout_set_num_threads(4096) != PYLAYOUT_OK || pylayout_copy(&s, &d) != PYLAYOUT_OK)
            return 3;
        for (int i = 0; i < N; i += 7)
            for (int j = 0; j < N; j += 5)
                if (dst[i * N + j] != src[j * N + i])
                    return 4;
    }
    bool openmp = false;
    const char *simd = NULL;
    if (pylayout_build_info(&openmp, &simd) != PYLAYOUT_OK)
        return 5;
    if (pylayout_get_num_threads(&n) != PYLAYOUT_OK || n != (openmp ? 4096 : 1)) /* the setting, not the clamp */
        return 6;
    free(src);
    free(dst);
    return 0;
}

START_TEST(test_threads_clamped_and_warned_once)
{
    char *argv[] = {"check_copy", "--clamp-child", NULL};
    char err[4096];
    const int status = spawn_capture(self_path, argv, environ, STDERR_FILENO, err, sizeof err);
    ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "clamp child failed (status %d): %s",
                  status, err);
    bool openmp = false;
    const char *simd = NULL;
    ck_assert_int_eq(pylayout_build_info(&openmp, &simd), PYLAYOUT_OK);
    int warnings = 0;
    for (const char *p = err; (p = strstr(p, "pylayout: warning: pylayout_set_num_threads(4096)")) != NULL; p++)
        warnings++;
    ck_assert_msg(warnings == (openmp && sysconf(_SC_NPROCESSORS_ONLN) < 4096 ? 1 : 0), "stderr: %s", err);
}
END_TEST

/* The random layouts again with the parallel threshold at 0 (as
 * PYLAYOUT_PARALLEL_MIN_BYTES=0 sets it, read once per process: so in a
 * fresh process, this executable again), so that every copy of two or more
 * units at 2 threads runs through the team's chunks. */
START_TEST(test_random_parallel_chunks)
{
    static char knob[] = "PYLAYOUT_PARALLEL_MIN_BYTES=0";
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 2, sizeof *env);
    ck_assert_ptr_nonnull(env);
    for (size_t k = 0; k < n; k++)
        env[k] = environ[k];
    env[n] = knob;
    char *argv[] = {"check_copy", "--random-parallel", NULL};
    pid_t pid = 0;
    fflush(NULL);
    ck_assert_int_eq(posix_spawnp(&pid, self_path, NULL, NULL, argv, env), 0);
    free(env);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "random layouts through the team's chunks failed "
                  "(status %d; its output is above)", status);
}
END_TEST

/* --------------------------------------------------------------- main */

static Suite *copy_suite(void)
{
    const tcase_spec cases[] = {
        TCASE("identity", TEST(test_identity), TEST(test_identity_null_strides)),
        TCASE("transpose_2d", TEST(test_transpose_2d), TEST(test_transpose_large), TEST(test_rows_past_l3), TEST(test_transpose_small_edges),
              TEST(test_transpose_buffered_stream), TEST(test_permute_5d_large)),
        TCASE("permutations", TEST(test_permutations_3d_4d), TEST(test_permutations_6d)),
        TCASE("broadcast", TEST(test_broadcast), TEST(test_broadcast_rows)),
        TCASE("step2", TEST(test_step2)),
        TCASE("stepk", TEST(test_stepk)),
        TCASE("groups", TEST(test_groups)),
        TCASE("blocks", TEST(test_blocks)),
        TCASE("fused", TEST(test_fused)),
        TCASE("negative_strides", TEST(test_negative_strides), TEST(test_reversed_rows), TEST(test_rotations)),
        TCASE("byte_offset", TEST(test_byte_offset)),
        TCASE("size0_size1", TEST(test_size0_size1)),
        TCASE("errors", TEST(test_error_shape_mismatch), TEST(test_error_itemsize_mismatch),
              TEST(test_error_dst_overlaps_itself), TEST(test_error_dst_aliases_src), TEST(test_views_of_one_buffer)),
        TCASE("errors_args", TEST(test_error_device), TEST(test_error_null_args)),
        TCASE("convert", TEST(test_convert_formats), TEST(test_convert_order)),
        TCASE("threads_info", TEST(test_threads), TEST(test_build_info), TEST(test_l3_size_from_sysfs), TEST(test_threads_clamped_and_warned_once)),
        TCASE("random", TEST(test_random_vs_reference), TEST(test_random_parallel_chunks)),
        TCASE("element_sizes", LOOP(test_element_sizes, 5)),
    };
    return SUITE_OF("copy", cases, 300);
}

int main(int argc, char **argv)
{
    if (argc > 0 && argv[0] != NULL)
        self_path = argv[0];
    if (argc == 2 && strcmp(argv[1], "--clamp-child") == 0)
        return clamp_child();
    if (argc == 2 && strcmp(argv[1], "--print-simd") == 0)
        return print_simd();
    if (argc == 2 && strcmp(argv[1], "--random-parallel") == 0) {
        const tcase_spec cases[] = {TCASE("random", TEST(test_random_vs_reference))};
        return run_suite(SUITE_OF("copy-parallel-chunks", cases, 300));
    }
    if (simd_run_repeats_best("check_copy", self_path))
        return 77;
    return run_suite(copy_suite());
}
