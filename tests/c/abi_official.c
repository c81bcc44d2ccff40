/* abi_official.c - the ABI table of the official DLPack header, from the
 * apache-tvm-ffi wheel (never copied into this repository). */
#include <dlpack/dlpack.h>

#ifndef DLPACK_DLPACK_H_
#error "<dlpack/dlpack.h> is not the official DLPack header (no DLPACK_DLPACK_H_ guard)"
#endif
#ifdef PYLAYOUT_DLPACK_H
#error "abi_official.c must not see pylayout's declarations"
#endif

#include "abi_fields.h"

const abi_entry abi_official[] = {ABI_TABLE};
const size_t abi_official_len = sizeof abi_official / sizeof abi_official[0];
const unsigned abi_official_version[2] = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
