/* abi_ours.c - the ABI table of pylayout's own DLPack declarations. */
#include <pylayout.h>

#ifndef PYLAYOUT_OWN_DLPACK_DECLARATIONS
#error "abi_ours.c must see pylayout's own declarations (pylayout/dlpack.h), not another dlpack.h"
#endif

#include "abi_fields.h"

const abi_entry abi_ours[] = {ABI_TABLE};
const size_t abi_ours_len = sizeof abi_ours / sizeof abi_ours[0];
const unsigned abi_ours_version[2] = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
