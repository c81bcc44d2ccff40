/*
 * copy.c - pylayout_copy, pylayout_convert, pylayout_convert_order.
 *
 * A copy runs in three steps:
 *   1. validate everything (shapes, devices, overlap) before touching dst;
 *   2. canonicalise, HPTT style: drop size-1 dims, flip dims whose dst stride
 *      is negative, sort dims by dst stride (outermost first), fuse dims that
 *      are contiguous in both tensors -- so an identity permutation becomes one
 *      memcpy and NCHW -> NHWC becomes a batch of 2-D transposes;
 *   3. hand the canonical copy to the engine (plan.c), which cuts it into
 *      units (a tile or a block of rows) and runs them with the kernels
 *      cpu_features.c chose, across threads when the copy is large enough.
 */
#include <stdint.h>

#include "internal.h"

/* ---------------------------------------------------------- validation */

/* Everything about src and dst but overlap: both valid, in CPU memory, of
 * one shape and dtype.  Fills their element strides. */
static pylayout_status pl_check_pair(const DLTensor *src, const DLTensor *dst, int64_t *sstr, int64_t *dstr)
{
    pylayout_status st;
    if (src == NULL || dst == NULL)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "pylayout_copy: %s is NULL",
                              src == NULL ? "src" : "dst");
    if ((st = _pylayout_check(src, "src", sstr)) != PYLAYOUT_OK)
        return st;
    if ((st = _pylayout_check(dst, "dst", dstr)) != PYLAYOUT_OK)
        return st;
    if (!_pylayout_device_is_host(src->device))
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DEVICE,
                              "src is on device '%s'; pylayout copies only CPU memory: copy it to the host first",
                              _pylayout_device_name((int32_t)src->device.device_type));
    if (!_pylayout_device_is_host(dst->device))
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DEVICE,
                              "dst is on device '%s'; pylayout copies only CPU memory: allocate dst on the host",
                              _pylayout_device_name((int32_t)dst->device.device_type));
    if (src->ndim != dst->ndim)
        return _pylayout_fail(PYLAYOUT_ERR_SHAPE_MISMATCH,
                              "src has %d dims but dst has %d: both must have the same shape", (int)src->ndim,
                              (int)dst->ndim);
    for (int32_t k = 0; k < src->ndim; k++)
        if (src->shape[k] != dst->shape[k])
            return _pylayout_fail(PYLAYOUT_ERR_SHAPE_MISMATCH,
                                  "dim %d: src has size %lld but dst has %lld: both must have the same shape",
                                  (int)k, (long long)src->shape[k], (long long)dst->shape[k]);
    if (src->dtype.code != dst->dtype.code || src->dtype.bits != dst->dtype.bits ||
        src->dtype.lanes != dst->dtype.lanes)
        return _pylayout_fail(PYLAYOUT_ERR_DTYPE_MISMATCH,
                              "src is %s but dst is %s: a layout copy never reinterprets values; convert the "
                              "dtype first",
                              _pylayout_dtype_name(src->dtype), _pylayout_dtype_name(dst->dtype));
    return PYLAYOUT_OK;
}

/* For a non-empty pair that passed pl_check_pair: dst must not overlap
 * itself, nor share a byte with src.  Views of one buffer whose spans
 * interleave, but whose elements do not (copy_into(x[:, 1], x[:, 0]), one
 * channel of an image into another, the real parts into the imaginary
 * ones), are apart (_pylayout_views_apart): torch and NumPy copy them. */
static pylayout_status pl_check_overlap(const DLTensor *src, const DLTensor *dst, const int64_t *sstr,
                                        const int64_t *dstr, size_t itemsize)
{
    pylayout_status st;
    const int32_t ndim = src->ndim;
    int bad = -1; /* the shared test: sorted by |stride|, each must clear the dims inside it */
    if (_pylayout_self_overlaps(ndim, dst->shape, dstr, &bad))
        return _pylayout_fail(PYLAYOUT_ERR_OVERLAP,
                              "dst overlaps itself: dim %d (size %lld, stride %lld) maps different indices to "
                              "the same memory; copy into a dense tensor instead",
                              bad, (long long)dst->shape[bad], (long long)dstr[bad]);

    int64_t slo, shi, dlo, dhi;
    if ((st = _pylayout_extent(ndim, src->shape, sstr, itemsize, &slo, &shi)) != PYLAYOUT_OK)
        return st;
    if ((st = _pylayout_extent(ndim, dst->shape, dstr, itemsize, &dlo, &dhi)) != PYLAYOUT_OK)
        return st;
    const char *sbase = (const char *)src->data + src->byte_offset;
    const char *dbase = (const char *)dst->data + dst->byte_offset;
    uintptr_t s0 = (uintptr_t)sbase + (uintptr_t)slo, s1 = (uintptr_t)sbase + (uintptr_t)shi;
    uintptr_t d0 = (uintptr_t)dbase + (uintptr_t)dlo, d1 = (uintptr_t)dbase + (uintptr_t)dhi;
    if (s0 < d1 && d0 < s1 &&
        !_pylayout_views_apart(ndim, src->shape, itemsize, sstr, (uintptr_t)sbase, dstr, (uintptr_t)dbase))
        return _pylayout_fail(PYLAYOUT_ERR_OVERLAP,
                              "dst's memory overlaps src's (bytes %p..%p vs %p..%p); copy through a "
                              "temporary tensor",
                              (void *)d0, (void *)d1, (const void *)s0, (const void *)s1);
    return PYLAYOUT_OK;
}

/* ------------------------------------------------------ canonicalisation */

