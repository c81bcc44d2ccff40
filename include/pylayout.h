/*
 * pylayout.h - tensor layouts over DLPack: inspect, convert, copy.
 *
 * pylayout works on DLPack DLTensors (strided views of memory, strides in
 * elements).  It never copies unless asked to, and it preserves strides.
 *
 *   Names:   pylayout_dtype_name, pylayout_dtype_from_name, pylayout_dtype_itemsize,
 *            pylayout_complex_dtype, pylayout_real_dtype, pylayout_format_name,
 *            pylayout_format_from_name, pylayout_device_name, pylayout_device_is_host
 *   Queries  (metadata only, any device):
 *       pylayout_validate, pylayout_numel, pylayout_is_contiguous,
 *       pylayout_suggest_format, pylayout_is_dense, pylayout_format_strides,
 *       pylayout_order_strides, pylayout_like_order, pylayout_is_in_order
 *   Tensors  (pylayout_tensor: a reference-counted DLTensor plus its owner):
 *       import:  pylayout_tensor_from_versioned, pylayout_tensor_from_legacy,
 *                pylayout_tensor_borrow
 *       create:  pylayout_tensor_empty, pylayout_tensor_empty_order,
 *                pylayout_tensor_view
 *       read:    pylayout_tensor_dltensor, pylayout_tensor_flags
 *       export:  pylayout_tensor_to_versioned, pylayout_tensor_to_legacy
 *       lifetime: pylayout_tensor_retain, pylayout_tensor_release
 *   Copies   (CPU memory; cache-blocked, OpenMP-parallel):
 *       pylayout_copy, pylayout_convert, pylayout_convert_order,
 *       pylayout_set_num_threads, pylayout_set_num_threads_quiet,
 *       pylayout_get_num_threads, pylayout_last_copy_threads,
 *       pylayout_set_cache_limit, pylayout_cache_info
 *   Complex  (views where memory allows, packing where it does not):
 *       pylayout_canonical_strides, pylayout_tensor_canonicalize,
 *       pylayout_view_as_complex, pylayout_view_as_real,
 *       pylayout_complex_parts, pylayout_pack_complex, pylayout_unpack_complex
 *   Errors:  pylayout_strerror, pylayout_last_error
 *   Version: pylayout_version (PYLAYOUT_VERSION_NUMBER in pylayout/version.h)
 *
 * Every function that can fail returns a pylayout_status; results come back
 * through pointer parameters whose names end in _ret.  The two string
 * functions (pylayout_strerror, pylayout_last_error) cannot fail and return
 * the string itself.  All functions are thread-safe unless noted.
 *
 * Include the official <dlpack/dlpack.h> before this header to use its
 * declarations; otherwise pylayout declares the identical DLPack 1.x ABI.
 */
#ifndef PYLAYOUT_H
#define PYLAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pylayout/dlpack.h"

#if defined(PYLAYOUT_STATIC)
#define PYLAYOUT_API
#elif defined(_WIN32) && defined(PYLAYOUT_BUILDING)
#define PYLAYOUT_API __declspec(dllexport)
#elif defined(_WIN32)
#define PYLAYOUT_API __declspec(dllimport)
#else
#define PYLAYOUT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* PYLAYOUT_VERSION_{MAJOR,MINOR,PATCH,NUMBER,STRING}: the header's version;
 * pylayout_version() gives the library's, which may differ when a program
 * runs against another libpylayout than it was compiled with. */
#include "pylayout/version.h"

/* Tensors may have at most this many dimensions. */
#define PYLAYOUT_MAX_NDIM 64

/* Flag bits, identical to DLPack's DLPACK_FLAG_BITMASK_*. */
#define PYLAYOUT_FLAG_READ_ONLY (UINT64_C(1) << 0)
#define PYLAYOUT_FLAG_IS_COPIED (UINT64_C(1) << 1)

