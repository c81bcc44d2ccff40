/*
 * tile_bytes_x86.h - the AVX-512 1-byte streaming transpose
 * (tile_bytes_x86.c), which copy_x86.c's pl_stile1_avx512 calls for the
 * rows of a tile that fill whole 256-row bands.  Not installed.
 */
#ifndef PYLAYOUT_TILE_BYTES_X86_H
#define PYLAYOUT_TILE_BYTES_X86_H

#include "kernels.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)
/* Src rows a band holds: each dst row gets this many contiguous bytes. */
#define PL_BYTE_BAND 256

/* The 1-byte tile transpose (see _pylayout_tile_fn) of the first
 * nbands * PL_BYTE_BAND rows (i) and all nb columns (j):
 *     dst[j * dsb + i] = src[i * ssa + j]
 * with streaming stores: dst and dsb must be 64-byte aligned.  Needs
 * AVX-512 F + BW.  The caller fences (see _pylayout_kernels.fence). */
void _pylayout_stile1_bands_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t nbands,
                                   int64_t nb);
/* The same with cached stores, for dst rows anywhere (not a whole number
 * of lines apart): each dst row still gets 256 contiguous bytes a band. */
void _pylayout_tile1_bands_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t nbands,
                                  int64_t nb);
/* The transpose into planes of bytes (see _pylayout_tile_split_fn) in
 * blocks of 64 x 64 through a 4 KiB L1 buffer, cached stores; a tile
 * thinner than a block goes to narrow.  Needs AVX-512 F + BW. */
void _pylayout_split1_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t dsq, int P, int64_t na,
                             int64_t nc, _pylayout_tile_split_fn narrow);
#endif

#endif /* PYLAYOUT_TILE_BYTES_X86_H */
