/*
 * layout.c - validation and layout queries.  Metadata only: nothing here
 * reads tensor memory, so every function works on any device.
 *
 * The contiguity rules follow PyTorch's c10 (TensorImpl::refresh_contiguous
 * and c10/core/MemoryFormat.h) exactly, and NumPy's flags for Fortran order;
 * tests/python/test_layout_queries.py checks them against both on thousands
 * of generated layouts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

pylayout_status _pylayout_extent(int32_t ndim, const int64_t *shape, const int64_t *strides,
                                 size_t itemsize, int64_t *lo_ret, int64_t *hi_ret)
{
    int64_t lo = 0, hi = 0; /* in elements, relative to element 0 */
    for (int32_t d = 0; d < ndim; d++) {
        int64_t reach;
        if (shape[d] == 0) {
            *lo_ret = 0;
            *hi_ret = 0;
            return PYLAYOUT_OK;
        }
        if (strides[d] == INT64_MIN || __builtin_mul_overflow(shape[d] - 1, abs64(strides[d]), &reach))
            return PYLAYOUT_ERR_INVALID_TENSOR;
        if (strides[d] < 0) {
            if (__builtin_sub_overflow(lo, reach, &lo))
                return PYLAYOUT_ERR_INVALID_TENSOR;
        } else if (__builtin_add_overflow(hi, reach, &hi)) {
            return PYLAYOUT_ERR_INVALID_TENSOR;
        }
    }
    if (__builtin_mul_overflow(lo, (int64_t)itemsize, &lo) || __builtin_add_overflow(hi, 1, &hi) ||
        __builtin_mul_overflow(hi, (int64_t)itemsize, &hi))
        return PYLAYOUT_ERR_INVALID_TENSOR;
    *lo_ret = lo;
    *hi_ret = hi;
    return PYLAYOUT_OK;
}

/* step * size for stride computations; false on overflow (step is then
 * left saturated, which only an empty tensor can reach harmlessly). */
static bool grow(int64_t *step, int64_t size)
{
    if (__builtin_mul_overflow(*step, size > 1 ? size : 1, step)) {
        *step = INT64_MAX;
        return false;
    }
    return true;
}

bool _pylayout_self_overlaps(int32_t ndim, const int64_t *shape, const int64_t *strides, int *dim_ret)
{
    /* Sufficient test, exact for every tensor torch or NumPy can make dense:
     * sorted by |stride|, each dim of size > 1 must step past the whole
     * extent of the dims inside it.  Empty tensors have no elements to share. */
    int perm[PYLAYOUT_MAX_NDIM], n = 0;
    for (int32_t d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return false;
        if (shape[d] > 1)
            perm[n++] = d;
    }
    for (int i = 1; i < n; i++) {
        int v = perm[i], j = i;
        while (j > 0 && abs64(strides[perm[j - 1]]) > abs64(strides[v])) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = v;
    }
    int64_t reach = 0; /* elements spanned by the inner dims, minus one */
    for (int i = 0; i < n; i++) {
        int64_t s = abs64(strides[perm[i]]), span;
        if (s <= reach || __builtin_mul_overflow(s, shape[perm[i]] - 1, &span) ||
            __builtin_add_overflow(reach, span, &reach)) {
            if (dim_ret)
                *dim_ret = perm[i];
            return true;
        }
    }
    return false;
}

/* The arc of residues mod m that holds every byte of the tensor (element
 * strides `strides`, element 0 at byte address base): its first residue
 * and its length.  Each dim adds i * (its byte stride mod m) for i < its
 * size, the residue taken nearest 0, so the sums span [lo, hi] and the
 * bytes [lo, hi + itemsize).  False where that is all of the circle. */
static bool residue_arc(int32_t ndim, const int64_t *shape, const int64_t *strides, size_t itemsize,
                        uintptr_t base, int64_t m, int64_t *start, int64_t *len)
{
    int64_t lo = 0, hi = 0;
    for (int32_t d = 0; d < ndim; d++) {
        if (shape[d] < 2)
            continue;
        /* |stride| * itemsize * (size - 1) fits: it is within the extent */
        int64_t r = strides[d] * (int64_t)itemsize % m;
        if (r > m / 2)
            r -= m;
        else if (r < -(m / 2))
            r += m;
        const int64_t span = r * (shape[d] - 1); /* |r| <= |stride| * itemsize */
        if (span < 0)
            lo += span;
        else
            hi += span;
    }
    *len = hi - lo + (int64_t)itemsize;
    if (*len >= m)
        return false;
    *start = (int64_t)(base % (uintptr_t)m) + lo % m; /* in (-m, m) */
    if (*start < 0)
        *start += m;
    return true;
}

