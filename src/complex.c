/*
 * complex.c - complex views and planar <-> interleaved packing.
 *
 * A complex element is two adjacent reals, so a real tensor whose last dim
 * is (re, im) with stride 1 *is* a complex tensor whenever the other strides
 * step over whole complex elements.  torch.view_as_complex asks for more
 * than memory needs (even strides on empty tensors, and on size-1 dims before
 * pytorch#169780, which torch 2.11 has); pylayout asks only what memory
 * needs, and computes the view's strides with torch's own arithmetic so
 * results agree wherever torch agrees.
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cpu_features.h"
#include "internal.h"

/* The real dtype of a complex one, or bits == 0 if there is none. */
static DLDataType real_of(DLDataType c)
{
    DLDataType r = {kDLFloat, 0, 1};
    if (pylayout_real_dtype(c, &r) != PYLAYOUT_OK)
        r.bits = 0;
    return r;
}

static DLDataType complex_of(DLDataType r)
{
    DLDataType c = {kDLComplex, 0, 1};
    if (pylayout_complex_dtype(r, &c) != PYLAYOUT_OK)
        c.bits = 0;
    return c;
}

pylayout_status pylayout_canonical_strides(const DLTensor *t, int64_t *strides_ret)
{
    int64_t strides[PYLAYOUT_MAX_NDIM];
    if (!t || !strides_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "t or strides_ret is NULL");
    if (t->ndim < 0 || t->ndim > PYLAYOUT_MAX_NDIM || (t->ndim && !t->shape))
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "tensor has invalid ndim %d or NULL shape",
                              (int)t->ndim);
    pylayout_status st = _pylayout_check(t, "tensor", strides);
    if (st != PYLAYOUT_OK)
        return st;
    /* Inside-out: a size-1 dim takes the extent of the dims inside it, the
     * stride it would have if it were laid out just past all of them. */
    int64_t extent = 1;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 1)
            strides[d] = extent;
        int64_t span, mag = strides[d] == INT64_MIN ? INT64_MAX : strides[d] < 0 ? -strides[d] : strides[d];
        if (__builtin_mul_overflow(mag, t->shape[d], &span))
            span = INT64_MAX;
        if (span > extent)
            extent = span;
    }
    memcpy(strides_ret, strides, (size_t)t->ndim * sizeof(int64_t));
    return PYLAYOUT_OK;
}

pylayout_status pylayout_tensor_canonicalize(pylayout_tensor *x, pylayout_tensor **view_ret)
{
    const DLTensor *dl;
    int64_t strides[PYLAYOUT_MAX_NDIM];
    if (!x || !view_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "x or view_ret is NULL");
    pylayout_tensor_dltensor(x, &dl);
    pylayout_status st = pylayout_canonical_strides(dl, strides);
    if (st != PYLAYOUT_OK)
        return st;
    DLTensor desc = *dl;
    desc.strides = strides;
    return pylayout_tensor_view(x, &desc, view_ret);
}

