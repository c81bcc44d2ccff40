/*
 * check_tensor.c - Check tests of pylayout_tensor: DLPack import (versioned,
 * legacy, borrowed), creation (empty, empty_order, view), export, flags,
 * reference counting across threads, and the error strings, through the
 * public API only.
 *
 * Ownership is tested with counting deleters: every fake producer counts how
 * often its deleter ran, and each test asserts the count is exactly 0 while
 * any reference is alive and exactly 1 afterwards.  The deleters do not free
 * the producer, so a second call is counted, not a use-after-free; the test
 * frees it.  Runs with CK_NOFORK: libgomp is not fork-safe.
 */
#include <check.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pylayout.h>

#include "check_util.h"

extern char **environ;

/* This executable, for tests that run part of it again in a fresh process:
 * argv[0] as main got it (not /proc/self/exe, which is valgrind itself when
 * the suite runs under valgrind). */
static const char *self_path = "./check_tensor";

static const DLDataType f32 = {kDLFloat, 32, 1};

/* ------------------------------------------------------------ producers */

/* A fake DLPack producer: a versioned and a legacy managed tensor over the
 * same metadata and a malloc'd buffer of `nbytes`. */
typedef struct fake {
    DLManagedTensorVersioned mv;
    DLManagedTensor ml;
    int64_t shape[8];
    int64_t strides[8];
    unsigned char *buf;
    size_t nbytes;
    atomic_int deletes;
} fake;

static void versioned_deleter(DLManagedTensorVersioned *self)
{
    fake *f = self->manager_ctx;
    atomic_fetch_add(&f->deletes, 1);
}

static void legacy_deleter(DLManagedTensor *self)
{
    fake *f = self->manager_ctx;
    atomic_fetch_add(&f->deletes, 1);
}

/* A float32 tensor of `shape`; strides NULL means the DLTensor says NULL
 * (compact row-major).  The buffer holds nbytes >= the compact size and is
 * filled with float values 0, 1, 2, ... */
static fake *fake_new(int32_t ndim, const int64_t *shape, const int64_t *strides, size_t nbytes)
{
    fake *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    int64_t numel = 1;
    for (int32_t d = 0; d < ndim; d++) {
        f->shape[d] = shape[d];
        if (strides)
            f->strides[d] = strides[d];
        numel *= shape[d];
    }
    if (nbytes < (size_t)numel * 4)
        nbytes = (size_t)numel * 4;
    f->nbytes = nbytes;
    f->buf = malloc(nbytes ? nbytes : 1);
    ck_assert_ptr_nonnull(f->buf);
    for (size_t i = 0; i < nbytes / 4; i++) {
        float v = (float)i;
        memcpy(f->buf + 4 * i, &v, 4);
    }
    DLTensor dl = dl_make(f->buf, ndim, ndim ? f->shape : NULL, strides ? f->strides : NULL, f32, 0);
    f->mv.version.major = 1;
    f->mv.version.minor = 3;
    f->mv.manager_ctx = f;
    f->mv.deleter = versioned_deleter;
    f->mv.flags = 0;
    f->mv.dl_tensor = dl;
    f->ml.dl_tensor = dl;
    f->ml.manager_ctx = f;
    f->ml.deleter = legacy_deleter;
    atomic_init(&f->deletes, 0);
    return f;
}

static fake *fake_simple(void)
{
    static const int64_t shape[3] = {2, 3, 4};
    return fake_new(3, shape, NULL, 0);
}

static int deletes(fake *f)
{
    return atomic_load(&f->deletes);
}

static void fake_free(fake *f)
{
    free(f->buf);
    free(f);
}

static uint64_t flags_of(const pylayout_tensor *t)
{
    uint64_t flags = ~UINT64_C(0);
    ck_assert_int_eq(pylayout_tensor_flags(t, &flags), PYLAYOUT_OK);
    return flags;
}

/* Asserts that two DLTensors describe the same memory identically. */
static void assert_same_tensor(const DLTensor *a, const DLTensor *b, const char *what)
{
    ck_assert_msg(a->data == b->data, "%s: data %p vs %p", what, a->data, b->data);
    ck_assert_msg(a->device.device_type == b->device.device_type && a->device.device_id == b->device.device_id,
                  "%s: device (%d, %d) vs (%d, %d)", what, (int)a->device.device_type, (int)a->device.device_id,
                  (int)b->device.device_type, (int)b->device.device_id);
    ck_assert_msg(a->ndim == b->ndim, "%s: ndim %d vs %d", what, (int)a->ndim, (int)b->ndim);
    ck_assert_msg(a->dtype.code == b->dtype.code && a->dtype.bits == b->dtype.bits &&
                      a->dtype.lanes == b->dtype.lanes,
                  "%s: dtype differs", what);
    ck_assert_msg(a->byte_offset == b->byte_offset, "%s: byte_offset %llu vs %llu", what,
                  (unsigned long long)a->byte_offset, (unsigned long long)b->byte_offset);
    ck_assert_ptr_nonnull(b->strides);
    for (int32_t d = 0; d < a->ndim; d++) {
        ck_assert_msg(a->shape[d] == b->shape[d], "%s: shape[%d] %lld vs %lld", what, (int)d,
                      (long long)a->shape[d], (long long)b->shape[d]);
        ck_assert_msg(a->strides[d] == b->strides[d], "%s: strides[%d] %lld vs %lld", what, (int)d,
                      (long long)a->strides[d], (long long)b->strides[d]);
    }
}

/* ------------------------------------------------------------ ownership */

START_TEST(test_versioned_import_release)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(deletes(f), 0);
    ck_assert_int_eq(pylayout_tensor_retain(t), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_release(t), PYLAYOUT_OK);
    ck_assert_int_eq(deletes(f), 0);
    ck_assert_int_eq(pylayout_tensor_release(t), PYLAYOUT_OK);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

START_TEST(test_legacy_import_release)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL;
    ck_assert_int_eq(pylayout_tensor_from_legacy(&f->ml, PYLAYOUT_FLAG_READ_ONLY, &t), PYLAYOUT_OK);
    ck_assert_int_eq(flags_of(t), PYLAYOUT_FLAG_READ_ONLY);
    int64_t row_major[3] = {12, 4, 1};
    DLTensor expected = f->ml.dl_tensor;
    expected.strides = row_major; /* NULL strides made explicit */
    assert_same_tensor(&expected, dl_of(t), "legacy import");
    ck_assert_int_eq(deletes(f), 0);
    ck_assert_int_eq(pylayout_tensor_release(t), PYLAYOUT_OK);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

/* Import + versioned export; _i = 0 releases the tensor first, 1 the export. */
START_TEST(test_export_release_orders)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL;
    DLManagedTensorVersioned *m = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_to_versioned(t, &m), PYLAYOUT_OK);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(m->deleter);
    if (_i == 0) {
        pylayout_tensor_release(t);
        ck_assert_int_eq(deletes(f), 0);
        /* The export still describes live memory. */
        float v;
        memcpy(&v, (char *)m->dl_tensor.data + 4 * 5, 4);
        ck_assert(v == 5.0f);
        m->deleter(m);
    } else {
        m->deleter(m);
        ck_assert_int_eq(deletes(f), 0);
        ck_assert_ptr_eq(dl_of(t)->data, f->buf);
        pylayout_tensor_release(t);
    }
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

START_TEST(test_multiple_exports)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL;
    DLManagedTensorVersioned *v[3];
    DLManagedTensor *l[2];
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pylayout_tensor_to_versioned(t, &v[i]), PYLAYOUT_OK);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pylayout_tensor_to_legacy(t, &l[i]), PYLAYOUT_OK);
    ck_assert_ptr_ne(v[0], v[1]);
    ck_assert_ptr_ne(l[0], l[1]);
    /* Interleaved releases; the producer's deleter waits for the last one. */
    v[1]->deleter(v[1]);
    l[0]->deleter(l[0]);
    pylayout_tensor_release(t);
    v[0]->deleter(v[0]);
    l[1]->deleter(l[1]);
    ck_assert_int_eq(deletes(f), 0);
    v[2]->deleter(v[2]);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

START_TEST(test_legacy_export)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL;
    DLManagedTensor *l = NULL;
    ck_assert_int_eq(pylayout_tensor_from_legacy(&f->ml, 0, &t), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_to_legacy(t, &l), PYLAYOUT_OK);
    assert_same_tensor(dl_of(t), &l->dl_tensor, "legacy export");
    pylayout_tensor_release(t);
    ck_assert_int_eq(deletes(f), 0);
    l->deleter(l);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

/* A pylayout export re-imported into pylayout: two layers of ownership. */
START_TEST(test_reimport_own_export)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL, *u = NULL;
    DLManagedTensorVersioned *m = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_to_versioned(t, &m), PYLAYOUT_OK);
    pylayout_tensor_release(t);
    ck_assert_int_eq(pylayout_tensor_from_versioned(m, &u), PYLAYOUT_OK);
    ck_assert_ptr_eq(dl_of(u)->data, f->buf);
    ck_assert_int_eq(deletes(f), 0);
    pylayout_tensor_release(u); /* runs m's deleter, which releases t */
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

/* base <- v1 <- v2 (a view of a view), released in all 6 orders. */
START_TEST(test_view_of_view_release_orders)
{
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    fake *f = fake_simple();
    pylayout_tensor *t[3] = {NULL, NULL, NULL};
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t[0]), PYLAYOUT_OK);
    int64_t s1[2] = {3, 4}, st1[2] = {4, 1};
    DLTensor d1 = {.ndim = 2, .dtype = f32, .shape = s1, .strides = st1, .byte_offset = 48};
    ck_assert_int_eq(pylayout_tensor_view(t[0], &d1, &t[1]), PYLAYOUT_OK);
    int64_t s2[1] = {4}, st2[1] = {1};
    DLTensor d2 = {.ndim = 1, .dtype = f32, .shape = s2, .strides = st2, .byte_offset = 64};
    ck_assert_int_eq(pylayout_tensor_view(t[1], &d2, &t[2]), PYLAYOUT_OK);
    ck_assert_ptr_eq(dl_of(t[2])->data, f->buf);
    ck_assert_uint_eq(dl_of(t[2])->byte_offset, 64);
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(deletes(f) == 0, "order %d: deleter ran after %d of 3 releases", _i, k);
        pylayout_tensor_release(t[orders[_i][k]]);
    }
    ck_assert_msg(deletes(f) == 1, "order %d: deleter ran %d times", _i, deletes(f));
    fake_free(f);
}
END_TEST