bool _pylayout_views_apart(int32_t ndim, const int64_t *shape, size_t itemsize, const int64_t *sa, uintptr_t pa,
                           const int64_t *sb, uintptr_t pb)
{
    for (int side = 0; side < 2; side++)
        for (int32_t k = 0; k < ndim; k++) {
            const int64_t s = side == 0 ? sa[k] : sb[k];
            if (shape[k] < 2 || s == 0)
                continue;
            const int64_t m = abs64(s) * (int64_t)itemsize;
            int64_t a0, alen, b0, blen;
            if (!residue_arc(ndim, shape, sa, itemsize, pa, m, &a0, &alen) ||
                !residue_arc(ndim, shape, sb, itemsize, pb, m, &b0, &blen))
                continue;
            int64_t ab = b0 - a0; /* from a's arc to b's, going up */
            if (ab < 0)
                ab += m;
            if (ab >= alen && m - ab >= blen)
                return true;
        }
    return false;
}

/* Element strides of a compact row-major tensor, as PyTorch computes them
 * (size-0 dims count as 1, so strides stay nonzero). */
static bool row_major_strides(int32_t ndim, const int64_t *shape, int64_t *strides)
{
    int64_t step = 1;
    bool ok = true;
    for (int32_t d = ndim - 1; d >= 0; d--) {
        strides[d] = step;
        ok &= grow(&step, shape[d]);
    }
    return ok;
}

/* The metadata checks every entry point shares: t, ndim, shape, and an
 * element count int64 can hold (which bounds every product of sizes formed
 * later).  Fills strides_out (row-major where strides is NULL) and numel. */
static pylayout_status check_shape(const DLTensor *t, const char *what, int64_t *strides_out, int64_t *numel_ret)
{
    if (!t)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "%s is NULL", what);
    if (t->ndim < 0 || t->ndim > PYLAYOUT_MAX_NDIM)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "%s has ndim %d; pylayout supports 0 to %d dims",
                              what, (int)t->ndim, PYLAYOUT_MAX_NDIM);
    if (t->ndim > 0 && !t->shape)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "%s has ndim %d but a NULL shape", what, (int)t->ndim);
    int64_t numel = 1;
    for (int32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "%s has negative size %lld in dim %d", what,
                                  (long long)t->shape[d], (int)d);
        if (__builtin_mul_overflow(numel, t->shape[d], &numel))
            return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "%s has more elements than int64 can count", what);
    }
    if (t->strides) /* a loop: GCC inlines the memcpy of these few words as rep movsq, slow to start */
        for (int32_t d = 0; d < t->ndim; d++)
            strides_out[d] = t->strides[d];
    else
        (void)row_major_strides(t->ndim, t->shape, strides_out); /* overflows only if empty */
    *numel_ret = numel;
    return PYLAYOUT_OK;
}

pylayout_status _pylayout_check(const DLTensor *t, const char *what, int64_t *strides_out)
{
    int64_t numel;
    pylayout_status st = check_shape(t, what, strides_out, &numel);
    if (st != PYLAYOUT_OK)
        return st;
    size_t itemsize = _pylayout_itemsize(t->dtype);
    if (!itemsize)
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DTYPE,
                              "%s has unsupported dtype (code %u, bits %u, lanes %u); pylayout handles "
                              "bool, int, uint, float, bfloat, complex and float8 types of whole bytes "
                              "with lanes == 1",
                              what, (unsigned)t->dtype.code, (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes);
    if (numel == 0)
        return PYLAYOUT_OK;
    if (!t->data)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "%s has %lld elements but a NULL data pointer", what,
                              (long long)numel);
    int64_t lo, hi;
    if (_pylayout_extent(t->ndim, t->shape, strides_out, itemsize, &lo, &hi) != PYLAYOUT_OK)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "%s has strides whose byte extent overflows int64",
                              what);
    /* The whole extent must be addressable: data + byte_offset + [lo, hi). */
    uintptr_t base = (uintptr_t)t->data, first;
    if (t->byte_offset > (uint64_t)INT64_MAX || __builtin_add_overflow(base, (uintptr_t)t->byte_offset, &base) ||
        (uintptr_t)0 - (uintptr_t)lo > base || __builtin_add_overflow(base, (uintptr_t)hi, &first))
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR,
                              "%s reaches outside the address space (data %p, byte_offset %llu)", what, t->data,
                              (unsigned long long)t->byte_offset);
    return PYLAYOUT_OK;
}

