/*
 * check_complex.c - Check tests of pylayout's complex API through the public
 * header only: pylayout_view_as_complex, pylayout_view_as_real,
 * pylayout_complex_parts, pylayout_canonical_strides,
 * pylayout_tensor_canonicalize, pylayout_pack_complex and
 * pylayout_unpack_complex.
 *
 * Every error status each function documents is provoked, and the written
 * tensors are checked byte for byte against a sentinel afterwards ("on
 * error nothing is written").  A randomized differential test compares
 * pack/unpack with a naive loop over all indices, over whole buffers, so a
 * write outside the destination's elements shows too.  Runs with
 * CK_NOFORK: libgomp is not fork-safe.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <complex.h> /* before pylayout.h, as a C user's may be: its `complex` and `I` macros */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pylayout.h>

#include "check_util.h"

#define SENTINEL 0xA5

static const DLDataType F32 = {kDLFloat, 32, 1}, F64 = {kDLFloat, 64, 1};
static const DLDataType C32 = {kDLComplex, 32, 1}, C64 = {kDLComplex, 64, 1}, C128 = {kDLComplex, 128, 1};
static const DLDataType BF16 = {kDLBfloat, 16, 1}, I32 = {kDLInt, 32, 1};

/* ------------------------------------------------------------ helpers */

static _Alignas(64) unsigned char arena[1 << 16];

static DLTensor desc(void *data, int32_t ndim, int64_t *shape, int64_t *strides, DLDataType dt, uint64_t off)
{
    return dl_make(data, ndim, shape, strides, dt, off);
}

static pylayout_tensor *borrow_flags(DLTensor t, uint64_t flags)
{
    pylayout_tensor *x = NULL;
    pylayout_status st = pylayout_tensor_borrow(&t, flags, &x);
    ck_assert_msg(st == PYLAYOUT_OK, "borrow failed: %s (%s)", pylayout_strerror(st), pylayout_last_error());
    return x;
}

static pylayout_tensor *borrow(DLTensor t)
{
    return borrow_flags(t, 0);
}

static uintptr_t first(const DLTensor *t)
{
    return (uintptr_t)t->data + (uintptr_t)t->byte_offset;
}

static bool same_dtype(DLDataType a, DLDataType b)
{
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

static void assert_layout(const DLTensor *t, int32_t ndim, const int64_t *shape, const int64_t *strides)
{
    ck_assert_int_eq(t->ndim, ndim);
    for (int32_t d = 0; d < ndim; d++) {
        ck_assert_msg(t->shape[d] == shape[d], "dim %d: shape %lld, expected %lld", d, (long long)t->shape[d],
                      (long long)shape[d]);
        ck_assert_msg(t->strides[d] == strides[d], "dim %d: stride %lld, expected %lld", d,
                      (long long)t->strides[d], (long long)strides[d]);
    }
}

/* Whether the last error names `dim` as "dim N" (whole word). */
static bool error_names_dim(int dim)
{
    char want[32];
    snprintf(want, sizeof want, "dim %d", dim);
    const char *e = pylayout_last_error();
    for (const char *p = strstr(e, want); p; p = strstr(p + 1, want))
        if (!isdigit((unsigned char)p[strlen(want)]))
            return true;
    return false;
}

static bool error_mentions_ci(const char *word)
{
    const char *e = pylayout_last_error();
    size_t n = strlen(word);
    for (; *e; e++) {
        size_t i = 0;
        while (i < n && e[i] && tolower((unsigned char)e[i]) == tolower((unsigned char)word[i]))
            i++;
        if (i == n)
            return true;
    }
    return false;
}

static DLDataType complex_of(DLDataType r)
{
    DLDataType c = {kDLComplex, (uint8_t)(r.bits * 2), 1};
    return c;
}

static const DLDataType REALS[3] = {{kDLFloat, 16, 1}, {kDLFloat, 32, 1}, {kDLFloat, 64, 1}};

/* ------------------------------------------------- view_as_complex */

START_TEST(test_view_as_complex_layouts)
{
    for (int k = 0; k < 3; k++) {
        DLDataType rt = REALS[k];
        size_t isz = rt.bits / 8;
        struct {
            int32_t ndim;
            int64_t shape[4], strides[4];
            uint64_t off; /* in real elements */
            int64_t want[3];
        } cases[] = {
            {3, {3, 4, 2}, {8, 2, 1}, 0, {4, 1}},             /* contiguous */
            {3, {4, 3, 2}, {2, 8, 1}, 0, {1, 4}},             /* transposed */
            {3, {3, 2, 2}, {16, 4, 1}, 6, {8, 2}},            /* sliced with step 2, even offset */
            {3, {336, 1, 2}, {2, 1, 1}, 0, {1, 0}},           /* user story 2: odd stride on a size-1 dim */
            {3, {5, 1, 2}, {2, 3, 1}, 2, {1, 1}},             /* stride 3 -> 1 (C division) */
            {2, {3, 2}, {0, 1}, 0, {0}},                      /* broadcast: stride 0 */
            {4, {2, 3, 2, 2}, {12, 4, 2, 1}, 0, {6, 2, 1}},   /* overlapping stride 2 dims: still aligned */
            {4, {2, 2, 2, 2}, {4, 16, 8, 1}, 0, {2, 8, 4}},   /* channels_last-like order */
            {2, {1, 2}, {7, 1}, 0, {3}},                      /* size-1 only */
            {1, {2}, {1}, 0, {0}},                            /* 1-D: 0-d complex */
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            DLTensor t = desc(arena, cases[c].ndim, cases[c].shape, cases[c].strides, rt, cases[c].off * isz);
            pylayout_tensor *x = borrow(t), *v = NULL;
            pylayout_status st = pylayout_view_as_complex(x, &v);
            ck_assert_msg(st == PYLAYOUT_OK, "float%d case %zu: %s", rt.bits, c, pylayout_last_error());
            const DLTensor *d = dl_of(v);
            ck_assert(same_dtype(d->dtype, complex_of(rt)));
            assert_layout(d, cases[c].ndim - 1, cases[c].shape, cases[c].want);
            ck_assert_msg(first(d) == (uintptr_t)arena + cases[c].off * isz, "case %zu: not zero-copy", c);
            ck_assert_int_eq(d->device.device_type, kDLCPU);
            pylayout_tensor_release(v);
            pylayout_tensor_release(x);
        }
    }
}
END_TEST

START_TEST(test_view_as_complex_empty_and_negative)
{
    /* Empty tensors: any strides, any alignment (torch refuses odd strides here). */
    int64_t shape[3] = {0, 3, 2}, strides[3] = {1, 3, 1};
    for (uint64_t off = 0; off < 12; off += 4) {
        pylayout_tensor *x = borrow(desc(arena, 3, shape, strides, F32, off)), *v = NULL;
        ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_OK);
        int64_t want_shape[2] = {0, 3}, want[2] = {0, 1};
        assert_layout(dl_of(v), 2, want_shape, want);
        pylayout_tensor_release(v);
        pylayout_tensor_release(x);
    }
    int64_t shape3[3] = {4, 0, 2}, strides3[3] = {3, 5, 7};
    pylayout_tensor *x = borrow(desc(NULL, 3, shape3, strides3, F64, 0)), *v = NULL;
    ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_OK); /* empty: even (re, im) stride 7 is fine */
    pylayout_tensor_release(v);
    pylayout_tensor_release(x);
    /* Negative even strides (NumPy's a[::-1]): viewable, halved. */
    int64_t shape4[2] = {3, 2}, strides4[2] = {-2, 1};
    x = borrow(desc(arena, 2, shape4, strides4, F32, 4 * 4));
    ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_OK);
    int64_t want_shape4[1] = {3}, want4[1] = {-1};
    assert_layout(dl_of(v), 1, want_shape4, want4);
    ck_assert(first(dl_of(v)) == (uintptr_t)arena + 16);
    pylayout_tensor_release(v);
    pylayout_tensor_release(x);
}
END_TEST

