/*
 * abi_fields.h - the DLPack 1.x ABI facts check_abi compares: every struct's
 * size and alignment, every field's offset, size and scalar type, every enum
 * value and flag bit, and the exact type of every function pointer.
 *
 * Included by abi_table.c, compiled once after <pylayout.h> and once after
 * the official <dlpack/dlpack.h>: the same list, evaluated once against
 * each declaration, gives two tables that must be identical.
 */
#ifndef PYLAYOUT_ABI_FIELDS_H
#define PYLAYOUT_ABI_FIELDS_H

#include <stddef.h>
#include <stdint.h>

typedef struct abi_entry {
    const char *name;
    unsigned long long value;
    const char *type; /* scalar field type, "" where not applicable */
} abi_entry;

/* The scalar type of a field (enums show as their compatible integer type). */
#define ABI_TYPE_NAME(expr)                                                                                  \
    _Generic((expr), int8_t: "int8", uint8_t: "uint8", int16_t: "int16", uint16_t: "uint16", int32_t: "int32", \
             uint32_t: "uint32", int64_t: "int64", uint64_t: "uint64", void *: "void *", int64_t *: "int64 *", \
             default: "other")

#define ABI_STRUCT(T) {#T " sizeof", sizeof(T), ""}, {#T " alignof", _Alignof(T), ""},
#define ABI_FIELD(T, f)                                                                                      \
    {#T "." #f " offsetof", offsetof(T, f), ABI_TYPE_NAME(((T *)0)->f)},                                    \
        {#T "." #f " sizeof", sizeof(((T *)0)->f), ""},
#define ABI_VALUE(name) {#name, (unsigned long long)(name), ""},
/* 1 if `expr` has exactly type `type` (as the specification spells it). */
#define ABI_HAS_TYPE(label, expr, type) {"type of " label, _Generic((expr), type: 1ULL, default: 0ULL), ""},

#define ABI_TABLE                                                                                            \
    ABI_STRUCT(DLPackVersion)                                                                                \
    ABI_FIELD(DLPackVersion, major)                                                                          \
    ABI_FIELD(DLPackVersion, minor)                                                                          \
    {"DLDeviceType sizeof", sizeof(DLDeviceType), ""},                                                       \
    {"DLDataTypeCode sizeof", sizeof(DLDataTypeCode), ""},                                                   \
    ABI_STRUCT(DLDevice)                                                                                     \
    ABI_FIELD(DLDevice, device_type)                                                                         \
    ABI_FIELD(DLDevice, device_id)                                                                           \
    ABI_STRUCT(DLDataType)                                                                                   \
    ABI_FIELD(DLDataType, code)                                                                              \
    ABI_FIELD(DLDataType, bits)                                                                              \
    ABI_FIELD(DLDataType, lanes)                                                                             \
    ABI_STRUCT(DLTensor)                                                                                     \
    ABI_FIELD(DLTensor, data)                                                                                \
    ABI_FIELD(DLTensor, device)                                                                              \
    ABI_FIELD(DLTensor, ndim)                                                                                \
    ABI_FIELD(DLTensor, dtype)                                                                               \
    ABI_FIELD(DLTensor, shape)                                                                               \
    ABI_FIELD(DLTensor, strides)                                                                             \
    ABI_FIELD(DLTensor, byte_offset)                                                                         \
    ABI_STRUCT(DLManagedTensor)                                                                              \
    ABI_FIELD(DLManagedTensor, dl_tensor)                                                                    \
    ABI_FIELD(DLManagedTensor, manager_ctx)                                                                  \
    ABI_FIELD(DLManagedTensor, deleter)                                                                      \
    ABI_STRUCT(DLManagedTensorVersioned)                                                                     \
    ABI_FIELD(DLManagedTensorVersioned, version)                                                             \
    ABI_FIELD(DLManagedTensorVersioned, manager_ctx)                                                         \
    ABI_FIELD(DLManagedTensorVersioned, deleter)                                                             \
    ABI_FIELD(DLManagedTensorVersioned, flags)                                                               \
    ABI_FIELD(DLManagedTensorVersioned, dl_tensor)                                                           \
    ABI_STRUCT(DLPackExchangeAPIHeader)                                                                      \
    ABI_FIELD(DLPackExchangeAPIHeader, version)                                                              \
    ABI_FIELD(DLPackExchangeAPIHeader, prev_api)                                                             \
    ABI_STRUCT(DLPackExchangeAPI)                                                                            \
    ABI_FIELD(DLPackExchangeAPI, header)                                                                     \
    ABI_FIELD(DLPackExchangeAPI, managed_tensor_allocator)                                                   \
    ABI_FIELD(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync)                                      \
    ABI_FIELD(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync)                                        \
    ABI_FIELD(DLPackExchangeAPI, dltensor_from_py_object_no_sync)                                            \
    ABI_FIELD(DLPackExchangeAPI, current_work_stream)                                                        \
    /* function pointer types, spelled as the specification declares them */                                \
    ABI_HAS_TYPE("DLManagedTensor.deleter", ((DLManagedTensor *)0)->deleter,                                 \
                 void (*)(struct DLManagedTensor *))                                                         \
    ABI_HAS_TYPE("DLManagedTensorVersioned.deleter", ((DLManagedTensorVersioned *)0)->deleter,               \
                 void (*)(struct DLManagedTensorVersioned *))                                                \
    ABI_HAS_TYPE("DLPackExchangeAPIHeader.prev_api", ((DLPackExchangeAPIHeader *)0)->prev_api,               \
                 struct DLPackExchangeAPIHeader *)                                                           \
    ABI_HAS_TYPE("DLPackManagedTensorAllocator", (DLPackManagedTensorAllocator)0,                            \
                 int (*)(DLTensor *, DLManagedTensorVersioned **, void *,                                    \
                         void (*)(void *, const char *, const char *)))                                      \
    ABI_HAS_TYPE("DLPackManagedTensorFromPyObjectNoSync", (DLPackManagedTensorFromPyObjectNoSync)0,          \
                 int (*)(void *, DLManagedTensorVersioned **))                                               \
    ABI_HAS_TYPE("DLPackDLTensorFromPyObjectNoSync", (DLPackDLTensorFromPyObjectNoSync)0,                    \
                 int (*)(void *, DLTensor *))                                                                \
    ABI_HAS_TYPE("DLPackCurrentWorkStream", (DLPackCurrentWorkStream)0,                                      \
                 int (*)(DLDeviceType, int32_t, void **))                                                    \
    ABI_HAS_TYPE("DLPackManagedTensorToPyObjectNoSync", (DLPackManagedTensorToPyObjectNoSync)0,              \
                 int (*)(DLManagedTensorVersioned *, void **))                                               \
    ABI_HAS_TYPE("DLPackExchangeAPI.managed_tensor_allocator",                                               \
                 ((DLPackExchangeAPI *)0)->managed_tensor_allocator, DLPackManagedTensorAllocator)           \
    ABI_HAS_TYPE("DLPackExchangeAPI.managed_tensor_from_py_object_no_sync",                                  \
                 ((DLPackExchangeAPI *)0)->managed_tensor_from_py_object_no_sync,                            \
                 DLPackManagedTensorFromPyObjectNoSync)                                                      \
    ABI_HAS_TYPE("DLPackExchangeAPI.managed_tensor_to_py_object_no_sync",                                    \
                 ((DLPackExchangeAPI *)0)->managed_tensor_to_py_object_no_sync,                              \
                 DLPackManagedTensorToPyObjectNoSync)                                                        \
    ABI_HAS_TYPE("DLPackExchangeAPI.dltensor_from_py_object_no_sync",                                        \
                 ((DLPackExchangeAPI *)0)->dltensor_from_py_object_no_sync, DLPackDLTensorFromPyObjectNoSync) \
    ABI_HAS_TYPE("DLPackExchangeAPI.current_work_stream", ((DLPackExchangeAPI *)0)->current_work_stream,     \
                 DLPackCurrentWorkStream)                                                                    \
    ABI_HAS_TYPE("DLPackExchangeAPI.header", ((DLPackExchangeAPI *)0)->header, DLPackExchangeAPIHeader)      \
    ABI_HAS_TYPE("DLManagedTensorVersioned.version", ((DLManagedTensorVersioned *)0)->version, DLPackVersion) \
    ABI_HAS_TYPE("DLManagedTensorVersioned.dl_tensor", ((DLManagedTensorVersioned *)0)->dl_tensor, DLTensor) \
    ABI_HAS_TYPE("DLManagedTensor.dl_tensor", ((DLManagedTensor *)0)->dl_tensor, DLTensor)                   \
    ABI_HAS_TYPE("DLTensor.device", ((DLTensor *)0)->device, DLDevice)                                       \
    ABI_HAS_TYPE("DLTensor.dtype", ((DLTensor *)0)->dtype, DLDataType)                                       \
    ABI_HAS_TYPE("DLDevice.device_type", ((DLDevice *)0)->device_type, DLDeviceType)                         \
    /* device types */                                                                                       \
    ABI_VALUE(kDLCPU) ABI_VALUE(kDLCUDA) ABI_VALUE(kDLCUDAHost) ABI_VALUE(kDLOpenCL) ABI_VALUE(kDLVulkan)     \
    ABI_VALUE(kDLMetal) ABI_VALUE(kDLVPI) ABI_VALUE(kDLROCM) ABI_VALUE(kDLROCMHost) ABI_VALUE(kDLExtDev)      \
    ABI_VALUE(kDLCUDAManaged) ABI_VALUE(kDLOneAPI) ABI_VALUE(kDLWebGPU) ABI_VALUE(kDLHexagon)                 \
    ABI_VALUE(kDLMAIA) ABI_VALUE(kDLTrn)                                                                     \
    /* dtype codes */                                                                                        \
    ABI_VALUE(kDLInt) ABI_VALUE(kDLUInt) ABI_VALUE(kDLFloat) ABI_VALUE(kDLOpaqueHandle) ABI_VALUE(kDLBfloat) \
    ABI_VALUE(kDLComplex) ABI_VALUE(kDLBool) ABI_VALUE(kDLFloat8_e3m4) ABI_VALUE(kDLFloat8_e4m3)             \
    ABI_VALUE(kDLFloat8_e4m3b11fnuz) ABI_VALUE(kDLFloat8_e4m3fn) ABI_VALUE(kDLFloat8_e4m3fnuz)               \
    ABI_VALUE(kDLFloat8_e5m2) ABI_VALUE(kDLFloat8_e5m2fnuz) ABI_VALUE(kDLFloat8_e8m0fnu)                     \
    ABI_VALUE(kDLFloat6_e2m3fn) ABI_VALUE(kDLFloat6_e3m2fn) ABI_VALUE(kDLFloat4_e2m1fn)                      \
    /* flag bits */                                                                                          \
    ABI_VALUE(DLPACK_FLAG_BITMASK_READ_ONLY) ABI_VALUE(DLPACK_FLAG_BITMASK_IS_COPIED)                        \
    ABI_VALUE(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)                                                    \
    {"sizeof DLPACK_FLAG_BITMASK_READ_ONLY >= 8", sizeof(DLPACK_FLAG_BITMASK_READ_ONLY) >= 8, ""},

/* The two tables, and the version each declaration follows. */
extern const abi_entry abi_ours[], abi_official[];
extern const size_t abi_ours_len, abi_official_len;
extern const unsigned abi_ours_version[2], abi_official_version[2];

/* abi_mixed.c: 0 if pylayout works on types from the official header. */
int abi_mixed_roundtrip(char *why, size_t why_len);

#endif /* PYLAYOUT_ABI_FIELDS_H */
