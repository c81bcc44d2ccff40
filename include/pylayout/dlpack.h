/*
 * pylayout/dlpack.h - the DLPack 1.x ABI, declared by pylayout from the DLPack
 * specification (https://dmlc.github.io/dlpack/latest/).
 *
 * pylayout does not ship the official dlpack.h.  This file declares the same
 * types with the same names, sizes and field offsets; tests/c/check_abi.c
 * compares every size and offset against the official 1.x header.
 *
 * If the official <dlpack/dlpack.h> is included *before* <pylayout.h>, its
 * declarations are used and this file declares nothing.
 */
#ifndef PYLAYOUT_DLPACK_H
#define PYLAYOUT_DLPACK_H

#include <stddef.h>
#include <stdint.h>

#ifndef DLPACK_MAJOR_VERSION
#define PYLAYOUT_OWN_DLPACK_DECLARATIONS 1

/* The DLPack version these declarations follow. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3

/* Bits of DLManagedTensorVersioned.flags. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* Where a tensor's memory lives.  Stored as a 32-bit int in DLDevice. */
typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
    kDLTrn = 18
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

/* The kind of number in each element (DLDataType.code). */
typedef enum {
    kDLInt = 0U,
    kDLUInt = 1U,
    kDLFloat = 2U,
    kDLOpaqueHandle = 3U,
    kDLBfloat = 4U,
    kDLComplex = 5U,
    kDLBool = 6U,
    kDLFloat8_e3m4 = 7U,
    kDLFloat8_e4m3 = 8U,
    kDLFloat8_e4m3b11fnuz = 9U,
    kDLFloat8_e4m3fn = 10U,
    kDLFloat8_e4m3fnuz = 11U,
    kDLFloat8_e5m2 = 12U,
    kDLFloat8_e5m2fnuz = 13U,
    kDLFloat8_e8m0fnu = 14U,
    kDLFloat6_e2m3fn = 15U,
    kDLFloat6_e3m2fn = 16U,
    kDLFloat4_e2m1fn = 17U
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* a DLDataTypeCode */
    uint8_t bits;   /* bits per lane, e.g. 32 for float32, 64 for complex64 */
    uint16_t lanes; /* vector lanes; 1 for ordinary tensors */
} DLDataType;

/*
 * A strided view of memory.  Element (i0, i1, ...) lives at
 *   (char *)data + byte_offset + sum(ik * strides[k]) * (bits * lanes / 8).
 * strides are in elements.  NULL strides (DLPack < 1.2) mean compact row-major.
 */
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;

/* Legacy (unversioned) owner of a DLTensor. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* Versioned owner of a DLTensor: the current exchange structure. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* ---- DLPack 1.3 C exchange API (type(x).__dlpack_c_exchange_api__) ---- */

typedef int (*DLPackManagedTensorAllocator)(
    DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
    void (*SetError)(void *error_ctx, const char *kind, const char *message));
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(
    void *py_object, DLManagedTensorVersioned **out);
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);
typedef int (*DLPackCurrentWorkStream)(
    DLDeviceType device_type, int32_t device_id, void **out_current_stream);
typedef int (*DLPackManagedTensorToPyObjectNoSync)(
    DLManagedTensorVersioned *tensor, void **out_py_object);

typedef struct DLPackExchangeAPIHeader {
    DLPackVersion version;
    struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

typedef struct DLPackExchangeAPI {
    DLPackExchangeAPIHeader header;
    DLPackManagedTensorAllocator managed_tensor_allocator;
    DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
    DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
    DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
    DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#ifdef __cplusplus
}
#endif

/* The layout this file promises, checked wherever it is compiled (x86-64 / LP64). */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(DLDevice) == 8, "DLDevice is 8 bytes");
_Static_assert(sizeof(DLDataType) == 4, "DLDataType is 4 bytes");
_Static_assert(sizeof(DLTensor) == 48, "DLTensor is 48 bytes");
_Static_assert(offsetof(DLTensor, device) == 8, "DLTensor.device at 8");
_Static_assert(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim at 16");
_Static_assert(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype at 20");
_Static_assert(offsetof(DLTensor, shape) == 24, "DLTensor.shape at 24");
_Static_assert(offsetof(DLTensor, strides) == 32, "DLTensor.strides at 32");
_Static_assert(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset at 40");
_Static_assert(sizeof(DLManagedTensor) == 64, "DLManagedTensor is 64 bytes");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned is 80 bytes");
_Static_assert(offsetof(DLManagedTensorVersioned, flags) == 24, "flags at 24");
_Static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "dl_tensor at 32");
#endif

#endif /* DLPACK_MAJOR_VERSION */
#endif /* PYLAYOUT_DLPACK_H */