pylayout_status pylayout_view_as_complex(pylayout_tensor *x, pylayout_tensor **view_ret)
{
    const DLTensor *dl;
    if (!x || !view_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "x or view_ret is NULL");
    pylayout_tensor_dltensor(x, &dl);
    DLDataType ct = complex_of(dl->dtype);
    if (!ct.bits)
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DTYPE,
                              "view_as_complex needs float16, float32 or float64 input, got %s; complex numbers "
                              "of bfloat16 or integers do not exist in DLPack, torch or NumPy",
                              _pylayout_dtype_name(dl->dtype) ? _pylayout_dtype_name(dl->dtype) : "unknown");
    int32_t n = dl->ndim;
    if (n == 0 || dl->shape[n - 1] != 2) {
        char shape[160] = "(";
        for (int32_t d = 0; d < n && strlen(shape) < sizeof shape - 32; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), d ? ", %lld" : "%lld",
                     (long long)dl->shape[d]);
        strcat(shape, n == 1 ? ",)" : ")");
        return _pylayout_fail(PYLAYOUT_ERR_SHAPE_MISMATCH,
                              "view_as_complex needs a last dim of size 2 holding (real, imag); got shape %s", shape);
    }
    int64_t numel = 1;
    for (int32_t d = 0; d < n; d++)
        numel *= dl->shape[d];
    size_t real_size = (size_t)dl->dtype.bits / 8;
    if (numel > 0) {
        if (dl->strides[n - 1] != 1)
            return _pylayout_fail(PYLAYOUT_ERR_NOT_VIEWABLE,
                                  "dim %d (real, imag) has stride %lld; a complex view needs the two parts "
                                  "adjacent (stride 1); pack a copy (copy=None) or call pylayout.contiguous first",
                                  (int)(n - 1), (long long)dl->strides[n - 1]);
        for (int32_t d = 0; d < n - 1; d++)
            if (dl->shape[d] > 1 && dl->strides[d] % 2 != 0)
                return _pylayout_fail(PYLAYOUT_ERR_NOT_VIEWABLE,
                                      "dim %d (size %lld) has odd stride %lld, so its elements start halfway "
                                      "through complex numbers; a complex view needs even strides on every dim "
                                      "of size > 1; pack a copy (copy=None) or call pylayout.contiguous first",
                                      (int)d, (long long)dl->shape[d], (long long)dl->strides[d]);
        uintptr_t first = (uintptr_t)dl->data + (uintptr_t)dl->byte_offset;
        if (first % (2 * real_size) != 0)
            return _pylayout_fail(PYLAYOUT_ERR_NOT_VIEWABLE,
                                  "the first element's address is not a multiple of the complex element size "
                                  "(%zu bytes; for torch, an odd storage offset); pack a copy (copy=None)",
                                  2 * real_size);
    }
    int64_t strides[PYLAYOUT_MAX_NDIM];
    for (int32_t d = 0; d < n - 1; d++)
        strides[d] = dl->strides[d] / 2; /* C division, as torch.view_as_complex */
    DLTensor desc = *dl;
    desc.ndim = n - 1;
    desc.strides = strides;
    desc.dtype = ct;
    /* An empty input may have any byte_offset: keep it, the view has no elements. */
    return pylayout_tensor_view(x, &desc, view_ret);
}

static pylayout_status real_view(pylayout_tensor *z, int64_t part, bool append_dim, pylayout_tensor **view_ret)
{
    const DLTensor *dl;
    if (!z || !view_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "z or view_ret is NULL");
    pylayout_tensor_dltensor(z, &dl);
    DLDataType rt = real_of(dl->dtype);
    if (!rt.bits)
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DTYPE,
                              "expected a complex32, complex64 or complex128 tensor, got %s",
                              _pylayout_dtype_name(dl->dtype) ? _pylayout_dtype_name(dl->dtype) : "unknown");
    if (append_dim && dl->ndim >= PYLAYOUT_MAX_NDIM)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "view_as_real would need more than %d dims",
                              PYLAYOUT_MAX_NDIM);
    int64_t shape[PYLAYOUT_MAX_NDIM], strides[PYLAYOUT_MAX_NDIM];
    for (int32_t d = 0; d < dl->ndim; d++) {
        shape[d] = dl->shape[d];
        if (__builtin_mul_overflow(dl->strides[d], 2, &strides[d]))
            return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "dim %d's stride overflows when doubled", (int)d);
    }
    DLTensor desc = *dl;
    desc.dtype = rt;
    desc.shape = shape;
    desc.strides = strides;
    if (append_dim) {
        shape[dl->ndim] = 2;
        strides[dl->ndim] = 1;
        desc.ndim = dl->ndim + 1;
    }
    desc.byte_offset += (uint64_t)part * (rt.bits / 8);
    return pylayout_tensor_view(z, &desc, view_ret);
}