START_TEST(test_view_keeps_base_alive)
{
    fake *f = fake_simple();
    pylayout_tensor *base = NULL, *view = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &base), PYLAYOUT_OK);
    int64_t s[1] = {4}, st[1] = {-1};
    DLTensor d = {.ndim = 1, .dtype = f32, .shape = s, .strides = st, .byte_offset = 4 * 23};
    ck_assert_int_eq(pylayout_tensor_view(base, &d, &view), PYLAYOUT_OK);
    pylayout_tensor_release(base);
    ck_assert_int_eq(deletes(f), 0);
    /* Copy the view out: reads base's memory through it. */
    pylayout_tensor *copy = NULL;
    ck_assert_int_eq(pylayout_convert(dl_of(view), PYLAYOUT_FORMAT_CONTIGUOUS, &copy), PYLAYOUT_OK);
    const float *out = (const float *)dl_of(copy)->data;
    ck_assert(out[0] == 23.0f && out[1] == 22.0f && out[2] == 21.0f && out[3] == 20.0f);
    pylayout_tensor_release(copy);
    ck_assert_int_eq(deletes(f), 0);
    pylayout_tensor_release(view);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

/* On failure the caller still owns the managed tensor: no deleter call. */
START_TEST(test_failed_import_keeps_ownership)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL;
    static const uint32_t majors[] = {2, 0, 3, UINT32_MAX};
    for (size_t i = 0; i < sizeof majors / sizeof majors[0]; i++) {
        f->mv.version.major = majors[i];
        ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_ERR_UNSUPPORTED_VERSION);
        ck_assert_str_ne(pylayout_last_error(), "");
        ck_assert_int_eq(deletes(f), 0);
    }
    f->mv.version.major = 1;
    f->mv.version.minor = 99; /* a newer minor version is fine */

    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_from_legacy(&f->ml, 0, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    f->mv.dl_tensor.ndim = -1;
    f->ml.dl_tensor.ndim = -1;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_ERR_INVALID_TENSOR);
    ck_assert_int_eq(pylayout_tensor_from_legacy(&f->ml, 0, &t), PYLAYOUT_ERR_INVALID_TENSOR);
    f->mv.dl_tensor.ndim = 3;
    f->ml.dl_tensor.ndim = 3;
    f->mv.dl_tensor.dtype.lanes = 4;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
    f->mv.dl_tensor.dtype.lanes = 1;
    ck_assert_int_eq(deletes(f), 0);

    /* The caller still owns it: deleting it is the caller's job... */
    f->mv.deleter(&f->mv);
    ck_assert_int_eq(deletes(f), 1);
    /* ...and a later successful import takes it over normally. */
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    pylayout_tensor_release(t);
    ck_assert_int_eq(deletes(f), 2);
    fake_free(f);
}
END_TEST

START_TEST(test_borrow)
{
    float data[6] = {0, 1, 2, 3, 4, 5};
    int64_t shape[2] = {2, 3}, strides[2] = {1, 2};
    DLTensor src = dl_make(data, 2, shape, strides, f32, 0);
    pylayout_tensor *t = NULL;
    ck_assert_int_eq(pylayout_tensor_borrow(&src, 0, &t), PYLAYOUT_OK);
    assert_same_tensor(&src, dl_of(t), "borrow");
    /* Shape and strides were copied: the caller may reuse its arrays. */
    ck_assert_ptr_ne(dl_of(t)->shape, shape);
    ck_assert_ptr_ne(dl_of(t)->strides, strides);
    shape[0] = 99;
    strides[0] = 99;
    ck_assert_int_eq(dl_of(t)->shape[0], 2);
    ck_assert_int_eq(dl_of(t)->strides[0], 1);
    ck_assert_int_eq(flags_of(t), 0);
    ck_assert_int_eq(pylayout_tensor_release(t), PYLAYOUT_OK);
    /* Nothing touched the memory. */
    for (int i = 0; i < 6; i++)
        ck_assert(data[i] == (float)i);
}
END_TEST

/* DLPack allows a NULL deleter; release then has nothing to call. */
START_TEST(test_null_deleter)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL;
    f->mv.deleter = NULL;
    f->ml.deleter = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_release(t), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_from_legacy(&f->ml, 0, &t), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_release(t), PYLAYOUT_OK);
    ck_assert_int_eq(deletes(f), 0);
    fake_free(f);
}
END_TEST

/* --------------------------------------------------------------- round trip */

typedef struct roundtrip_case {
    const char *name;
    int32_t ndim;
    int64_t shape[4];
    int64_t strides[4];
    DLDataType dtype;
    uint64_t byte_offset;
    DLDevice device;
    uint64_t flags;
    bool null_data;
} roundtrip_case;

static const roundtrip_case roundtrip_cases[] = {
    {"row-major", 3, {2, 3, 4}, {12, 4, 1}, {kDLFloat, 32, 1}, 0, {kDLCPU, 0}, 0, false},
    {"channels_last", 4, {2, 3, 4, 5}, {60, 1, 15, 3}, {kDLFloat, 16, 1}, 0, {kDLCPU, 0}, 0, false},
    {"negative strides + offset", 2, {3, 4}, {-4, -1}, {kDLInt, 32, 1}, 44, {kDLCPU, 0}, 0, false},
    {"broadcast", 3, {2, 3, 4}, {0, 1, 0}, {kDLUInt, 8, 1}, 5, {kDLCPU, 0}, 0, false},
    {"padded, read-only, copied", 2, {3, 4}, {10, 2}, {kDLComplex, 128, 1}, 32, {kDLCPU, 0},
     PYLAYOUT_FLAG_READ_ONLY | PYLAYOUT_FLAG_IS_COPIED, false},
    {"size-1 dim odd stride", 3, {3, 1, 4}, {4, 999, 1}, {kDLBfloat, 16, 1}, 0, {kDLCPU, 0}, 0, false},
    {"0-d", 0, {0}, {0}, {kDLFloat, 64, 1}, 8, {kDLCPU, 0}, 0, false},
    {"empty, NULL data", 2, {0, 3}, {3, 1}, {kDLFloat, 32, 1}, 0, {kDLCPU, 0}, 0, true},
    {"cuda device 3", 2, {3, 4}, {1, 3}, {kDLFloat, 32, 1}, 16, {kDLCUDA, 3}, 0, false},
    {"rocm, read-only", 1, {7}, {2}, {kDLBool, 8, 1}, 0, {kDLROCM, 1}, PYLAYOUT_FLAG_READ_ONLY, false},
};
#define N_ROUNDTRIP_CASES ((int)(sizeof roundtrip_cases / sizeof roundtrip_cases[0]))

/* Import, then export (versioned and, unless read-only, legacy): every field
 * comes back exactly as the producer sent it. */
START_TEST(test_roundtrip)
{
    const roundtrip_case *c = &roundtrip_cases[_i];
    static unsigned char memory[4096] __attribute__((aligned(64)));
    fake *f = fake_simple();
    DLTensor dl = {
        /* Device memory is never touched: any non-NULL pointer will do. */
        .data = c->null_data ? NULL : (c->device.device_type == kDLCPU ? (void *)memory : (void *)0x7f0000001000),
        .device = c->device,
        .ndim = c->ndim,
        .dtype = c->dtype,
        .shape = c->ndim ? f->shape : NULL,
        .strides = c->ndim ? f->strides : NULL,
        .byte_offset = c->byte_offset,
    };
    for (int32_t d = 0; d < c->ndim; d++) {
        f->shape[d] = c->shape[d];
        f->strides[d] = c->strides[d];
    }
    f->mv.dl_tensor = dl;
    f->mv.flags = c->flags;
    pylayout_tensor *t = NULL;
    ck_assert_msg(pylayout_tensor_from_versioned(&f->mv, &t) == PYLAYOUT_OK, "%s: import failed: %s", c->name,
                  pylayout_last_error());
    assert_same_tensor(&dl, dl_of(t), c->name);
    ck_assert_uint_eq(flags_of(t), c->flags);

    DLManagedTensorVersioned *m = NULL;
    ck_assert_int_eq(pylayout_tensor_to_versioned(t, &m), PYLAYOUT_OK);
    assert_same_tensor(&dl, &m->dl_tensor, c->name);
    ck_assert_uint_eq(m->flags, c->flags & PYLAYOUT_FLAG_READ_ONLY); /* IS_COPIED is per import */
    ck_assert_uint_eq(m->version.major, 1);
    ck_assert_uint_eq(m->version.minor, DLPACK_MINOR_VERSION);

    DLManagedTensor *l = NULL;
    pylayout_status st = pylayout_tensor_to_legacy(t, &l);
    if (c->flags & PYLAYOUT_FLAG_READ_ONLY) {
        ck_assert_int_eq(st, PYLAYOUT_ERR_READ_ONLY);
        ck_assert_str_ne(pylayout_last_error(), "");
    } else {
        ck_assert_int_eq(st, PYLAYOUT_OK);
        assert_same_tensor(&dl, &l->dl_tensor, c->name);
        l->deleter(l);
    }
    m->deleter(m);
    ck_assert_int_eq(deletes(f), 0);
    pylayout_tensor_release(t);
    ck_assert_int_eq(deletes(f), 1); /* a failed legacy export holds no reference */
    fake_free(f);
}
END_TEST

START_TEST(test_null_strides_become_explicit)
{
    static const int64_t shape[3] = {2, 3, 4};
    fake *f = fake_new(3, shape, NULL, 0);
    ck_assert_ptr_null(f->mv.dl_tensor.strides);
    pylayout_tensor *t = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    const DLTensor *dl = dl_of(t);
    ck_assert_ptr_nonnull(dl->strides);
    ck_assert_int_eq(dl->strides[0], 12);
    ck_assert_int_eq(dl->strides[1], 4);
    ck_assert_int_eq(dl->strides[2], 1);
    DLManagedTensorVersioned *m = NULL;
    ck_assert_int_eq(pylayout_tensor_to_versioned(t, &m), PYLAYOUT_OK);
    ck_assert_ptr_nonnull(m->dl_tensor.strides);
    ck_assert_mem_eq(m->dl_tensor.strides, ((int64_t[]){12, 4, 1}), 3 * sizeof(int64_t));
    m->deleter(m);
    pylayout_tensor_release(t);

    /* Borrowed and legacy imports too; and a 0-d tensor still gets a
     * non-NULL strides pointer ("strides never NULL"). */
    DLTensor src = f->mv.dl_tensor;
    ck_assert_int_eq(pylayout_tensor_borrow(&src, 0, &t), PYLAYOUT_OK);
    ck_assert_mem_eq(dl_of(t)->strides, ((int64_t[]){12, 4, 1}), 3 * sizeof(int64_t));
    pylayout_tensor_release(t);
    ck_assert_int_eq(pylayout_tensor_from_legacy(&f->ml, 0, &t), PYLAYOUT_OK);
    ck_assert_mem_eq(dl_of(t)->strides, ((int64_t[]){12, 4, 1}), 3 * sizeof(int64_t));
    pylayout_tensor_release(t);
    src.ndim = 0;
    src.shape = NULL;
    ck_assert_int_eq(pylayout_tensor_borrow(&src, 0, &t), PYLAYOUT_OK);
    ck_assert_ptr_nonnull(dl_of(t)->strides);
    pylayout_tensor_release(t);
    ck_assert_int_eq(deletes(f), 2); /* the versioned and the legacy import */
    fake_free(f);
}
END_TEST

