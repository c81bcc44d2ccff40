/*
 * tensor.c - pylayout_tensor: a DLTensor with explicit strides, a reference
 * count, and the one thing that keeps its memory alive.
 *
 * Every import copies only metadata (shape and strides, into the same
 * allocation as the struct); data pointers, byte offsets and strides pass
 * through unchanged, so import followed by export is the identity.  The
 * owner's deleter runs exactly once, when the last reference goes.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum owner_kind {
    OWNER_BORROWED,  /* the caller keeps the memory alive */
    OWNER_LEGACY,    /* a DLManagedTensor */
    OWNER_VERSIONED, /* a DLManagedTensorVersioned */
    OWNER_ALLOCATED, /* pylayout's own 64-byte aligned allocation */
    OWNER_BASE       /* another pylayout_tensor (a view) */
};

struct pylayout_tensor {
    atomic_long refcount;
    enum owner_kind owner_kind;
    union {
        DLManagedTensor *legacy;
        DLManagedTensorVersioned *versioned;
        void *allocation;
        pylayout_tensor *base;
    } owner;
    size_t allocation_bytes; /* OWNER_ALLOCATED: the size asked for */
    uint64_t flags;
    DLTensor dl;
    int64_t dims[]; /* shape[ndim], then strides[ndim] */
};

/* Builds a tensor over `src`'s memory with explicit strides.  Ownership is
 * attached by the caller after success. */
static pylayout_status make_tensor(const DLTensor *src, uint64_t flags, const char *what,
                                   pylayout_tensor **tensor_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM];
    if (!tensor_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "tensor_ret is NULL");
    pylayout_status st = _pylayout_check(src, what, strides);
    if (st != PYLAYOUT_OK)
        return st;
    size_t ndim = (size_t)src->ndim;
    pylayout_tensor *t = malloc(sizeof *t + 2 * ndim * sizeof(int64_t));
    if (!t)
        return _pylayout_fail(PYLAYOUT_ERR_NO_MEMORY, "out of memory allocating tensor metadata");
    atomic_init(&t->refcount, 1);
    t->owner_kind = OWNER_BORROWED;
    t->owner.allocation = NULL;
    t->allocation_bytes = 0;
    t->flags = flags & (PYLAYOUT_FLAG_READ_ONLY | PYLAYOUT_FLAG_IS_COPIED);
    t->dl = *src;
    t->dl.shape = t->dims;
    t->dl.strides = t->dims + ndim;
    if (ndim) {
        memcpy(t->dl.shape, src->shape, ndim * sizeof(int64_t));
        memcpy(t->dl.strides, strides, ndim * sizeof(int64_t));
    }
    *tensor_ret = t;
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_from_versioned(DLManagedTensorVersioned *managed, pylayout_tensor **tensor_ret)
{
    if (!managed)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "managed tensor is NULL");
    if (managed->version.major != DLPACK_MAJOR_VERSION)
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_VERSION,
                              "DLPack version %u.%u is not supported; pylayout understands major version %d",
                              (unsigned)managed->version.major, (unsigned)managed->version.minor,
                              DLPACK_MAJOR_VERSION);
    pylayout_status st = make_tensor(&managed->dl_tensor, managed->flags, "tensor", tensor_ret);
    if (st != PYLAYOUT_OK)
        return st;
    (*tensor_ret)->owner_kind = OWNER_VERSIONED;
    (*tensor_ret)->owner.versioned = managed;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_from_legacy(DLManagedTensor *managed, uint64_t flags, pylayout_tensor **tensor_ret)
{
    if (!managed)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "managed tensor is NULL");
    pylayout_status st = make_tensor(&managed->dl_tensor, flags, "tensor", tensor_ret);
    if (st != PYLAYOUT_OK)
        return st;
    (*tensor_ret)->owner_kind = OWNER_LEGACY;
    (*tensor_ret)->owner.legacy = managed;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_borrow(const DLTensor *t, uint64_t flags, pylayout_tensor **tensor_ret)
{
    return make_tensor(t, flags, "tensor", tensor_ret);
}