pylayout_status pylayout_view_as_real(pylayout_tensor *z, pylayout_tensor **view_ret)
{
    return real_view(z, 0, true, view_ret);
}

pylayout_status pylayout_complex_parts(pylayout_tensor *z, pylayout_tensor **re_ret, pylayout_tensor **im_ret)
{
    if (!re_ret || !im_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "re_ret or im_ret is NULL");
    pylayout_status st = real_view(z, 0, false, re_ret);
    if (st != PYLAYOUT_OK)
        return st;
    st = real_view(z, 1, false, im_ret);
    if (st != PYLAYOUT_OK) {
        pylayout_tensor_release(*re_ret);
        *re_ret = NULL;
    }
    return st;
}

/* ------------------------------------------------------------- packing */

/* Views of the real and imaginary parts of complex `z` as real DLTensors
 * (strides doubled), using caller storage for the strides. */
static void part_views(const DLTensor *z, const int64_t *zstrides, DLTensor *re, DLTensor *im, int64_t *strides)
{
    DLDataType rt = real_of(z->dtype);
    for (int32_t d = 0; d < z->ndim; d++)
        strides[d] = zstrides[d] * 2;
    *re = *z;
    re->dtype = rt;
    re->strides = strides;
    *im = *re;
    im->byte_offset += rt.bits / 8;
}

static bool ranges_intersect(const DLTensor *a, const int64_t *as, const DLTensor *b, const int64_t *bs)
{
    int64_t alo, ahi, blo, bhi;
    if (_pylayout_extent(a->ndim, a->shape, as, _pylayout_itemsize(a->dtype), &alo, &ahi) != PYLAYOUT_OK ||
        _pylayout_extent(b->ndim, b->shape, bs, _pylayout_itemsize(b->dtype), &blo, &bhi) != PYLAYOUT_OK)
        return true;
    if (ahi == alo || bhi == blo)
        return false; /* empty */
    intptr_t a0 = (intptr_t)((char *)a->data + a->byte_offset), b0 = (intptr_t)((char *)b->data + b->byte_offset);
    return a0 + alo < b0 + bhi && b0 + blo < a0 + ahi;
}

/* Common checks of pack and unpack: z complex, re/im of its real dtype and
 * shape, CPU memory, the written tensors disjoint from the others. */
