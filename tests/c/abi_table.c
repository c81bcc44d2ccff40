/* abi_table.c - the ABI table (abi_fields.h) of one set of DLPack
 * declarations, compiled twice by tests/c/meson.build: with ABI_OFFICIAL,
 * against the official header from the apache-tvm-ffi wheel (never copied
 * into this repository), as abi_official[]; without, against pylayout's own
 * declarations, as abi_ours[].  One source, so the two tables can only
 * differ by the header they saw. */
#ifdef ABI_OFFICIAL
#include <dlpack/dlpack.h>
#ifndef DLPACK_DLPACK_H_
#error "<dlpack/dlpack.h> is not the official DLPack header (no DLPACK_DLPACK_H_ guard)"
#endif
#ifdef PYLAYOUT_DLPACK_H
#error "the official table must not see pylayout's declarations"
#endif
#define ABI_NAME(suffix) abi_official##suffix
#else
#include <pylayout.h>
#ifndef PYLAYOUT_OWN_DLPACK_DECLARATIONS
#error "pylayout's table must see pylayout's own declarations (pylayout/dlpack.h), not another dlpack.h"
#endif
#define ABI_NAME(suffix) abi_ours##suffix
#endif

#include "abi_fields.h"

const abi_entry ABI_NAME()[] = {ABI_TABLE};
const size_t ABI_NAME(_len) = sizeof ABI_NAME() / sizeof ABI_NAME()[0];
const unsigned ABI_NAME(_version)[2] = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