pylayout_status pylayout_validate(const DLTensor *t)
{
    int64_t strides[PYLAYOUT_MAX_NDIM];
    pylayout_status st = _pylayout_check(t, "tensor", strides);
    if (st == PYLAYOUT_OK)
        _pylayout_clear_error();
    return st;
}

/* Metadata checks only (no data pointer or extent), for the queries, which
 * must work on tensors whose memory pylayout never touches. */
static pylayout_status check_meta(const DLTensor *t, int64_t *strides, int64_t *numel_ret)
{
    pylayout_status st = check_shape(t, "tensor", strides, numel_ret);
    if (st == PYLAYOUT_OK)
        _pylayout_clear_error();
    return st;
}

pylayout_status pylayout_numel(const DLTensor *t, int64_t *numel_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM], n = 0;
    pylayout_status st = check_meta(t, strides, &n);
    if (st != PYLAYOUT_OK)
        return st;
    if (!numel_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "numel_ret is NULL");
    *numel_ret = n;
    return PYLAYOUT_OK;
}

/* True if the dims visited in `order` (innermost first) have strides of a
 * compact tensor, skipping size-1 dims: c10's compute_contiguous and
 * compute_channels_last_contiguous_{2d,3d} share this shape. */
static bool compact_in_order(const int64_t *shape, const int64_t *strides, const int *order, int n)
{
    int64_t expected = 1;
    bool overflowed = false; /* only an empty tensor gets here: no stride can equal it */
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (shape[d] == 1)
            continue;
        if (overflowed || strides[d] != expected)
            return false;
        overflowed = __builtin_mul_overflow(expected, shape[d], &expected);
    }
    return true;
}

static const int channels_last_2d_order[4] = {1, 3, 2, 0};
static const int channels_last_3d_order[5] = {1, 4, 3, 2, 0};

pylayout_status pylayout_is_contiguous(const DLTensor *t, pylayout_format format, bool *result_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM], numel;
    int order[PYLAYOUT_MAX_NDIM];
    pylayout_status st = check_meta(t, strides, &numel);
    if (st != PYLAYOUT_OK)
        return st;
    if (!result_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "result_ret is NULL");
    int n = t->ndim;
    switch (format) {
    case PYLAYOUT_FORMAT_CONTIGUOUS:
        /* c10: an empty tensor is contiguous whatever its strides. */
        if (numel == 0) {
            *result_ret = true;
            return PYLAYOUT_OK;
        }
        for (int i = 0; i < n; i++)
            order[i] = n - 1 - i;
        *result_ret = compact_in_order(t->shape, strides, order, n);
        return PYLAYOUT_OK;
    case PYLAYOUT_FORMAT_FORTRAN:
        /* NumPy: every empty array is F-contiguous. */
        if (numel == 0) {
            *result_ret = true;
            return PYLAYOUT_OK;
        }
        for (int i = 0; i < n; i++)
            order[i] = i;
        *result_ret = compact_in_order(t->shape, strides, order, n);
        return PYLAYOUT_OK;
    case PYLAYOUT_FORMAT_CHANNELS_LAST:
        /* c10 applies no empty-tensor shortcut here: only the stride rule. */
        *result_ret = n == 4 && compact_in_order(t->shape, strides, channels_last_2d_order, 4);
        return PYLAYOUT_OK;
    case PYLAYOUT_FORMAT_CHANNELS_LAST_3D:
        *result_ret = n == 5 && compact_in_order(t->shape, strides, channels_last_3d_order, 5);
        return PYLAYOUT_OK;
    }
    return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "unknown format %d", (int)format);
}

/* c10's is_channels_last_strides_{2d_s4,3d_s5}: do the strides *order* like
 * channels_last, even if the tensor is not dense?  Ambiguous cases resolve to
 * false (contiguous), exactly as PyTorch resolves them. */