static pylayout_status check_planar(const DLTensor *z, const DLTensor *re, const DLTensor *im, bool z_written,
                                    int64_t *zs, int64_t *rs, int64_t *is)
{
    pylayout_status st;
    if ((st = _pylayout_check(z, z_written ? "out" : "z", zs)) != PYLAYOUT_OK ||
        (st = _pylayout_check(re, "re", rs)) != PYLAYOUT_OK || (st = _pylayout_check(im, "im", is)) != PYLAYOUT_OK)
        return st;
    DLDataType rt = real_of(z->dtype);
    if (!rt.bits)
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DTYPE, "%s must be complex32, complex64 or complex128",
                              z_written ? "out" : "z");
    for (int32_t d = 0; d < z->ndim; d++) /* part_views doubles them */
        if (zs[d] > INT64_MAX / 2 || zs[d] < INT64_MIN / 2)
            return _pylayout_fail(PYLAYOUT_ERR_INVALID_TENSOR, "%s's stride %lld in dim %d overflows in real units",
                                  z_written ? "out" : "z", (long long)zs[d], (int)d);
    const DLTensor *parts[2] = {re, im};
    for (int p = 0; p < 2; p++) {
        const char *name = p ? "im" : "re";
        if (parts[p]->dtype.code != kDLFloat || parts[p]->dtype.bits != rt.bits || parts[p]->dtype.lanes != 1)
            return _pylayout_fail(PYLAYOUT_ERR_DTYPE_MISMATCH,
                                  "%s must be float%u to pair with %s's complex%u", name, (unsigned)rt.bits,
                                  z_written ? "out" : "z", (unsigned)z->dtype.bits);
        if (parts[p]->ndim != z->ndim)
            return _pylayout_fail(PYLAYOUT_ERR_SHAPE_MISMATCH, "%s has %d dims but %s has %d", name,
                                  (int)parts[p]->ndim, z_written ? "out" : "z", (int)z->ndim);
        for (int32_t d = 0; d < z->ndim; d++)
            if (parts[p]->shape[d] != z->shape[d])
                return _pylayout_fail(PYLAYOUT_ERR_SHAPE_MISMATCH, "%s has size %lld in dim %d but %s has %lld",
                                      name, (long long)parts[p]->shape[d], (int)d, z_written ? "out" : "z",
                                      (long long)z->shape[d]);
    }
    const DLTensor *all[3] = {z, re, im};
    for (int i = 0; i < 3; i++)
        if (!_pylayout_device_is_host(all[i]->device))
            return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DEVICE,
                                  "a tensor lives on %s, not in CPU memory; pylayout has no backend for that "
                                  "device yet",
                                  _pylayout_device_name(all[i]->device.device_type));
    const DLTensor *written[2] = {z_written ? z : re, z_written ? NULL : im};
    const int64_t *wstrides[2] = {z_written ? zs : rs, is};
    for (int w = 0; w < 2 && written[w]; w++)
        if (_pylayout_self_overlaps(written[w]->ndim, written[w]->shape, wstrides[w], NULL))
            return _pylayout_fail(PYLAYOUT_ERR_OVERLAP,
                                  "%s has elements that share memory (a stride of 0, or strides that "
                                  "interleave), so it cannot be written; pass a dense tensor",
                                  z_written ? "out" : (w ? "im" : "re"));
    if (z_written) {
        if (ranges_intersect(z, zs, re, rs) || ranges_intersect(z, zs, im, is))
            return _pylayout_fail(PYLAYOUT_ERR_OVERLAP, "out overlaps re or im; write into separate memory");
    } else if (ranges_intersect(re, rs, im, is) || ranges_intersect(z, zs, re, rs) ||
               ranges_intersect(z, zs, im, is)) {
        return _pylayout_fail(PYLAYOUT_ERR_OVERLAP, "re, im and z must not overlap one another");
    }
    return PYLAYOUT_OK;
}

/* Whether the tensors are laid out alike and densely with non-negative
 * strides, so that element k of each lies k elements past its start. */
static bool same_dense_layout(const DLTensor *z, const int64_t *zs, const DLTensor *re, const int64_t *rs,
                              const int64_t *is)
{
    DLTensor probe = *z;
    probe.strides = (int64_t *)zs;
    bool dense = false;
    if (pylayout_is_dense(&probe, &dense) != PYLAYOUT_OK || !dense)
        return false;
    for (int32_t d = 0; d < z->ndim; d++)
        if (z->shape[d] > 1 && (zs[d] < 0 || rs[d] != zs[d] || is[d] != zs[d]))
            return false;
    (void)re;
    return true;
}

/* ------------------------------------------------------ interleaving */

/* Below this many complex elements one thread is faster than waking more. */
#define PL_PACK_PARALLEL_MIN 65536

/* Elements per chunk of a parallel pack: as many chunks as copies of this
 * size, at most PL_MAX_CHUNKS. */
#define PL_PACK_CHUNK (PL_PACK_PARALLEL_MIN / 4)

/* Chunk boundaries fall on multiples of this many elements: no two threads
 * write the same cache line of z, re or im (64 2-byte parts are two lines),
 * and a streaming kernel's z stays 32-byte aligned at every chunk. */
#define PL_PACK_ALIGN 64

typedef struct {
    _pylayout_interleave_fn fn;
    void (*fence)(void); /* set when fn streams */
    void *z, *re, *im;
} interleave_job;

