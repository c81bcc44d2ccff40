/*
 * internal.h - helpers shared by pylayout's C sources.  Not installed.
 * Non-static symbols carry the _pylayout_ prefix so they never collide.
 */
#ifndef PYLAYOUT_INTERNAL_H
#define PYLAYOUT_INTERNAL_H

#include "pylayout.h"

#if defined(__GNUC__)
#define PL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PL_PRINTF(a, b)
#endif

/* Records a detailed message for pylayout_last_error() on this thread and
 * returns `status`, so that callers can write
 *     return _pylayout_fail(PYLAYOUT_ERR_SHAPE_MISMATCH, "dim %d: ...", d);  */
pylayout_status _pylayout_fail(pylayout_status status, const char *fmt, ...) PL_PRINTF(2, 3);

/* Clears this thread's last-error message (called on entry to public functions
 * that succeed, so stale text never describes a later success). */
void _pylayout_clear_error(void);

/* Bytes per element of a supported dtype, or 0 if pylayout cannot handle it
 * (lanes != 1, sub-byte types, opaque handles, unknown codes). */
size_t _pylayout_itemsize(DLDataType dtype);

/* "float32", "bfloat16", "complex64", "bool", ... or NULL if unsupported. */
const char *_pylayout_dtype_name(DLDataType dtype);

/* "cpu", "cuda", "rocm", ... ("device type N" for unknown types, into a static buffer). */
const char *_pylayout_device_name(int32_t device_type);

/* True for devices whose memory the CPU can read and write directly
 * (CPU, CUDAHost, ROCMHost, CUDAManaged). */
bool _pylayout_device_is_host(DLDevice device);

/* Validates `t` like pylayout_validate and, on success, fills strides_out
 * (PYLAYOUT_MAX_NDIM entries) with explicit element strides (row-major when
 * t->strides is NULL).  `what` names the tensor in error messages ("src"). */
pylayout_status _pylayout_check(const DLTensor *t, const char *what, int64_t *strides_out);

/* Lowest and one-past-highest byte offsets, relative to (char *)data +
 * byte_offset, touched by a valid non-empty tensor with these strides.
 * lo <= 0 < hi.  Returns INVALID_TENSOR if they overflow int64. */
pylayout_status _pylayout_extent(int32_t ndim, const int64_t *shape, const int64_t *strides,
                                 size_t itemsize, int64_t *lo_ret, int64_t *hi_ret);

/* True if two distinct indices of a tensor with these shape and element
 * strides can reach the same element (a stride-0 dim of size > 1, or
 * strides that interleave), storing the offending dim in *dim_ret when
 * dim_ret is not NULL.  Conservative: false means certainly disjoint. */
bool _pylayout_self_overlaps(int32_t ndim, const int64_t *shape, const int64_t *strides, int *dim_ret);

/* Allocation with 64-byte alignment (size 0 gives a valid unique pointer);
 * large blocks are 2 MiB aligned and may come from the reuse cache
 * (alloc.c).  Free with the same nbytes. */
void *_pylayout_aligned_alloc(size_t nbytes);
void _pylayout_aligned_free(void *p, size_t nbytes);

#endif /* PYLAYOUT_INTERNAL_H */
