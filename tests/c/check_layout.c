/*
 * check_layout.c - Check tests of pylayout's metadata queries:
 * pylayout_is_contiguous, pylayout_suggest_format, pylayout_is_dense,
 * pylayout_numel, pylayout_validate, pylayout_format_strides and
 * pylayout_order_strides, through the public API only.
 *
 * The expected values in layout_cases[], format_cases[] and order_cases[]
 * were produced by real PyTorch 2.13.0 (+cpu) and NumPy 2.4.6, not by
 * reasoning about pylayout's code.  The generator (run with python3):
 *
 *   x = torch.zeros(10000).as_strided(shape, strides)   # torch.empty(0) if 0-size
 *   contiguous  = x.is_contiguous()
 *   cl / cl3    = x.is_contiguous(memory_format=torch.channels_last / _3d)
 *   fortran     = np.ndarray(shape, np.float32, buf, off, bytes_strides).flags.f_contiguous
 *   dense       = torch.empty_like(x).stride() == x.stride()
 *                 (empty_like's preserve_format copies strides exactly when
 *                  c10's is_non_overlapping_and_dense() holds)
 *   suggest     = stride of F.interpolate(x, size=x.shape[2:], mode="nearest"),
 *                 whose output is allocated in x.suggest_memory_format(),
 *                 compared with torch.empty(shape[, memory_format]).stride()
 *   format strides = torch.empty(shape, memory_format=fmt).stride();
 *                 Fortran = torch.empty(shape[::-1]).permute(reversed).stride()
 *   order strides  = torch.empty([shape[o] for o in order]).permute(argsort(order)).stride()
 *
 * Rows torch cannot observe are derived by hand from c10 and say so:
 * suggest_format on 0-size tensors (c10's is_channels_last_strides_2d_s4
 * returns false when any size is 0) and on ambiguous N111 layouts, whose
 * channels_last and contiguous strides coincide (c10 falls back to NCHW);
 * and negative strides, which torch.as_strided refuses.
 *
 * NumPy gives 0-size arrays all-zero strides; pylayout follows torch there
 * (size-0 dims count as 1), which the format_cases rows pin down.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pylayout.h>

#include "check_util.h"

#define FMT_C PYLAYOUT_FORMAT_CONTIGUOUS
#define FMT_CL PYLAYOUT_FORMAT_CHANNELS_LAST
#define FMT_CL3 PYLAYOUT_FORMAT_CHANNELS_LAST_3D
#define FMT_F PYLAYOUT_FORMAT_FORTRAN

static const DLDataType f32 = {kDLFloat, 32, 1};

/* A metadata-only DLTensor: the queries never read data. */
static DLTensor meta(int32_t ndim, const int64_t *shape, const int64_t *strides)
{
    static float dummy;
    return dl_make(&dummy, ndim, shape, strides, f32, 0);
}

static void fmt_dims(char *buf, size_t n, int32_t ndim, const int64_t *v)
{
    size_t used = 0;
    used += (size_t)snprintf(buf + used, n - used, "(");
    for (int32_t d = 0; d < ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, d ? ", %lld" : "%lld", (long long)v[d]);
    if (used < n)
        snprintf(buf + used, n - used, ")");
}

/* ------------------------------------------------- is_contiguous & co. */

typedef struct layout_case {
    int32_t ndim;
    int64_t shape[5];
    int64_t strides[5];
    bool contiguous, channels_last, channels_last_3d, fortran, dense;
    pylayout_format suggest;
} layout_case;

/* {ndim, shape, strides, contiguous, channels_last, channels_last_3d,
 *  fortran, dense, suggest_format} -- generated, see the header comment. */
