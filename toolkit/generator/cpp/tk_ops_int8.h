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
void depthwise_q8_m1_avx2(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                          const int32_t* bias, const QuantOut& q, int8_t* y, int row0,
                          int row1);
#endif

}  // namespace tk

#endif  // TK_OPS_INT8_H_
