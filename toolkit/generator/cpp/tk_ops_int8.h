// int8 convolution kernels of the op library for AVX2 without AVX-512 (tk_ops_int8_avx2.cpp),
// called by tk_ops.cpp's conv2d_q8x4 and depthwise_q8 where the build has AVX2: the same
// arguments and the same results, bit for bit, as those functions' portable code.
#ifndef TK_OPS_INT8_H_
#define TK_OPS_INT8_H_

#include "tk_ops.h"

namespace tk {

#if defined(__AVX2__)
// conv2d_q8x4 (same filter layout and folded bias) with 16-bit multiply-adds: the input rows
// the stripe reads are first copied as int16 (x + 128), then tiles of 6 pixels x 8 output
// channels sum each quad of input channels with two VPMADDWD per pixel.
void conv2d_q8x4_avx2(const ConvGeom& g, const int8_t* x, int zp_in, const int8_t* w,
                      const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1);
// depthwise_q8 with channel multiplier 1: 16 channels at a time, the taps in pairs (the two
// taps' int16 values interleaved, one VPMADDWD per 8 channels), taps outside the image read
// as the zero point.
// wi and folded: the interleaved filter and the folded bias as depthwise_q8_pre takes them
// (null: prepared at each call).
void depthwise_q8_m1_avx2(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                          const int32_t* bias, const QuantOut& q, int8_t* y, int row0,
                          int row1, const int16_t* wi = nullptr,
                          const int32_t* folded = nullptr);

// The vector part of add_q8 / mul_q8 over one run of n outputs whose inputs are each
// contiguous (stride 1) or one repeated value (stride 0): writes the first outputs, 16 at a
// time, and returns how many (0 where a shift is out of the vector code's range); the
// caller's scalar code does the rest. The same values as the scalar code (mbqm_bf).
int64_t add_q8_run_avx2(const AddQ& q, int sign, const int8_t* a, int64_t sa, const int8_t* b,
                        int64_t sb, int8_t* y, int64_t n);
int64_t mul_q8_run_avx2(int zp_a, int zp_b, int32_t m, int s, int zp_out, int lo, int hi,
                        const int8_t* a, int64_t sa, const int8_t* b, int64_t sb, int8_t* y,
                        int64_t n);
// lut_q8's first outputs, 32 at a time (16 byte shuffles of the table's 16-value slices);
// returns how many.
size_t lut_q8_avx2(const int8_t* x, const int8_t* table, int8_t* y, size_t n);
// acc[i] += x[i] for i < n (mean_q8's sums over the kept innermost axis).
void add_row_q8_avx2(const int8_t* x, int64_t n, int32_t* acc);
#endif

}  // namespace tk

#endif  // TK_OPS_INT8_H_
