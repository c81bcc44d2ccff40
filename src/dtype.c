/* dtype.c - which DLPack dtypes and devices pylayout understands. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Every dtype pylayout handles, named as NumPy and PyTorch spell them. */
static const struct {
    const char *name;
    uint8_t code, bits;
} dtypes[] = {
    {"bool", kDLBool, 8},
    {"int8", kDLInt, 8},
    {"int16", kDLInt, 16},
    {"int32", kDLInt, 32},
    {"int64", kDLInt, 64},
    {"uint8", kDLUInt, 8},
    {"uint16", kDLUInt, 16},
    {"uint32", kDLUInt, 32},
    {"uint64", kDLUInt, 64},
    {"float16", kDLFloat, 16},
    {"float32", kDLFloat, 32},
    {"float64", kDLFloat, 64},
    {"bfloat16", kDLBfloat, 16},
    {"complex32", kDLComplex, 32},
    {"complex64", kDLComplex, 64},
    {"complex128", kDLComplex, 128},
    {"float8_e3m4", kDLFloat8_e3m4, 8},
    {"float8_e4m3", kDLFloat8_e4m3, 8},
    {"float8_e4m3b11fnuz", kDLFloat8_e4m3b11fnuz, 8},
    {"float8_e4m3fn", kDLFloat8_e4m3fn, 8},
    {"float8_e4m3fnuz", kDLFloat8_e4m3fnuz, 8},
    {"float8_e5m2", kDLFloat8_e5m2, 8},
    {"float8_e5m2fnuz", kDLFloat8_e5m2fnuz, 8},
    {"float8_e8m0fnu", kDLFloat8_e8m0fnu, 8},
};

const char *_pylayout_dtype_name(DLDataType dt)
{
    if (dt.lanes == 1)
        for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
            if (dtypes[i].code == dt.code && dtypes[i].bits == dt.bits)
                return dtypes[i].name;
    return NULL;
}

pylayout_status pylayout_dtype_name(DLDataType dtype, const char **name_ret)
{
    if (!name_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "name_ret is NULL");
    const char *name = _pylayout_dtype_name(dtype);
    if (!name)
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DTYPE, "no supported dtype has code %u, bits %u, lanes %u",
                              (unsigned)dtype.code, (unsigned)dtype.bits, (unsigned)dtype.lanes);
    *name_ret = name;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_dtype_from_name(const char *name, DLDataType *dtype_ret)
{
    if (!name || !dtype_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "name or dtype_ret is NULL");
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (!strcmp(name, dtypes[i].name)) {
            *dtype_ret = (DLDataType){dtypes[i].code, dtypes[i].bits, 1};
            return PYLAYOUT_OK;
        }
    }
    return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "unknown dtype name '%.64s'; use a name such as 'float32'",
                          name);
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

pylayout_status pylayout_device_name(int32_t device_type, const char **name_ret)
{
    if (!name_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "name_ret is NULL");
    const char *name = _pylayout_device_name(device_type);
    if (!strncmp(name, "device type ", 12)) {
        *name_ret = NULL;
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DEVICE, "DLPack device type %d is unknown to pylayout",
                              (int)device_type);
    }
    *name_ret = name;
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}