/* Status codes.  Their numbers never change once released. */
typedef enum pylayout_status {
    PYLAYOUT_OK = 0,
    PYLAYOUT_ERR_INVALID_ARGUMENT = 1,   /* NULL pointer, unknown format, bad order */
    PYLAYOUT_ERR_NO_MEMORY = 2,          /* an allocation failed */
    PYLAYOUT_ERR_INVALID_TENSOR = 3,     /* ndim, shape, strides or data are malformed */
    PYLAYOUT_ERR_UNSUPPORTED_DTYPE = 4,  /* lanes != 1, sub-byte or opaque dtypes */
    PYLAYOUT_ERR_UNSUPPORTED_DEVICE = 5, /* memory access on a non-CPU device */
    PYLAYOUT_ERR_UNSUPPORTED_VERSION = 6,/* DLPack major version other than 1 */
    PYLAYOUT_ERR_READ_ONLY = 7,          /* a write into a read-only tensor */
    PYLAYOUT_ERR_SHAPE_MISMATCH = 8,     /* shapes or element sizes differ */
    PYLAYOUT_ERR_OVERLAP = 9,            /* destination overlaps itself or the source */
    PYLAYOUT_ERR_FORMAT_RANK = 10,       /* format needs another ndim (channels_last on 3-D) */
    PYLAYOUT_ERR_NOT_VIEWABLE = 11,      /* a zero-copy view is impossible for these strides */
    PYLAYOUT_ERR_OUT_OF_BOUNDS = 12,     /* a view reaches outside its base tensor */
    PYLAYOUT_ERR_DTYPE_MISMATCH = 13     /* operands' dtypes differ (or do not pair real with complex) */
} pylayout_status;

/* Memory formats.  Each names a dense layout for a logical shape. */
typedef enum pylayout_format {
    PYLAYOUT_FORMAT_CONTIGUOUS = 0,       /* row-major (C order) */
    PYLAYOUT_FORMAT_CHANNELS_LAST = 1,    /* 4-D NCHW stored as NHWC */
    PYLAYOUT_FORMAT_CHANNELS_LAST_3D = 2, /* 5-D NCDHW stored as NDHWC */
    PYLAYOUT_FORMAT_FORTRAN = 3           /* column-major */
} pylayout_format;

/* A reference-counted tensor: a DLTensor with explicit strides plus whatever
 * keeps its memory alive (a DLPack producer, pylayout's own allocation, a
 * base tensor, or nothing for borrowed memory).  Opaque; read it through
 * pylayout_tensor_dltensor().  Immutable after creation, so it may be shared
 * between threads; retain/release are atomic. */
typedef struct pylayout_tensor pylayout_tensor;

/* ---------------------------------------------------------------- errors */

/* The version of the library in use: *number_ret as PYLAYOUT_VERSION_NUMBER
 * counts (MAJOR * 10000 + MINOR * 100 + PATCH) and *string_ret a static
 * "MAJOR.MINOR.PATCH"; either may be NULL.  Always returns OK. */
PYLAYOUT_API pylayout_status pylayout_version(unsigned *number_ret, const char **string_ret);

/* A short English description of a status; "unknown status" for values
 * outside the enum.  Never returns NULL. */
PYLAYOUT_API const char *pylayout_strerror(pylayout_status status);

/* Details of the last error raised on the calling thread (names the
 * offending dimension, stride or device), or "" if none.  Never NULL.
 * The string stays valid until the next pylayout call on this thread. */
PYLAYOUT_API const char *pylayout_last_error(void);

/* ---------------------------------------------------------------- dtypes */

/* Points *name_ret at the NumPy/PyTorch name of `dtype` ("float32",
 * "bfloat16", "complex64", "bool", "float8_e4m3fn", ...), a static string.
 * Returns OK, INVALID_ARGUMENT or UNSUPPORTED_DTYPE (a dtype pylayout does
 * not handle: lanes != 1, sub-byte, opaque or unknown codes). */
PYLAYOUT_API pylayout_status pylayout_dtype_name(DLDataType dtype, const char **name_ret);

/* The inverse: the dtype (lanes 1) of a name pylayout_dtype_name gives.
 * Returns OK or INVALID_ARGUMENT (NULL or unknown name). */
PYLAYOUT_API pylayout_status pylayout_dtype_from_name(const char *name, DLDataType *dtype_ret);

/* Points *name_ret at the name of `format`: "contiguous", "channels_last",
 * "channels_last_3d" or "fortran".  Returns OK or INVALID_ARGUMENT. */
PYLAYOUT_API pylayout_status pylayout_format_name(pylayout_format format, const char **name_ret);