START_TEST(test_view_as_complex_flags_and_device)
{
    int64_t shape[2] = {3, 2}, strides[2] = {2, 1};
    pylayout_tensor *x = borrow_flags(desc(arena, 2, shape, strides, F32, 0), PYLAYOUT_FLAG_READ_ONLY), *v = NULL;
    ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_OK);
    uint64_t flags = 0;
    ck_assert_int_eq(pylayout_tensor_flags(v, &flags), PYLAYOUT_OK);
    ck_assert_msg(flags & PYLAYOUT_FLAG_READ_ONLY, "a view of a read-only tensor must be read-only");
    pylayout_tensor *r = NULL;
    ck_assert_int_eq(pylayout_view_as_real(v, &r), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_flags(r, &flags), PYLAYOUT_OK);
    ck_assert(flags & PYLAYOUT_FLAG_READ_ONLY);
    pylayout_tensor *c = NULL;
    ck_assert_int_eq(pylayout_tensor_canonicalize(x, &c), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_flags(c, &flags), PYLAYOUT_OK);
    ck_assert(flags & PYLAYOUT_FLAG_READ_ONLY);
    pylayout_tensor *re = NULL, *im = NULL;
    ck_assert_int_eq(pylayout_complex_parts(v, &re, &im), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_flags(im, &flags), PYLAYOUT_OK);
    ck_assert(flags & PYLAYOUT_FLAG_READ_ONLY);
    pylayout_tensor_release(re);
    pylayout_tensor_release(im);
    pylayout_tensor_release(c);
    pylayout_tensor_release(r);
    pylayout_tensor_release(v);
    pylayout_tensor_release(x);

    /* A CUDA tensor: metadata only, works. */
    DLTensor g = desc(arena, 2, shape, strides, F32, 0);
    g.device.device_type = kDLCUDA;
    x = borrow(g);
    ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_OK);
    ck_assert_int_eq(dl_of(v)->device.device_type, kDLCUDA);
    ck_assert_int_eq(pylayout_view_as_real(v, &r), PYLAYOUT_OK);
    ck_assert_int_eq(dl_of(r)->device.device_type, kDLCUDA);
    ck_assert_int_eq(pylayout_complex_parts(v, &re, &im), PYLAYOUT_OK);
    ck_assert_int_eq(dl_of(im)->device.device_type, kDLCUDA);
    pylayout_tensor_release(re);
    pylayout_tensor_release(im);
    pylayout_tensor_release(r);
    pylayout_tensor_release(v);
    pylayout_tensor_release(x);
}
END_TEST

