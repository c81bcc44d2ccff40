/*
 * abi_mixed.c - the official <dlpack/dlpack.h> first, then <pylayout.h>, as
 * pylayout.h documents.  Built with warnings as errors, so a redefined type
 * or macro fails the build; then a round trip through pylayout using the
 * official header's types.
 */
#include <dlpack/dlpack.h>
#include <pylayout.h>

#include <stdio.h>

#ifndef DLPACK_DLPACK_H_
#error "the official DLPack header was not included"
#endif
#ifdef PYLAYOUT_OWN_DLPACK_DECLARATIONS
#error "pylayout.h declared DLPack types although the official header came first"
#endif

#include "abi_fields.h"

static int deleted;

static void deleter(struct DLManagedTensorVersioned *self)
{
    (void)self;
    deleted++;
}

#define FAIL(...) return (snprintf(why, why_len, __VA_ARGS__), 1)

int abi_mixed_roundtrip(char *why, size_t why_len)
{
    static float data[24];
    int64_t shape[3] = {2, 3, 4}, strides[3] = {1, 2, 6};
    DLManagedTensorVersioned m = {
        .version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
        .manager_ctx = NULL,
        .deleter = deleter,
        .flags = DLPACK_FLAG_BITMASK_READ_ONLY,
        .dl_tensor = {.data = data, .device = {kDLCPU, 0}, .ndim = 3, .dtype = {kDLFloat, 32, 1},
                      .shape = shape, .strides = strides, .byte_offset = 0},
    };
    pylayout_tensor *t = NULL;
    pylayout_status st = pylayout_tensor_from_versioned(&m, &t);
    if (st != PYLAYOUT_OK)
        FAIL("import: %s (%s)", pylayout_strerror(st), pylayout_last_error());
    bool fortran = false;
    const DLTensor *dl = NULL;
    if (pylayout_tensor_dltensor(t, &dl) != PYLAYOUT_OK || dl->data != data)
        FAIL("dltensor");
    if (pylayout_is_contiguous(dl, PYLAYOUT_FORMAT_FORTRAN, &fortran) != PYLAYOUT_OK || !fortran)
        FAIL("is_contiguous(FORTRAN)");
    DLManagedTensorVersioned *out = NULL;
    if (pylayout_tensor_to_versioned(t, &out) != PYLAYOUT_OK)
        FAIL("export");
    if (out->flags != DLPACK_FLAG_BITMASK_READ_ONLY || out->dl_tensor.strides[2] != 6 ||
        out->version.major != DLPACK_MAJOR_VERSION)
        FAIL("export differs");
    pylayout_tensor_release(t);
    if (deleted != 0)
        FAIL("deleter ran early");
    out->deleter(out);
    if (deleted != 1)
        FAIL("deleter ran %d times", deleted);
    return 0;
}