/* The format a name spells: the four names above, NumPy's "C" and "F", and
 * torch's memory formats as str() prints them ("torch.channels_last",
 * "torch.contiguous_format", ...).  Returns OK or INVALID_ARGUMENT. */
PYLAYOUT_API pylayout_status pylayout_format_from_name(const char *name, pylayout_format *format_ret);

/* Points *name_ret at the short name of a DLPack device type ("cpu", "cuda",
 * "cuda_host", "rocm", "metal", ...), a static string, as pylayout's
 * messages and Tensor.device_name use it.  Returns OK, INVALID_ARGUMENT or
 * UNSUPPORTED_DEVICE (a type DLPack 1.3 does not define; *name_ret = NULL). */
PYLAYOUT_API pylayout_status pylayout_device_name(int32_t device_type, const char **name_ret);

/* Stores the bytes per element of `dtype` in *itemsize_ret.  Returns OK,
 * INVALID_ARGUMENT or UNSUPPORTED_DTYPE (lanes != 1, sub-byte, opaque or
 * unknown codes). */
PYLAYOUT_API pylayout_status pylayout_dtype_itemsize(DLDataType dtype, size_t *itemsize_ret);

/* The complex dtype whose parts are `real` (float16 -> complex32, float32 ->
 * complex64, float64 -> complex128), and the inverse.  Returns OK,
 * INVALID_ARGUMENT or UNSUPPORTED_DTYPE (no such pair). */
PYLAYOUT_API pylayout_status pylayout_complex_dtype(DLDataType real, DLDataType *complex_ret);
PYLAYOUT_API pylayout_status pylayout_real_dtype(DLDataType complex_dtype, DLDataType *real_ret);

/* Whether the CPU can read and write `device`'s memory directly (CPU,
 * CUDAHost, ROCMHost, CUDAManaged): what pylayout's copies accept.
 * Returns OK or INVALID_ARGUMENT. */
PYLAYOUT_API pylayout_status pylayout_device_is_host(DLDevice device, bool *host_ret);

/* --------------------------------------------------------------- queries */
/* These read only metadata: they work on tensors of any device.  A DLTensor
 * with strides == NULL is read as compact row-major. */

/* Checks that `t` is a tensor pylayout can describe: 0 <= ndim <= 64, shape
 * entries >= 0, element count and byte extent representable, data non-NULL
 * unless the tensor is empty, a supported dtype (lanes == 1, whole bytes).
 * Returns PYLAYOUT_OK, INVALID_ARGUMENT (t NULL), INVALID_TENSOR or
 * UNSUPPORTED_DTYPE. */
PYLAYOUT_API pylayout_status pylayout_validate(const DLTensor *t);

/* Stores the number of elements of `t` (1 for 0-d) in *numel_ret.
 * Returns OK, INVALID_ARGUMENT or INVALID_TENSOR (overflow, negative size). */
PYLAYOUT_API pylayout_status pylayout_numel(const DLTensor *t, int64_t *numel_ret);

/* Whether `t` is contiguous in `format`, by PyTorch's rules: size-1 dims are
 * ignored; empty tensors are always CONTIGUOUS (and FORTRAN, as in NumPy),
 * while channels_last formats apply their stride rule even when empty, as
 * torch does; channels_last holds only for 4-D and channels_last_3d only for
 * 5-D tensors (other ranks give false, not an error).  FORTRAN follows
 * NumPy's F flag.
 * Returns OK, INVALID_ARGUMENT or INVALID_TENSOR. */
PYLAYOUT_API pylayout_status pylayout_is_contiguous(const DLTensor *t, pylayout_format format,
                                                    bool *result_ret);

/* The memory format PyTorch's Tensor::suggest_memory_format() gives for `t`:
 * CHANNELS_LAST for 4-D and CHANNELS_LAST_3D for 5-D tensors whose strides
 * order like NHWC / NDHWC, CONTIGUOUS otherwise (ambiguous cases included).
 * Returns OK, INVALID_ARGUMENT or INVALID_TENSOR. */
PYLAYOUT_API pylayout_status pylayout_suggest_format(const DLTensor *t, pylayout_format *format_ret);

/* Whether the elements of `t` cover a single block of memory exactly once
 * (some permutation of its dims is row-major).  Empty tensors are dense.
 * Returns OK, INVALID_ARGUMENT or INVALID_TENSOR. */
