/*
 * kernels_portable.c - the "scalar" kernel table: plain C for any CPU, and
 * what PYLAYOUT_SIMD=scalar selects to test the fallbacks.  Only the tile
 * transposes, complex interleaves and thin transposes have entries; every
 * other kernel is NULL, so the copy engine runs its own portable loops
 * (plan.c).  The thin transposes are also every SIMD table's fallback.
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
    .thin = &_pylayout_thin_portable,
};

/* Thin transposes (see _pylayout_zip_fn): one loop per plane count P and
 * element size, every move a fixed-size memcpy (one load, one store). */
#define PL_DEFINE_THIN_PORTABLE(P, SIZE)                                                                 \
    static void pl_zip##P##_##SIZE(const char *planes, int64_t plane_stride, char *packed, int64_t n)   \
    {                                                                                                    \
        for (int64_t k = 0; k < n; k++)                                                                  \
            for (int p = 0; p < (P); p++)                                                                \
                memcpy(packed + (k * (P) + p) * (SIZE), planes + p * plane_stride + k * (SIZE), SIZE);   \
    }                                                                                                    \
    static void pl_unzip##P##_##SIZE(const char *packed, char *planes, int64_t plane_stride, int64_t n) \
    {                                                                                                    \
        for (int64_t k = 0; k < n; k++)                                                                  \
            for (int p = 0; p < (P); p++)                                                                \
                memcpy(planes + p * plane_stride + k * (SIZE), packed + (k * (P) + p) * (SIZE), SIZE);   \
    }
#define PL_DEFINE_THIN_PORTABLE_SIZES(P)                                                                 \
    PL_DEFINE_THIN_PORTABLE(P, 1)                                                                        \
    PL_DEFINE_THIN_PORTABLE(P, 2)                                                                        \
    PL_DEFINE_THIN_PORTABLE(P, 4)                                                                        \
    PL_DEFINE_THIN_PORTABLE(P, 8)                                                                        \
    PL_DEFINE_THIN_PORTABLE(P, 16)
PL_DEFINE_THIN_PORTABLE_SIZES(2)
PL_DEFINE_THIN_PORTABLE_SIZES(3)
PL_DEFINE_THIN_PORTABLE_SIZES(4)
PL_DEFINE_THIN_PORTABLE_SIZES(5)
PL_DEFINE_THIN_PORTABLE_SIZES(6)
PL_DEFINE_THIN_PORTABLE_SIZES(7)
PL_DEFINE_THIN_PORTABLE_SIZES(8)

#define PL_THIN_ROW(F, P) {F##P##_1, F##P##_2, F##P##_4, F##P##_8, F##P##_16}
#define PL_THIN_ROWS(F)                                                                                  \
    {PL_THIN_ROW(F, 2), PL_THIN_ROW(F, 3), PL_THIN_ROW(F, 4), PL_THIN_ROW(F, 5), PL_THIN_ROW(F, 6),      \
     PL_THIN_ROW(F, 7), PL_THIN_ROW(F, 8)}
const _pylayout_thin_kernels _pylayout_thin_portable = {.zip = PL_THIN_ROWS(pl_zip), .unzip = PL_THIN_ROWS(pl_unzip)};