static bool strides_like(const int64_t *shape, const int64_t *strides, const int *order, int n)
{
    int64_t min = 0;
    if (strides[1] == 0)
        return false; /* trivial C dimension: default to NCHW */
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (shape[d] == 0)
            return false;
        if (strides[d] < min)
            return false;
        /* N111-like tensors with equal strides fall back to NCHW. */
        if (d == 0 && min == strides[1])
            return false;
        min = strides[d];
        if (shape[d] > 1 && __builtin_mul_overflow(min, shape[d], &min))
            min = INT64_MAX; /* no later stride can reach past it */
    }
    return true;
}

pylayout_status pylayout_suggest_format(const DLTensor *t, pylayout_format *format_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM], numel;
    pylayout_status st = check_meta(t, strides, &numel);
    if (st != PYLAYOUT_OK)
        return st;
    if (!format_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "format_ret is NULL");
    *format_ret = PYLAYOUT_FORMAT_CONTIGUOUS;
    if (t->ndim == 4 && strides_like(t->shape, strides, channels_last_2d_order, 4))
        *format_ret = PYLAYOUT_FORMAT_CHANNELS_LAST;
    else if (t->ndim == 5 && strides_like(t->shape, strides, channels_last_3d_order, 5))
        *format_ret = PYLAYOUT_FORMAT_CHANNELS_LAST_3D;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_is_dense(const DLTensor *t, bool *result_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM], numel;
    int perm[PYLAYOUT_MAX_NDIM];
    pylayout_status st = check_meta(t, strides, &numel);
    if (st != PYLAYOUT_OK)
        return st;
    if (!result_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "result_ret is NULL");
    /* c10's compute_non_overlapping_and_dense: dims of size < 2 sort last;
     * the others, by ascending stride, must be exactly compact.  An empty
     * tensor has no elements to overlap: dense, as torch reports. */
    if (numel == 0) {
        *result_ret = true;
        return PYLAYOUT_OK;
    }
    int n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] >= 2)
            perm[n++] = d;
    for (int i = 1; i < n; i++) { /* insertion sort: stable, n <= 64 */
        int v = perm[i], j = i;
        while (j > 0 && strides[perm[j - 1]] > strides[v]) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = v;
    }
    int64_t expected = 1;
    *result_ret = true;
    for (int i = 0; i < n; i++) {
        if (strides[perm[i]] != expected) {
            *result_ret = false;
            break;
        }
        expected *= t->shape[perm[i]];
    }
    return PYLAYOUT_OK;
}

static pylayout_status check_shape_args(int32_t ndim, const int64_t *shape, const void *out)
{
    if (ndim < 0 || ndim > PYLAYOUT_MAX_NDIM)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "ndim %d is outside 0..%d", (int)ndim,
                              PYLAYOUT_MAX_NDIM);
    if ((ndim > 0 && (!shape || !out)))
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "shape or strides_ret is NULL");
    for (int32_t d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "negative size %lld in dim %d",
                                  (long long)shape[d], (int)d);
    return PYLAYOUT_OK;
}

pylayout_status pylayout_format_strides(int32_t ndim, const int64_t *shape, pylayout_format format,
                                        int64_t *strides_ret)
{
    pylayout_status st = check_shape_args(ndim, shape, strides_ret);
    if (st != PYLAYOUT_OK)
        return st;
    bool ok = true;
    switch (format) {
    case PYLAYOUT_FORMAT_CONTIGUOUS:
        ok = row_major_strides(ndim, shape, strides_ret);
        break;
    case PYLAYOUT_FORMAT_FORTRAN: {
        int64_t step = 1;
        for (int32_t d = 0; d < ndim; d++) {
            strides_ret[d] = step;
            ok &= grow(&step, shape[d]);
        }
        break;
    }
    case PYLAYOUT_FORMAT_CHANNELS_LAST:
    case PYLAYOUT_FORMAT_CHANNELS_LAST_3D: {
        int rank = format == PYLAYOUT_FORMAT_CHANNELS_LAST ? 4 : 5;
        const int *order = rank == 4 ? channels_last_2d_order : channels_last_3d_order;
        if (ndim != rank)
            return _pylayout_fail(PYLAYOUT_ERR_FORMAT_RANK, "%s needs a %d-D tensor, got %d-D",
                                  rank == 4 ? "channels_last" : "channels_last_3d", rank, (int)ndim);
        /* c10's get_channels_last_strides_*: plain products, so a size-0
         * dim gives zero strides, as torch.empty(..., memory_format=) does. */
        int64_t step = 1;
        for (int i = 0; i < rank; i++) {
            strides_ret[order[i]] = step;
            ok &= !__builtin_mul_overflow(step, shape[order[i]], &step);
        }
        break;
    }
    default:
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "unknown format %d", (int)format);
    }
    if (!ok)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "shape has more elements than int64 can count");
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