PYLAYOUT_API pylayout_status pylayout_is_dense(const DLTensor *t, bool *result_ret);

/* Writes to strides_ret[0..ndim) the element strides of a dense tensor of
 * `shape` in `format`.  Returns OK, INVALID_ARGUMENT or FORMAT_RANK. */
PYLAYOUT_API pylayout_status pylayout_format_strides(int32_t ndim, const int64_t *shape,
                                                     pylayout_format format, int64_t *strides_ret);

/* Like pylayout_format_strides for a dense tensor whose dims are laid out in
 * `order`: order[0] is the outermost (largest stride) dim and order[ndim-1]
 * the innermost.  order must be a permutation of 0..ndim-1.
 * Returns OK or INVALID_ARGUMENT. */
PYLAYOUT_API pylayout_status pylayout_order_strides(int32_t ndim, const int64_t *shape,
                                                    const int32_t *order, int64_t *strides_ret);

/* Writes to order_ret[0..ndim) the dim order, outermost first, that keeps
 * t's layout in a dense copy (pass it to pylayout_order_strides or
 * pylayout_convert_order): the order of t's strides, so a dense t is copied
 * with its own strides, and otherwise the order torch.empty_like(x,
 * memory_format=torch.preserve_format) infers (c10's infer_dense_strides:
 * a stride-0 dim keeps its place, equal strides put the smaller size inside).
 * Metadata only.  Returns OK, INVALID_ARGUMENT or INVALID_TENSOR. */
PYLAYOUT_API pylayout_status pylayout_like_order(const DLTensor *t, int32_t *order_ret);

/* Whether t is dense with its dims laid out in `order` (outermost first),
 * size-1 dims aside and any empty tensor included (as torch judges row-major
 * contiguity; its channels_last test alone holds empty tensors to the stride
 * rule): what pylayout.to_order returns as it is.
 * Returns OK, INVALID_ARGUMENT (order not a permutation) or INVALID_TENSOR. */
PYLAYOUT_API pylayout_status pylayout_is_in_order(const DLTensor *t, const int32_t *order, bool *result_ret);

/* --------------------------------------------------------------- tensors */

/* Takes ownership of a versioned DLPack tensor.  On success *tensor_ret owns
 * `managed`, whose deleter will run exactly once, when the last reference is
 * released.  On failure the caller still owns `managed`.  The READ_ONLY flag
 * is carried over; NULL strides are made explicit.
 * Returns OK, INVALID_ARGUMENT, UNSUPPORTED_VERSION (major != 1),
 * INVALID_TENSOR, UNSUPPORTED_DTYPE or NO_MEMORY. */
PYLAYOUT_API pylayout_status pylayout_tensor_from_versioned(DLManagedTensorVersioned *managed,
                                                            pylayout_tensor **tensor_ret);

/* Takes ownership of a legacy DLPack tensor; `flags` (e.g. READ_ONLY) are
 * attached since the legacy struct has none.  Ownership as above. */
PYLAYOUT_API pylayout_status pylayout_tensor_from_legacy(DLManagedTensor *managed, uint64_t flags,
                                                         pylayout_tensor **tensor_ret);

/* Wraps memory the caller keeps alive for the tensor's whole lifetime.
 * Shape and strides are copied; the data is not.  Returns as above. */
PYLAYOUT_API pylayout_status pylayout_tensor_borrow(const DLTensor *t, uint64_t flags,
                                                    pylayout_tensor **tensor_ret);

/* Allocates an uninitialised CPU tensor of `shape` and `dtype`, dense in
 * `format`, with 64-byte aligned data.  Returns OK, INVALID_ARGUMENT,
 * FORMAT_RANK, INVALID_TENSOR, UNSUPPORTED_DTYPE or NO_MEMORY. */
PYLAYOUT_API pylayout_status pylayout_tensor_empty(int32_t ndim, const int64_t *shape, DLDataType dtype,
                                                   pylayout_format format, pylayout_tensor **tensor_ret);

/* Allocates like pylayout_tensor_empty, dense in the dim order `order`
 * (see pylayout_order_strides). */