static pylayout_status alloc_with_strides(int32_t ndim, const int64_t *shape, DLDataType dtype,
                                          const int64_t *strides, pylayout_tensor **tensor_ret)
{
    size_t itemsize = _pylayout_itemsize(dtype);
    if (!itemsize)
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DTYPE,
                              "cannot allocate dtype (code %u, bits %u, lanes %u)", (unsigned)dtype.code,
                              (unsigned)dtype.bits, (unsigned)dtype.lanes);
    int64_t numel = 1, nbytes;
    for (int32_t d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(numel, shape[d], &numel))
            return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "shape has more elements than int64 can count");
    if (__builtin_mul_overflow(numel, (int64_t)itemsize, &nbytes) || (uint64_t)nbytes > SIZE_MAX)
        return _pylayout_fail(PYLAYOUT_ERR_NO_MEMORY, "a tensor of %lld elements of %zu bytes is too large",
                              (long long)numel, itemsize);
    void *data = _pylayout_aligned_alloc((size_t)nbytes);
    if (!data)
        return _pylayout_fail(PYLAYOUT_ERR_NO_MEMORY, "out of memory allocating %lld bytes", (long long)nbytes);
    DLTensor desc = {
        .data = data,
        .device = {kDLCPU, 0},
        .ndim = ndim,
        .dtype = dtype,
        .shape = (int64_t *)shape,
        .strides = (int64_t *)strides,
        .byte_offset = 0,
    };
    pylayout_status st = make_tensor(&desc, 0, "tensor", tensor_ret);
    if (st != PYLAYOUT_OK) {
        _pylayout_aligned_free(data, (size_t)nbytes);
        return st;
    }
    (*tensor_ret)->owner_kind = OWNER_ALLOCATED;
    (*tensor_ret)->owner.allocation = data;
    (*tensor_ret)->allocation_bytes = (size_t)nbytes;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_empty(int32_t ndim, const int64_t *shape, DLDataType dtype, pylayout_format format,
                                      pylayout_tensor **tensor_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM];
    if (!tensor_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "tensor_ret is NULL");
    pylayout_status st = pylayout_format_strides(ndim, shape, format, strides);
    if (st != PYLAYOUT_OK)
        return st;
    return alloc_with_strides(ndim, shape, dtype, strides, tensor_ret);
}

pylayout_status pylayout_tensor_empty_order(int32_t ndim, const int64_t *shape, DLDataType dtype,
                                            const int32_t *order, pylayout_tensor **tensor_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM];
    if (!tensor_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "tensor_ret is NULL");
    pylayout_status st = pylayout_order_strides(ndim, shape, order, strides);
    if (st != PYLAYOUT_OK)
        return st;
    return alloc_with_strides(ndim, shape, dtype, strides, tensor_ret);
}