START_TEST(test_view_as_complex_errors)
{
    pylayout_tensor *v = NULL;
    int64_t shape[3] = {2, 3, 2}, strides[3] = {6, 2, 1};
    pylayout_tensor *ok = borrow(desc(arena, 3, shape, strides, F32, 0));
    ck_assert_int_eq(pylayout_view_as_complex(NULL, &v), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_view_as_complex(ok, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    pylayout_tensor_release(ok);

    const DLDataType bad_dtypes[] = {{kDLBfloat, 16, 1}, {kDLInt, 32, 1}, {kDLComplex, 64, 1}, {kDLUInt, 16, 1},
                                     {kDLFloat, 32, 2}};
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        DLTensor t = desc(arena, 3, shape, strides, bad_dtypes[i], 0);
        pylayout_tensor *x = NULL;
        if (pylayout_tensor_borrow(&t, 0, &x) != PYLAYOUT_OK)
            continue; /* lanes != 1 is refused already by borrow */
        ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
        ck_assert_str_ne(pylayout_last_error(), "");
        pylayout_tensor_release(x);
    }

    /* SHAPE_MISMATCH: 0-d, last dim 3, last dim 1 */
    {
        pylayout_tensor *x = borrow(desc(arena, 0, NULL, NULL, F32, 0));
        ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_ERR_SHAPE_MISMATCH);
        pylayout_tensor_release(x);
        int64_t s2[2] = {4, 3}, st2[2] = {3, 1};
        x = borrow(desc(arena, 2, s2, st2, F32, 0));
        ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_ERR_SHAPE_MISMATCH);
        pylayout_tensor_release(x);
        int64_t s3[2] = {4, 1}, st3[2] = {2, 1};
        x = borrow(desc(arena, 2, s3, st3, F64, 0));
        ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_ERR_SHAPE_MISMATCH);
        pylayout_tensor_release(x);
    }

    /* NOT_VIEWABLE, naming the dim */
    struct {
        int32_t ndim;
        int64_t shape[4], strides[4];
        uint64_t off;
        int dim; /* -1: alignment, no dim */
    } bad[] = {
        {2, {3, 2}, {4, 2}, 0, 1},                /* (re, im) stride 2 */
        {2, {3, 2}, {2, 0}, 0, 1},                /* (re, im) stride 0 */
        {2, {3, 2}, {3, 1}, 0, 0},                /* odd stride on dim 0 */
        {3, {2, 3, 2}, {12, 3, 1}, 0, 1},         /* odd stride on dim 1 */
        {4, {2, 1, 3, 2}, {12, 5, 3, 1}, 0, 2},   /* size-1 dim 1 is fine; dim 2 is not */
        {3, {2, 3, 2}, {-3, 2, 1}, 6, 0},         /* odd negative stride */
        {2, {3, 2}, {2, 1}, 1, -1},               /* first element misaligned (odd storage offset) */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int k = 0; k < 3; k++) {
            DLDataType rt = REALS[k];
            pylayout_tensor *x = borrow(desc(arena, bad[i].ndim, bad[i].shape, bad[i].strides, rt,
                                             bad[i].off * (rt.bits / 8)));
            v = NULL;
            pylayout_status st = pylayout_view_as_complex(x, &v);
            ck_assert_msg(st == PYLAYOUT_ERR_NOT_VIEWABLE, "case %zu float%d: status %d", i, rt.bits, st);
            if (bad[i].dim >= 0)
                ck_assert_msg(error_names_dim(bad[i].dim), "case %zu: '%s' should name dim %d", i,
                              pylayout_last_error(), bad[i].dim);
            else
                ck_assert_str_ne(pylayout_last_error(), "");
            pylayout_tensor_release(x);
        }
    }
    /* Misaligned for float32 by 4 bytes with a pointer (not byte_offset): also refused. */
    int64_t s[2] = {2, 2}, st[2] = {2, 1};
    pylayout_tensor *x = borrow(desc(arena + 4, 2, s, st, F32, 0));
    ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_ERR_NOT_VIEWABLE);
    pylayout_tensor_release(x);
}
END_TEST

/* ------------------------------------------------------- view_as_real */

START_TEST(test_view_as_real)
{
    const DLDataType cts[3] = {{kDLComplex, 32, 1}, {kDLComplex, 64, 1}, {kDLComplex, 128, 1}};
    for (int k = 0; k < 3; k++) {
        size_t rsz = cts[k].bits / 16;
        int64_t shape[3] = {3, 1, 4}, strides[3] = {1, 5, 3}; /* transposed, odd stride on a size-1 dim */
        pylayout_tensor *z = borrow(desc(arena, 3, shape, strides, cts[k], 2 * rsz * 2)), *r = NULL;
        ck_assert_int_eq(pylayout_view_as_real(z, &r), PYLAYOUT_OK);
        const DLTensor *d = dl_of(r);
        ck_assert(same_dtype(d->dtype, REALS[k]));
        int64_t ws[4] = {3, 1, 4, 2}, wst[4] = {2, 10, 6, 1};
        assert_layout(d, 4, ws, wst);
        ck_assert(first(d) == (uintptr_t)arena + 4 * rsz);
        /* view_as_complex inverts it exactly */
        pylayout_tensor *back = NULL;
        ck_assert_int_eq(pylayout_view_as_complex(r, &back), PYLAYOUT_OK);
        assert_layout(dl_of(back), 3, shape, strides);
        ck_assert(first(dl_of(back)) == first(dl_of(z)));
        ck_assert(same_dtype(dl_of(back)->dtype, cts[k]));
        pylayout_tensor_release(back);
        pylayout_tensor_release(r);

        /* complex_parts: strides doubled, im one real element further */
        pylayout_tensor *re = NULL, *im = NULL;
        ck_assert_int_eq(pylayout_complex_parts(z, &re, &im), PYLAYOUT_OK);
        int64_t wps[3] = {2, 10, 6};
        assert_layout(dl_of(re), 3, shape, wps);
        assert_layout(dl_of(im), 3, shape, wps);
        ck_assert(same_dtype(dl_of(re)->dtype, REALS[k]) && same_dtype(dl_of(im)->dtype, REALS[k]));
        ck_assert(first(dl_of(re)) == first(dl_of(z)));
        ck_assert(first(dl_of(im)) == first(dl_of(z)) + rsz);
        pylayout_tensor_release(re);
        pylayout_tensor_release(im);
        pylayout_tensor_release(z);

        /* 0-d complex -> shape (2,) */
        z = borrow(desc(arena, 0, NULL, NULL, cts[k], 0));
        ck_assert_int_eq(pylayout_view_as_real(z, &r), PYLAYOUT_OK);
        int64_t s1[1] = {2}, st1[1] = {1};
        assert_layout(dl_of(r), 1, s1, st1);
        pylayout_tensor_release(r);
        pylayout_tensor_release(z);
    }
}
END_TEST