pylayout_status pylayout_order_strides(int32_t ndim, const int64_t *shape, const int32_t *order,
                                       int64_t *strides_ret)
{
    pylayout_status st = check_shape_args(ndim, shape, strides_ret);
    if (st != PYLAYOUT_OK)
        return st;
    if (ndim > 0 && !order)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "order is NULL");
    bool seen[PYLAYOUT_MAX_NDIM] = {false};
    for (int32_t i = 0; i < ndim; i++) {
        if (order[i] < 0 || order[i] >= ndim || seen[order[i]])
            return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT,
                                  "order must be a permutation of 0..%d; entry %d is %d", (int)ndim - 1, (int)i,
                                  (int)order[i]);
        seen[order[i]] = true;
    }
    int64_t step = 1;
    bool ok = true;
    for (int32_t i = ndim - 1; i >= 0; i--) {
        strides_ret[order[i]] = step;
        ok &= grow(&step, shape[order[i]]);
    }
    if (!ok)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "shape has more elements than int64 can count");
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

/* c10's infer_dense_strides (what torch.empty_like(preserve_format) does for a
 * tensor that is not dense): an insertion sort of the dims, starting from
 * the innermost, by ascending stride; a stride-0 dim compares equal to every
 * dim (so it does not move), equal strides put the smaller size inside. */
static int like_compare(const int64_t *shape, const int64_t *strides, int32_t a, int32_t b)
{
    if (strides[a] == 0 || strides[b] == 0)
        return 0;
    if (strides[a] != strides[b])
        return strides[a] < strides[b] ? -1 : 1;
    return shape[a] > shape[b] ? 1 : 0;
}

pylayout_status pylayout_like_order(const DLTensor *t, int32_t *order_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM], numel;
    pylayout_status st = check_meta(t, strides, &numel);
    if (st != PYLAYOUT_OK)
        return st;
    if (t->ndim > 0 && !order_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "order_ret is NULL");
    const int32_t n = t->ndim;
    bool dense = false;
    pylayout_is_dense(t, &dense);
    int32_t perm[PYLAYOUT_MAX_NDIM]; /* innermost first */
    for (int32_t i = 0; i < n; i++)
        perm[i] = n - 1 - i;
    for (int32_t i = 1; i < n; i++) {
        int32_t d1 = i;
        for (int32_t d0 = i - 1; d0 >= 0; d0--) {
            int c = dense ? (strides[perm[d0]] > strides[perm[d1]] ? 1 : strides[perm[d0]] < strides[perm[d1]] ? -1 : 0)
                          : like_compare(t->shape, strides, perm[d0], perm[d1]);
            if (c > 0) {
                int32_t tmp = perm[d0];
                perm[d0] = perm[d1];
                perm[d1] = tmp;
                d1 = d0;
            } else if (c < 0) {
                break;
            }
        }
    }
    for (int32_t i = 0; i < n; i++)
        order_ret[i] = perm[n - 1 - i];
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

pylayout_status pylayout_is_in_order(const DLTensor *t, const int32_t *order, bool *result_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM], want[PYLAYOUT_MAX_NDIM], numel;
    pylayout_status st = check_meta(t, strides, &numel);
    if (st != PYLAYOUT_OK)
        return st;
    if (!result_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "result_ret is NULL");
    if ((st = pylayout_order_strides(t->ndim, t->shape, order, want)) != PYLAYOUT_OK)
        return st;
    /* torch's rule: size-1 dims aside, and an empty tensor is in every order */
    *result_ret = true;
    for (int32_t d = 0; numel > 0 && d < t->ndim; d++)
        if (t->shape[d] != 1 && strides[d] != want[d])
            *result_ret = false;
    return PYLAYOUT_OK;
}
