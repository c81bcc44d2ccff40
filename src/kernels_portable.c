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

/* Blocks permuted element by element: each move one fixed-size memcpy,
 * which the compiler makes a load and a store.  Blocks of fewer than
 * PL_BP_MAX_MOVES elements: the tiles won at 64 and more.  On the 2-core
 * Zen 5 dev VM, 1 thread, (N,m,n) from (N,n,m) (a C driver), GB/s, tiles
 * / moves, 256 KiB and 64 MiB: SSE2 float64 6 x 6 15.6 / 32.3 and 10.3 /
 * 17.5, 5 x 5 10.7 / 31.8 and 6.6 / 16.5, float32 3 x 3 2.2 / 18.4 and
 * 1.8 / 13.5, uint8 3 x 3 0.6 / 4.8 and 0.4 / 4.1; but float64 8 x 8
 * 26.1 / 31.7 and 21.3 / 14.9, float32 16 x 16 37.0 / 14.8 and 13.3 /
 * 11.7.  AVX-512, float64 6 x 6 13.3 / 26.3 and 9.1 / 19.4, 7 x 7 17.8 /
 * 31.3 and 11.1 / 15.9. */
#define PL_BP_MAX_MOVES 64
#define PL_DEFINE_BP_MOVES(NAME, E)                                                                     \
    static void NAME(const char *src, char *dst, int64_t n, const _pylayout_block_perm *t)               \
    {                                                                                                   \
        const int64_t S = t->S, m = S / (E);                                                            \
        for (int64_t b = 0; b < n; b++, src += S, dst += S)                                             \
            for (int64_t j = 0; j < m; j++)                                                             \
                memcpy(dst + j * (E), src + (int64_t)t->ctl[j] * (E), E);                               \
    }
PL_DEFINE_BP_MOVES(pl_bp_moves1, 1)
PL_DEFINE_BP_MOVES(pl_bp_moves2, 2)
PL_DEFINE_BP_MOVES(pl_bp_moves4, 4)
PL_DEFINE_BP_MOVES(pl_bp_moves8, 8)
PL_DEFINE_BP_MOVES(pl_bp_moves16, 16)

bool _pylayout_block_perm_moves(_pylayout_block_perm *t, int64_t S, int64_t e, const uint8_t *eperm)
{
    static void (*const runs[PL_NSIZES])(const char *, char *, int64_t, const _pylayout_block_perm *) = {
        pl_bp_moves1, pl_bp_moves2, pl_bp_moves4, pl_bp_moves8, pl_bp_moves16};
    const int lg = _pl_size_index((size_t)e);
    if (lg < 0 || S < 2 * e || S > PL_BP_MAX_BYTES || S / e >= PL_BP_MAX_MOVES || S % e != 0)
        return false;
    t->S = t->T = S;
    t->nvec = 0;
    memcpy(t->ctl, eperm, (size_t)(S / e));
    t->run = runs[lg];
    return true;
}

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
    .block_perm = _pylayout_block_perm_moves,
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