START_TEST(test_view_as_real_errors)
{
    pylayout_tensor *r = NULL, *re = NULL, *im = NULL;
    int64_t shape[1] = {4}, strides[1] = {1};
    pylayout_tensor *z = borrow(desc(arena, 1, shape, strides, C64, 0));
    ck_assert_int_eq(pylayout_view_as_real(NULL, &r), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_view_as_real(z, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_complex_parts(NULL, &re, &im), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_complex_parts(z, NULL, &im), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_complex_parts(z, &re, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    pylayout_tensor_release(z);
    const DLDataType bad[] = {{kDLFloat, 32, 1}, {kDLFloat, 64, 1}, {kDLInt, 64, 1}, {kDLBfloat, 16, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        z = borrow(desc(arena, 1, shape, strides, bad[i], 0));
        ck_assert_int_eq(pylayout_view_as_real(z, &r), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
        re = im = NULL;
        ck_assert_int_eq(pylayout_complex_parts(z, &re, &im), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
        pylayout_tensor_release(z);
    }
    /* 64 dims: the trailing dim does not fit.  (pylayout.h lists OK,
     * INVALID_ARGUMENT, UNSUPPORTED_DTYPE, NO_MEMORY; the implementation
     * returns INVALID_TENSOR, which is the sensible status.) */
    int64_t s64[PYLAYOUT_MAX_NDIM], st64[PYLAYOUT_MAX_NDIM];
    for (int d = 0; d < PYLAYOUT_MAX_NDIM; d++)
        s64[d] = 1, st64[d] = 1;
    z = borrow(desc(arena, PYLAYOUT_MAX_NDIM, s64, st64, C64, 0));
    r = NULL;
    ck_assert_int_eq(pylayout_view_as_real(z, &r), PYLAYOUT_ERR_INVALID_TENSOR);
    ck_assert_ptr_null(r);
    re = im = NULL;
    ck_assert_int_eq(pylayout_complex_parts(z, &re, &im), PYLAYOUT_OK); /* parts add no dim */
    pylayout_tensor_release(re);
    pylayout_tensor_release(im);
    pylayout_tensor_release(z);
}
END_TEST

/* --------------------------------------------------------- canonicalize */

START_TEST(test_canonical_strides)
{
    struct {
        int32_t ndim;
        int64_t shape[5], strides[5], want[5];
    } cases[] = {
        {3, {336, 1, 2}, {2, 1, 1}, {2, 2, 1}},         /* user story 2 */
        {3, {4, 1, 2}, {2, 1, 1}, {2, 2, 1}},           /* the docstring example */
        {2, {3, 1}, {5, 7}, {5, 1}},                    /* innermost size-1 dim: 1 */
        {3, {1, 1, 1}, {9, 9, 9}, {1, 1, 1}},
        {3, {2, 1, 3}, {3, 17, 1}, {3, 3, 1}},
        {3, {0, 1, 3}, {3, 5, 1}, {3, 3, 1}},           /* empty */
        {3, {2, 1, 0}, {1, 5, 1}, {1, 1, 1}},           /* size-0 inner dim counts as 1 */
        {2, {1, 3}, {5, -2}, {6, -2}},                  /* negative inner stride */
        {3, {2, 3, 4}, {1, 8, 2}, {1, 8, 2}},           /* no size-1 dims: unchanged */
        {4, {2, 1, 3, 1}, {40, 11, 13, 3}, {40, 39, 13, 1}}, /* inner dims sliced: stride * size */
        {5, {1, 2, 1, 2, 1}, {7, 6, 5, 3, 1}, {12, 6, 6, 3, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        DLTensor t = desc(arena, cases[c].ndim, cases[c].shape, cases[c].strides, F32, 0);
        int64_t got[5];
        ck_assert_int_eq(pylayout_canonical_strides(&t, got), PYLAYOUT_OK);
        for (int d = 0; d < cases[c].ndim; d++)
            ck_assert_msg(got[d] == cases[c].want[d], "case %zu dim %d: %lld, expected %lld", c, d,
                          (long long)got[d], (long long)cases[c].want[d]);
        /* tensor_canonicalize: the same strides, zero-copy */
        pylayout_tensor *x = borrow(t), *v = NULL;
        ck_assert_int_eq(pylayout_tensor_canonicalize(x, &v), PYLAYOUT_OK);
        assert_layout(dl_of(v), cases[c].ndim, cases[c].shape, cases[c].want);
        ck_assert(first(dl_of(v)) == first(dl_of(x)));
        pylayout_tensor_release(v);
        pylayout_tensor_release(x);
    }
    /* NULL strides: compact row-major */
    int64_t shape[3] = {2, 1, 3}, got[3];
    DLTensor t = desc(arena, 3, shape, NULL, F64, 0);
    ck_assert_int_eq(pylayout_canonical_strides(&t, got), PYLAYOUT_OK);
    ck_assert(got[0] == 3 && got[1] == 3 && got[2] == 1);
    /* 0-d: nothing to write */
    t = desc(arena, 0, NULL, NULL, F32, 0);
    got[0] = 77;
    ck_assert_int_eq(pylayout_canonical_strides(&t, got), PYLAYOUT_OK);
    ck_assert_int_eq(got[0], 77);
}
END_TEST

/* The purpose of canonical strides (pylayout.h, pylayout/__init__.py): strict
 * stride checks such as torch's view_as_complex before pytorch#169780 (every stride but the
 * last even) accept every tensor pylayout views as complex.  A size-1 dim
 * outside a broadcast (stride 0) dim breaks this if it gets stride 1. */
START_TEST(test_canonical_strides_even_outside_broadcast_dim)
{
    int64_t shape[3] = {1, 3, 2}, strides[3] = {7, 0, 1}, got[3];
    DLTensor t = desc(arena, 3, shape, strides, F32, 0);
    pylayout_tensor *x = borrow(t), *v = NULL;
    ck_assert_int_eq(pylayout_view_as_complex(x, &v), PYLAYOUT_OK); /* viewable */
    pylayout_tensor_release(v);
    pylayout_tensor_release(x);
    ck_assert_int_eq(pylayout_canonical_strides(&t, got), PYLAYOUT_OK);
    ck_assert_int_eq(got[1], 0);
    ck_assert_msg(got[0] % 2 == 0, "canonical stride of size-1 dim 0 outside a stride-0 dim is %lld (odd)",
                  (long long)got[0]);
}
END_TEST

START_TEST(test_canonical_strides_errors)
{
    int64_t shape[2] = {2, 1}, strides[2] = {1, 1}, got[PYLAYOUT_MAX_NDIM + 2];
    DLTensor t = desc(arena, 2, shape, strides, F32, 0);
    ck_assert_int_eq(pylayout_canonical_strides(NULL, got), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_canonical_strides(&t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    pylayout_tensor *v = NULL;
    ck_assert_int_eq(pylayout_tensor_canonicalize(NULL, &v), PYLAYOUT_ERR_INVALID_ARGUMENT);
    pylayout_tensor *x = borrow(t);
    ck_assert_int_eq(pylayout_tensor_canonicalize(x, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    pylayout_tensor_release(x);

    int64_t big_shape[PYLAYOUT_MAX_NDIM + 1], big_strides[PYLAYOUT_MAX_NDIM + 1];
    for (int d = 0; d <= PYLAYOUT_MAX_NDIM; d++)
        big_shape[d] = 1, big_strides[d] = 1;
    int64_t neg_shape[2] = {2, -1};
    DLTensor bad[4] = {
        desc(arena, -1, shape, strides, F32, 0),
        desc(arena, PYLAYOUT_MAX_NDIM + 1, big_shape, big_strides, F32, 0),
        desc(arena, 2, neg_shape, strides, F32, 0),
        desc(arena, 2, NULL, strides, F32, 0),
    };
    for (int i = 0; i < 4; i++) {
        memset(got, SENTINEL, sizeof got);
        ck_assert_int_eq(pylayout_canonical_strides(&bad[i], got), PYLAYOUT_ERR_INVALID_TENSOR);
        for (size_t b = 0; b < sizeof got; b++)
            ck_assert_msg(((unsigned char *)got)[b] == SENTINEL, "case %d wrote strides_ret on error", i);
    }
}
END_TEST

/* ------------------------------------------------------ pack / unpack */

static unsigned char out_buf[256], re_buf[128], im_buf[128], snap[256];

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)((i * 131u + seed * 7u) >> 1);
}

static void expect_unchanged(const unsigned char *b, const unsigned char *ref, size_t n, const char *what)
{
    ck_assert_msg(memcmp(b, ref, n) == 0, "%s was written although the call failed (%s)", what,
                  pylayout_last_error());
}

START_TEST(test_pack_small_exact)
{
    for (int k = 0; k < 3; k++) {
        DLDataType rt = REALS[k];
        size_t isz = rt.bits / 8;
        int64_t shape[2] = {2, 3}, rs[2] = {3, 1}, is[2] = {0, 1}, zs[2] = {1, 2}; /* im broadcast, out F-order */
        fill(re_buf, sizeof re_buf, 1);
        fill(im_buf, sizeof im_buf, 2);
        memset(out_buf, SENTINEL, sizeof out_buf);
        DLTensor re = desc(re_buf, 2, shape, rs, rt, 0), im = desc(im_buf, 2, shape, is, rt, isz);
        DLTensor out = desc(out_buf, 2, shape, zs, complex_of(rt), 2 * isz);
        ck_assert_int_eq(pylayout_pack_complex(&re, &im, &out), PYLAYOUT_OK);
        ck_assert_str_eq(pylayout_last_error(), "");
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                size_t z = 2 * isz * (size_t)(1 + i * zs[0] + j * zs[1]);
                ck_assert(memcmp(out_buf + z, re_buf + isz * (size_t)(i * 3 + j), isz) == 0);
                ck_assert(memcmp(out_buf + z + isz, im_buf + isz * (size_t)(1 + j), isz) == 0);
            }
        ck_assert_int_eq(out_buf[0], SENTINEL); /* before the first element */
        ck_assert_int_eq(out_buf[2 * isz * 7], SENTINEL); /* after the last one */

        /* and back */
        memset(re_buf, SENTINEL, sizeof re_buf);
        memset(im_buf, SENTINEL, sizeof im_buf);
        int64_t ds[2] = {1, 2};
        DLTensor dre = desc(re_buf, 2, shape, ds, rt, 0), dim = desc(im_buf, 2, shape, rs, rt, 0);
        ck_assert_int_eq(pylayout_unpack_complex(&out, &dre, &dim), PYLAYOUT_OK);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                size_t z = 2 * isz * (size_t)(1 + i * zs[0] + j * zs[1]);
                ck_assert(memcmp(re_buf + isz * (size_t)(i + 2 * j), out_buf + z, isz) == 0);
                ck_assert(memcmp(im_buf + isz * (size_t)(i * 3 + j), out_buf + z + isz, isz) == 0);
            }
    }
}
END_TEST

START_TEST(test_pack_errors_write_nothing)
{
    int64_t shape[2] = {2, 3}, rs[2] = {3, 1}, zs[2] = {3, 1}, zero[2] = {0, 1}, shape2[2] = {3, 2};
    int64_t shape1[1] = {6}, st1[1] = {1};
    fill(re_buf, sizeof re_buf, 3);
    fill(im_buf, sizeof im_buf, 4);
    DLTensor re = desc(re_buf, 2, shape, rs, F32, 0), im = desc(im_buf, 2, shape, rs, F32, 0);
    DLTensor out = desc(out_buf, 2, shape, zs, C64, 0);
    struct pack_case {
        const char *what;
        DLTensor re, im, out;
        pylayout_status want;
    } cases[16];
    int n = 0;
#define CASE(W, RE, IM, OUT, ST)                                                                                       \
    do {                                                                                                               \
        ck_assert_int_lt(n, (int)(sizeof cases / sizeof cases[0]));                                                    \
        cases[n++] = (struct pack_case){W, RE, IM, OUT, ST};                                                           \
    } while (0)
    DLTensor t;
    t = re, t.ndim = -1;
    CASE("re ndim -1", t, im, out, PYLAYOUT_ERR_INVALID_TENSOR);
    t = out, t.data = NULL;
    CASE("out data NULL", re, im, t, PYLAYOUT_ERR_INVALID_TENSOR);
    t = out, t.dtype = F32;
    CASE("out real", re, im, t, PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
    t = re, t.dtype = F64;
    CASE("re float64 for complex64", t, im, out, PYLAYOUT_ERR_DTYPE_MISMATCH);
    t = im, t.dtype = I32;
    CASE("im int32", re, t, out, PYLAYOUT_ERR_DTYPE_MISMATCH);
    {
        DLTensor b = re, bo = out;
        b.dtype = BF16;
        bo.dtype = C32;
        DLTensor bi = im;
        bi.dtype = BF16;
        CASE("bfloat16 parts for complex32", b, bi, bo, PYLAYOUT_ERR_DTYPE_MISMATCH);
    }
    t = re, t.ndim = 1, t.shape = shape1, t.strides = st1;
    CASE("re 1-D", t, im, out, PYLAYOUT_ERR_SHAPE_MISMATCH);
    t = im, t.shape = shape2;
    CASE("im 3x2", re, t, out, PYLAYOUT_ERR_SHAPE_MISMATCH);
    t = out, t.device.device_type = kDLCUDA;
    CASE("out on cuda", re, im, t, PYLAYOUT_ERR_UNSUPPORTED_DEVICE);
    t = re, t.device.device_type = kDLCUDA;
    CASE("re on cuda", t, im, out, PYLAYOUT_ERR_UNSUPPORTED_DEVICE);
    t = out, t.strides = zero;
    CASE("out broadcast", re, im, t, PYLAYOUT_ERR_OVERLAP);
    {
        DLTensor alias = re; /* re is out's real parts */
        static int64_t s2[2] = {6, 2};
        alias.data = out_buf;
        alias.strides = s2;
        CASE("re inside out", alias, im, out, PYLAYOUT_ERR_OVERLAP);
        DLTensor alias_im = alias;
        alias_im.byte_offset = 8 * 5 + 4; /* only out's last element's imaginary part */
        static int64_t s3[2] = {0, 0};
        alias_im.strides = s3;
        CASE("im touching out's last element", re, alias_im, out, PYLAYOUT_ERR_OVERLAP);
    }
#undef CASE
    for (int i = 0; i < n; i++) {
        memset(out_buf, SENTINEL, sizeof out_buf);
        memcpy(snap, out_buf, sizeof out_buf);
        pylayout_status st = pylayout_pack_complex(&cases[i].re, &cases[i].im, &cases[i].out);
        ck_assert_msg(st == cases[i].want, "%s: status %d (%s), expected %d", cases[i].what, st,
                      pylayout_last_error(), cases[i].want);
        ck_assert_str_ne(pylayout_last_error(), "");
        if (st == PYLAYOUT_ERR_UNSUPPORTED_DEVICE)
            ck_assert_msg(error_mentions_ci("cuda"), "%s: '%s' should name the device", cases[i].what,
                          pylayout_last_error());
        expect_unchanged(out_buf, snap, sizeof out_buf, cases[i].what);
    }
    ck_assert_int_eq(pylayout_pack_complex(NULL, &im, &out), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_pack_complex(&re, NULL, &out), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_pack_complex(&re, &im, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    /* re and im may be the same memory: only out is written. */
    ck_assert_int_eq(pylayout_pack_complex(&re, &re, &out), PYLAYOUT_OK);
    /* Empty: OK, nothing written. */
    int64_t eshape[2] = {0, 3};
    DLTensor ere = re, eim = im, eout = out;
    ere.shape = eim.shape = eout.shape = eshape;
    memset(out_buf, SENTINEL, sizeof out_buf);
    memcpy(snap, out_buf, sizeof out_buf);
    ck_assert_int_eq(pylayout_pack_complex(&ere, &eim, &eout), PYLAYOUT_OK);
    expect_unchanged(out_buf, snap, sizeof out_buf, "empty out");
}
END_TEST

START_TEST(test_unpack_errors_write_nothing)
{
    int64_t shape[2] = {2, 3}, rs[2] = {3, 1}, zs[2] = {3, 1}, zero[2] = {0, 1}, shape2[2] = {3, 2};
    fill(out_buf, sizeof out_buf, 5);
    DLTensor z = desc(out_buf, 2, shape, zs, C128, 0);
    DLTensor re = desc(re_buf, 2, shape, rs, F64, 0), im = desc(im_buf, 2, shape, rs, F64, 0);
    struct unpack_case {
        const char *what;
        DLTensor z, re, im;
        pylayout_status want;
    } cases[16];
    int n = 0;
#define CASE(W, Z, RE, IM, ST)                                                                                         \
    do {                                                                                                               \
        ck_assert_int_lt(n, (int)(sizeof cases / sizeof cases[0]));                                                    \
        cases[n++] = (struct unpack_case){W, Z, RE, IM, ST};                                                           \
    } while (0)
    DLTensor t;
    static int64_t big[PYLAYOUT_MAX_NDIM + 1];
    for (int d = 0; d <= PYLAYOUT_MAX_NDIM; d++)
        big[d] = 1;
    t = z, t.ndim = PYLAYOUT_MAX_NDIM + 1, t.shape = big, t.strides = big;
    CASE("z ndim 65", t, re, im, PYLAYOUT_ERR_INVALID_TENSOR);
    t = z, t.dtype = F64;
    CASE("z real", t, re, im, PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
    t = re, t.dtype = F32;
    CASE("re float32 for complex128", z, t, im, PYLAYOUT_ERR_DTYPE_MISMATCH);
    t = im, t.shape = shape2;
    CASE("im 3x2", z, re, t, PYLAYOUT_ERR_SHAPE_MISMATCH);
    t = z, t.device.device_type = kDLCUDA;
    CASE("z on cuda", t, re, im, PYLAYOUT_ERR_UNSUPPORTED_DEVICE);
    t = im, t.device.device_type = kDLROCM;
    CASE("im on rocm", z, re, t, PYLAYOUT_ERR_UNSUPPORTED_DEVICE);
    t = re, t.strides = zero;
    CASE("re broadcast", z, t, im, PYLAYOUT_ERR_OVERLAP);
    CASE("im == re", z, re, re, PYLAYOUT_ERR_OVERLAP);
    {
        DLTensor alias = re;
        static int64_t s2[2] = {6, 2};
        alias.data = out_buf;
        alias.strides = s2;
        CASE("re inside z", z, alias, im, PYLAYOUT_ERR_OVERLAP);
        DLTensor inter = re;
        inter.data = im_buf;
        inter.byte_offset = 8 * 5; /* re's first element is im's last */
        CASE("re and im share one element", z, inter, im, PYLAYOUT_ERR_OVERLAP);
    }
#undef CASE
    for (int i = 0; i < n; i++) {
        memset(re_buf, SENTINEL, sizeof re_buf);
        memset(im_buf, SENTINEL, sizeof im_buf);
        memcpy(snap, out_buf, sizeof out_buf);
        pylayout_status st = pylayout_unpack_complex(&cases[i].z, &cases[i].re, &cases[i].im);
        ck_assert_msg(st == cases[i].want, "%s: status %d (%s), expected %d", cases[i].what, st,
                      pylayout_last_error(), cases[i].want);
        ck_assert_str_ne(pylayout_last_error(), "");
        for (size_t b = 0; b < sizeof re_buf; b++)
            ck_assert_msg(re_buf[b] == SENTINEL && im_buf[b] == SENTINEL, "%s: wrote re/im on error",
                          cases[i].what);
        expect_unchanged(out_buf, snap, sizeof out_buf, "z (an input)");
    }
    ck_assert_int_eq(pylayout_unpack_complex(NULL, &re, &im), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_unpack_complex(&z, NULL, &im), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_unpack_complex(&z, &re, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    /* z may broadcast (it is only read) */
    DLTensor zb = z;
    zb.strides = zero;
    ck_assert_int_eq(pylayout_unpack_complex(&zb, &re, &im), PYLAYOUT_OK);
}
END_TEST

/* ------------------------------------------- randomized vs naive loops */

typedef struct lay {
    int32_t ndim;
    int64_t shape[5], strides[5];
    uint64_t off;       /* byte offset of element 0 from the buffer start */
    size_t span;        /* bytes the buffer must hold */
} lay;

/* A random layout of `shape` for elements of `isz` bytes: dims in a random
 * order, padded by steps, some flipped (negative) and, if allow_zero, some
 * broadcast (stride 0); element 0 placed so that every element is inside. */
static void random_layout(lay *l, int32_t ndim, const int64_t *shape, size_t isz, bool allow_zero, unsigned *s)
{
    int perm[5], steps[5], flip[5], zero[5];
    int64_t spacing = 1 + test_rand(s, 2); /* 2: every element one apart from the next */
    random_perm(perm, ndim, s);
    for (int d = 0; d < ndim; d++) {
        zero[d] = allow_zero && test_rand(s, 6) == 0;
        steps[d] = test_rand(s, 3) == 0 ? 2 + (int)test_rand(s, 2) : 1;
        flip[d] = test_rand(s, 5) == 0;
    }
    l->ndim = ndim;
    memcpy(l->shape, shape, (size_t)ndim * sizeof *shape);
    int64_t lo, hi;
    layout_strides(ndim, shape, perm, steps, flip, zero, l->strides, &lo, &hi);
    for (int d = 0; d < ndim; d++)
        l->strides[d] *= spacing;
    lo *= spacing;
    hi *= spacing;
    size_t pad = test_rand(s, 3);
    l->off = (uint64_t)((size_t)(-lo) + pad) * isz;
    l->span = l->off + (size_t)(hi + 1) * isz + 2 * isz;
}

/* A dense row-major-in-perm layout, identical for the three tensors when
 * called with the same seed: exercises the fast same-layout path. */
static void dense_layout(lay *l, int32_t ndim, const int64_t *shape, size_t isz, unsigned seed)
{
    unsigned s = seed;
    int perm[5];
    random_perm(perm, ndim, &s);
    l->ndim = ndim;
    memcpy(l->shape, shape, (size_t)ndim * sizeof *shape);
    int64_t lo, hi;
    layout_strides(ndim, shape, perm, NULL, NULL, NULL, l->strides, &lo, &hi);
    l->off = 0;
    l->span = (size_t)(hi + 1) * isz;
}

static unsigned char *alloc_filled(size_t n, int byte, unsigned *s)
{
    unsigned char *b = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < n; i++)
        b[i] = byte >= 0 ? (unsigned char)byte : (unsigned char)(rand_r(s) >> 5);
    return b;
}

static int64_t offset_of(const lay *l, const int64_t *idx)
{
    int64_t o = 0;
    for (int d = 0; d < l->ndim; d++)
        o += idx[d] * l->strides[d];
    return o;
}

static int64_t numel(int32_t ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* One pack and one unpack on random layouts, each checked against a naive
 * loop over the whole destination buffers. */
static void random_case(unsigned *s, int32_t ndim, const int64_t *shape, bool same_dense)
{
    DLDataType rt = REALS[test_rand(s, 3)], ct = complex_of(rt);
    size_t isz = rt.bits / 8;
    lay lz, lr, li;
    if (same_dense) {
        unsigned seed = (unsigned)rand_r(s);
        dense_layout(&lz, ndim, shape, 2 * isz, seed);
        dense_layout(&lr, ndim, shape, isz, seed);
        dense_layout(&li, ndim, shape, isz, seed);
    } else {
        random_layout(&lz, ndim, shape, 2 * isz, false, s);
        random_layout(&lr, ndim, shape, isz, true, s);
        random_layout(&li, ndim, shape, isz, true, s);
    }
    int64_t n = numel(ndim, shape);

    /* pack: out is written, re/im read (may broadcast) */
    unsigned char *zb = alloc_filled(lz.span, SENTINEL, s), *rb = alloc_filled(lr.span, -1, s),
                  *ib = alloc_filled(li.span, -1, s);
    unsigned char *ref = malloc(lz.span);
    ck_assert_ptr_nonnull(ref);
    memcpy(ref, zb, lz.span);
    int64_t idx[5] = {0};
    if (n > 0)
        do {
            unsigned char *z = ref + lz.off + offset_of(&lz, idx) * (int64_t)(2 * isz);
            memcpy(z, rb + lr.off + offset_of(&lr, idx) * (int64_t)isz, isz);
            memcpy(z + isz, ib + li.off + offset_of(&li, idx) * (int64_t)isz, isz);
        } while (next_index(idx, ndim, shape));
    DLTensor out = desc(zb, ndim, lz.shape, lz.strides, ct, lz.off);
    DLTensor re = desc(rb, ndim, lr.shape, lr.strides, rt, lr.off);
    DLTensor im = desc(ib, ndim, li.shape, li.strides, rt, li.off);
    pylayout_status st = pylayout_pack_complex(&re, &im, &out);
    ck_assert_msg(st == PYLAYOUT_OK, "pack: %s", pylayout_last_error());
    ck_assert_msg(memcmp(zb, ref, lz.span) == 0, "pack differs from the naive loop (float%d, ndim %d, n %lld)",
                  rt.bits, ndim, (long long)n);
    free(ref);

    /* unpack: z (the packed buffer, or a broadcast of it) read, re/im written */
    if (!same_dense) {
        random_layout(&lr, ndim, shape, isz, false, s);
        random_layout(&li, ndim, shape, isz, false, s);
        free(rb);
        free(ib);
        rb = alloc_filled(lr.span, SENTINEL, s);
        ib = alloc_filled(li.span, SENTINEL, s);
    } else {
        memset(rb, SENTINEL, lr.span);
        memset(ib, SENTINEL, li.span);
    }
    for (size_t b = 0; b < lz.span; b++) /* fresh random complex data */
        zb[b] = (unsigned char)(rand_r(s) >> 5);
    unsigned char *rref = malloc(lr.span), *iref = malloc(li.span);
    ck_assert(rref && iref);
    memcpy(rref, rb, lr.span);
    memcpy(iref, ib, li.span);
    memset(idx, 0, sizeof idx);
    if (n > 0)
        do {
            const unsigned char *z = zb + lz.off + offset_of(&lz, idx) * (int64_t)(2 * isz);
            memcpy(rref + lr.off + offset_of(&lr, idx) * (int64_t)isz, z, isz);
            memcpy(iref + li.off + offset_of(&li, idx) * (int64_t)isz, z + isz, isz);
        } while (next_index(idx, ndim, shape));
    DLTensor zt = desc(zb, ndim, lz.shape, lz.strides, ct, lz.off);
    DLTensor dre = desc(rb, ndim, lr.shape, lr.strides, rt, lr.off);
    DLTensor dim = desc(ib, ndim, li.shape, li.strides, rt, li.off);
    st = pylayout_unpack_complex(&zt, &dre, &dim);
    ck_assert_msg(st == PYLAYOUT_OK, "unpack: %s", pylayout_last_error());
    ck_assert_msg(memcmp(rb, rref, lr.span) == 0, "unpack re differs from the naive loop (float%d)", rt.bits);
    ck_assert_msg(memcmp(ib, iref, li.span) == 0, "unpack im differs from the naive loop (float%d)", rt.bits);
    free(rref);
    free(iref);
    free(zb);
    free(rb);
    free(ib);
}

START_TEST(test_random_vs_naive)
{
    unsigned s = 12345;
    for (int it = 0; it < 4000; it++) {
        int32_t ndim = (int32_t)test_rand(&s, 5);
        int64_t shape[5];
        for (int d = 0; d < ndim; d++)
            shape[d] = test_rand(&s, 25) == 0 ? 0 : 1 + test_rand(&s, 5);
        random_case(&s, ndim, shape, test_rand(&s, 4) == 0);
    }
}
END_TEST

START_TEST(test_large_parallel)
{
    /* Above the parallel threshold: both the same-layout fast path and the strided path. */
    unsigned s = 777;
    int64_t shape2[2] = {300, 257}, shape3[3] = {64, 33, 40};
    random_case(&s, 2, shape2, true);
    random_case(&s, 3, shape3, true);
    random_case(&s, 2, shape2, false);
    random_case(&s, 3, shape3, false);
}
END_TEST

/* Outputs of 4 MiB and more take the streaming-store kernels when 32-byte
 * aligned, and the cached ones when not: both, with an odd tail, against a
 * naive interleave, at 1 and 2 threads. */
struct streaming_case {
    int64_t n;
    float *re, *im;
    char *raw;
    size_t raw_bytes;
};

static void pack_streaming_at(int threads, void *ctx)
{
    const struct streaming_case *c = ctx;
    const int64_t n = c->n;
    const float *re = c->re, *im = c->im;
    int64_t shape[1] = {n};
    DLTensor tre = {c->re, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
    DLTensor tim = {c->im, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
    for (size_t misalign = 0; misalign <= 16; misalign += 16) { /* 32-aligned, then not */
        char *z = c->raw + misalign;
        memset(c->raw, 0xAB, c->raw_bytes);
        DLTensor tz = {z, {kDLCPU, 0}, 1, {kDLComplex, 64, 1}, shape, NULL, 0};
        ck_assert_int_eq(pylayout_pack_complex(&tre, &tim, &tz), PYLAYOUT_OK);
        for (int64_t k = 0; k < n; k++) {
            float pair[2];
            memcpy(pair, z + 8 * k, sizeof pair);
            if (pair[0] != re[k] || pair[1] != im[k])
                ck_abort_msg("element %lld wrong (threads %d, misalign %zu)", (long long)k, threads, misalign);
        }
        ck_assert_uint_eq((unsigned char)c->raw[misalign + (size_t)n * 8], 0xAB); /* nothing past the end */
        float *ore = malloc((size_t)n * sizeof(float)), *oim = malloc((size_t)n * sizeof(float));
        DLTensor tore = {ore, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
        DLTensor toim = {oim, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
        ck_assert_int_eq(pylayout_unpack_complex(&tz, &tore, &toim), PYLAYOUT_OK);
        ck_assert_int_eq(memcmp(ore, re, (size_t)n * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(oim, im, (size_t)n * sizeof(float)), 0);
        free(ore);
        free(oim);
    }
}

START_TEST(test_pack_streaming_large)
{
    struct streaming_case c;
    c.n = ((int64_t)1 << 20) + 5; /* 8 MiB of complex64, tail of 5 */
    c.re = malloc((size_t)c.n * sizeof(float));
    c.im = malloc((size_t)c.n * sizeof(float));
    c.raw_bytes = ((size_t)c.n * 8 + 64 + 63) & ~(size_t)63; /* aligned_alloc wants a multiple of 64 */
    c.raw = aligned_alloc(64, c.raw_bytes);
    ck_assert_ptr_nonnull(c.re);
    ck_assert_ptr_nonnull(c.im);
    ck_assert_ptr_nonnull(c.raw);
    for (int64_t k = 0; k < c.n; k++) {
        c.re[k] = (float)k * 0.5f;
        c.im[k] = -(float)k - 0.25f;
    }
    at_1_and_2_threads(pack_streaming_at, &c);
    free(c.re);
    free(c.im);
    free(c.raw);
}
END_TEST

/* --------------------------------------------------------------- main */

static Suite *complex_suite(void)
{
    const tcase_spec cases[] = {
        TCASE("view_as_complex", TEST(test_view_as_complex_layouts), TEST(test_view_as_complex_empty_and_negative),
              TEST(test_view_as_complex_flags_and_device), TEST(test_view_as_complex_errors)),
        TCASE("view_as_real", TEST(test_view_as_real), TEST(test_view_as_real_errors)),
        TCASE("canonical", TEST(test_canonical_strides), TEST(test_canonical_strides_errors),
              TEST(test_canonical_strides_even_outside_broadcast_dim)),
        TCASE("pack", TEST(test_pack_small_exact), TEST(test_pack_errors_write_nothing),
              TEST(test_unpack_errors_write_nothing)),
        TCASE("random", TEST(test_random_vs_naive), TEST(test_large_parallel), TEST(test_pack_streaming_large)),
    };
    return SUITE_OF("complex", cases, 300);
}

int main(void) { return run_suite(complex_suite()); }