static const layout_case layout_cases[] = {
    {4, {2, 3, 4, 5}, {60, 20, 5, 1}, true, false, false, false, true, FMT_C},
    {4, {2, 3, 4, 5}, {60, 1, 15, 3}, false, true, false, false, true, FMT_CL},
    {4, {1, 3, 4, 5}, {999, 1, 15, 3}, false, true, false, false, true, FMT_CL},
    {4, {2, 1, 4, 5}, {20, 20, 5, 1}, true, true, false, false, true, FMT_C},
    {4, {2, 1, 4, 5}, {20, 1, 5, 1}, true, true, false, false, true, FMT_CL},
    {4, {2, 3, 1, 1}, {3, 1, 1, 1}, true, true, false, false, true, FMT_C},
    {4, {2, 3, 1, 1}, {3, 1, 3, 3}, true, true, false, false, true, FMT_CL},
    {4, {4, 1, 1, 1}, {1, 1, 1, 1}, true, true, false, true, true, FMT_C /* ambiguous: c10 N111 rule */},
    {4, {1, 1, 1, 1}, {1, 1, 1, 1}, true, true, false, true, true, FMT_C /* ambiguous: c10 N111 rule */},
    {4, {2, 3, 4, 5}, {20, 0, 5, 1}, false, false, false, false, false, FMT_C},
    {4, {2, 3, 4, 5}, {120, 40, 10, 2}, false, false, false, false, false, FMT_C},
    {4, {2, 3, 4, 5}, {60, 1, 20, 4}, false, false, false, false, false, FMT_C},
    {4, {2, 3, 4, 5}, {1, 2, 6, 24}, false, false, false, true, true, FMT_C},
    {4, {0, 3, 4, 5}, {60, 20, 5, 1}, true, false, false, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {4, {0, 3, 4, 5}, {60, 1, 15, 3}, true, true, false, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    /* Empty tensors are dense whatever their strides (c10 sets
     * is_non_overlapping_and_dense from is_contiguous_, true when numel == 0):
     * these two rows caught pylayout_is_dense applying the stride rule. */
    {4, {2, 0, 4, 5}, {0, 1, 0, 0}, true, true, false, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {4, {2, 3, 0, 5}, {7, 11, 13, 17}, true, false, false, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {5, {2, 3, 4, 5, 6}, {360, 120, 30, 6, 1}, true, false, false, false, true, FMT_C},
    {5, {2, 3, 4, 5, 6}, {360, 1, 90, 18, 3}, false, false, true, false, true, FMT_CL3},
    {5, {2, 1, 4, 5, 6}, {120, 1, 30, 6, 1}, true, false, true, false, true, FMT_CL3},
    {5, {4, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, true, false, true, true, true, FMT_C /* ambiguous: c10 N111 rule */},
    {5, {2, 3, 4, 5, 6}, {360, 0, 30, 6, 1}, false, false, false, false, false, FMT_C},
    {3, {2, 3, 4}, {12, 4, 1}, true, false, false, false, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {3, {2, 3, 4}, {1, 2, 6}, false, false, false, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {3, {2, 3, 4}, {4, 8, 1}, false, false, false, false, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {3, {3, 1, 4}, {4, 999, 1}, true, false, false, false, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {2, {3, 4}, {1, 3}, false, false, false, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {2, {3, 4}, {4, 1}, true, false, false, false, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {2, {3, 4}, {1, 1}, false, false, false, false, false, FMT_C /* c10: 0-size or not 4/5-D */},
    {2, {3, 4}, {8, 2}, false, false, false, false, false, FMT_C /* c10: 0-size or not 4/5-D */},
    {1, {5}, {1}, true, false, false, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {1, {5}, {2}, false, false, false, false, false, FMT_C /* c10: 0-size or not 4/5-D */},
    {1, {1}, {7}, true, false, false, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {1, {5}, {0}, false, false, false, false, false, FMT_C /* c10: 0-size or not 4/5-D */},
    {0, {0}, {0}, true, false, false, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    {4, {2, 3, 4, 5}, {80, 1, 20, 4}, false, false, false, false, false, FMT_CL},
    {4, {1, 4, 1, 3}, {12, 1, 4, 4}, false, true, false, true, true, FMT_C},
    {4, {2, 1, 4, 1}, {4, 1, 1, 1}, true, true, false, false, true, FMT_CL},
    {4, {2, 1, 4, 1}, {4, 4, 1, 1}, true, true, false, false, true, FMT_C},
    {4, {3, 1, 1, 1}, {5, 5, 5, 5}, false, false, false, false, false, FMT_C /* ambiguous: c10 N111 rule */},
    {5, {2, 3, 4, 5, 6}, {720, 1, 180, 36, 6}, false, false, false, false, false, FMT_CL3},
    {5, {2, 3, 4, 5, 6}, {3, 18, 90, 1, 360}, false, false, false, false, false, FMT_C},
    {5, {2, 3, 4, 5, 6}, {1, 2, 6, 24, 120}, false, false, false, true, true, FMT_C},
    {5, {0, 3, 4, 5, 6}, {360, 1, 90, 18, 3}, true, false, true, true, true, FMT_C /* c10: 0-size or not 4/5-D */},
    /* Negative strides: torch.as_strided refuses them; derived from c10's
     * compute_contiguous / compute_non_overlapping_and_dense (a negative
     * stride never equals the expected positive one) and NumPy's flags. */
    {4, {2, 3, 4, 5}, {60, 20, 5, -1}, false, false, false, false, false, FMT_C},
    {4, {2, 3, 4, 5}, {-60, 1, 15, 3}, false, false, false, false, false, FMT_C},
    {1, {5}, {-1}, false, false, false, false, false, FMT_C},
    {1, {1}, {-1}, true, false, false, true, true, FMT_C}, /* size-1 dims are ignored */
    {2, {3, 1}, {-1, 5}, false, false, false, false, false, FMT_C},
};
#define N_LAYOUT_CASES ((int)(sizeof layout_cases / sizeof layout_cases[0]))

static const char *describe(const layout_case *c)
{
    static char buf[160];
    char sh[64], st[80];
    fmt_dims(sh, sizeof sh, c->ndim, c->shape);
    fmt_dims(st, sizeof st, c->ndim, c->strides);
    snprintf(buf, sizeof buf, "shape %s strides %s", sh, st);
    return buf;
}

START_TEST(test_is_contiguous_table)
{
    const layout_case *c = &layout_cases[_i];
    DLTensor t = meta(c->ndim, c->shape, c->strides);
    static const struct {
        pylayout_format format;
        const char *name;
    } formats[] = {{FMT_C, "contiguous"}, {FMT_CL, "channels_last"}, {FMT_CL3, "channels_last_3d"},
                   {FMT_F, "fortran"}};
    const bool expected[] = {c->contiguous, c->channels_last, c->channels_last_3d, c->fortran};
    for (int f = 0; f < 4; f++) {
        bool got = !expected[f];
        ck_assert_int_eq(pylayout_is_contiguous(&t, formats[f].format, &got), PYLAYOUT_OK);
        ck_assert_msg(got == expected[f], "row %d, %s: is_contiguous(%s) = %d, torch/NumPy say %d", _i,
                      describe(c), formats[f].name, got, expected[f]);
    }
}
END_TEST

START_TEST(test_is_dense_table)
{
    const layout_case *c = &layout_cases[_i];
    DLTensor t = meta(c->ndim, c->shape, c->strides);
    bool got = !c->dense;
    ck_assert_int_eq(pylayout_is_dense(&t, &got), PYLAYOUT_OK);
    ck_assert_msg(got == c->dense, "row %d, %s: is_dense = %d, torch says %d", _i, describe(c), got, c->dense);
}
END_TEST

START_TEST(test_suggest_format_table)
{
    const layout_case *c = &layout_cases[_i];
    DLTensor t = meta(c->ndim, c->shape, c->strides);
    pylayout_format got = (pylayout_format)99;
    ck_assert_int_eq(pylayout_suggest_format(&t, &got), PYLAYOUT_OK);
    ck_assert_msg(got == c->suggest, "row %d, %s: suggest_format = %d, torch says %d", _i, describe(c), (int)got,
                  (int)c->suggest);
}
END_TEST

/* Queries read metadata only: NULL data with elements, a CUDA device, and
 * NULL strides (compact row-major) are all fine. */
START_TEST(test_queries_metadata_only)
{
    int64_t shape[4] = {2, 3, 4, 5};
    int64_t cl_strides[4] = {60, 1, 15, 3};
    DLTensor t = meta(4, shape, cl_strides);
    t.data = NULL;
    t.device = (DLDevice){kDLCUDA, 1};
    bool b = false;
    pylayout_format f = FMT_C;
    int64_t n = 0;
    ck_assert_int_eq(pylayout_is_contiguous(&t, FMT_CL, &b), PYLAYOUT_OK);
    ck_assert(b);
    ck_assert_int_eq(pylayout_is_dense(&t, &b), PYLAYOUT_OK);
    ck_assert(b);
    ck_assert_int_eq(pylayout_suggest_format(&t, &f), PYLAYOUT_OK);
    ck_assert_int_eq(f, FMT_CL);
    ck_assert_int_eq(pylayout_numel(&t, &n), PYLAYOUT_OK);
    ck_assert_int_eq(n, 120);

    t.strides = NULL; /* row-major */
    ck_assert_int_eq(pylayout_is_contiguous(&t, FMT_C, &b), PYLAYOUT_OK);
    ck_assert(b);
    ck_assert_int_eq(pylayout_is_contiguous(&t, FMT_CL, &b), PYLAYOUT_OK);
    ck_assert(!b);
    ck_assert_int_eq(pylayout_suggest_format(&t, &f), PYLAYOUT_OK);
    ck_assert_int_eq(f, FMT_C);
    ck_assert_int_eq(pylayout_is_dense(&t, &b), PYLAYOUT_OK);
    ck_assert(b);

    /* 0-d: shape and strides may be NULL. */
    DLTensor s = meta(0, NULL, NULL);
    ck_assert_int_eq(pylayout_is_contiguous(&s, FMT_C, &b), PYLAYOUT_OK);
    ck_assert(b);
    ck_assert_int_eq(pylayout_is_contiguous(&s, FMT_CL, &b), PYLAYOUT_OK);
    ck_assert(!b);
    ck_assert_int_eq(pylayout_numel(&s, &n), PYLAYOUT_OK);
    ck_assert_int_eq(n, 1);
}
END_TEST

/* channels_last is defined only for 4-D and channels_last_3d only for 5-D:
 * compact strides of every other rank give false, not an error. */
START_TEST(test_channels_last_other_ranks)
{
    for (int32_t ndim = 0; ndim <= 6; ndim++) {
        int64_t shape[6] = {2, 3, 4, 5, 6, 7}, strides[6];
        ck_assert_int_eq(pylayout_format_strides(ndim, shape, FMT_C, strides), PYLAYOUT_OK);
        DLTensor t = meta(ndim, shape, strides);
        bool cl = true, cl3 = true;
        ck_assert_int_eq(pylayout_is_contiguous(&t, FMT_CL, &cl), PYLAYOUT_OK);
        ck_assert_int_eq(pylayout_is_contiguous(&t, FMT_CL3, &cl3), PYLAYOUT_OK);
        ck_assert_msg(!cl && !cl3, "ndim %d: channels_last %d channels_last_3d %d", (int)ndim, cl, cl3);
    }
    /* A 3-D tensor whose every dim has size 1 satisfies any stride rule, but
     * still is not channels_last (torch: defined for 4-D only). */
    int64_t ones[3] = {1, 1, 1}, ostr[3] = {1, 1, 1};
    DLTensor t = meta(3, ones, ostr);
    bool b = true;
    ck_assert_int_eq(pylayout_is_contiguous(&t, FMT_CL, &b), PYLAYOUT_OK);
    ck_assert(!b);
}
END_TEST

START_TEST(test_query_errors)
{
    int64_t shape[2] = {2, 3}, strides[2] = {3, 1}, neg[2] = {2, -3};
    DLTensor t = meta(2, shape, strides);
    bool b;
    pylayout_format f;
    int64_t n;
    ck_assert_int_eq(pylayout_is_contiguous(NULL, FMT_C, &b), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_is_contiguous(&t, FMT_C, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_is_contiguous(&t, (pylayout_format)4, &b), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_is_contiguous(&t, (pylayout_format)-1, &b), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_str_ne(pylayout_last_error(), "");
    ck_assert_int_eq(pylayout_suggest_format(NULL, &f), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_suggest_format(&t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_is_dense(NULL, &b), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_is_dense(&t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_numel(NULL, &n), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_numel(&t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);

    DLTensor bad = meta(2, neg, strides);
    ck_assert_int_eq(pylayout_is_contiguous(&bad, FMT_C, &b), PYLAYOUT_ERR_INVALID_TENSOR);
    ck_assert_int_eq(pylayout_suggest_format(&bad, &f), PYLAYOUT_ERR_INVALID_TENSOR);
    ck_assert_int_eq(pylayout_is_dense(&bad, &b), PYLAYOUT_ERR_INVALID_TENSOR);
    ck_assert_int_eq(pylayout_numel(&bad, &n), PYLAYOUT_ERR_INVALID_TENSOR);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "dim 1"));

    const int32_t bad_ndims[] = {-1, 65, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_ndims / sizeof bad_ndims[0]; i++) {
        int64_t big[70] = {0};
        DLTensor x = meta(bad_ndims[i], big, big);
        ck_assert_int_eq(pylayout_is_contiguous(&x, FMT_C, &b), PYLAYOUT_ERR_INVALID_TENSOR);
        ck_assert_int_eq(pylayout_suggest_format(&x, &f), PYLAYOUT_ERR_INVALID_TENSOR);
        ck_assert_int_eq(pylayout_is_dense(&x, &b), PYLAYOUT_ERR_INVALID_TENSOR);
        ck_assert_int_eq(pylayout_numel(&x, &n), PYLAYOUT_ERR_INVALID_TENSOR);
    }
    DLTensor noshape = meta(2, NULL, strides);
    ck_assert_int_eq(pylayout_is_contiguous(&noshape, FMT_C, &b), PYLAYOUT_ERR_INVALID_TENSOR);
    ck_assert_int_eq(pylayout_numel(&noshape, &n), PYLAYOUT_ERR_INVALID_TENSOR);
}
END_TEST

/* Tensors whose element count overflows int64: pylayout_numel says
 * INVALID_TENSOR, and so must the other metadata queries.  Returns 0 if
 * every query did, else 1 + the index of the first that did not. */
static int queries_on_overflowing_numel(void)
{
    static const struct {
        int64_t shape[4];
        int64_t strides[4];
    } cases[] = {
        /* row-major strides that fit; numel 2^64 does not */
        {{1, 1, INT64_C(1) << 32, INT64_C(1) << 32}, {1, 1, INT64_C(1) << 32, 1}},
        /* a channels_last-like ordering whose expected stride overflows */
        {{2, INT64_C(1) << 32, INT64_C(1) << 32, 2}, {INT64_C(1) << 62, 1, INT64_C(1) << 33, 2}},
    };
    int k = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        DLTensor t = meta(4, cases[i].shape, cases[i].strides);
        bool b;
        pylayout_format f;
        int64_t n;
        if (pylayout_numel(&t, &n) != PYLAYOUT_ERR_INVALID_TENSOR)
            return 1 + k;
        k++;
        for (int fmt = 0; fmt < 4; fmt++, k++)
            if (pylayout_is_contiguous(&t, (pylayout_format)fmt, &b) != PYLAYOUT_ERR_INVALID_TENSOR)
                return 1 + k;
        if (pylayout_is_dense(&t, &b) != PYLAYOUT_ERR_INVALID_TENSOR)
            return 1 + k;
        k++;
        if (pylayout_suggest_format(&t, &f) != PYLAYOUT_ERR_INVALID_TENSOR)
            return 1 + k;
        k++;
    }
    return 0;
}

START_TEST(test_queries_numel_overflow)
{
    /* Regression: every layout query must refuse, with INVALID_TENSOR as
     * pylayout_numel does, metadata whose element count does not fit int64.
     * They once skipped that check and overflowed int64_t (signed overflow,
     * UB) in the contiguity, density and strides-order products, returning
     * OK with a meaningless answer.  Run in a child so that a sanitizer
     * abort or crash fails this test only. */
    int rc = run_in_child(queries_on_overflowing_numel);
    ck_assert_msg(rc >= 0, "child died of signal %d (a sanitizer abort or a crash)", -rc);
    ck_assert_msg(rc == 0, "query #%d (per case: numel, is_contiguous x4, is_dense, suggest_format) did not "
                  "return INVALID_TENSOR", rc - 1);
}
END_TEST

/* ------------------------------------------------------------- numel */

START_TEST(test_numel)
{
    static const struct {
        int32_t ndim;
        int64_t shape[4];
        pylayout_status status;
        int64_t numel;
    } cases[] = {
        {0, {0}, PYLAYOUT_OK, 1},
        {1, {7}, PYLAYOUT_OK, 7},
        {4, {2, 3, 4, 5}, PYLAYOUT_OK, 120},
        {4, {2, 0, 4, 5}, PYLAYOUT_OK, 0},
        {3, {INT64_MAX, 1, 1}, PYLAYOUT_OK, INT64_MAX},
        {2, {INT64_C(1) << 31, INT64_C(1) << 31}, PYLAYOUT_OK, INT64_C(1) << 62},
        {2, {INT64_C(1) << 32, INT64_C(1) << 31}, PYLAYOUT_ERR_INVALID_TENSOR, 0}, /* 2^63 */
        {2, {INT64_C(1) << 32, INT64_C(1) << 32}, PYLAYOUT_ERR_INVALID_TENSOR, 0},
        {3, {0, INT64_MAX, INT64_MAX}, PYLAYOUT_OK, 0},
        {2, {3, -1}, PYLAYOUT_ERR_INVALID_TENSOR, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        DLTensor t = meta(cases[i].ndim, cases[i].shape, NULL);
        int64_t n = -42;
        pylayout_status st = pylayout_numel(&t, &n);
        ck_assert_msg(st == cases[i].status, "case %zu: status %d, expected %d", i, (int)st,
                      (int)cases[i].status);
        if (st == PYLAYOUT_OK)
            ck_assert_msg(n == cases[i].numel, "case %zu: numel %lld, expected %lld", i, (long long)n,
                          (long long)cases[i].numel);
    }
}
END_TEST

/* ---------------------------------------------------------- validate */

typedef struct validate_case {
    const char *name;
    int32_t ndim;
    int64_t shape[3];
    int64_t strides[3];
    bool null_strides, null_data, null_shape;
    DLDataType dtype;
    uint64_t byte_offset;
    pylayout_status status;
} validate_case;

#define F32 {kDLFloat, 32, 1}
static const validate_case validate_cases[] = {
    {"compact", 2, {2, 3}, {3, 1}, false, false, false, F32, 0, PYLAYOUT_OK},
    {"null strides", 2, {2, 3}, {0}, true, false, false, F32, 0, PYLAYOUT_OK},
    {"0-d", 0, {0}, {0}, true, false, true, F32, 0, PYLAYOUT_OK},
    {"negative strides", 2, {2, 3}, {-3, -1}, false, false, false, F32, 64, PYLAYOUT_OK},
    {"broadcast", 2, {2, 3}, {0, 0}, false, false, false, F32, 0, PYLAYOUT_OK},
    {"empty with NULL data", 2, {0, 3}, {3, 1}, false, true, false, F32, 0, PYLAYOUT_OK},
    {"empty with huge strides", 2, {0, 3}, {INT64_MAX, INT64_MIN}, false, false, false, F32, 0, PYLAYOUT_OK},
    {"NULL data with elements", 2, {2, 3}, {3, 1}, false, true, false, F32, 0, PYLAYOUT_ERR_INVALID_TENSOR},
    {"ndim -1", -1, {0}, {0}, false, false, false, F32, 0, PYLAYOUT_ERR_INVALID_TENSOR},
    {"NULL shape", 2, {0}, {0}, false, false, true, F32, 0, PYLAYOUT_ERR_INVALID_TENSOR},
    {"negative size", 2, {2, -3}, {3, 1}, false, false, false, F32, 0, PYLAYOUT_ERR_INVALID_TENSOR},
    {"numel overflow", 3, {INT64_C(1) << 32, INT64_C(1) << 32, 1}, {0, 0, 0}, false, false, false, F32, 0,
     PYLAYOUT_ERR_INVALID_TENSOR},
    {"stride reach overflow", 2, {INT64_C(1) << 32, 2}, {INT64_C(1) << 40, 1}, false, false, false, F32, 0,
     PYLAYOUT_ERR_INVALID_TENSOR},
    {"stride INT64_MIN", 1, {2}, {INT64_MIN}, false, false, false, F32, 0, PYLAYOUT_ERR_INVALID_TENSOR},
    {"byte extent overflow", 1, {2}, {INT64_MAX / 4}, false, false, false, {kDLFloat, 64, 1}, 0,
     PYLAYOUT_ERR_INVALID_TENSOR},
    {"byte_offset > INT64_MAX", 1, {2}, {1}, false, false, false, F32, UINT64_C(1) << 63,
     PYLAYOUT_ERR_INVALID_TENSOR},
    {"negative reach below address 0", 1, {4}, {-1}, false, false, false, F32, 0, PYLAYOUT_ERR_INVALID_TENSOR},
    {"lanes 2", 1, {2}, {1}, false, false, false, {kDLFloat, 32, 2}, 0, PYLAYOUT_ERR_UNSUPPORTED_DTYPE},
    {"int4", 1, {2}, {1}, false, false, false, {kDLInt, 4, 1}, 0, PYLAYOUT_ERR_UNSUPPORTED_DTYPE},
    {"opaque handle", 1, {2}, {1}, false, false, false, {kDLOpaqueHandle, 64, 1}, 0,
     PYLAYOUT_ERR_UNSUPPORTED_DTYPE},
    {"code 99", 1, {2}, {1}, false, false, false, {99, 32, 1}, 0, PYLAYOUT_ERR_UNSUPPORTED_DTYPE},
};
#define N_VALIDATE_CASES ((int)(sizeof validate_cases / sizeof validate_cases[0]))

START_TEST(test_validate_table)
{
    const validate_case *c = &validate_cases[_i];
    static double buf[64]; /* data + byte_offset of "negative strides" must stay addressable */
    DLTensor t = {
        .data = c->null_data ? NULL : (void *)buf,
        .device = {kDLCPU, 0},
        .ndim = c->ndim,
        .dtype = c->dtype,
        .shape = c->null_shape ? NULL : (int64_t *)c->shape,
        .strides = c->null_strides ? NULL : (int64_t *)c->strides,
        .byte_offset = c->byte_offset,
    };
    if (strcmp(c->name, "negative reach below address 0") == 0)
        t.data = (void *)(uintptr_t)8; /* element 3 would sit at address 8 - 12 */
    pylayout_status st = pylayout_validate(&t);
    ck_assert_msg(st == c->status, "%s: status %d (%s), expected %d", c->name, (int)st, pylayout_strerror(st),
                  (int)c->status);
    if (st != PYLAYOUT_OK)
        ck_assert_msg(pylayout_last_error()[0] != '\0', "%s: no last_error detail", c->name);
}
END_TEST

START_TEST(test_validate_ndim_limits)
{
    int64_t shape[65], strides[65];
    for (int d = 0; d < 65; d++) {
        shape[d] = 1;
        strides[d] = 1;
    }
    float x = 0;
    DLTensor t = {.data = &x, .device = {kDLCPU, 0}, .ndim = 64, .dtype = f32, .shape = shape, .strides = strides};
    ck_assert_int_eq(pylayout_validate(&t), PYLAYOUT_OK);
    t.ndim = 65;
    ck_assert_int_eq(pylayout_validate(&t), PYLAYOUT_ERR_INVALID_TENSOR);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "65"));
    ck_assert_int_eq(pylayout_validate(NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* Every dtype the header says pylayout handles validates; its neighbours do not. */
START_TEST(test_validate_dtypes)
{
    static const struct {
        uint8_t code, bits;
        uint16_t lanes;
        bool ok;
    } dtypes[] = {
        {kDLBool, 8, 1, true},         {kDLInt, 8, 1, true},          {kDLInt, 16, 1, true},
        {kDLInt, 32, 1, true},         {kDLInt, 64, 1, true},         {kDLUInt, 8, 1, true},
        {kDLUInt, 16, 1, true},        {kDLUInt, 32, 1, true},        {kDLUInt, 64, 1, true},
        {kDLFloat, 16, 1, true},       {kDLFloat, 32, 1, true},       {kDLFloat, 64, 1, true},
        {kDLBfloat, 16, 1, true},      {kDLComplex, 32, 1, true},     {kDLComplex, 64, 1, true},
        {kDLComplex, 128, 1, true},    {kDLFloat8_e3m4, 8, 1, true},  {kDLFloat8_e4m3, 8, 1, true},
        {kDLFloat8_e4m3b11fnuz, 8, 1, true}, {kDLFloat8_e4m3fn, 8, 1, true}, {kDLFloat8_e4m3fnuz, 8, 1, true},
        {kDLFloat8_e5m2, 8, 1, true},  {kDLFloat8_e5m2fnuz, 8, 1, true}, {kDLFloat8_e8m0fnu, 8, 1, true},
        {kDLBool, 1, 1, false},        {kDLInt, 4, 1, false},         {kDLInt, 128, 1, false},
        {kDLUInt, 1, 1, false},        {kDLFloat, 8, 1, false},       {kDLFloat, 32, 2, false},
        {kDLFloat, 32, 0, false},      {kDLBfloat, 32, 1, false},     {kDLOpaqueHandle, 64, 1, false},
        {kDLFloat6_e2m3fn, 6, 1, false}, {kDLFloat6_e3m2fn, 6, 1, false}, {kDLFloat4_e2m1fn, 4, 1, false},
        {kDLFloat8_e5m2, 16, 1, false}, {99, 32, 1, false},
    };
    int64_t shape[1] = {3}, strides[1] = {1};
    static uint64_t buf[8];
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        DLTensor t = meta(1, shape, strides);
        t.data = buf;
        t.dtype = (DLDataType){dtypes[i].code, dtypes[i].bits, dtypes[i].lanes};
        pylayout_status st = pylayout_validate(&t);
        ck_assert_msg(st == (dtypes[i].ok ? PYLAYOUT_OK : PYLAYOUT_ERR_UNSUPPORTED_DTYPE),
                      "dtype (%u, %u, %u): status %d", dtypes[i].code, dtypes[i].bits, dtypes[i].lanes, (int)st);
    }
}
END_TEST

/* ------------------------------------------------- format/order strides */

typedef struct format_case {
    int32_t ndim;
    int64_t shape[5];
    pylayout_format format;
    int64_t strides[5];
} format_case;

static const format_case format_cases[] = {
    {4, {2, 3, 4, 5}, PYLAYOUT_FORMAT_CONTIGUOUS, {60, 20, 5, 1}},
    {4, {2, 3, 4, 5}, PYLAYOUT_FORMAT_FORTRAN, {1, 2, 6, 24}},
    {4, {2, 3, 4, 5}, PYLAYOUT_FORMAT_CHANNELS_LAST, {60, 1, 15, 3}},
    {4, {2, 0, 4, 5}, PYLAYOUT_FORMAT_CONTIGUOUS, {20, 20, 5, 1}},
    {4, {2, 0, 4, 5}, PYLAYOUT_FORMAT_FORTRAN, {1, 2, 2, 8}},
    {4, {2, 0, 4, 5}, PYLAYOUT_FORMAT_CHANNELS_LAST, {0, 1, 0, 0}},
    {4, {0, 3, 4, 5}, PYLAYOUT_FORMAT_CONTIGUOUS, {60, 20, 5, 1}},
    {4, {0, 3, 4, 5}, PYLAYOUT_FORMAT_FORTRAN, {1, 1, 3, 12}},
    {4, {0, 3, 4, 5}, PYLAYOUT_FORMAT_CHANNELS_LAST, {60, 1, 15, 3}},
    {4, {1, 1, 1, 1}, PYLAYOUT_FORMAT_CONTIGUOUS, {1, 1, 1, 1}},
    {4, {1, 1, 1, 1}, PYLAYOUT_FORMAT_FORTRAN, {1, 1, 1, 1}},
    {4, {1, 1, 1, 1}, PYLAYOUT_FORMAT_CHANNELS_LAST, {1, 1, 1, 1}},
    {5, {2, 3, 4, 5, 6}, PYLAYOUT_FORMAT_CONTIGUOUS, {360, 120, 30, 6, 1}},
    {5, {2, 3, 4, 5, 6}, PYLAYOUT_FORMAT_FORTRAN, {1, 2, 6, 24, 120}},
    {5, {2, 3, 4, 5, 6}, PYLAYOUT_FORMAT_CHANNELS_LAST_3D, {360, 1, 90, 18, 3}},
    {5, {2, 3, 0, 5, 6}, PYLAYOUT_FORMAT_CONTIGUOUS, {90, 30, 30, 6, 1}},
    {5, {2, 3, 0, 5, 6}, PYLAYOUT_FORMAT_FORTRAN, {1, 2, 6, 6, 30}},
    {5, {2, 3, 0, 5, 6}, PYLAYOUT_FORMAT_CHANNELS_LAST_3D, {0, 1, 90, 18, 3}},
    {1, {3}, PYLAYOUT_FORMAT_CONTIGUOUS, {1}},
    {1, {3}, PYLAYOUT_FORMAT_FORTRAN, {1}},
    {0, {0}, PYLAYOUT_FORMAT_CONTIGUOUS, {0}},
    {0, {0}, PYLAYOUT_FORMAT_FORTRAN, {0}},
    {3, {3, 0, 2}, PYLAYOUT_FORMAT_CONTIGUOUS, {2, 2, 1}},
    {3, {3, 0, 2}, PYLAYOUT_FORMAT_FORTRAN, {1, 3, 3}},
    {3, {7, 1, 5}, PYLAYOUT_FORMAT_CONTIGUOUS, {5, 5, 1}},
    {3, {7, 1, 5}, PYLAYOUT_FORMAT_FORTRAN, {1, 7, 7}},
};
#define N_FORMAT_CASES ((int)(sizeof format_cases / sizeof format_cases[0]))

START_TEST(test_format_strides_table)
{
    const format_case *c = &format_cases[_i];
    int64_t got[5] = {-7, -7, -7, -7, -7};
    ck_assert_int_eq(pylayout_format_strides(c->ndim, c->shape, c->format, got), PYLAYOUT_OK);
    for (int32_t d = 0; d < c->ndim; d++)
        ck_assert_msg(got[d] == c->strides[d], "row %d (format %d): stride[%d] = %lld, torch says %lld", _i,
                      (int)c->format, (int)d, (long long)got[d], (long long)c->strides[d]);
    for (int32_t d = c->ndim; d < 5; d++)
        ck_assert_msg(got[d] == -7, "row %d: wrote past ndim", _i);

    /* Dense in its own format, and detected as such (including size-0
     * channels_last rows, whose strides c10 makes 0). */
    DLTensor t = meta(c->ndim, c->shape, got);
    bool b = false;
    ck_assert_int_eq(pylayout_is_contiguous(&t, c->format, &b), PYLAYOUT_OK);
    ck_assert_msg(b, "row %d: strides of format %d are not contiguous in it", _i, (int)c->format);
    ck_assert_int_eq(pylayout_is_dense(&t, &b), PYLAYOUT_OK);
    ck_assert(b);
}
END_TEST

START_TEST(test_format_strides_errors)
{
    int64_t shape[6] = {2, 3, 4, 5, 6, 7}, neg[2] = {2, -1}, strides[70];
    int64_t huge[3] = {INT64_C(1) << 32, INT64_C(1) << 32, 2};
    static const struct {
        int32_t ndim;
        pylayout_format format;
        pylayout_status status;
    } rank_cases[] = {
        {3, FMT_CL, PYLAYOUT_ERR_FORMAT_RANK},  {5, FMT_CL, PYLAYOUT_ERR_FORMAT_RANK},
        {0, FMT_CL, PYLAYOUT_ERR_FORMAT_RANK},  {4, FMT_CL3, PYLAYOUT_ERR_FORMAT_RANK},
        {6, FMT_CL3, PYLAYOUT_ERR_FORMAT_RANK}, {4, (pylayout_format)4, PYLAYOUT_ERR_INVALID_ARGUMENT},
        {4, (pylayout_format)-1, PYLAYOUT_ERR_INVALID_ARGUMENT}, {-1, FMT_C, PYLAYOUT_ERR_INVALID_ARGUMENT},
        {65, FMT_C, PYLAYOUT_ERR_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof rank_cases / sizeof rank_cases[0]; i++) {
        int64_t big[70] = {0};
        const int64_t *sh = rank_cases[i].ndim > 6 ? big : shape;
        pylayout_status st = pylayout_format_strides(rank_cases[i].ndim, sh, rank_cases[i].format, strides);
        ck_assert_msg(st == rank_cases[i].status, "case %zu: status %d, expected %d", i, (int)st,
                      (int)rank_cases[i].status);
        ck_assert_str_ne(pylayout_last_error(), "");
    }
    ck_assert_int_eq(pylayout_format_strides(2, NULL, FMT_C, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_format_strides(2, shape, FMT_C, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_format_strides(2, neg, FMT_C, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_format_strides(3, huge, FMT_C, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_format_strides(3, huge, FMT_F, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_format_strides(0, NULL, FMT_C, NULL), PYLAYOUT_OK);
}
END_TEST

typedef struct order_case {
    int32_t ndim;
    int64_t shape[5];
    int32_t order[5];
    int64_t strides[5];
} order_case;

static const order_case order_cases[] = {
    {4, {2, 3, 4, 5}, {0, 2, 3, 1}, {60, 1, 15, 3}},
    {4, {2, 3, 4, 5}, {3, 2, 1, 0}, {1, 2, 6, 24}},
    {4, {2, 3, 4, 5}, {0, 1, 2, 3}, {60, 20, 5, 1}},
    {3, {2, 3, 4}, {1, 0, 2}, {4, 8, 1}},
    {3, {2, 0, 4}, {2, 0, 1}, {1, 1, 2}},
    {1, {5}, {0}, {1}},
    {0, {0}, {0}, {0}},
    {5, {2, 3, 4, 5, 6}, {0, 2, 3, 4, 1}, {360, 1, 90, 18, 3}},
    {4, {1, 3, 1, 2}, {3, 1, 0, 2}, {1, 1, 1, 3}},
};
#define N_ORDER_CASES ((int)(sizeof order_cases / sizeof order_cases[0]))

START_TEST(test_order_strides_table)
{
    const order_case *c = &order_cases[_i];
    int64_t got[5] = {-7, -7, -7, -7, -7};
    ck_assert_int_eq(pylayout_order_strides(c->ndim, c->shape, c->order, got), PYLAYOUT_OK);
    for (int32_t d = 0; d < c->ndim; d++)
        ck_assert_msg(got[d] == c->strides[d], "row %d: stride[%d] = %lld, torch says %lld", _i, (int)d,
                      (long long)got[d], (long long)c->strides[d]);
    for (int32_t d = c->ndim; d < 5; d++)
        ck_assert_msg(got[d] == -7, "row %d: wrote past ndim", _i);
}
END_TEST

/* order_strides agrees with format_strides for the orders that name a format. */
START_TEST(test_order_matches_formats)
{
    int64_t s4[4] = {2, 3, 4, 5}, s5[5] = {2, 3, 4, 5, 6}, a[5], b[5];
    const int32_t c4[4] = {0, 1, 2, 3}, cl[4] = {0, 2, 3, 1}, f4[4] = {3, 2, 1, 0};
    const int32_t cl3[5] = {0, 2, 3, 4, 1};
    ck_assert_int_eq(pylayout_order_strides(4, s4, c4, a), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_format_strides(4, s4, FMT_C, b), PYLAYOUT_OK);
    ck_assert_mem_eq(a, b, 4 * sizeof(int64_t));
    ck_assert_int_eq(pylayout_order_strides(4, s4, cl, a), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_format_strides(4, s4, FMT_CL, b), PYLAYOUT_OK);
    ck_assert_mem_eq(a, b, 4 * sizeof(int64_t));
    ck_assert_int_eq(pylayout_order_strides(4, s4, f4, a), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_format_strides(4, s4, FMT_F, b), PYLAYOUT_OK);
    ck_assert_mem_eq(a, b, 4 * sizeof(int64_t));
    ck_assert_int_eq(pylayout_order_strides(5, s5, cl3, a), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_format_strides(5, s5, FMT_CL3, b), PYLAYOUT_OK);
    ck_assert_mem_eq(a, b, 5 * sizeof(int64_t));
}
END_TEST

/* pylayout_like_order: rows checked against torch 2.13's
 * x.clone(memory_format=torch.preserve_format).stride() (c10's
 * infer_dense_strides) for the same shape and strides. */
typedef struct {
    int32_t ndim;
    int64_t shape[4], strides[4];
    int64_t torch_strides[4]; /* of the preserve_format clone */
} like_case;

static const like_case like_cases[] = {
    {2, {3, 4}, {4, 1}, {4, 1}},                          /* dense: its own strides */
    {2, {3, 4}, {1, 3}, {1, 3}},                          /* transposed, dense */
    {3, {2, 3, 4}, {24, 1, 6}, {12, 1, 3}},               /* sliced: stride order kept */
    {4, {2, 3, 4, 5}, {120, 1, 30, 6}, {60, 1, 15, 3}},   /* channels_last with gaps */
    {3, {2, 3, 4}, {0, 4, 1}, {12, 4, 1}},                /* broadcast dim stays in place */
    {3, {4, 3, 2}, {2, 2, 1}, {6, 2, 1}},                 /* equal strides: smaller size inside */
    {4, {2, 1, 2, 2}, {24, 60, 6, 12}, {4, 8, 1, 2}},     /* a size-1 dim with the largest stride */
};
#define N_LIKE_CASES ((int)(sizeof like_cases / sizeof like_cases[0]))

START_TEST(test_like_order_table)
{
    const like_case *c = &like_cases[_i];
    DLTensor t = {.data = (void *)64, .device = {kDLCPU, 0}, .ndim = c->ndim, .dtype = {kDLFloat, 32, 1},
                  .shape = (int64_t *)c->shape, .strides = (int64_t *)c->strides};
    int32_t order[4];
    int64_t got[4];
    ck_assert_int_eq(pylayout_like_order(&t, order), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_order_strides(c->ndim, c->shape, order, got), PYLAYOUT_OK);
    for (int32_t d = 0; d < c->ndim; d++)
        ck_assert_msg(got[d] == c->torch_strides[d], "row %d: stride[%d] = %lld, torch says %lld", _i, (int)d,
                      (long long)got[d], (long long)c->torch_strides[d]);
}
END_TEST

START_TEST(test_like_order_errors)
{
    int64_t shape[2] = {2, -3}, strides[2] = {1, 1};
    DLTensor t = {.data = (void *)64, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                  .shape = shape, .strides = strides};
    int32_t order[2];
    ck_assert_int_eq(pylayout_like_order(NULL, order), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_like_order(&t, order), PYLAYOUT_ERR_INVALID_TENSOR);
    shape[1] = 3;
    ck_assert_int_eq(pylayout_like_order(&t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_like_order(&t, order), PYLAYOUT_OK);
}
END_TEST

/* pylayout_is_in_order: agrees with is_contiguous for the orders that name a
 * format, on every row of the layout table. */
START_TEST(test_is_in_order_matches_formats)
{
    const layout_case *c = &layout_cases[_i];
    DLTensor t = {.data = (void *)64, .device = {kDLCPU, 0}, .ndim = c->ndim, .dtype = {kDLFloat, 32, 1},
                  .shape = (int64_t *)c->shape, .strides = (int64_t *)c->strides};
    int32_t row_major[PYLAYOUT_MAX_NDIM], col_major[PYLAYOUT_MAX_NDIM];
    for (int32_t d = 0; d < c->ndim; d++) {
        row_major[d] = d;
        col_major[d] = c->ndim - 1 - d;
    }
    bool in_order = false, fmt = false;
    ck_assert_int_eq(pylayout_is_in_order(&t, row_major, &in_order), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_is_contiguous(&t, PYLAYOUT_FORMAT_CONTIGUOUS, &fmt), PYLAYOUT_OK);
    ck_assert_msg(in_order == fmt, "row %d: row-major order %d, contiguous %d", _i, in_order, fmt);
    ck_assert_int_eq(pylayout_is_in_order(&t, col_major, &in_order), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_is_contiguous(&t, PYLAYOUT_FORMAT_FORTRAN, &fmt), PYLAYOUT_OK);
    ck_assert_msg(in_order == fmt, "row %d: column-major order %d, fortran %d", _i, in_order, fmt);
    int64_t numel = 1;
    for (int32_t d = 0; d < c->ndim; d++)
        numel *= c->shape[d];
    if (c->ndim == 4 && numel > 0) { /* c10's channels_last test holds empty tensors to the stride rule */
        const int32_t cl[4] = {0, 2, 3, 1};
        ck_assert_int_eq(pylayout_is_in_order(&t, cl, &in_order), PYLAYOUT_OK);
        ck_assert_int_eq(pylayout_is_contiguous(&t, PYLAYOUT_FORMAT_CHANNELS_LAST, &fmt), PYLAYOUT_OK);
        ck_assert_msg(in_order == fmt, "row %d: NHWC order %d, channels_last %d", _i, in_order, fmt);
    }
}
END_TEST

START_TEST(test_is_in_order_errors)
{
    int64_t shape[2] = {2, 3}, strides[2] = {1, 2};
    DLTensor t = {.data = (void *)64, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                  .shape = shape, .strides = strides};
    const int32_t ok[2] = {1, 0}, dup[2] = {0, 0};
    bool r = false;
    ck_assert_int_eq(pylayout_is_in_order(&t, ok, &r), PYLAYOUT_OK);
    ck_assert(r);
    ck_assert_int_eq(pylayout_is_in_order(&t, dup, &r), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_is_in_order(&t, NULL, &r), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_is_in_order(&t, ok, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_is_in_order(NULL, ok, &r), PYLAYOUT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_order_strides_errors)
{
    int64_t shape[4] = {2, 3, 4, 5}, neg[4] = {2, -3, 4, 5}, strides[4];
    int64_t huge[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
    static const struct {
        const char *name;
        int32_t order[4];
    } bad[] = {
        {"duplicate", {0, 1, 1, 3}}, {"out of range", {0, 1, 2, 4}}, {"negative", {0, 1, 2, -1}},
        {"all zero", {0, 0, 0, 0}},  {"INT32_MIN", {0, 1, 2, INT32_MIN}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(pylayout_order_strides(4, shape, bad[i].order, strides) == PYLAYOUT_ERR_INVALID_ARGUMENT,
                      "order %s accepted", bad[i].name);
        ck_assert_str_ne(pylayout_last_error(), "");
    }
    const int32_t ok[4] = {0, 1, 2, 3}, ok2[2] = {1, 0};
    ck_assert_int_eq(pylayout_order_strides(4, shape, NULL, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_order_strides(4, NULL, ok, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_order_strides(4, shape, ok, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_order_strides(4, neg, ok, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_order_strides(-1, shape, ok, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_order_strides(65, shape, ok, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_order_strides(2, huge, ok2, strides), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_order_strides(0, NULL, NULL, NULL), PYLAYOUT_OK);
}
END_TEST

/* ------------------------------------------------------------- errors */

START_TEST(test_last_error_cleared_by_success)
{
    int64_t shape[1] = {-1};
    DLTensor bad = meta(1, shape, NULL);
    ck_assert_int_eq(pylayout_validate(&bad), PYLAYOUT_ERR_INVALID_TENSOR);
    ck_assert_str_ne(pylayout_last_error(), "");
    int64_t good[1] = {3};
    DLTensor t = meta(1, good, NULL);
    ck_assert_int_eq(pylayout_validate(&t), PYLAYOUT_OK);
    ck_assert_str_eq(pylayout_last_error(), "");
}
END_TEST

static Suite *layout_suite(void)
{
    const tcase_spec cases[] = {
        TCASE("contiguity", LOOP(test_is_contiguous_table, N_LAYOUT_CASES), TEST(test_channels_last_other_ranks)),
        TCASE("suggest_format", LOOP(test_suggest_format_table, N_LAYOUT_CASES)),
        TCASE("is_dense", LOOP(test_is_dense_table, N_LAYOUT_CASES)),
        TCASE("metadata", TEST(test_queries_metadata_only), TEST(test_query_errors), TEST(test_numel),
              TEST(test_queries_numel_overflow)),
        TCASE("validate", LOOP(test_validate_table, N_VALIDATE_CASES), TEST(test_validate_ndim_limits),
              TEST(test_validate_dtypes), TEST(test_last_error_cleared_by_success)),
        TCASE("strides", LOOP(test_format_strides_table, N_FORMAT_CASES), TEST(test_format_strides_errors),
              LOOP(test_order_strides_table, N_ORDER_CASES), TEST(test_order_matches_formats),
              LOOP(test_like_order_table, N_LIKE_CASES), TEST(test_like_order_errors),
              LOOP(test_is_in_order_matches_formats, N_LAYOUT_CASES), TEST(test_is_in_order_errors),
              TEST(test_order_strides_errors)),
    };
    return SUITE_OF("layout", cases, 0);
}

int main(void) { return run_suite(layout_suite()); }
