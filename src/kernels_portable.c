/*
 * kernels_portable.c - the "scalar" kernel table: plain C for any CPU, and
 * what PYLAYOUT_SIMD=scalar selects to test the fallbacks.  Only the tile
 * transposes and complex interleaves have entries; every other kernel is
 * NULL, so the copy engine runs its own portable loops (plan.c).
 */
#include "kernels.h"

/* Tile transposes: the same 2-D loop for every element size. */
#define PL_DEFINE_SCALAR_TILE(NAME, SIZE, MOVE2D)                                                        \
    static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)      \
    {                                                                                                    \
        MOVE2D(src, ssa, SIZE, dst, SIZE, dsb, na, nb);                                                  \
    }
PL_DEFINE_SCALAR_TILE(pl_tile1_scalar, 1, _pl_move2d_1)
PL_DEFINE_SCALAR_TILE(pl_tile2_scalar, 2, _pl_move2d_2)
PL_DEFINE_SCALAR_TILE(pl_tile4_scalar, 4, _pl_move2d_4)
PL_DEFINE_SCALAR_TILE(pl_tile8_scalar, 8, _pl_move2d_8)
PL_DEFINE_SCALAR_TILE(pl_tile16_scalar, 16, _pl_move2d_16)

const _pylayout_kernels _pylayout_kernels_scalar = {
    .name = "scalar",
    .tile = {
        [PL_SIZE1] = pl_tile1_scalar,
        [PL_SIZE2] = pl_tile2_scalar,
        [PL_SIZE4] = pl_tile4_scalar,
        [PL_SIZE8] = pl_tile8_scalar,
        [PL_SIZE16] = pl_tile16_scalar,
    },
    .pack = {[PL_SIZE2] = _pl_pack_2, [PL_SIZE4] = _pl_pack_4, [PL_SIZE8] = _pl_pack_8},
    .unpack = {[PL_SIZE2] = _pl_unpack_2, [PL_SIZE4] = _pl_unpack_4, [PL_SIZE8] = _pl_unpack_8},
};