pylayout_status pylayout_tensor_view(pylayout_tensor *base, const DLTensor *desc, pylayout_tensor **tensor_ret)
{
    if (!base || !desc || !tensor_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "base, desc or tensor_ret is NULL");
    DLTensor view = *desc;
    view.data = base->dl.data;
    view.device = base->dl.device;
    pylayout_tensor *t;
    pylayout_status st = make_tensor(&view, base->flags & PYLAYOUT_FLAG_READ_ONLY, "view", &t);
    if (st != PYLAYOUT_OK)
        return st;
    int64_t numel = 1;
    for (int32_t d = 0; d < t->dl.ndim; d++)
        numel *= t->dl.shape[d];
    if (numel > 0) {
        int64_t vlo, vhi, blo, bhi, bnumel = 1;
        for (int32_t d = 0; d < base->dl.ndim; d++)
            bnumel *= base->dl.shape[d];
        _pylayout_extent(t->dl.ndim, t->dl.shape, t->dl.strides, _pylayout_itemsize(t->dl.dtype), &vlo, &vhi);
        _pylayout_extent(base->dl.ndim, base->dl.shape, base->dl.strides, _pylayout_itemsize(base->dl.dtype),
                         &blo, &bhi);
        /* Byte offsets are < 2^63 and extents fit int64 (both checked), but
         * their sums may not: an overflowing sum is out of bounds. */
        int64_t v0 = (int64_t)t->dl.byte_offset, b0 = (int64_t)base->dl.byte_offset, vstart, vend, bstart, bend;
        bool overflow = __builtin_add_overflow(v0, vlo, &vstart) || __builtin_add_overflow(v0, vhi, &vend) ||
                        __builtin_add_overflow(b0, blo, &bstart) || __builtin_add_overflow(b0, bhi, &bend);
        if (overflow || bnumel == 0 || vstart < bstart || vend > bend) {
            free(t);
            if (overflow)
                return _pylayout_fail(PYLAYOUT_ERR_OUT_OF_BOUNDS,
                                      "the view's byte offset plus its extent overflows int64: it cannot lie "
                                      "inside its base");
            return _pylayout_fail(PYLAYOUT_ERR_OUT_OF_BOUNDS,
                                  "the view spans bytes [%lld, %lld) of its base, which owns only [%lld, %lld)",
                                  (long long)vstart, (long long)vend, (long long)bstart, (long long)bend);
        }
    }
    /* Hold the root owner, not `base`: a view of a view of ... is then one
     * link from its memory however it was made, so a loop of views neither
     * grows nor recurses when the last one is released. */
    pylayout_tensor *root = base->owner_kind == OWNER_BASE ? base->owner.base : base;
    pylayout_tensor_retain(root);
    t->owner_kind = OWNER_BASE;
    t->owner.base = root;
    *tensor_ret = t;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_dltensor(const pylayout_tensor *tensor, const DLTensor **dltensor_ret)
{
    if (!tensor || !dltensor_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "tensor or dltensor_ret is NULL");
    *dltensor_ret = &tensor->dl;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_flags(const pylayout_tensor *tensor, uint64_t *flags_ret)
{
    if (!tensor || !flags_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "tensor or flags_ret is NULL");
    *flags_ret = tensor->flags;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_retain(pylayout_tensor *tensor)
{
    if (!tensor)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "tensor is NULL");
    atomic_fetch_add_explicit(&tensor->refcount, 1, memory_order_relaxed);
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_release(pylayout_tensor *tensor)
{
    if (!tensor)
        return PYLAYOUT_OK;
    if (atomic_fetch_sub_explicit(&tensor->refcount, 1, memory_order_acq_rel) != 1)
        return PYLAYOUT_OK;
    switch (tensor->owner_kind) {
    case OWNER_BORROWED:
        break;
    case OWNER_LEGACY:
        if (tensor->owner.legacy->deleter)
            tensor->owner.legacy->deleter(tensor->owner.legacy);
        break;
    case OWNER_VERSIONED:
        if (tensor->owner.versioned->deleter)
            tensor->owner.versioned->deleter(tensor->owner.versioned);
        break;
    case OWNER_ALLOCATED:
        _pylayout_aligned_free(tensor->owner.allocation, tensor->allocation_bytes);
        break;
    case OWNER_BASE: /* a root, never itself a view: no recursion */
        pylayout_tensor_release(tensor->owner.base);
        break;
    }
    free(tensor);
    return PYLAYOUT_OK;
}

/* Exports hold a reference to the tensor and point at its shape and strides,
 * which never change, so an export costs one small allocation. */
static void versioned_export_deleter(DLManagedTensorVersioned *self)
{
    pylayout_tensor_release(self->manager_ctx);
    free(self);
}

static void legacy_export_deleter(DLManagedTensor *self)
{
    pylayout_tensor_release(self->manager_ctx);
    free(self);
}

pylayout_status pylayout_tensor_to_versioned(pylayout_tensor *tensor, DLManagedTensorVersioned **managed_ret)
{
    if (!tensor || !managed_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "tensor or managed_ret is NULL");
    DLManagedTensorVersioned *m = malloc(sizeof *m);
    if (!m)
        return _pylayout_fail(PYLAYOUT_ERR_NO_MEMORY, "out of memory exporting a tensor");
    m->version.major = DLPACK_MAJOR_VERSION;
    m->version.minor = DLPACK_MINOR_VERSION;
    m->manager_ctx = tensor;
    m->deleter = versioned_export_deleter;
    m->flags = tensor->flags & PYLAYOUT_FLAG_READ_ONLY; /* IS_COPIED describes an import, not this export */
    m->dl_tensor = tensor->dl;
    pylayout_tensor_retain(tensor);
    *managed_ret = m;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_to_legacy(pylayout_tensor *tensor, DLManagedTensor **managed_ret)
{
    if (!tensor || !managed_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "tensor or managed_ret is NULL");
    if (tensor->flags & PYLAYOUT_FLAG_READ_ONLY)
        return _pylayout_fail(PYLAYOUT_ERR_READ_ONLY,
                              "a read-only tensor cannot be exported through legacy DLPack, which has no "
                              "read-only flag; ask for a versioned capsule (max_version=(1, 0))");
    DLManagedTensor *m = malloc(sizeof *m);
    if (!m)
        return _pylayout_fail(PYLAYOUT_ERR_NO_MEMORY, "out of memory exporting a tensor");
    m->dl_tensor = tensor->dl;
    m->manager_ctx = tensor;
    m->deleter = legacy_export_deleter;
    pylayout_tensor_retain(tensor);
    *managed_ret = m;
    return PYLAYOUT_OK;
}
