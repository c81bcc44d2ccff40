/* dtype.c - which DLPack dtypes and devices pylayout understands. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Every dtype pylayout handles, named as NumPy and PyTorch spell them:
 * X(name, DLPack code, bits) for each, the one list both lookups below
 * are made from. */
#define PL_DTYPES(X) \
    X("bool", kDLBool, 8) \
    X("int8", kDLInt, 8) \
    X("int16", kDLInt, 16) \
    X("int32", kDLInt, 32) \
    X("int64", kDLInt, 64) \
    X("uint8", kDLUInt, 8) \
    X("uint16", kDLUInt, 16) \
    X("uint32", kDLUInt, 32) \
    X("uint64", kDLUInt, 64) \
    X("float16", kDLFloat, 16) \
    X("float32", kDLFloat, 32) \
    X("float64", kDLFloat, 64) \
    X("bfloat16", kDLBfloat, 16) \
    X("complex32", kDLComplex, 32) \
    X("complex64", kDLComplex, 64) \
    X("complex128", kDLComplex, 128) \
    X("float8_e3m4", kDLFloat8_e3m4, 8) \
    X("float8_e4m3", kDLFloat8_e4m3, 8) \
    X("float8_e4m3b11fnuz", kDLFloat8_e4m3b11fnuz, 8) \
    X("float8_e4m3fn", kDLFloat8_e4m3fn, 8) \
    X("float8_e4m3fnuz", kDLFloat8_e4m3fnuz, 8) \
    X("float8_e5m2", kDLFloat8_e5m2, 8) \
    X("float8_e5m2fnuz", kDLFloat8_e5m2fnuz, 8) \
    X("float8_e8m0fnu", kDLFloat8_e8m0fnu, 8)

#define PL_DTYPE_ENTRY(name, code, bits) {name, code, bits},
static const struct {
    const char *name;
    uint8_t code, bits;
} dtypes[] = {PL_DTYPES(PL_DTYPE_ENTRY)};
#undef PL_DTYPE_ENTRY

const char *_pylayout_dtype_name(DLDataType dt)
{
    /* a switch, not a search of the table: every copy asks a few times */
#define PL_DTYPE_CASE(name, code, bits) \
    case (code) << 8 | (bits): return name;
    if (dt.lanes != 1)
        return NULL;
    switch (dt.code << 8 | dt.bits) {
        PL_DTYPES(PL_DTYPE_CASE)
    default: return NULL;
    }
#undef PL_DTYPE_CASE
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

pylayout_status pylayout_dtype_itemsize(DLDataType dtype, size_t *itemsize_ret)
{
    if (!itemsize_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "itemsize_ret is NULL");
    size_t n = _pylayout_itemsize(dtype);
    if (!n)
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DTYPE, "no supported dtype has code %u, bits %u, lanes %u",
                              (unsigned)dtype.code, (unsigned)dtype.bits, (unsigned)dtype.lanes);
    *itemsize_ret = n;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_complex_dtype(DLDataType real, DLDataType *complex_ret)
{
    if (!complex_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "complex_ret is NULL");
    if (real.code != kDLFloat || real.lanes != 1 || (real.bits != 16 && real.bits != 32 && real.bits != 64))
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DTYPE, "%s has no complex dtype: use float16, float32 or "
                              "float64", _pylayout_dtype_name(real) ? _pylayout_dtype_name(real) : "this dtype");
    *complex_ret = (DLDataType){kDLComplex, (uint8_t)(real.bits * 2), 1};
    return PYLAYOUT_OK;
}

pylayout_status pylayout_real_dtype(DLDataType complex_dtype, DLDataType *real_ret)
{
    if (!real_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "real_ret is NULL");
    if (complex_dtype.code != kDLComplex || complex_dtype.lanes != 1 ||
        (complex_dtype.bits != 32 && complex_dtype.bits != 64 && complex_dtype.bits != 128))
        return _pylayout_fail(
            PYLAYOUT_ERR_UNSUPPORTED_DTYPE, "%s is not complex32, complex64 or complex128",
            _pylayout_dtype_name(complex_dtype) ? _pylayout_dtype_name(complex_dtype) : "this dtype");
    *real_ret = (DLDataType){kDLFloat, (uint8_t)(complex_dtype.bits / 2), 1};
    return PYLAYOUT_OK;
}

pylayout_status pylayout_device_is_host(DLDevice device, bool *host_ret)
{
    if (!host_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "host_ret is NULL");
    *host_ret = _pylayout_device_is_host(device);
    return PYLAYOUT_OK;
}

/* Every spelling users hold: pylayout's names, NumPy's orders, torch's
 * memory_format objects as str() prints them. */
static const struct {
    const char *name;
    pylayout_format format;
} format_names[] = {
    {"contiguous", PYLAYOUT_FORMAT_CONTIGUOUS},
    {"channels_last", PYLAYOUT_FORMAT_CHANNELS_LAST},
    {"channels_last_3d", PYLAYOUT_FORMAT_CHANNELS_LAST_3D},
    {"fortran", PYLAYOUT_FORMAT_FORTRAN},
    {"C", PYLAYOUT_FORMAT_CONTIGUOUS},
    {"F", PYLAYOUT_FORMAT_FORTRAN},
    {"torch.contiguous_format", PYLAYOUT_FORMAT_CONTIGUOUS},
    {"torch.channels_last", PYLAYOUT_FORMAT_CHANNELS_LAST},
    {"torch.channels_last_3d", PYLAYOUT_FORMAT_CHANNELS_LAST_3D},
};

pylayout_status pylayout_format_name(pylayout_format format, const char **name_ret)
{
    if (!name_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "name_ret is NULL");
    if ((unsigned)format > PYLAYOUT_FORMAT_FORTRAN)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "unknown format %d", (int)format);
    *name_ret = format_names[format].name; /* the first four rows are in enum order */
    return PYLAYOUT_OK;
}

pylayout_status pylayout_format_from_name(const char *name, pylayout_format *format_ret)
{
    if (!name || !format_ret)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "name or format_ret is NULL");
    for (size_t i = 0; i < sizeof format_names / sizeof format_names[0]; i++)
        if (!strcmp(name, format_names[i].name)) {
            *format_ret = format_names[i].format;
            return PYLAYOUT_OK;
        }
    return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT,
                          "unknown memory format '%.64s'; use 'contiguous' (or 'C'), 'channels_last', "
                          "'channels_last_3d', 'fortran' (or 'F') or a torch.memory_format",
                          name);
}
