/* status.c - status strings and the per-thread error detail. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[512];

const char *pylayout_strerror(pylayout_status status)
{
    switch (status) {
    case PYLAYOUT_OK: return "success";
    case PYLAYOUT_ERR_INVALID_ARGUMENT: return "invalid argument";
    case PYLAYOUT_ERR_NO_MEMORY: return "out of memory";
    case PYLAYOUT_ERR_INVALID_TENSOR: return "malformed tensor";
    case PYLAYOUT_ERR_UNSUPPORTED_DTYPE: return "unsupported dtype";
    case PYLAYOUT_ERR_UNSUPPORTED_DEVICE: return "unsupported device";
    case PYLAYOUT_ERR_UNSUPPORTED_VERSION: return "unsupported DLPack version";
    case PYLAYOUT_ERR_READ_ONLY: return "tensor is read-only";
    case PYLAYOUT_ERR_SHAPE_MISMATCH: return "shape or element size mismatch";
    case PYLAYOUT_ERR_OVERLAP: return "destination overlaps";
    case PYLAYOUT_ERR_FORMAT_RANK: return "format does not fit the tensor's rank";
    case PYLAYOUT_ERR_NOT_VIEWABLE: return "no zero-copy view is possible";
    case PYLAYOUT_ERR_OUT_OF_BOUNDS: return "view reaches outside its base tensor";
    case PYLAYOUT_ERR_DTYPE_MISMATCH: return "dtype mismatch";
    }
    return "unknown status";
}

const char *pylayout_last_error(void)
{
    return last_error;
}

pylayout_status _pylayout_fail(pylayout_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

void _pylayout_clear_error(void)
{
    last_error[0] = '\0';
}

pylayout_status pylayout_version(unsigned *number_ret, const char **string_ret)
{
    if (number_ret)
        *number_ret = PYLAYOUT_VERSION_NUMBER;
    if (string_ret)
        *string_ret = PYLAYOUT_VERSION_STRING;
    return PYLAYOUT_OK;
}