/* The canonical form of a validated, non-empty copy: shape and byte strides
 * (ss of src, ds of dst) of its dims of size > 1, dst strides positive and
 * descending, dims contiguous in both fused; *sbase and *dbase move to the
 * first element visited.  Returns the number of dims (0 for one element). */
static int pl_canonicalize(const DLTensor *src, const int64_t *sstr, const int64_t *dstr, size_t itemsize,
                           const char **sbase, char **dbase, int64_t *shape, int64_t *ss, int64_t *ds)
{
    /* Drop size-1 dims, make dst strides positive, in bytes. */
    int n = 0;
    for (int32_t k = 0; k < src->ndim; k++) {
        if (src->shape[k] == 1)
            continue;
        int64_t sb = sstr[k] * (int64_t)itemsize, db = dstr[k] * (int64_t)itemsize;
        if (db < 0) { /* visit this dim backwards: same pairs of elements */
            *sbase += (src->shape[k] - 1) * sb;
            *dbase += (src->shape[k] - 1) * db;
            sb = -sb;
            db = -db;
        }
        /* insertion by descending dst stride (all distinct: no self-overlap) */
        int pos = n++;
        while (pos > 0 && ds[pos - 1] < db) {
            shape[pos] = shape[pos - 1];
            ss[pos] = ss[pos - 1];
            ds[pos] = ds[pos - 1];
            pos--;
        }
        shape[pos] = src->shape[k];
        ss[pos] = sb;
        ds[pos] = db;
    }
    /* Fuse an outer dim into the next inner one when contiguous in both. */
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (m > 0 && ds[m - 1] == ds[k] * shape[k] && ss[m - 1] == ss[k] * shape[k]) {
            shape[m - 1] *= shape[k];
            ss[m - 1] = ss[k];
            ds[m - 1] = ds[k];
        } else {
            shape[m] = shape[k];
            ss[m] = ss[k];
            ds[m] = ds[k];
            m++;
        }
    }
    return m;
}

pylayout_status pylayout_copy(const DLTensor *src, DLTensor *dst)
{
    int64_t sstr[PYLAYOUT_MAX_NDIM], dstr[PYLAYOUT_MAX_NDIM];
    pylayout_status st = pl_check_pair(src, dst, sstr, dstr);
    if (st != PYLAYOUT_OK)
        return st;
    const size_t itemsize = _pylayout_itemsize(src->dtype);
    for (int32_t k = 0; k < src->ndim; k++)
        if (src->shape[k] == 0) {
            _pylayout_clear_error();
            return PYLAYOUT_OK; /* nothing to copy */
        }
    if ((st = pl_check_overlap(src, dst, sstr, dstr, itemsize)) != PYLAYOUT_OK)
        return st;

    int64_t shape[PYLAYOUT_MAX_NDIM], ss[PYLAYOUT_MAX_NDIM], ds[PYLAYOUT_MAX_NDIM];
    const char *sbase = (const char *)src->data + src->byte_offset;
    char *dbase = (char *)dst->data + dst->byte_offset;
    const int n = pl_canonicalize(src, sstr, dstr, itemsize, &sbase, &dbase, shape, ss, ds);
    _pylayout_copy_canonical(n, shape, ss, ds, itemsize, sbase, dbase, 0); /* 0: the setting, if it matters */
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

/* ------------------------------------------------------------ convert */

/* Checks src before allocating, so bad input costs no allocation. */
static pylayout_status pl_convert_check(const DLTensor *src, const void *what, pylayout_tensor **tensor_ret,
                                        const char *fn)
{
    int64_t strides[PYLAYOUT_MAX_NDIM];
    pylayout_status st;
    if (src == NULL || tensor_ret == NULL || (what == NULL && src->ndim > 0))
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                              src == NULL ? "src" : (tensor_ret == NULL ? "tensor_ret" : "order"));
    if ((st = _pylayout_check(src, "src", strides)) != PYLAYOUT_OK)
        return st;
    if (!_pylayout_device_is_host(src->device))
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DEVICE,
                              "src is on device '%s'; pylayout copies only CPU memory: copy it to the host first",
                              _pylayout_device_name((int32_t)src->device.device_type));
    return PYLAYOUT_OK;
}

static pylayout_status pl_convert_finish(const DLTensor *src, pylayout_tensor *out, pylayout_tensor **tensor_ret)
{
    const DLTensor *dt = NULL;
    pylayout_status st = pylayout_tensor_dltensor(out, &dt);
    if (st == PYLAYOUT_OK)
        st = pylayout_copy(src, (DLTensor *)dt); /* freshly allocated: ours to write */
    if (st != PYLAYOUT_OK) {
        pylayout_tensor_release(out);
        return st;
    }
    *tensor_ret = out;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_convert(const DLTensor *src, pylayout_format format, pylayout_tensor **tensor_ret)
{
    pylayout_tensor *out = NULL;
    pylayout_status st = pl_convert_check(src, "", tensor_ret, "pylayout_convert");
    if (st != PYLAYOUT_OK)
        return st;
    if ((st = pylayout_tensor_empty(src->ndim, src->shape, src->dtype, format, &out)) != PYLAYOUT_OK)
        return st;
    return pl_convert_finish(src, out, tensor_ret);
}

pylayout_status pylayout_convert_order(const DLTensor *src, const int32_t *order, pylayout_tensor **tensor_ret)
{
    pylayout_tensor *out = NULL;
    pylayout_status st = pl_convert_check(src, order, tensor_ret, "pylayout_convert_order");
    if (st != PYLAYOUT_OK)
        return st;
    if ((st = pylayout_tensor_empty_order(src->ndim, src->shape, src->dtype, order, &out)) != PYLAYOUT_OK)
        return st;
    return pl_convert_finish(src, out, tensor_ret);
}