static void interleave_range(void *ctx, int64_t k0, int64_t k1)
{
    const interleave_job *j = ctx;
    j->fn(j->z, j->re, j->im, k0, k1);
    if (j->fence != NULL)
        j->fence(); /* the streaming kernels leave it to their caller */
}

/* On the copy engine's kernel table (PYLAYOUT_SIMD caps it), and its
 * persistent team (threads.c), so packing shares its rules: the thread
 * count in force, and on a busy CPU the caller never waits for a worker the
 * kernel has not run. */
static void interleave(bool pack, void *zp, void *rp, void *ip, int64_t n, size_t real_size)
{
    const _pylayout_kernels *k = _pylayout_kernels_get();
    const int lg = _pl_size_index(real_size); /* 2, 4 or 8: check_planar saw a complex dtype */
    interleave_job job = {pack ? k->pack[lg] : k->unpack[lg], NULL, zp, rp, ip};
    if (pack && k->pack_stream[lg] != NULL && n * 2 * (int64_t)real_size >= PL_STREAM_MIN_BYTES &&
        (uintptr_t)zp % 32 == 0) {
        /* past the caches the output is not read back soon: skipping the
         * read-for-ownership saves a third of the traffic */
        job.fn = k->pack_stream[lg];
        job.fence = k->fence;
    }
    int nthreads = 1;
    if (n >= PL_PACK_PARALLEL_MIN)
        nthreads = _pylayout_copy_threads(); /* not the public getter: it would clear the last error */
    if (nthreads <= 1) {
        interleave_range(&job, 0, n);
        return;
    }
    int64_t chunks = (n + PL_PACK_CHUNK - 1) / PL_PACK_CHUNK;
    if (chunks > PL_MAX_CHUNKS)
        chunks = PL_MAX_CHUNKS;
    _pylayout_parallel_ranges(n, (int)chunks, PL_PACK_ALIGN, 1, nthreads, interleave_range, &job);
}

static int64_t count(const DLTensor *t)
{
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* pack_complex (pack: re, im -> z) and unpack_complex (z -> re, im): check
 * everything, then one interleaving pass when the three share a dense layout,
 * else two strided copies between the parts and z's (re, im) views. */
static pylayout_status planar(bool pack, const DLTensor *z, const DLTensor *re, const DLTensor *im)
{
    int64_t zs[PYLAYOUT_MAX_NDIM], rs[PYLAYOUT_MAX_NDIM], is[PYLAYOUT_MAX_NDIM], ps[PYLAYOUT_MAX_NDIM];
    pylayout_status st = check_planar(z, re, im, pack, zs, rs, is);
    if (st != PYLAYOUT_OK)
        return st;
    const int64_t n = count(z);
    if (n > 0 && same_dense_layout(z, zs, re, rs, is)) {
        interleave(pack, (char *)z->data + z->byte_offset, (char *)re->data + re->byte_offset,
                   (char *)im->data + im->byte_offset, n, (size_t)z->dtype.bits / 16);
    } else if (n > 0) { /* general strides (or broadcasting parts) */
        DLTensor zre, zim, pre = *re, pim = *im;
        pre.strides = rs;
        pim.strides = is;
        part_views(z, zs, &zre, &zim, ps);
        /* cannot fail: check_planar tested everything pylayout_copy tests */
        if ((st = pack ? pylayout_copy(&pre, &zre) : pylayout_copy(&zre, &pre)) != PYLAYOUT_OK ||
            (st = pack ? pylayout_copy(&pim, &zim) : pylayout_copy(&zim, &pim)) != PYLAYOUT_OK)
            return st;
    }
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

pylayout_status pylayout_pack_complex(const DLTensor *re, const DLTensor *im, DLTensor *out)
{
    if (!re || !im || !out)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "re, im or out is NULL");
    return planar(true, out, re, im);
}

pylayout_status pylayout_unpack_complex(const DLTensor *z, DLTensor *re, DLTensor *im)
{
    if (!z || !re || !im)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "z, re or im is NULL");
    return planar(false, z, re, im);
}