/* byte_offset selects the first element, for reads through pylayout_convert. */
START_TEST(test_byte_offset_honoured)
{
    static const int64_t shape[2] = {3, 4};
    fake *f = fake_new(2, shape, NULL, 24 * 4);
    f->mv.dl_tensor.byte_offset = 6 * 4;
    pylayout_tensor *t = NULL, *c = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    ck_assert_uint_eq(dl_of(t)->byte_offset, 24);
    ck_assert_ptr_eq(dl_of(t)->data, f->buf);
    ck_assert_int_eq(pylayout_convert(dl_of(t), PYLAYOUT_FORMAT_FORTRAN, &c), PYLAYOUT_OK);
    const DLTensor *cd = dl_of(c);
    ck_assert_uint_eq(cd->byte_offset, 0);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            float v = ((const float *)cd->data)[i * cd->strides[0] + j * cd->strides[1]];
            ck_assert_msg(v == (float)(6 + 4 * i + j), "[%d][%d] = %g", i, j, (double)v);
        }
    pylayout_tensor_release(c);
    pylayout_tensor_release(t);
    fake_free(f);
}
END_TEST

START_TEST(test_flags)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL, *v = NULL;
    DLManagedTensor *l = NULL;

    /* Versioned: READ_ONLY and IS_COPIED carried; bits pylayout does not
     * define (IS_SUBBYTE_TYPE_PADDED, bit 40) are not reported. */
    f->mv.flags = PYLAYOUT_FLAG_READ_ONLY | PYLAYOUT_FLAG_IS_COPIED | (UINT64_C(1) << 2) | (UINT64_C(1) << 40);
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    ck_assert_uint_eq(flags_of(t), PYLAYOUT_FLAG_READ_ONLY | PYLAYOUT_FLAG_IS_COPIED);
    /* A view inherits READ_ONLY; IS_COPIED described the import, not the
     * view, and no export carries it either (a zero-copy export is no copy). */
    int64_t s[1] = {4}, st[1] = {1};
    DLTensor d = {.ndim = 1, .dtype = f32, .shape = s, .strides = st};
    ck_assert_int_eq(pylayout_tensor_view(t, &d, &v), PYLAYOUT_OK);
    ck_assert_uint_eq(flags_of(v), PYLAYOUT_FLAG_READ_ONLY);
    DLManagedTensorVersioned *e = NULL;
    ck_assert_int_eq(pylayout_tensor_to_versioned(t, &e), PYLAYOUT_OK);
    ck_assert_uint_eq(e->flags, PYLAYOUT_FLAG_READ_ONLY);
    e->deleter(e);
    /* Read-only: no legacy export, from the tensor or its view. */
    ck_assert_int_eq(pylayout_tensor_to_legacy(t, &l), PYLAYOUT_ERR_READ_ONLY);
    ck_assert_int_eq(pylayout_tensor_to_legacy(v, &l), PYLAYOUT_ERR_READ_ONLY);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "read-only"));
    pylayout_tensor_release(v);
    pylayout_tensor_release(t);
    ck_assert_int_eq(deletes(f), 1);

    /* Legacy: the flags come from the argument. */
    ck_assert_int_eq(pylayout_tensor_from_legacy(&f->ml, PYLAYOUT_FLAG_READ_ONLY, &t), PYLAYOUT_OK);
    ck_assert_uint_eq(flags_of(t), PYLAYOUT_FLAG_READ_ONLY);
    ck_assert_int_eq(pylayout_tensor_to_legacy(t, &l), PYLAYOUT_ERR_READ_ONLY);
    pylayout_tensor_release(t);
    ck_assert_int_eq(pylayout_tensor_from_legacy(&f->ml, 0, &t), PYLAYOUT_OK);
    ck_assert_uint_eq(flags_of(t), 0);
    pylayout_tensor_release(t);
    ck_assert_int_eq(deletes(f), 3);

    /* Borrowed. */
    ck_assert_int_eq(pylayout_tensor_borrow(&f->mv.dl_tensor, PYLAYOUT_FLAG_IS_COPIED, &t), PYLAYOUT_OK);
    ck_assert_uint_eq(flags_of(t), PYLAYOUT_FLAG_IS_COPIED);
    ck_assert_int_eq(pylayout_tensor_to_legacy(t, &l), PYLAYOUT_OK);
    l->deleter(l);
    pylayout_tensor_release(t);
    fake_free(f);
}
END_TEST

/* A view of a view holds the memory's owner, not its parent: 300,000
 * chained views stay one link deep, so releasing the last one cannot
 * recurse, and dropping the intermediate ones frees them at once. */
START_TEST(test_view_chain_holds_root)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL, *v = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    int64_t s[1] = {4}, st[1] = {1};
    DLTensor d = {.ndim = 1, .dtype = f32, .shape = s, .strides = st};
    pylayout_tensor *cur = t;
    pylayout_tensor_retain(cur);
    for (int i = 0; i < 300000; i++) {
        ck_assert_int_eq(pylayout_tensor_view(cur, &d, &v), PYLAYOUT_OK);
        pylayout_tensor_release(cur); /* freed at once unless it is the root */
        cur = v;
    }
    pylayout_tensor_release(t);
    ck_assert_int_eq(deletes(f), 0); /* the last view keeps the owner alive */
    pylayout_tensor_release(cur);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

/* Non-CPU tensors import, export and view (metadata only); copies refuse them. */
START_TEST(test_non_cpu_device)
{
    fake *f = fake_simple();
    f->mv.dl_tensor.device = (DLDevice){kDLCUDA, 1};
    f->mv.dl_tensor.data = (void *)0x7f0000000000; /* never dereferenced */
    pylayout_tensor *t = NULL, *v = NULL, *c = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    ck_assert_int_eq(dl_of(t)->device.device_type, kDLCUDA);
    ck_assert_int_eq(dl_of(t)->device.device_id, 1);
    int64_t s[1] = {4}, st[1] = {3};
    DLTensor d = {.device = {kDLCPU, 0}, .ndim = 1, .dtype = f32, .shape = s, .strides = st};
    ck_assert_int_eq(pylayout_tensor_view(t, &d, &v), PYLAYOUT_OK);
    ck_assert_int_eq(dl_of(v)->device.device_type, kDLCUDA); /* desc->device is ignored */
    ck_assert_int_eq(dl_of(v)->device.device_id, 1);
    ck_assert_int_eq(pylayout_convert(dl_of(t), PYLAYOUT_FORMAT_CONTIGUOUS, &c), PYLAYOUT_ERR_UNSUPPORTED_DEVICE);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "cuda"));
    pylayout_tensor_release(v);
    pylayout_tensor_release(t);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

/* --------------------------------------------------------------- create */

typedef struct empty_case {
    int32_t ndim;
    int64_t shape[5];
    pylayout_format format;
    int64_t strides[5]; /* torch.empty(shape, memory_format=...).stride() */
} empty_case;

static const empty_case empty_cases[] = {
    {4, {2, 3, 4, 5}, PYLAYOUT_FORMAT_CONTIGUOUS, {60, 20, 5, 1}},
    {4, {2, 3, 4, 5}, PYLAYOUT_FORMAT_CHANNELS_LAST, {60, 1, 15, 3}},
    {4, {2, 3, 4, 5}, PYLAYOUT_FORMAT_FORTRAN, {1, 2, 6, 24}},
    {5, {2, 3, 4, 5, 6}, PYLAYOUT_FORMAT_CHANNELS_LAST_3D, {360, 1, 90, 18, 3}},
    {5, {2, 3, 4, 5, 6}, PYLAYOUT_FORMAT_CONTIGUOUS, {360, 120, 30, 6, 1}},
    {3, {7, 1, 5}, PYLAYOUT_FORMAT_FORTRAN, {1, 7, 7}},
    {4, {2, 0, 4, 5}, PYLAYOUT_FORMAT_CHANNELS_LAST, {0, 1, 0, 0}},
    {1, {0}, PYLAYOUT_FORMAT_CONTIGUOUS, {1}},
    {0, {0}, PYLAYOUT_FORMAT_CONTIGUOUS, {0}},
    {0, {0}, PYLAYOUT_FORMAT_FORTRAN, {0}},
};
#define N_EMPTY_CASES ((int)(sizeof empty_cases / sizeof empty_cases[0]))

/* Each case in every dtype size: strides as torch gives them, 64-byte
 * aligned data, writable over the whole extent (valgrind/ASan check it). */
START_TEST(test_empty_formats)
{
    const empty_case *c = &empty_cases[_i];
    static const DLDataType dtypes[] = {
        {kDLUInt, 8, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1}, {kDLInt, 64, 1}, {kDLComplex, 128, 1}};
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        pylayout_tensor *t = NULL;
        ck_assert_int_eq(pylayout_tensor_empty(c->ndim, c->ndim ? c->shape : NULL, dtypes[k], c->format, &t),
                         PYLAYOUT_OK);
        const DLTensor *dl = dl_of(t);
        ck_assert_int_eq(dl->ndim, c->ndim);
        ck_assert_int_eq(dl->device.device_type, kDLCPU);
        ck_assert_int_eq(dl->device.device_id, 0);
        ck_assert_uint_eq(dl->byte_offset, 0);
        ck_assert_int_eq(dl->dtype.code, dtypes[k].code);
        ck_assert_int_eq(dl->dtype.bits, dtypes[k].bits);
        ck_assert_int_eq(dl->dtype.lanes, 1);
        ck_assert_uint_eq(flags_of(t), 0);
        ck_assert_ptr_nonnull(dl->data);
        ck_assert_msg((uintptr_t)dl->data % 64 == 0, "data %p not 64-byte aligned", dl->data);
        ck_assert_ptr_nonnull(dl->strides);
        int64_t numel = 1;
        for (int32_t d = 0; d < c->ndim; d++) {
            ck_assert_int_eq(dl->shape[d], c->shape[d]);
            ck_assert_msg(dl->strides[d] == c->strides[d], "case %d: stride[%d] = %lld, expected %lld", _i, (int)d,
                          (long long)dl->strides[d], (long long)c->strides[d]);
            numel *= c->shape[d];
        }
        memset(dl->data, 0x5A, (size_t)numel * dtypes[k].bits / 8);
        bool b = false;
        ck_assert_int_eq(pylayout_is_contiguous(dl, c->format, &b), PYLAYOUT_OK);
        ck_assert(b);
        /* Exports of pylayout's own memory work like any other. */
        DLManagedTensorVersioned *m = NULL;
        ck_assert_int_eq(pylayout_tensor_to_versioned(t, &m), PYLAYOUT_OK);
        ck_assert_ptr_eq(m->dl_tensor.data, dl->data);
        pylayout_tensor_release(t);
        m->deleter(m);
    }
}
END_TEST

