/* dtype.c - which DLPack dtypes and devices pylayout understands. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* Names follow NumPy / PyTorch spelling. */
const char *_pylayout_dtype_name(DLDataType dt)
{
    if (dt.lanes != 1)
        return NULL;
    switch (dt.code) {
    case kDLInt:
        switch (dt.bits) {
        case 8: return "int8";
        case 16: return "int16";
        case 32: return "int32";
        case 64: return "int64";
        }
        break;
    case kDLUInt:
        switch (dt.bits) {
        case 8: return "uint8";
        case 16: return "uint16";
        case 32: return "uint32";
        case 64: return "uint64";
        }
        break;
    case kDLFloat:
        switch (dt.bits) {
        case 16: return "float16";
        case 32: return "float32";
        case 64: return "float64";
        }
        break;
    case kDLBfloat:
        if (dt.bits == 16)
            return "bfloat16";
        break;
    case kDLComplex:
        switch (dt.bits) {
        case 32: return "complex32";
        case 64: return "complex64";
        case 128: return "complex128";
        }
        break;
    case kDLBool:
        if (dt.bits == 8)
            return "bool";
        break;
    case kDLFloat8_e3m4: return dt.bits == 8 ? "float8_e3m4" : NULL;
    case kDLFloat8_e4m3: return dt.bits == 8 ? "float8_e4m3" : NULL;
    case kDLFloat8_e4m3b11fnuz: return dt.bits == 8 ? "float8_e4m3b11fnuz" : NULL;
    case kDLFloat8_e4m3fn: return dt.bits == 8 ? "float8_e4m3fn" : NULL;
    case kDLFloat8_e4m3fnuz: return dt.bits == 8 ? "float8_e4m3fnuz" : NULL;
    case kDLFloat8_e5m2: return dt.bits == 8 ? "float8_e5m2" : NULL;
    case kDLFloat8_e5m2fnuz: return dt.bits == 8 ? "float8_e5m2fnuz" : NULL;
    case kDLFloat8_e8m0fnu: return dt.bits == 8 ? "float8_e8m0fnu" : NULL;
    }
    return NULL;
}

size_t _pylayout_itemsize(DLDataType dt)
{
    return _pylayout_dtype_name(dt) ? (size_t)dt.bits / 8 : 0;
}

const char *_pylayout_device_name(int32_t device_type)
{
    static _Thread_local char unknown[32];
    switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLVPI: return "vpi";
    case kDLROCM: return "rocm";
    case kDLROCMHost: return "rocm_host";
    case kDLExtDev: return "ext_dev";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLOneAPI: return "oneapi";
    case kDLWebGPU: return "webgpu";
    case kDLHexagon: return "hexagon";
    case kDLMAIA: return "maia";
    case kDLTrn: return "trn";
    }
    snprintf(unknown, sizeof unknown, "device type %d", (int)device_type);
    return unknown;
}

bool _pylayout_device_is_host(DLDevice device)
{
    switch ((int)device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLROCMHost:
    case kDLCUDAManaged:
        return true;
    default:
        return false;
    }
}

void *_pylayout_aligned_alloc(size_t nbytes)
{
    /* aligned_alloc wants a size that is a multiple of the alignment. */
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded < nbytes)
        return NULL;
    return aligned_alloc(64, rounded ? rounded : 64);
}

void _pylayout_aligned_free(void *p)
{
    free(p);
}