PYLAYOUT_API pylayout_status pylayout_tensor_empty_order(int32_t ndim, const int64_t *shape, DLDataType dtype,
                                                         const int32_t *order, pylayout_tensor **tensor_ret);

/* A zero-copy view of `base` with another shape, strides, dtype and
 * byte_offset (those of `desc`; desc->data and desc->device are ignored: the
 * view uses base's).  The view keeps `base` alive and inherits its flags.
 * Every element of the view must lie inside base's memory extent.
 * Returns OK, INVALID_ARGUMENT, INVALID_TENSOR, UNSUPPORTED_DTYPE,
 * OUT_OF_BOUNDS or NO_MEMORY. */
PYLAYOUT_API pylayout_status pylayout_tensor_view(pylayout_tensor *base, const DLTensor *desc,
                                                  pylayout_tensor **tensor_ret);

/* Points *dltensor_ret at the tensor's DLTensor (strides never NULL).  It is
 * valid while the tensor is; do not modify it.  Returns OK or INVALID_ARGUMENT. */
PYLAYOUT_API pylayout_status pylayout_tensor_dltensor(const pylayout_tensor *tensor,
                                                      const DLTensor **dltensor_ret);

/* Stores the tensor's PYLAYOUT_FLAG_* bits in *flags_ret.  IS_COPIED
 * describes the import that made this tensor (the producer copied for it);
 * views and exports of the tensor never carry it.  Returns OK or
 * INVALID_ARGUMENT. */
PYLAYOUT_API pylayout_status pylayout_tensor_flags(const pylayout_tensor *tensor, uint64_t *flags_ret);

/* Exports a new versioned DLPack tensor describing `tensor` (same data,
 * shape, strides, dtype, byte_offset, READ_ONLY flag; never IS_COPIED:
 * an export is zero-copy).  It holds a reference to
 * `tensor`; its deleter releases it.  Returns OK, INVALID_ARGUMENT, NO_MEMORY. */
PYLAYOUT_API pylayout_status pylayout_tensor_to_versioned(pylayout_tensor *tensor,
                                                          DLManagedTensorVersioned **managed_ret);

/* Exports a legacy DLPack tensor, as above.  The legacy struct cannot say
 * "read-only": returns READ_ONLY for read-only tensors, as NumPy does. */
PYLAYOUT_API pylayout_status pylayout_tensor_to_legacy(pylayout_tensor *tensor, DLManagedTensor **managed_ret);

/* Adds a reference.  Returns OK or INVALID_ARGUMENT. */
PYLAYOUT_API pylayout_status pylayout_tensor_retain(pylayout_tensor *tensor);

/* Drops a reference; the last one runs the owner's deleter (exactly once)
 * and frees the tensor.  NULL is accepted.  Always returns OK. */
PYLAYOUT_API pylayout_status pylayout_tensor_release(pylayout_tensor *tensor);

/* ---------------------------------------------------------------- copies */

/* Copies every element of `src` into `dst`, which must have the same shape
 * and the same dtype: a layout copy never reinterprets values, so float32
 * into int32 is DTYPE_MISMATCH, not a bit copy.
 * Any strides: src may broadcast (stride 0); dst must not overlap itself
 * nor share a byte with src (views of one buffer whose elements interleave,
 * x[:, 1] and x[:, 0], are fine).  Both must be CPU memory.  On any error
 * nothing is written.
 * Returns OK, INVALID_ARGUMENT, INVALID_TENSOR, UNSUPPORTED_DTYPE,
 * UNSUPPORTED_DEVICE, SHAPE_MISMATCH, DTYPE_MISMATCH, OVERLAP or NO_MEMORY. */
PYLAYOUT_API pylayout_status pylayout_copy(const DLTensor *src, DLTensor *dst);

/* Allocates a tensor of src's shape and dtype, dense in `format`, and copies
 * src into it.  Always copies (test pylayout_is_contiguous first to skip it).
 * Returns pylayout_copy's statuses and FORMAT_RANK. */
PYLAYOUT_API pylayout_status pylayout_convert(const DLTensor *src, pylayout_format format,
                                              pylayout_tensor **tensor_ret);

/* Like pylayout_convert, dense in the dim order `order`
 * (see pylayout_order_strides). */
PYLAYOUT_API pylayout_status pylayout_convert_order(const DLTensor *src, const int32_t *order,
                                                    pylayout_tensor **tensor_ret);

