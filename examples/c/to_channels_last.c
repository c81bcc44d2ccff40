/*
 * to_channels_last.c - convert an NCHW float32 tensor to channels_last (NHWC
 * in memory) with pylayout.
 *
 * Build against an installed pylayout:
 *     cc to_channels_last.c $(pkg-config --cflags --libs pylayout) -o to_channels_last
 */
#include <stdio.h>
#include <stdlib.h>

#include <pylayout.h>

#define N 2
#define C 3
#define H 4
#define W 5

/* Prints what failed and returns 1 if `st` is an error. */
static int failed(pylayout_status st, const char *what)
{
    if (st == PYLAYOUT_OK)
        return 0;
    fprintf(stderr, "%s: %s (%s)\n", what, pylayout_strerror(st), pylayout_last_error());
    return 1;
}

int main(void)
{
    int rc = EXIT_FAILURE;
    pylayout_tensor *src = NULL, *dst = NULL;

    /* An NCHW tensor over our own buffer; element (n, c, h, w) holds nchw. */
    float *buf = malloc(sizeof(float) * N * C * H * W);
    if (!buf) {
        fprintf(stderr, "out of memory\n");
        return EXIT_FAILURE;
    }
    for (int i = 0; i < N * C * H * W; i++)
        buf[i] = (float)i;
    int64_t shape[4] = {N, C, H, W};
    int64_t strides[4] = {C * H * W, H * W, W, 1};
    DLTensor nchw = {
        .data = buf,
        .device = {kDLCPU, 0},
        .ndim = 4,
        .dtype = {kDLFloat, 32, 1},
        .shape = shape,
        .strides = strides,
        .byte_offset = 0,
    };

    /* Borrow: pylayout does not own buf, which must outlive `src`. */
    if (failed(pylayout_tensor_borrow(&nchw, 0, &src), "pylayout_tensor_borrow"))
        goto done;
    const DLTensor *in = NULL;
    if (failed(pylayout_tensor_dltensor(src, &in), "pylayout_tensor_dltensor"))
        goto done;

    bool already = true;
    if (failed(pylayout_is_contiguous(in, PYLAYOUT_FORMAT_CHANNELS_LAST, &already), "pylayout_is_contiguous"))
        goto done;
    if (already) {
        fprintf(stderr, "an NCHW tensor should not already be channels_last\n");
        goto done;
    }

    if (failed(pylayout_convert(in, PYLAYOUT_FORMAT_CHANNELS_LAST, &dst), "pylayout_convert"))
        goto done;
    const DLTensor *out = NULL;
    if (failed(pylayout_tensor_dltensor(dst, &out), "pylayout_tensor_dltensor"))
        goto done;

    printf("NCHW strides:          (%lld, %lld, %lld, %lld)\n", (long long)in->strides[0],
           (long long)in->strides[1], (long long)in->strides[2], (long long)in->strides[3]);
    printf("channels_last strides: (%lld, %lld, %lld, %lld)\n", (long long)out->strides[0],
           (long long)out->strides[1], (long long)out->strides[2], (long long)out->strides[3]);

    /* channels_last strides are (C*H*W, 1, W*C, C): channels are innermost. */
    if (out->strides[0] != C * H * W || out->strides[1] != 1 || out->strides[2] != W * C || out->strides[3] != C) {
        fprintf(stderr, "unexpected channels_last strides\n");
        goto done;
    }
    bool is_cl = false;
    if (failed(pylayout_is_contiguous(out, PYLAYOUT_FORMAT_CHANNELS_LAST, &is_cl), "pylayout_is_contiguous"))
        goto done;
    if (!is_cl) {
        fprintf(stderr, "the result is not channels_last\n");
        goto done;
    }

    /* The same logical elements, now stored NHWC. */
    static const int probes[][4] = {{0, 0, 0, 0}, {0, 1, 0, 0}, {0, 2, 3, 4}, {1, 0, 2, 1}, {1, 2, 3, 4}};
    const float *data = (const float *)((const char *)out->data + out->byte_offset);
    for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
        const int *i = probes[p];
        float got = data[i[0] * out->strides[0] + i[1] * out->strides[1] + i[2] * out->strides[2] +
                         i[3] * out->strides[3]];
        float want = buf[((i[0] * C + i[1]) * H + i[2]) * W + i[3]];
        if (got != want) {
            fprintf(stderr, "element (%d, %d, %d, %d): got %g, want %g\n", i[0], i[1], i[2], i[3], (double)got,
                    (double)want);
            goto done;
        }
    }
    /* Memory order: channel values of pixel (0, 0, 0) sit next to each other. */
    if (data[0] != 0.0f || data[1] != (float)(H * W) || data[2] != (float)(2 * H * W)) {
        fprintf(stderr, "memory is not NHWC\n");
        goto done;
    }
    printf("ok: %d elements converted to channels_last\n", N * C * H * W);
    rc = EXIT_SUCCESS;

done:
    pylayout_tensor_release(dst);
    pylayout_tensor_release(src);
    free(buf);
    return rc;
}