START_TEST(test_empty_errors)
{
    int64_t s3[3] = {2, 3, 4}, s4[4] = {2, 3, 4, 5}, neg[2] = {2, -1};
    int64_t huge[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
    pylayout_tensor *t = NULL;
    ck_assert_int_eq(pylayout_tensor_empty(3, s3, f32, PYLAYOUT_FORMAT_CHANNELS_LAST, &t), PYLAYOUT_ERR_FORMAT_RANK);
    ck_assert_str_ne(pylayout_last_error(), "");
    ck_assert_int_eq(pylayout_tensor_empty(4, s4, f32, PYLAYOUT_FORMAT_CHANNELS_LAST_3D, &t),
                     PYLAYOUT_ERR_FORMAT_RANK);
    ck_assert_int_eq(pylayout_tensor_empty(4, s4, f32, (pylayout_format)7, &t), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_empty(4, s4, f32, PYLAYOUT_FORMAT_CONTIGUOUS, NULL),
                     PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_empty(4, NULL, f32, PYLAYOUT_FORMAT_CONTIGUOUS, &t),
                     PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_empty(2, neg, f32, PYLAYOUT_FORMAT_CONTIGUOUS, &t),
                     PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_empty(-1, s4, f32, PYLAYOUT_FORMAT_CONTIGUOUS, &t),
                     PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_empty(65, s4, f32, PYLAYOUT_FORMAT_CONTIGUOUS, &t),
                     PYLAYOUT_ERR_INVALID_ARGUMENT);
    pylayout_status st = pylayout_tensor_empty(2, huge, f32, PYLAYOUT_FORMAT_CONTIGUOUS, &t);
    ck_assert_msg(st == PYLAYOUT_ERR_INVALID_ARGUMENT || st == PYLAYOUT_ERR_INVALID_TENSOR,
                  "2^64 elements: status %d", (int)st);
    static const DLDataType bad_dtypes[] = {
        {kDLFloat, 32, 2}, {kDLInt, 4, 1}, {kDLOpaqueHandle, 64, 1}, {99, 32, 1}};
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++)
        ck_assert_int_eq(pylayout_tensor_empty(4, s4, bad_dtypes[i], PYLAYOUT_FORMAT_CONTIGUOUS, &t),
                         PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
#if !defined(__SANITIZE_ADDRESS__)
    /* 2^60 float32 elements: representable, but no machine has 4 EiB.
     * (Skipped under ASan, whose allocator aborts instead of returning NULL.) */
    int64_t vast[2] = {INT64_C(1) << 40, INT64_C(1) << 20};
    ck_assert_int_eq(pylayout_tensor_empty(2, vast, f32, PYLAYOUT_FORMAT_CONTIGUOUS, &t), PYLAYOUT_ERR_NO_MEMORY);
#endif
}
END_TEST

START_TEST(test_empty_order)
{
    static const struct {
        int32_t ndim;
        int64_t shape[5];
        int32_t order[5];
        int64_t strides[5];
    } cases[] = {
        {4, {2, 3, 4, 5}, {0, 2, 3, 1}, {60, 1, 15, 3}},
        {4, {2, 3, 4, 5}, {3, 2, 1, 0}, {1, 2, 6, 24}},
        {3, {2, 3, 4}, {1, 0, 2}, {4, 8, 1}},
        {5, {2, 3, 4, 5, 6}, {0, 2, 3, 4, 1}, {360, 1, 90, 18, 3}},
        {0, {0}, {0}, {0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pylayout_tensor *t = NULL;
        ck_assert_int_eq(pylayout_tensor_empty_order(cases[i].ndim, cases[i].shape, (DLDataType){kDLFloat, 64, 1},
                                                     cases[i].order, &t),
                         PYLAYOUT_OK);
        const DLTensor *dl = dl_of(t);
        ck_assert((uintptr_t)dl->data % 64 == 0);
        int64_t numel = 1;
        for (int32_t d = 0; d < cases[i].ndim; d++) {
            ck_assert_msg(dl->strides[d] == cases[i].strides[d], "case %zu: stride[%d] = %lld", i, (int)d,
                          (long long)dl->strides[d]);
            numel *= cases[i].shape[d];
        }
        memset(dl->data, 0, (size_t)numel * 8);
        pylayout_tensor_release(t);
    }
    int64_t shape[4] = {2, 3, 4, 5};
    static const int32_t bad[][4] = {{0, 1, 1, 3}, {0, 1, 2, 4}, {-1, 0, 1, 2}, {3, 3, 3, 3}};
    pylayout_tensor *t = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(pylayout_tensor_empty_order(4, shape, f32, bad[i], &t) == PYLAYOUT_ERR_INVALID_ARGUMENT,
                      "bad order %zu accepted", i);
    const int32_t ok[4] = {0, 1, 2, 3};
    ck_assert_int_eq(pylayout_tensor_empty_order(4, shape, f32, NULL, &t), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_empty_order(4, shape, f32, ok, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_empty_order(4, shape, (DLDataType){kDLInt, 4, 1}, ok, &t),
                     PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
}
END_TEST

/* ---------------------------------------------------------------- views */

typedef struct view_case {
    const char *name;
    int32_t ndim;
    int64_t shape[3];
    int64_t strides[3];
    DLDataType dtype;
    uint64_t byte_offset;
    pylayout_status status;
} view_case;

/* Views of a float32 (2, 3, 4) row-major base: 96 bytes, [0, 96). */
static const view_case view_cases[] = {
    {"whole", 3, {2, 3, 4}, {12, 4, 1}, {kDLFloat, 32, 1}, 0, PYLAYOUT_OK},
    {"second row block", 2, {3, 4}, {4, 1}, {kDLFloat, 32, 1}, 48, PYLAYOUT_OK},
    {"transposed", 2, {4, 6}, {1, 4}, {kDLFloat, 32, 1}, 0, PYLAYOUT_OK},
    {"reversed", 1, {24}, {-1}, {kDLFloat, 32, 1}, 92, PYLAYOUT_OK},
    {"bytes", 1, {96}, {1}, {kDLUInt, 8, 1}, 0, PYLAYOUT_OK},
    {"float64 pairs", 1, {12}, {1}, {kDLFloat, 64, 1}, 0, PYLAYOUT_OK},
    {"last element, 0-d", 0, {0}, {0}, {kDLFloat, 32, 1}, 92, PYLAYOUT_OK},
    {"broadcast", 2, {1000, 4}, {0, 1}, {kDLFloat, 32, 1}, 80, PYLAYOUT_OK},
    {"empty view anywhere", 2, {0, 4}, {4, 1}, {kDLFloat, 32, 1}, 4096, PYLAYOUT_OK},
    {"0-d past the end", 0, {0}, {0}, {kDLFloat, 32, 1}, 96, PYLAYOUT_ERR_OUT_OF_BOUNDS},
    {"straddles the end", 0, {0}, {0}, {kDLFloat, 64, 1}, 92, PYLAYOUT_ERR_OUT_OF_BOUNDS},
    {"one float64 too many", 1, {13}, {1}, {kDLFloat, 64, 1}, 0, PYLAYOUT_ERR_OUT_OF_BOUNDS},
    {"one row too many", 2, {3, 4}, {4, 1}, {kDLFloat, 32, 1}, 52, PYLAYOUT_ERR_OUT_OF_BOUNDS},
    {"stride too large", 1, {3}, {12}, {kDLFloat, 32, 1}, 4, PYLAYOUT_ERR_OUT_OF_BOUNDS},
    {"negative stride before start", 1, {2}, {-1}, {kDLFloat, 32, 1}, 0, PYLAYOUT_ERR_OUT_OF_BOUNDS},
    {"invalid ndim", 65, {1}, {1}, {kDLFloat, 32, 1}, 0, PYLAYOUT_ERR_INVALID_TENSOR},
    {"negative size", 1, {-2}, {1}, {kDLFloat, 32, 1}, 0, PYLAYOUT_ERR_INVALID_TENSOR},
    {"lanes 4", 1, {2}, {1}, {kDLFloat, 32, 4}, 0, PYLAYOUT_ERR_UNSUPPORTED_DTYPE},
};
#define N_VIEW_CASES ((int)(sizeof view_cases / sizeof view_cases[0]))

START_TEST(test_view_table)
{
    const view_case *c = &view_cases[_i];
    fake *f = fake_simple();
    pylayout_tensor *base = NULL, *v = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &base), PYLAYOUT_OK);
    int64_t shape[70] = {1}, strides[70] = {1};
    memcpy(shape, c->shape, sizeof c->shape);
    memcpy(strides, c->strides, sizeof c->strides);
    DLTensor d = {
        .data = (void *)0x1234, /* ignored: the view uses base's data */
        .device = {kDLCUDA, 5}, /* ignored too */
        .ndim = c->ndim,
        .dtype = c->dtype,
        .shape = shape,
        .strides = strides,
        .byte_offset = c->byte_offset,
    };
    pylayout_status st = pylayout_tensor_view(base, &d, &v);
    ck_assert_msg(st == c->status, "%s: status %d (%s), expected %d", c->name, (int)st, pylayout_strerror(st),
                  (int)c->status);
    if (st == PYLAYOUT_OK) {
        const DLTensor *dl = dl_of(v);
        ck_assert_ptr_eq(dl->data, f->buf);
        ck_assert_int_eq(dl->device.device_type, kDLCPU);
        ck_assert_uint_eq(dl->byte_offset, c->byte_offset);
        ck_assert_int_eq(dl->ndim, c->ndim);
        for (int32_t k = 0; k < c->ndim; k++) {
            ck_assert_int_eq(dl->shape[k], c->shape[k]);
            ck_assert_int_eq(dl->strides[k], c->strides[k]);
        }
        pylayout_tensor_release(v);
    } else {
        ck_assert_str_ne(pylayout_last_error(), "");
    }
    pylayout_tensor_release(base);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

/* The base's own extent (byte_offset, negative strides) bounds its views. */
START_TEST(test_view_of_offset_base)
{
    float data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t bshape[1] = {4}, bstrides[1] = {-1};
    /* base: elements 7, 6, 5, 4 -> bytes [16, 32) */
    DLTensor b = dl_make(data, 1, bshape, bstrides, f32, 28);
    pylayout_tensor *base = NULL, *v = NULL;
    ck_assert_int_eq(pylayout_tensor_borrow(&b, 0, &base), PYLAYOUT_OK);
    int64_t s[1] = {4}, st[1] = {1};
    DLTensor d = {.ndim = 1, .dtype = f32, .shape = s, .strides = st, .byte_offset = 16};
    ck_assert_int_eq(pylayout_tensor_view(base, &d, &v), PYLAYOUT_OK);
    pylayout_tensor_release(v);
    d.byte_offset = 12;
    ck_assert_int_eq(pylayout_tensor_view(base, &d, &v), PYLAYOUT_ERR_OUT_OF_BOUNDS);
    d.byte_offset = 20;
    ck_assert_int_eq(pylayout_tensor_view(base, &d, &v), PYLAYOUT_ERR_OUT_OF_BOUNDS);
    d.byte_offset = 0;
    ck_assert_int_eq(pylayout_tensor_view(base, &d, &v), PYLAYOUT_ERR_OUT_OF_BOUNDS);
    pylayout_tensor_release(base);

    /* An empty base has no memory: only empty views fit. */
    int64_t eshape[1] = {0};
    DLTensor e = dl_make(data, 1, eshape, st, f32, 0);
    ck_assert_int_eq(pylayout_tensor_borrow(&e, 0, &base), PYLAYOUT_OK);
    d.byte_offset = 0;
    ck_assert_int_eq(pylayout_tensor_view(base, &d, &v), PYLAYOUT_ERR_OUT_OF_BOUNDS);
    DLTensor d0 = {.ndim = 1, .dtype = f32, .shape = eshape, .strides = st};
    ck_assert_int_eq(pylayout_tensor_view(base, &d0, &v), PYLAYOUT_OK);
    pylayout_tensor_release(v);
    pylayout_tensor_release(base);
}
END_TEST

static int view_null_tensor_ret(void)
{
    float data[4] = {0};
    int64_t s[1] = {4};
    DLTensor b = dl_make(data, 1, s, NULL, f32, 0);
    pylayout_tensor *base = NULL;
    if (pylayout_tensor_borrow(&b, 0, &base) != PYLAYOUT_OK)
        return 100;
    return (int)pylayout_tensor_view(base, &b, NULL);
}

/* A view whose byte_offset + extent passes 2^63 bytes lies far outside a
 * 96-byte base. */
static int view_extent_overflow(void)
{
    float data[24] = {0};
    int64_t bs[1] = {24};
    DLTensor b = dl_make(data, 1, bs, NULL, f32, 0);
    pylayout_tensor *base = NULL, *v = NULL;
    if (pylayout_tensor_borrow(&b, 0, &base) != PYLAYOUT_OK)
        return 100;
    /* Elements at bytes 2^62 and 2^62 + 2^62: each addressable on its own
     * (data + 2^63 + 4 < 2^64), but nowhere near the base. */
    int64_t s[1] = {2}, st[1] = {INT64_C(1) << 60};
    DLTensor d = {.ndim = 1, .dtype = f32, .shape = s, .strides = st, .byte_offset = UINT64_C(1) << 62};
    pylayout_status status = pylayout_tensor_view(base, &d, &v);
    pylayout_tensor_release(v);
    pylayout_tensor_release(base);
    return (int)status;
}

START_TEST(test_view_extent_overflow)
{
    /* Regression: pylayout_tensor_view's bounds check must not overflow
     * when byte_offset (< 2^63) plus the view's byte extent (< 2^63) passes
     * INT64_MAX: here 2^62 + (2^62 + 4) once wrapped negative in int64_t
     * (signed overflow, UB), the check passed and the view came back OK.
     * The view must be refused with OUT_OF_BOUNDS.  Run in a child so that
     * a sanitizer abort or crash fails this test only. */
    int rc = run_in_child(view_extent_overflow);
    ck_assert_msg(rc == PYLAYOUT_ERR_OUT_OF_BOUNDS, "view reaching 2^63 bytes past its base: child %s %d, expected %d",
                  rc < 0 ? "died of signal" : "returned", rc < 0 ? -rc : rc, (int)PYLAYOUT_ERR_OUT_OF_BOUNDS);
}
END_TEST

START_TEST(test_view_null_args)
{
    fake *f = fake_simple();
    pylayout_tensor *base = NULL, *v = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &base), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_view(NULL, &f->mv.dl_tensor, &v), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_view(base, NULL, &v), PYLAYOUT_ERR_INVALID_ARGUMENT);
    pylayout_tensor_release(base);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
    /* Regression: pylayout_tensor_view with a NULL tensor_ret must return
     * PYLAYOUT_ERR_INVALID_ARGUMENT; it once stored the view through the
     * NULL pointer (SIGSEGV).  Run in a child so that a crash fails this
     * test only. */
    int rc = run_in_child(view_null_tensor_ret);
    ck_assert_msg(rc == PYLAYOUT_ERR_INVALID_ARGUMENT,
                  "pylayout_tensor_view(base, desc, NULL): child %s %d, expected status %d",
                  rc < 0 ? "died of signal" : "returned", rc < 0 ? -rc : rc, (int)PYLAYOUT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* --------------------------------------------------------------- errors */

typedef struct bad_case {
    const char *name;
    int32_t ndim;
    int64_t shape[3];
    int64_t strides[3];
    bool null_shape, null_data;
    DLDataType dtype;
    pylayout_status status;
    const char *detail; /* a substring pylayout_last_error() must contain */
} bad_case;

static const bad_case bad_cases[] = {
    {"ndim -1", -1, {2}, {1}, false, false, {kDLFloat, 32, 1}, PYLAYOUT_ERR_INVALID_TENSOR, "-1"},
    {"ndim 65", 65, {2}, {1}, false, false, {kDLFloat, 32, 1}, PYLAYOUT_ERR_INVALID_TENSOR, "65"},
    {"NULL shape", 2, {0}, {0}, true, false, {kDLFloat, 32, 1}, PYLAYOUT_ERR_INVALID_TENSOR, "shape"},
    {"negative shape", 3, {2, 3, -4}, {12, 4, 1}, false, false, {kDLFloat, 32, 1}, PYLAYOUT_ERR_INVALID_TENSOR,
     "dim 2"},
    {"shape product overflow", 3, {INT64_C(1) << 40, INT64_C(1) << 40, 1}, {0, 0, 0}, false, false,
     {kDLFloat, 32, 1}, PYLAYOUT_ERR_INVALID_TENSOR, ""},
    {"strides overflow", 2, {INT64_C(1) << 20, 2}, {INT64_C(1) << 50, 1}, false, false, {kDLFloat, 32, 1},
     PYLAYOUT_ERR_INVALID_TENSOR, "stride"},
    {"byte extent overflow", 1, {3}, {INT64_C(1) << 61}, false, false, {kDLFloat, 32, 1},
     PYLAYOUT_ERR_INVALID_TENSOR, ""},
    {"NULL data, numel > 0", 2, {2, 3}, {3, 1}, false, true, {kDLFloat, 32, 1}, PYLAYOUT_ERR_INVALID_TENSOR,
     "NULL"},
    {"lanes 2", 1, {2}, {1}, false, false, {kDLFloat, 32, 2}, PYLAYOUT_ERR_UNSUPPORTED_DTYPE, "lanes 2"},
    {"bits 4", 1, {2}, {1}, false, false, {kDLInt, 4, 1}, PYLAYOUT_ERR_UNSUPPORTED_DTYPE, "bits 4"},
    {"opaque handle", 1, {2}, {1}, false, false, {kDLOpaqueHandle, 64, 1}, PYLAYOUT_ERR_UNSUPPORTED_DTYPE,
     "code 3"},
    {"code 99", 1, {2}, {1}, false, false, {99, 32, 1}, PYLAYOUT_ERR_UNSUPPORTED_DTYPE, "code 99"},
};
#define N_BAD_CASES ((int)(sizeof bad_cases / sizeof bad_cases[0]))

/* Each malformed tensor is refused by all three imports with the same
 * status, a detailed message, and no deleter call. */
START_TEST(test_bad_input_table)
{
    const bad_case *c = &bad_cases[_i];
    fake *f = fake_simple();
    int64_t shape[70], strides[70];
    for (int d = 0; d < 70; d++) {
        shape[d] = d < 3 ? c->shape[d] : 1;
        strides[d] = d < 3 ? c->strides[d] : 1;
    }
    DLTensor dl = {
        .data = c->null_data ? NULL : (void *)f->buf,
        .device = {kDLCPU, 0},
        .ndim = c->ndim,
        .dtype = c->dtype,
        .shape = c->null_shape ? NULL : shape,
        .strides = strides,
    };
    f->mv.dl_tensor = dl;
    f->ml.dl_tensor = dl;
    pylayout_tensor *t = NULL;
    pylayout_status st[3];
    st[0] = pylayout_tensor_borrow(&dl, 0, &t);
    ck_assert_msg(strstr(pylayout_last_error(), c->detail) != NULL, "%s: last_error \"%s\" lacks \"%s\"", c->name,
                  pylayout_last_error(), c->detail);
    st[1] = pylayout_tensor_from_legacy(&f->ml, 0, &t);
    ck_assert_str_ne(pylayout_last_error(), "");
    st[2] = pylayout_tensor_from_versioned(&f->mv, &t);
    ck_assert_str_ne(pylayout_last_error(), "");
    static const char *const via[3] = {"borrow", "from_legacy", "from_versioned"};
    for (int k = 0; k < 3; k++)
        ck_assert_msg(st[k] == c->status, "%s via %s: status %d (%s), expected %d", c->name, via[k], (int)st[k],
                      pylayout_strerror(st[k]), (int)c->status);
    ck_assert_int_eq(pylayout_validate(&dl), c->status);
    ck_assert_int_eq(deletes(f), 0);
    fake_free(f);
}
END_TEST

START_TEST(test_null_args)
{
    fake *f = fake_simple();
    pylayout_tensor *t = NULL;
    const DLTensor *dl = NULL;
    uint64_t flags;
    DLManagedTensorVersioned *mv = NULL;
    DLManagedTensor *ml = NULL;
    ck_assert_int_eq(pylayout_tensor_from_versioned(NULL, &t), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_from_legacy(NULL, 0, &t), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_borrow(NULL, 0, &t), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_borrow(&f->mv.dl_tensor, 0, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_dltensor(NULL, &dl), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_dltensor(t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_flags(NULL, &flags), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_flags(t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_to_versioned(NULL, &mv), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_to_versioned(t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_to_legacy(NULL, &ml), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_to_legacy(t, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_retain(NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_tensor_release(NULL), PYLAYOUT_OK);
    ck_assert_int_eq(deletes(f), 0); /* none of the failures took or dropped a reference */
    ck_assert_int_eq(pylayout_tensor_release(t), PYLAYOUT_OK);
    ck_assert_int_eq(deletes(f), 1);
    fake_free(f);
}
END_TEST

START_TEST(test_strerror)
{
    enum { LAST = PYLAYOUT_ERR_DTYPE_MISMATCH }; /* the highest status in pylayout.h */
    const char *seen[LAST + 1];
    for (int s = PYLAYOUT_OK; s <= LAST; s++) {
        const char *msg = pylayout_strerror((pylayout_status)s);
        ck_assert_ptr_nonnull(msg);
        ck_assert_msg(msg[0] != '\0', "status %d: empty string", s);
        ck_assert_msg(strcmp(msg, "unknown status") != 0, "status %d is unknown to strerror", s);
        for (int k = 0; k < s; k++)
            ck_assert_msg(strcmp(msg, seen[k]) != 0, "statuses %d and %d share \"%s\"", k, s, msg);
        seen[s] = msg;
    }
    static const int out_of_range[] = {LAST + 1, LAST + 2, 100, -1, -1000, 0x7fffffff};
    for (size_t i = 0; i < sizeof out_of_range / sizeof out_of_range[0]; i++) {
        const char *msg = pylayout_strerror((pylayout_status)out_of_range[i]);
        ck_assert_ptr_nonnull(msg);
        ck_assert_str_eq(msg, "unknown status");
    }
}
END_TEST

/* The detail is per thread. */
static void *other_thread_error(void *arg)
{
    (void)arg;
    return (void *)pylayout_last_error();
}

START_TEST(test_last_error)
{
    int64_t shape[2] = {2, -5};
    DLTensor bad = dl_make(NULL, 2, shape, NULL, f32, 0);
    pylayout_tensor *t = NULL;
    ck_assert_ptr_nonnull(pylayout_last_error());
    ck_assert_int_eq(pylayout_tensor_borrow(&bad, 0, &t), PYLAYOUT_ERR_INVALID_TENSOR);
    const char *msg = pylayout_last_error();
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "-5"));
    ck_assert_ptr_nonnull(strstr(msg, "dim 1"));
    pthread_t th;
    void *other = NULL;
    ck_assert_int_eq(pthread_create(&th, NULL, other_thread_error, NULL), 0);
    ck_assert_int_eq(pthread_join(th, &other), 0);
    ck_assert_ptr_nonnull(other);
    ck_assert_str_eq((const char *)other, "");
    ck_assert_str_ne(pylayout_last_error(), "");

    fake *f = fake_simple();
    f->mv.version.major = 2;
    f->mv.version.minor = 7;
    ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_ERR_UNSUPPORTED_VERSION);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "2.7"));
    fake_free(f);
}
END_TEST

/* -------------------------------------------------------------- threads */

#define N_THREADS 8
#define N_ROUNDS 20000

static void *retain_release_worker(void *arg)
{
    pylayout_tensor *t = arg;
    for (int i = 0; i < N_ROUNDS; i++) {
        if (pylayout_tensor_retain(t) != PYLAYOUT_OK)
            return (void *)1;
        if (i % 64 == 0) {
            DLManagedTensorVersioned *m = NULL;
            if (pylayout_tensor_to_versioned(t, &m) != PYLAYOUT_OK)
                return (void *)1;
            m->deleter(m);
        }
        pylayout_tensor_release(t);
    }
    pylayout_tensor_release(t); /* the reference main() took for this thread */
    return NULL;
}

/* 8 threads retain, export and release one tensor concurrently, each dropping
 * one reference of its own at the end; whichever drops the last one runs the
 * producer's deleter, exactly once. */
START_TEST(test_concurrent_retain_release)
{
    for (int round = 0; round < 4; round++) {
        fake *f = fake_simple();
        pylayout_tensor *t = NULL;
        pthread_t th[N_THREADS];
        ck_assert_int_eq(pylayout_tensor_from_versioned(&f->mv, &t), PYLAYOUT_OK);
        for (int i = 0; i < N_THREADS; i++)
            ck_assert_int_eq(pylayout_tensor_retain(t), PYLAYOUT_OK);
        for (int i = 0; i < N_THREADS; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, retain_release_worker, t), 0);
        if (round % 2)
            pylayout_tensor_release(t); /* main's own reference: early or late */
        for (int i = 0; i < N_THREADS; i++) {
            void *ret = (void *)1;
            ck_assert_int_eq(pthread_join(th[i], &ret), 0);
            ck_assert_ptr_null(ret);
        }
        if (round % 2 == 0) {
            ck_assert_int_eq(deletes(f), 0);
            pylayout_tensor_release(t);
        }
        ck_assert_int_eq(deletes(f), 1);
        fake_free(f);
    }
}
END_TEST

/* ------------------------------------------------------------- cache */

#define MIB ((int64_t)1 << 20)

/* Elements empty_mib writes and cache_worker checks: one per 4 KiB page and
 * then some, cheap enough for valgrind. */
#define FILL_STEP 1021

/* Sets *t to a float32 tensor of `mib` MiB from pylayout_tensor_empty, with
 * every FILL_STEP-th element and the last set to `v`.  Asserts nothing, so
 * that worker threads can use it: returns NULL on success, else what failed
 * (and *t is NULL). */
static const char *try_empty_mib(int64_t mib, float v, pylayout_tensor **t)
{
    int64_t shape[1] = {mib * MIB / 4};
    *t = NULL;
    if (pylayout_tensor_empty(1, shape, (DLDataType){kDLFloat, 32, 1}, PYLAYOUT_FORMAT_CONTIGUOUS, t) != PYLAYOUT_OK)
        return "pylayout_tensor_empty failed";
    const DLTensor *d = NULL;
    const char *why = NULL;
    if (pylayout_tensor_dltensor(*t, &d) != PYLAYOUT_OK || d == NULL)
        why = "pylayout_tensor_dltensor failed";
    else if ((uintptr_t)d->data % 64 != 0)
        why = "data not 64-byte aligned";
    if (why != NULL) {
        pylayout_tensor_release(*t);
        *t = NULL;
        return why;
    }
    float *f = d->data;
    for (int64_t k = 0; k < shape[0]; k += FILL_STEP)
        f[k] = v;
    f[shape[0] - 1] = v;
    return NULL;
}

static pylayout_tensor *empty_mib(int64_t mib, float v)
{
    pylayout_tensor *t = NULL;
    const char *why = try_empty_mib(mib, v, &t);
    ck_assert_msg(why == NULL, "empty_mib(%lld): %s (%s)", (long long)mib, why, pylayout_last_error());
    return t;
}

static int64_t cache_held(void)
{
    int64_t held = -1;
    ck_assert_int_eq(pylayout_cache_info(NULL, &held), PYLAYOUT_OK);
    return held;
}

static int64_t saved_limit;
static void cache_setup(void)
{
    ck_assert_int_eq(pylayout_cache_info(&saved_limit, NULL), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_set_cache_limit(256 * MIB), PYLAYOUT_OK);
}
static void cache_teardown(void)
{
    ck_assert_int_eq(pylayout_set_cache_limit(0), PYLAYOUT_OK);
    ck_assert_int_eq(cache_held(), 0);
    ck_assert_int_eq(pylayout_set_cache_limit(saved_limit), PYLAYOUT_OK);
}

/* A released large output is kept and handed to the next allocation of the
 * same size; other sizes get fresh memory. */
START_TEST(test_cache_reuses_same_size)
{
    pylayout_tensor *a = empty_mib(40, 1.0f);
    ck_assert_int_eq(cache_held(), 0);
    ck_assert_int_eq(pylayout_tensor_release(a), PYLAYOUT_OK);
    ck_assert_int_eq(cache_held(), 40 * MIB);
    pylayout_tensor *b = empty_mib(40, 2.0f); /* takes the cached block */
    ck_assert_int_eq(cache_held(), 0);
    pylayout_tensor *c = empty_mib(34, 3.0f); /* no block of that size: fresh */
    ck_assert_int_eq(cache_held(), 0);
    ck_assert_int_eq(pylayout_tensor_release(b), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_release(c), PYLAYOUT_OK);
    ck_assert_int_eq(cache_held(), 74 * MIB);
    /* 33 MiB rounds to the same 34 MiB of 2 MiB pages as the cached block */
    pylayout_tensor *d = empty_mib(33, 4.0f);
    ck_assert_int_eq(cache_held(), 40 * MIB);
    ck_assert_int_eq(pylayout_tensor_release(d), PYLAYOUT_OK);
}
END_TEST

/* Small blocks are malloc's business; blocks over the limit are unmapped;
 * the oldest block goes first when the limit or the slot count is reached. */
START_TEST(test_cache_limits)
{
    ck_assert_int_eq(pylayout_tensor_release(empty_mib(4, 1.0f)), PYLAYOUT_OK);
    ck_assert_int_eq(cache_held(), 0);
    ck_assert_int_eq(pylayout_set_cache_limit(100 * MIB), PYLAYOUT_OK);
    ck_assert_int_eq(pylayout_tensor_release(empty_mib(128, 1.0f)), PYLAYOUT_OK);
    ck_assert_int_eq(cache_held(), 0);
    pylayout_tensor *t[10];
    for (int k = 0; k < 3; k++)
        t[k] = empty_mib(34 + 2 * k, (float)k); /* 34, 36, 38 MiB */
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(pylayout_tensor_release(t[k]), PYLAYOUT_OK);
    ck_assert_int_eq(cache_held(), 36 * MIB + 38 * MIB); /* 34 was oldest: dropped at 108 > 100 */
    pylayout_tensor *again = empty_mib(34, 0.0f);         /* fresh, the cache keeps both */
    ck_assert_int_eq(cache_held(), 74 * MIB);
    ck_assert_int_eq(pylayout_tensor_release(again), PYLAYOUT_OK);
    ck_assert_int_eq(cache_held(), 34 * MIB + 38 * MIB); /* now 36 was oldest */

    ck_assert_int_eq(pylayout_set_cache_limit(1024 * MIB), PYLAYOUT_OK);
    for (int k = 0; k < 10; k++)
        t[k] = empty_mib(32 + 2 * k, (float)k);
    for (int k = 0; k < 10; k++)
        ck_assert_int_eq(pylayout_tensor_release(t[k]), PYLAYOUT_OK);
    int64_t kept = 0; /* 8 slots: the newest eight, 36..50 MiB */
    for (int k = 2; k < 10; k++)
        kept += (32 + 2 * k) * MIB;
    ck_assert_int_eq(cache_held(), kept);
    ck_assert_int_eq(pylayout_set_cache_limit(40 * MIB), PYLAYOUT_OK); /* trims now */
    ck_assert_int_lt(cache_held(), 40 * MIB + 1);
    ck_assert_int_eq(pylayout_set_cache_limit(0), PYLAYOUT_OK);
    ck_assert_int_eq(cache_held(), 0);
    ck_assert_int_eq(pylayout_tensor_release(empty_mib(34, 1.0f)), PYLAYOUT_OK);
    ck_assert_int_eq(cache_held(), 0); /* off: nothing kept */
}
END_TEST

static void expect_error(pylayout_status st, pylayout_status want, const char *needle)
{
    ck_assert_int_eq(st, want);
    ck_assert_msg(strstr(pylayout_last_error(), needle) != NULL, "'%s' lacks '%s'", pylayout_last_error(), needle);
}

START_TEST(test_cache_errors)
{
    int64_t limit = -1;
    expect_error(pylayout_set_cache_limit(-1), PYLAYOUT_ERR_INVALID_ARGUMENT, ">= 0");
    ck_assert_int_eq(pylayout_cache_info(&limit, NULL), PYLAYOUT_OK);
    ck_assert_int_eq(limit, 256 * MIB); /* unchanged by the refused call */
    expect_error(pylayout_cache_info(NULL, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT, "NULL");
}
END_TEST

/* Threads allocate, fill, check and release blocks of two sizes at once:
 * no block is ever handed to two owners. */
static void *cache_worker(void *arg)
{
    /* No ck_assert off the main thread: each failure is returned as a
     * message for test_cache_threads to assert on. */
    const float v = (float)(uintptr_t)arg;
    for (int round = 0; round < 6; round++) {
        pylayout_tensor *t = NULL;
        const char *why = try_empty_mib(round % 2 ? 34 : 36, v, &t);
        if (why != NULL)
            return (void *)why;
        const DLTensor *d = NULL;
        if (pylayout_tensor_dltensor(t, &d) != PYLAYOUT_OK || d == NULL)
            why = "pylayout_tensor_dltensor failed";
        else {
            const float *f = d->data;
            for (int64_t k = 0; k < d->shape[0] && why == NULL; k += FILL_STEP)
                if (f[k] != v)
                    why = "block shared with another thread (element changed)";
            if (why == NULL && f[d->shape[0] - 1] != v)
                why = "block shared with another thread (last element changed)";
        }
        if (pylayout_tensor_release(t) != PYLAYOUT_OK && why == NULL)
            why = "pylayout_tensor_release failed";
        if (why != NULL)
            return (void *)why;
    }
    return NULL;
}

START_TEST(test_cache_threads)
{
    pthread_t th[4];
    for (uintptr_t i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, cache_worker, (void *)(i + 1)), 0);
    const char *why[4];
    for (int i = 0; i < 4; i++) {
        void *ret = (void *)"pthread_join did not set the result";
        ck_assert_int_eq(pthread_join(th[i], &ret), 0);
        why[i] = ret;
    }
    for (int i = 0; i < 4; i++)
        ck_assert_msg(why[i] == NULL, "cache worker %d: %s", i, why[i]);
    ck_assert_int_le(cache_held(), 256 * MIB);
}
END_TEST

/* Small outputs (64 B to 4 KiB) reuse one freed block per size class: a
 * block comes back only once freed, two live tensors never share one, and
 * every size in a class gets room for the whole class.  Under ASan the
 * slots are off and only the aliasing checks apply. */
#if defined(__SANITIZE_ADDRESS__)
#define PL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PL_TEST_ASAN 1
#endif
#endif

static pylayout_tensor *empty_bytes(int64_t n, unsigned char fill)
{
    pylayout_tensor *t = NULL;
    ck_assert_int_eq(pylayout_tensor_empty(1, &n, (DLDataType){kDLUInt, 8, 1}, PYLAYOUT_FORMAT_CONTIGUOUS, &t),
                     PYLAYOUT_OK);
    ck_assert((uintptr_t)dl_of(t)->data % 64 == 0);
    memset(dl_of(t)->data, fill, (size_t)n);
    return t;
}

static void assert_filled(pylayout_tensor *t, int64_t n, unsigned char fill)
{
    const unsigned char *p = dl_of(t)->data;
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(p[i] == fill, "byte %lld is %u, not %u: another tensor wrote here", (long long)i, p[i], fill);
}

START_TEST(test_small_blocks_never_shared)
{
    static const int64_t sizes[] = {1, 63, 64, 65, 700, 1000, 1024, 1025, 3000, 4096, 4097, 9000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const int64_t n = sizes[i];
        pylayout_tensor *a = empty_bytes(n, 1), *b = empty_bytes(n, 2);
        ck_assert_ptr_ne(dl_of(a)->data, dl_of(b)->data);
        void *freed = dl_of(a)->data;
        ck_assert_int_eq(pylayout_tensor_release(a), PYLAYOUT_OK);
        pylayout_tensor *c = empty_bytes(n, 3), *d = empty_bytes(n, 4);
        ck_assert_ptr_ne(dl_of(c)->data, dl_of(d)->data);
        ck_assert_ptr_ne(dl_of(c)->data, dl_of(b)->data);
        ck_assert_ptr_ne(dl_of(d)->data, dl_of(b)->data);
#if !defined(PL_TEST_ASAN)
        if (n <= 4096) /* the freed block is the next one handed out */
            ck_assert_ptr_eq(dl_of(c)->data, freed);
#endif
        (void)freed;
        assert_filled(b, n, 2);
        assert_filled(c, n, 3);
        assert_filled(d, n, 4);
        pylayout_tensor_release(b);
        pylayout_tensor_release(c);
        pylayout_tensor_release(d);
    }
    /* a block freed from one size is big enough for any size of its class */
    pylayout_tensor_release(empty_bytes(513, 5));
    pylayout_tensor *big = empty_bytes(1024, 6);
    assert_filled(big, 1024, 6);
    pylayout_tensor_release(big);
}
END_TEST

static void *small_worker(void *arg)
{
    const unsigned char id = (unsigned char)(uintptr_t)arg;
    for (int round = 0; round < 20000; round++) {
        const int64_t n = 64 << (round % 7);
        pylayout_tensor *t = NULL;
        if (pylayout_tensor_empty(1, &n, (DLDataType){kDLUInt, 8, 1}, PYLAYOUT_FORMAT_CONTIGUOUS, &t) != PYLAYOUT_OK)
            return (void *)"pylayout_tensor_empty failed";
        unsigned char *p = dl_of(t)->data;
        memset(p, id, (size_t)n);
        for (int64_t i = 0; i < n; i += 61)
            if (p[i] != id)
                return (void *)"a live small block was written by another thread";
        pylayout_tensor_release(t);
    }
    return NULL;
}

START_TEST(test_small_blocks_threads)
{
    pthread_t th[4];
    for (uintptr_t i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, small_worker, (void *)(i + 1)), 0);
    for (int i = 0; i < 4; i++) {
        void *ret = (void *)"pthread_join did not set the result";
        ck_assert_int_eq(pthread_join(th[i], &ret), 0);
        ck_assert_msg(ret == NULL, "small-block worker %d: %s", i, (const char *)ret);
    }
}
END_TEST

/* ------------------------------------------------------------ dtypes */

static const struct {
    DLDataType dtype;
    const char *name;
} dtype_names[] = {
    {{kDLBool, 8, 1}, "bool"},          {{kDLInt, 8, 1}, "int8"},
    {{kDLInt, 64, 1}, "int64"},         {{kDLUInt, 16, 1}, "uint16"},
    {{kDLFloat, 16, 1}, "float16"},     {{kDLFloat, 64, 1}, "float64"},
    {{kDLBfloat, 16, 1}, "bfloat16"},   {{kDLComplex, 32, 1}, "complex32"},
    {{kDLComplex, 128, 1}, "complex128"}, {{kDLFloat8_e4m3fn, 8, 1}, "float8_e4m3fn"},
};

START_TEST(test_dtype_names_round_trip)
{
    const char *name = NULL;
    DLDataType back;
    ck_assert_int_eq(pylayout_dtype_name(dtype_names[_i].dtype, &name), PYLAYOUT_OK);
    ck_assert_str_eq(name, dtype_names[_i].name);
    ck_assert_int_eq(pylayout_dtype_from_name(name, &back), PYLAYOUT_OK);
    ck_assert_uint_eq(back.code, dtype_names[_i].dtype.code);
    ck_assert_uint_eq(back.bits, dtype_names[_i].dtype.bits);
    ck_assert_uint_eq(back.lanes, 1);
}
END_TEST

START_TEST(test_device_names)
{
    static const struct {
        int32_t type;
        const char *name;
    } known[] = {{kDLCPU, "cpu"}, {kDLCUDA, "cuda"}, {kDLCUDAHost, "cuda_host"}, {kDLROCM, "rocm"},
                 {kDLMetal, "metal"}, {kDLCUDAManaged, "cuda_managed"}, {kDLOneAPI, "oneapi"}, {kDLTrn, "trn"}};
    const char *name = "x";
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        ck_assert_int_eq(pylayout_device_name(known[i].type, &name), PYLAYOUT_OK);
        ck_assert_str_eq(name, known[i].name);
    }
    ck_assert_int_eq(pylayout_device_name(5, &name), PYLAYOUT_ERR_UNSUPPORTED_DEVICE); /* no DLPack type 5 */
    ck_assert_ptr_null(name);
    ck_assert_int_eq(pylayout_device_name(-1, &name), PYLAYOUT_ERR_UNSUPPORTED_DEVICE);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "-1"));
    ck_assert_int_eq(pylayout_device_name(kDLCPU, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_dtype_helpers)
{
    size_t n = 0;
    ck_assert_int_eq(pylayout_dtype_itemsize((DLDataType){kDLComplex, 128, 1}, &n), PYLAYOUT_OK);
    ck_assert_uint_eq(n, 16);
    ck_assert_int_eq(pylayout_dtype_itemsize((DLDataType){kDLBool, 8, 1}, &n), PYLAYOUT_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(pylayout_dtype_itemsize((DLDataType){kDLFloat, 32, 4}, &n), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
    ck_assert_int_eq(pylayout_dtype_itemsize((DLDataType){kDLFloat, 32, 1}, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);

    static const uint8_t real_bits[3] = {16, 32, 64};
    for (int i = 0; i < 3; i++) {
        DLDataType c, r;
        ck_assert_int_eq(pylayout_complex_dtype((DLDataType){kDLFloat, real_bits[i], 1}, &c), PYLAYOUT_OK);
        ck_assert(c.code == kDLComplex && c.bits == 2 * real_bits[i] && c.lanes == 1);
        ck_assert_int_eq(pylayout_real_dtype(c, &r), PYLAYOUT_OK);
        ck_assert(r.code == kDLFloat && r.bits == real_bits[i] && r.lanes == 1);
    }
    DLDataType out;
    ck_assert_int_eq(pylayout_complex_dtype((DLDataType){kDLBfloat, 16, 1}, &out), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "bfloat16"));
    ck_assert_int_eq(pylayout_complex_dtype((DLDataType){kDLInt, 32, 1}, &out), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
    ck_assert_int_eq(pylayout_real_dtype((DLDataType){kDLFloat, 32, 1}, &out), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
    ck_assert_int_eq(pylayout_real_dtype((DLDataType){kDLComplex, 64, 2}, &out), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
    ck_assert_int_eq(pylayout_real_dtype((DLDataType){kDLComplex, 64, 1}, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);

    bool host = false;
    ck_assert_int_eq(pylayout_device_is_host((DLDevice){kDLCPU, 0}, &host), PYLAYOUT_OK);
    ck_assert(host);
    ck_assert_int_eq(pylayout_device_is_host((DLDevice){kDLCUDAManaged, 1}, &host), PYLAYOUT_OK);
    ck_assert(host);
    ck_assert_int_eq(pylayout_device_is_host((DLDevice){kDLCUDA, 0}, &host), PYLAYOUT_OK);
    ck_assert(!host);
    ck_assert_int_eq(pylayout_device_is_host((DLDevice){kDLCPU, 0}, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_format_names)
{
    static const char *const names[4] = {"contiguous", "channels_last", "channels_last_3d", "fortran"};
    for (int f = 0; f < 4; f++) {
        const char *name = NULL;
        pylayout_format back;
        ck_assert_int_eq(pylayout_format_name((pylayout_format)f, &name), PYLAYOUT_OK);
        ck_assert_str_eq(name, names[f]);
        ck_assert_int_eq(pylayout_format_from_name(name, &back), PYLAYOUT_OK);
        ck_assert_int_eq(back, f);
    }
    static const struct {
        const char *alias;
        pylayout_format f;
    } aliases[] = {{"C", PYLAYOUT_FORMAT_CONTIGUOUS}, {"F", PYLAYOUT_FORMAT_FORTRAN},
                   {"torch.contiguous_format", PYLAYOUT_FORMAT_CONTIGUOUS},
                   {"torch.channels_last", PYLAYOUT_FORMAT_CHANNELS_LAST},
                   {"torch.channels_last_3d", PYLAYOUT_FORMAT_CHANNELS_LAST_3D}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        pylayout_format f;
        ck_assert_int_eq(pylayout_format_from_name(aliases[i].alias, &f), PYLAYOUT_OK);
        ck_assert_int_eq(f, aliases[i].f);
    }
    pylayout_format f;
    const char *name;
    ck_assert_int_eq(pylayout_format_from_name("NHWC", &f), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(pylayout_last_error(), "'C'"));
    ck_assert_int_eq(pylayout_format_from_name("torch.preserve_format", &f), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_format_from_name(NULL, &f), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_format_name((pylayout_format)4, &name), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_format_name((pylayout_format)-1, &name), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_format_name(PYLAYOUT_FORMAT_FORTRAN, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* The library's version is the header's (both come from meson.build). */
START_TEST(test_version)
{
    unsigned number = 0;
    const char *string = NULL;
    ck_assert_int_eq(pylayout_version(&number, &string), PYLAYOUT_OK);
    ck_assert_uint_eq(number, PYLAYOUT_VERSION_NUMBER);
    ck_assert_str_eq(string, PYLAYOUT_VERSION_STRING);
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", PYLAYOUT_VERSION_MAJOR, PYLAYOUT_VERSION_MINOR,
             PYLAYOUT_VERSION_PATCH);
    ck_assert_str_eq(string, expect);
    ck_assert_int_eq(pylayout_version(NULL, NULL), PYLAYOUT_OK);
}
END_TEST

START_TEST(test_dtype_name_errors)
{
    const char *name = "untouched";
    DLDataType dt = {kDLFloat, 32, 1};
    DLDataType bad[] = {{kDLFloat, 32, 4}, {kDLFloat4_e2m1fn, 4, 1}, {kDLOpaqueHandle, 64, 1}, {99, 8, 1},
                        {kDLInt, 24, 1}, {kDLBool, 1, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(pylayout_dtype_name(bad[i], &name), PYLAYOUT_ERR_UNSUPPORTED_DTYPE);
        ck_assert_str_eq(name, "untouched");
        ck_assert_str_ne(pylayout_last_error(), "");
    }
    ck_assert_int_eq(pylayout_dtype_name(dt, NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_dtype_from_name("float33", &dt), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_dtype_from_name("Float32", &dt), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_dtype_from_name(NULL, &dt), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pylayout_dtype_from_name("int8", NULL), PYLAYOUT_ERR_INVALID_ARGUMENT);
    ck_assert_uint_eq(dt.code, kDLFloat); /* untouched by the failures */
    ck_assert_uint_eq(dt.bits, 32);
}
END_TEST

/* ---------------------------------------------------------------- suite */

/* In a fresh process (so that no explicit limit is in force): the default
 * limit under RLIMIT_AS = VmSize + 512 MiB is at most an eighth of that
 * room (the cache's blocks keep address space other allocators may need),
 * and a released output larger than the limit is not kept.  Exit
 * status 0 when all holds, else the number of the check that failed. */
static int cache_rlimit_child(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = 0;
    if (f == NULL || fscanf(f, "%lld", &pages) != 1)
        return 2;
    fclose(f);
    int64_t vm = pages * sysconf(_SC_PAGESIZE), limit = -1;
    struct rlimit rl = {(rlim_t)(vm + 512 * MIB), RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        return 3;
#if defined(__SANITIZE_ADDRESS__)
    /* ASan builds start with the cache off (alloc.c), whatever the limits */
    return pylayout_cache_info(&limit, NULL) == PYLAYOUT_OK && limit == 0 ? 0 : 4;
#endif
    if (pylayout_cache_info(&limit, NULL) != PYLAYOUT_OK || limit <= 0 || limit > 64 * MIB)
        return 4;
    pylayout_tensor *a = NULL, *b = NULL;
    if (try_empty_mib(40, 1.0f, &a) != NULL)
        return 5;
    pylayout_tensor_release(a); /* 40 MiB <= the limit: kept */
    int64_t held = -1;
    if (pylayout_cache_info(NULL, &held) != PYLAYOUT_OK || held != 40 * MIB)
        return 6;
    if (try_empty_mib(80, 1.0f, &b) != NULL)
        return 7;
    pylayout_tensor_release(b); /* 80 MiB > the limit: unmapped */
    if (pylayout_cache_info(NULL, &held) != PYLAYOUT_OK || held != 40 * MIB)
        return 8;
    return 0;
}

START_TEST(test_cache_default_follows_rlimit_as)
{
    char *argv[] = {"check_tensor", "--cache-rlimit-child", NULL};
    pid_t pid = 0;
    fflush(NULL);
    ck_assert_int_eq(posix_spawnp(&pid, self_path, NULL, NULL, argv, environ), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "cache limit under RLIMIT_AS: check %d failed",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}
END_TEST

static Suite *tensor_suite(void)
{
    const tcase_spec cases[] = {
        TCASE("ownership", TEST(test_versioned_import_release), TEST(test_legacy_import_release),
              LOOP(test_export_release_orders, 2),
              TEST(test_multiple_exports), TEST(test_legacy_export), TEST(test_reimport_own_export),
              LOOP(test_view_of_view_release_orders, 6), TEST(test_view_keeps_base_alive),
              TEST(test_failed_import_keeps_ownership), TEST(test_borrow), TEST(test_null_deleter)),
        TCASE("roundtrip", LOOP(test_roundtrip, N_ROUNDTRIP_CASES), TEST(test_null_strides_become_explicit),
              TEST(test_byte_offset_honoured), TEST(test_flags), TEST(test_view_chain_holds_root),
              TEST(test_non_cpu_device)),
        TCASE("create", LOOP(test_empty_formats, N_EMPTY_CASES), TEST(test_empty_errors), TEST(test_empty_order)),
        TCASE("views", LOOP(test_view_table, N_VIEW_CASES), TEST(test_view_of_offset_base), TEST(test_view_null_args),
              TEST(test_view_extent_overflow)),
        TCASE("errors", LOOP(test_bad_input_table, N_BAD_CASES), TEST(test_null_args), TEST(test_strerror),
              TEST(test_last_error)),
        TCASE("dtypes", LOOP(test_dtype_names_round_trip, (int)(sizeof dtype_names / sizeof dtype_names[0])),
              TEST(test_device_names), TEST(test_dtype_helpers), TEST(test_format_names), TEST(test_version),
              TEST(test_dtype_name_errors)),
        {.name = "cache", .tests = {TEST(test_cache_reuses_same_size), TEST(test_cache_limits), TEST(test_cache_errors),
              TEST(test_cache_threads)}, .timeout_s = 120, .setup = cache_setup, .teardown = cache_teardown},
        {.name = "cache_limits", .tests = {TEST(test_cache_default_follows_rlimit_as)}, .timeout_s = 120},
        {.name = "threads", .tests = {TEST(test_concurrent_retain_release)}, .timeout_s = 120},
        {.name = "small_blocks", .tests = {TEST(test_small_blocks_never_shared), TEST(test_small_blocks_threads)},
         .timeout_s = 120},
    };
    return SUITE_OF("tensor", cases, 0);
}

int main(int argc, char **argv)
{
    if (argc > 0 && argv[0] != NULL)
        self_path = argv[0];
    if (argc == 2 && strcmp(argv[1], "--cache-rlimit-child") == 0)
        return cache_rlimit_child();
    return run_suite(tensor_suite());
}