/* Sets the number of threads copies use (n >= 1; above 4096 counts as
 * 4096), for the whole process.  The count in force, highest precedence
 * first: this function; PYLAYOUT_NUM_THREADS (a malformed value is reported
 * once on stderr and ignored); the OpenMP setting in force in the calling
 * thread, omp_get_max_threads() (OMP_NUM_THREADS, omp_set_num_threads,
 * torch.set_num_threads; 1 inside an OpenMP region that may not nest); the
 * number of cores.  A child made by fork() starts at 1, since libgomp hangs
 * in a forked child once the parent has started its worker threads; calling
 * this function in the child lifts that.  A copy uses at most what the
 * process can run at once (the CPUs in the calling thread's affinity mask,
 * OMP_THREAD_LIMIT) and what can be created (under RLIMIT_AS or a pids
 * limit: down to 1), and copies that would take under about 50 us on one
 * thread run on the calling thread alone (below 1 MiB, or
 * PYLAYOUT_PARALLEL_MIN_BYTES, without even timing themselves).  A request above what the process can run
 * is reported once per process on stderr ("pylayout: warning: ...").
 * Thread-safe.  Returns OK or INVALID_ARGUMENT (n < 1). */
PYLAYOUT_API pylayout_status pylayout_set_num_threads(int n);

/* pylayout_set_num_threads for a host that reports warnings its own way
 * (the Python extension raises a RuntimeWarning): nothing is printed.
 * *clamped_first_ret (may be NULL) becomes true when n is more than the
 * process can run at once and no such warning was given yet in this process
 * (the caller now owes one); *limit_ret (may be NULL) gets that limit.
 * Returns OK or INVALID_ARGUMENT (n < 1). */
PYLAYOUT_API pylayout_status pylayout_set_num_threads_quiet(int n, bool *clamped_first_ret, int *limit_ret);

/* Stores in *n_ret the number of threads the calling thread's last copy was
 * entitled to by the settings and limits above (1 for copies that run on the
 * caller alone; 0 before any copy): a check of the thread rules, not a
 * timing.  Returns OK or INVALID_ARGUMENT. */
PYLAYOUT_API pylayout_status pylayout_last_copy_threads(int *n_ret);

/* Stores the thread count in force for the calling thread in *n_ret, by
 * the precedence above (1 without OpenMP): what the setting asks for, before
 * the clamp to what the machine can run. */
PYLAYOUT_API pylayout_status pylayout_get_num_threads(int *n_ret);

/* Caps the memory pylayout keeps for reuse, for the whole process.
 * Outputs of 32 MiB and more that pylayout allocated (pylayout_convert,
 * pylayout_tensor_empty, ...) are not unmapped when released: up to this
 * many bytes of them stay mapped but lazily freed (Linux MADV_FREE), so the
 * kernel reclaims their pages whenever it needs memory, and until then the
 * next allocation of the same size reuses them without page faults.  This
 * is what makes a loop of allocating conversions run at copy speed.  Lazily
 * freed pages count in RSS until reclaimed, and their address space stays
 * mapped.  0 releases everything now and turns the cache off.
 * The limit is PYLAYOUT_CACHE_LIMIT from the environment (bytes, optionally
 * with K, M or G: "512M"; a malformed value is reported once on stderr and
 * ignored) until this function sets another.  Without either, it is derived
 * afresh whenever it is used: an eighth of the smallest of physical memory
 * (at least 1 GiB), the memory limit of the process's cgroup (containers)
 * and the address space RLIMIT_AS leaves -- 0 in AddressSanitizer builds,
 * and off Linux, where blocks are not lazily freed.  Whatever the limit, an
 * allocation pylayout cannot get releases the cache and is tried again.
 * Thread-safe.  Returns OK or INVALID_ARGUMENT (nbytes < 0). */
PYLAYOUT_API pylayout_status pylayout_set_cache_limit(int64_t nbytes);

/* Stores the cache limit in force now (see pylayout_set_cache_limit) in
 * *limit_ret and the bytes the cache holds in *held_ret; either may be
 * NULL, not both.  Returns OK or INVALID_ARGUMENT. */
PYLAYOUT_API pylayout_status pylayout_cache_info(int64_t *limit_ret, int64_t *held_ret);

/* Describes the build: whether OpenMP is compiled in and which SIMD kernel
 * path was chosen at run time ("avx2", "sse2", "scalar", ...). */
PYLAYOUT_API pylayout_status pylayout_build_info(bool *openmp_ret, const char **simd_ret);

/* --------------------------------------------------------------- complex */
/* Complex dtypes pair with real ones of half the bits: complex32 with
 * float16, complex64 with float32, complex128 with float64. */

/* Writes to strides_ret[0..ndim) t's strides with those of size-1 dims
 * rewritten to their canonical value: the extent of the dims inside it,
 * max(|stride| * size) over them (1 for an innermost size-1 dim), i.e. the
 * stride the dim would have if laid out just past them.  For a row-major
 * tensor these are torch.empty(shape).stride().
 * Other strides are copied.  A size-1 dim's stride never changes which
 * memory a tensor covers, so this is always a valid zero-copy relabelling.
 * Returns OK, INVALID_ARGUMENT or INVALID_TENSOR. */
PYLAYOUT_API pylayout_status pylayout_canonical_strides(const DLTensor *t, int64_t *strides_ret);

/* A zero-copy view of `x` with canonical strides (see above). */
PYLAYOUT_API pylayout_status pylayout_tensor_canonicalize(pylayout_tensor *x, pylayout_tensor **view_ret);

/* A zero-copy complex view of a real tensor `x` whose last dim has size 2
 * and stride 1, whose first element is aligned to the complex element size,
 * and whose other dims of size > 1 have even strides (in any order: sliced,
 * transposed, channels_last).  The view drops the last dim and halves the
 * other strides (C division, as torch.view_as_complex does, so size-1 and
 * empty dims may have any stride).  Metadata only: works on any device.
 * Returns OK, INVALID_ARGUMENT, UNSUPPORTED_DTYPE (not float16/32/64),
 * SHAPE_MISMATCH (last dim not of size 2), NOT_VIEWABLE (the strides or
 * alignment forbid a view; pylayout_last_error() names the dim) or NO_MEMORY. */
PYLAYOUT_API pylayout_status pylayout_view_as_complex(pylayout_tensor *x, pylayout_tensor **view_ret);

/* A zero-copy real view of a complex tensor `z`: a trailing dim of size 2
 * (stride 1) is appended and the other strides doubled.  Any device.
 * Returns OK, INVALID_ARGUMENT, UNSUPPORTED_DTYPE, INVALID_TENSOR (z has 64
 * dims already, or a doubled stride overflows) or NO_MEMORY. */
PYLAYOUT_API pylayout_status pylayout_view_as_real(pylayout_tensor *z, pylayout_tensor **view_ret);

/* Zero-copy strided real views of the real and imaginary parts of `z`
 * (strides doubled, the imaginary part one real element further).
 * Release both.  Returns as pylayout_view_as_real. */
PYLAYOUT_API pylayout_status pylayout_complex_parts(pylayout_tensor *z, pylayout_tensor **re_ret,
                                                    pylayout_tensor **im_ret);

/* Interleaves planar `re` and `im` into the complex tensor `out`:
 * out = re + i*im.  All three have the same shape; re and im have the real
 * dtype matching out's complex dtype and may broadcast (stride 0); out must
 * not overlap itself or the inputs.  Parallel.  CPU memory only.  On error
 * nothing is written.  Returns OK, INVALID_ARGUMENT, INVALID_TENSOR,
 * UNSUPPORTED_DTYPE (out not complex), DTYPE_MISMATCH (re or im not the real
 * dtype of out's), UNSUPPORTED_DEVICE, SHAPE_MISMATCH, OVERLAP, NO_MEMORY. */
PYLAYOUT_API pylayout_status pylayout_pack_complex(const DLTensor *re, const DLTensor *im, DLTensor *out);

/* The inverse: copies the real and imaginary parts of `z` into the planar
 * tensors `re` and `im` (any strides).  Statuses as pylayout_pack_complex. */
PYLAYOUT_API pylayout_status pylayout_unpack_complex(const DLTensor *z, DLTensor *re, DLTensor *im);

#ifdef __cplusplus
}
#endif

#endif /* PYLAYOUT_H */
