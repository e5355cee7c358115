// Operator library of the toolkit's C++ artifacts (plain C++17, standard library only).
//
// Every function works on raw pointers to tensors whose shapes were fixed when the
// artifact was generated. Float kernels compute in float32; quantized (int8) kernels follow
// TFLite's integer arithmetic: QuantizeMultiplier's (multiplier, shift) pairs are prepared by
// the generator, and the kernels apply MultiplyByQuantizedMultiplier with gemmlowp's
// SaturatingRoundingDoublingHighMul and RoundingDivideByPOT, or its "upward" variant (the
// final shift's ties rounded toward +inf) where LiteRT's optimized kernels round so.
//
// Windowed kernels (convolution, pooling) compute output rows [row0, row1) of NHWC axis 1,
// so that one call computes one stripe of a compiled model's command queue.
#ifndef TK_OPS_H_
#define TK_OPS_H_

#include <cstddef>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tk {

#if defined(__AVX2__)
// ---------------------------------------------------------------- partial vectors
// The first n lanes set (n clamped to 0..8): the mask of a vector's first n floats.
inline __m256i lanes8(int n) {
  static const int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  n = n < 0 ? 0 : (n > 8 ? 8 : n);
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n));
}

// The first n (0 to 8) floats of v stored at p, in pieces of 4, 2 and 1 values: a masked
// store (VMASKMOVPS) costs several times a whole-vector store on some processors (about 20
// cycles on AMD Zen 3), which the tails of every kernel would pay.
inline void store_first8(float* p, __m256 v, int n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  __m128 part = _mm256_castps256_ps128(v);
  if (n & 4) {
    _mm_storeu_ps(p, part);
    part = _mm256_extractf128_ps(v, 1);
    p += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), part);
    part = _mm_movehl_ps(part, part);
    p += 2;
  }
  if (n & 1) _mm_store_ss(p, part);
}

// _mm256_maskstore_ps(p, m, v) for a mask m of the first lanes (lanes8's), without the
// masked store.
inline void store_prefix8(float* p, __m256i m, __m256 v) {
  store_first8(p, v, __builtin_popcount(_mm256_movemask_ps(_mm256_castsi256_ps(m))));
}
#endif

// ---------------------------------------------------------------- fixed point
inline int64_t srdhm(int64_t a, int64_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  // gemmlowp's nudge and truncation equal floor((a b + 2**30) / 2**31)
  int64_t p = a * b + (int64_t(1) << 30);
  return p >> 31;  // arithmetic shift: floor
}

inline int64_t rounding_divide_by_pot(int64_t x, int exponent) {
  const int64_t mask = (int64_t(1) << exponent) - 1;
  const int64_t remainder = x & mask;
  const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

inline int64_t shift_left_wrap(int64_t x, int shift) {
  if (shift <= 0) return x;
  uint32_t v = static_cast<uint32_t>(static_cast<uint64_t>(x) << shift);
  return static_cast<int32_t>(v);
}

// TFLite MultiplyByQuantizedMultiplier: ties of the final shift away from zero.
inline int64_t mbqm(int64_t x, int32_t multiplier, int shift) {
  const int right = shift > 0 ? 0 : -shift;
  return rounding_divide_by_pot(srdhm(shift_left_wrap(x, shift), multiplier), right);
}

// The same with the final shift's ties rounded upward (ruy / NEON vrshl).
inline int64_t mbqm_up(int64_t x, int32_t multiplier, int shift) {
  const int right = shift > 0 ? 0 : -shift;
  int64_t v = srdhm(shift_left_wrap(x, shift), multiplier);
  if (right > 0) v += int64_t(1) << (right - 1);
  return v >> right;
}

// ---------------------------------------------------------------- activations
enum Act : int { ACT_NONE = 0, ACT_RELU = 1, ACT_RELU_N1_TO_1 = 2, ACT_RELU6 = 3, ACT_TANH = 4 };

void activate_f32(float* y, size_t n, int act);

// ---------------------------------------------------------------- convolution
struct ConvGeom {
  int n, h, w, c;        // input
  int kh, kw;            // filter taps
  int oh, ow, o;         // output
  int sh, sw, dh, dw;    // strides, dilations
  int pt, pl;            // padding before (top, left)
  int mult;              // depthwise channel multiplier (1 for convolution)
};

// CONV_2D float on a filter packed for the GEMM microkernels: panels of `nr` (16 or 32)
// output channels, [ceil(O / nr)][KH][KW][C][nr], zeros after the last channel. Each output
// is the sum over taps and input channels in that order (fused multiply-adds), then the bias
// and the activation (NaN stays NaN through the clamps).
void conv2d_f32_packed(const ConvGeom& g, const float* x, const float* wp, int nr,
                       const float* bias, int act, float* y, int row0, int row1);
// The same, every output row, of the output channels of panels [pan0, pan1) (a split of
// the work across threads by channels, each thread reading only its panels).
void conv2d_f32_panels(const ConvGeom& g, const float* x, const float* wp, int nr,
                       const float* bias, int act, float* y, int pan0, int pan1);
// CONV_2D float with few output channels (the GEMM's channel panels would be mostly empty):
// each output pixel's taps gathered once ([KH][KW][C], zeros outside the image, then zeros
// up to K' = KH*KW*C rounded up to 8) and dotted with each channel's filter, packed as
// [O][K'], in eight interleaved partial sums; then the bias and the activation.
void conv2d_f32_few(const ConvGeom& g, const float* x, const float* w, const float* bias,
                    int act, float* y, int row0, int row1);
// CONV_2D float read in place (no im2col buffer), for convolutions with few input channels:
// filter packed as [KH][KW][C][O8], O8 = O rounded up to 8 (zeros after the last channel).
// Each output starts at its bias and adds its in-image taps in (ky, kx, ci) order (fused
// multiply-adds), then the activation (NaN stays NaN through the clamps).
void conv2d_f32_direct(const ConvGeom& g, const float* x, const float* w, const float* bias,
                       int act, float* y, int row0, int row1);
// FULLY_CONNECTED float on weights packed as conv2d_f32_packed's ([ceil(O / nr)][K][nr]).
void fully_connected_f32_packed(const float* x, const float* wp, int nr, const float* bias,
                                int batch, int k, int o, int act, float* y);
// CONV_2D float 1x1, stride 1, no padding (a GEMM of the [pixels][C] input, read in place,
// with the filter) on a filter packed as conv2d_f32_packed's in panels of `nr` output
// channels: 8 or 16 (tk_ops_f32_gemm.cpp's register tiles; other widths go to
// conv2d_f32_packed). The same sums (fused multiply-adds in input channel order from zero,
// then the bias and the activation), output rows [row0, row1).
void conv2d_f32_pointwise(const ConvGeom& g, const float* x, const float* wp, int nr,
                          const float* bias, int act, float* y, int row0, int row1);
// DEPTHWISE_CONV_2D float: filter as [KH][KW][C*M] (vector kernels with AVX-512; with AVX2
// see depthwise_f32_pre).
void depthwise_f32(const ConvGeom& g, const float* x, const float* w, const float* bias,
                   int act, float* y, int row0, int row1);
// The same with the filter and bias also packed for the AVX2 kernel (channel multiplier 1):
// [ceil(C / 8)][1 + KH*KW][8], per group of 8 channels the bias then the taps in (ky, kx)
// order, zeros after the last channel. Builds with AVX2 and FMA (without AVX-512) read
// `packed`; the others read w and bias as depthwise_f32.
void depthwise_f32_pre(const ConvGeom& g, const float* x, const float* w, const float* bias,
                       const float* packed, int act, float* y, int row0, int row1);

struct QuantOut {
  const int32_t* mult;   // per output channel (or one value, see per_channel)
  const int32_t* shift;
  int per_channel;
  int zp_out;
  int lo, hi;            // clamp range (activation)
  int upward_channels;   // channels [0, upward_channels) round ties upward
};

// CONV_2D int8: filter (w - zp_w) as int16 pairs of input channels [KH][KW][C/2][O][2]
// (C rounded up to even, zeros after the last channel), bias int32 [O] or null.
void conv2d_q8(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
               const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1);
// CONV_2D int8 as sums of unsigned-by-signed byte products (x + 128) (w - zp_w): filter in
// quads of input channels [KH][KW][C/4][O'][4] (C rounded up to a multiple of 4, O' = O
// rounded up to a multiple of 16, zeros after the last ones); `bias` must already hold
// bias - (128 + zp_in) * (sum of the channel's filter), so that the result equals conv2d_q8's.
void conv2d_q8x4(const ConvGeom& g, const int8_t* x, int zp_in, const int8_t* w,
                 const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1);
void depthwise_q8(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                  const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1);
// depthwise_q8 (channel multiplier 1) with the AVX2 kernel's filter and bias prepared by the
// generator: wi int16 [ceil(C / 16)][ceil(taps / 2)][32] (per block of 16 channels and pair
// of taps a, b: a, b of channels 0-3, 8-11, then 4-7, 12-15, interleaved), folded int32
// [16 ceil(C / 16)] = bias - zp_in (sum of the channel's filter), wrapped (zeros past C).
// Builds without AVX2 (or with AVX-512) read w and bias as depthwise_q8.
void depthwise_q8_pre(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                      const int32_t* bias, const int16_t* wi, const int32_t* folded,
                      const QuantOut& q, int8_t* y, int row0, int row1);

// TRANSPOSE_CONV: input [N][H][W][C], filter [O][KH][KW][C], output [N][OH][OW][O] cropped
// `pt` rows and `pl` columns into the full strided scatter. Each output sums, tap by tap in
// row-major order, the dot products of the input pixels that land on it, then adds the bias.
struct TConvGeom {
  int n, h, w, c, kh, kw, o, sh, sw, oh, ow, pt, pl;
};
// Float TRANSPOSE_CONV through the pointwise GEMM (conv2d_f32_pointwise's): the filter
// packed for each filter row ky as a [C, KW*O] matrix in panels of nr, the slabs one after
// the other; bias (O values, or null) and activation. When the taps tile the output (strides
// equal to the filter, no padding) each input row and ky write one output row in place;
// otherwise blocks of input rows give their products, each then added to the output pixel
// its tap lands on (outputs start at the bias, the activation last).
void transpose_conv_f32_gemm(const TConvGeom& g, const float* x, const float* wp, int nr,
                             const float* bias, int act, float* y);
// int8: filter (w - zp_w) as int16, bias int32 or null.
void transpose_conv_q8(const TConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                       const int32_t* bias, const QuantOut& q, int8_t* y);

// RESIZE_BILINEAR of NHWC: output row oy reads input rows y0[oy], y1[oy] with weight dy[oy]
// (float) or fy[oy] / 1024 (int8, TFLite's ResizeBilinearInteger), columns likewise.
struct ResizeGeom {
  int n, h, w, c, oh, ow;
  const int32_t *y0, *y1, *x0, *x1;
};
void resize_bilinear_f32(const ResizeGeom& g, const float* dy, const float* dx, const float* x,
                         float* y);
void resize_bilinear_q8(const ResizeGeom& g, const int32_t* fy, const int32_t* fx,
                        const int8_t* x, int8_t* y);

// CONV_3D float: input [N][D][H][W][C], filter [KD][KH][KW][C][O], output
// [N][OD][OH][OW][O]; each output sums its taps' dot products in row-major tap order, then
// adds the bias.
struct Conv3Geom {
  int n, d, h, w, c, kd, kh, kw, o, od, oh, ow;
  int sd, sh, sw, dd, dh, dw, pd, pt, pl;
};
void conv3d_f32(const Conv3Geom& g, const float* x, const float* w, const float* bias, int act,
                float* y);

// UNIDIRECTIONAL_SEQUENCE_LSTM float (no projection, no layer norm): x [B][T][I] (or
// [T][B][I] when time_major), gates in the order (i,) f, c, o (`gates` 4, or 3 for CIFG):
// w_in [I][gates * U], w_rec [U][gates * U], bias [gates * U], peepholes (i,) f, o [U] or
// null, initial states h0 [B][U] and c0 [B][U] or null (zeros); y like x with U features.
struct LstmGeom {
  int steps, batch, in, units, gates, time_major, act;
  float cell_clip;
};
void lstm_f32(const LstmGeom& g, const float* x, const float* w_in, const float* w_rec,
              const float* bias, const float* peep_i, const float* peep_f, const float* peep_o,
              const float* h0, const float* c0, float* y);

// ---------------------------------------------------------------- matmul
void fully_connected_q8(const int8_t* x, int zp_in, const int16_t* w, const int32_t* bias,
                        int batch, int k, int o, const QuantOut& q, int8_t* y);

struct MatmulGeom {
  int batches, m, n, k;
  const int32_t* a_off;  // per batch: offset of the lhs matrix (elements)
  const int32_t* b_off;
  int a_rs, a_cs, b_rs, b_cs;  // element strides of rows / columns
};
void batch_matmul_f32(const MatmulGeom& g, const float* a, const float* b, float* y);
void batch_matmul_q8(const MatmulGeom& g, const int8_t* a, int zp_a, const int8_t* b, int zp_b,
                     int32_t mult, int shift, int zp_out, int lo, int hi, int8_t* y);

// ---------------------------------------------------------------- element-wise
enum BinOp : int {
  B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_SQDIFF, B_MIN, B_MAX, B_PRELU, B_FLOOR_MOD, B_FLOOR_DIV
};

// Output of up to 6 dims (leading dims 1), inputs with element strides per output dim
// (0 where broadcast). Rows [row0, row1) of output dim `row_dim` (or all when row_dim < 0).
struct Bcast {
  int64_t shape[6];
  int64_t sa[6];
  int64_t sb[6];
  int row_dim;
};
// A residual ADD on rows [row0, row1) of y [N][H][W][C] in place: y[.., c0 + i] += r[.., i]
// for the rc channels of r [N][H][W][rc] (the others add the zeros of a channel PAD), then
// the fused activation `act` on every channel, as binary_f32's ADD computes it.
void add_rows_f32(const float* r, int64_t rc, int64_t c0, float* y, int64_t c, int64_t n,
                  int64_t h, int64_t w, int act, int row0, int row1);
void binary_f32(const Bcast& g, int op, const float* a, const float* b, int act, float* y,
                int row0, int row1);

struct AddQ {
  int zp_a, zp_b, zp_out;
  int32_t m_a, m_b, m_out;
  int s_a, s_b, s_out;
  int left_shift;
  int lo, hi;
};
void add_q8(const Bcast& g, const AddQ& q, int sign, const int8_t* a, const int8_t* b,
            int8_t* y, int row0, int row1);
void mul_q8(const Bcast& g, int zp_a, int zp_b, int32_t m, int s, int zp_out, int lo, int hi,
            const int8_t* a, const int8_t* b, int8_t* y, int row0, int row1);
// The same as tables over every pair of int8 values (256 x 256, index (a + 128) * 256 +
// b + 128), filled once, and a broadcast lookup through such a table.
void add_table_q8(const AddQ& q, int sign, int8_t* table);
void mul_table_q8(int zp_a, int zp_b, int32_t m, int s, int zp_out, int lo, int hi,
                  int8_t* table);
// MUL of an int8 x and gate[x + 128] (a table of x, as LOGISTIC's) over the 256 values of x,
// x the first operand if x_first: the product as a table of x (applied with lut_q8).
void mul_gate_table_q8(const int8_t* gate, int x_first, int zp_a, int zp_b, int32_t m, int s,
                       int zp_out, int lo, int hi, int8_t* table);
// MINIMUM (is_max 0) / MAXIMUM (1) of int8 stored values (inputs and output share their
// quantization, as LiteRT assumes).
void minmax_q8(const Bcast& g, int is_max, const int8_t* a, const int8_t* b, int8_t* y,
               int row0, int row1);
void lookup2_q8(const Bcast& g, const int8_t* table, const int8_t* a, const int8_t* b,
                int8_t* y, int row0, int row1);

enum UnOp : int { U_RELU, U_RELU6, U_RELU_N1_TO_1, U_RELU_0_TO_1, U_TANH, U_LOGISTIC,
                  U_RSQRT, U_SQRT, U_EXP, U_NEG, U_ABS, U_LOG, U_GELU, U_GELU_TANH,
                  U_HARD_SWISH, U_ELU, U_SQUARE, U_FLOOR, U_CEIL, U_ROUND, U_SIN, U_COS };
void unary_f32(int op, const float* x, float* y, size_t n);
// RELU family on int8: clamp(mbqm(q - zp_in) + zp_out, lo, hi).
void relu_q8(const int8_t* x, int zp_in, int32_t m, int s, int zp_out, int lo, int hi,
             int8_t* y, size_t n);
// A table over the 256 input values (LUT ops).
void lut_q8(const int8_t* x, const int8_t* table, int8_t* y, size_t n);
// relu_q8's values as such a table (filled once, then applied with lut_q8).
void relu_table_q8(int zp_in, int32_t m, int s, int zp_out, int lo, int hi, int8_t* table);
// LEAKY_RELU: float x > 0 ? x : alpha x; int8 TFLite's QuantizeLeakyRelu as a table over the
// 256 input values (identity and alpha multipliers), filled once.
void leaky_relu_f32(const float* x, float alpha, float* y, size_t n);
void leaky_table_q8(int zp_in, int32_t m_id, int s_id, int32_t m_alpha, int s_alpha,
                    int zp_out, int8_t* table);

// PRELU int8 (TFLite): x >= zp_x ? mbqm(x - zp_x, m_pos, s_pos)
//                               : mbqm((x - zp_x) (alpha - zp_a), m_neg, s_neg), + zp_out.
void prelu_q8(const Bcast& g, const int8_t* x, int zp_x, const int8_t* alpha, int zp_a,
              int32_t m_pos, int s_pos, int32_t m_neg, int s_neg, int zp_out, int8_t* y,
              int row0, int row1);
enum CmpOp : int { C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE };
// Comparisons to bool: float values, or int8 values rescaled as TFLite's
// ComparisonQuantized (mbqm((q - zp) << 8, m, s) per operand).
void compare_f32(const Bcast& g, int op, const float* a, const float* b, bool* y, int row0,
                 int row1);
void compare_q8(const Bcast& g, int op, const int8_t* a, int zp_a, int32_t m_a, int s_a,
                const int8_t* b, int zp_b, int32_t m_b, int s_b, bool* y, int row0, int row1);
void compare_i32(const Bcast& g, int op, const int32_t* a, const int32_t* b, bool* y,
                 int row0, int row1);
// int32 ADD, SUB, MUL, MINIMUM, MAXIMUM, FLOOR_MOD, FLOOR_DIV (BinOp codes; a zero divisor
// gives 0) in int64, clamped to [lo, hi] (the fused activation's range within int32).
void binary_i32(const Bcast& g, int op, const int32_t* a, const int32_t* b, int64_t lo,
                int64_t hi, int32_t* y, int row0, int row1);
// GATHER (batch_dims 0): y[o][i][k] = x[o][idx[i]][k] for `outer` x `n_idx` x `inner`
// `elem`-byte values, x with `axis_n` entries on the gathered axis. Returns false (and
// leaves y unwritten) when an index is outside [0, axis_n).
template <typename I>
bool gather(const void* x, const I* idx, void* y, size_t elem, int64_t outer, int64_t axis_n,
            int64_t inner, int64_t n_idx);
// GATHER_ND: for each of n_idx tuples of k indices (idx[i * k + j] on axis j of x, whose
// axis j has dims[j] entries and strides[j] elements), copy `inner` elements. Returns false
// (y unwritten) when an index is out of range.
bool gather_nd(const void* x, const int32_t* idx, void* y, size_t elem, int64_t n_idx, int k,
               const int64_t* dims, const int64_t* strides, int64_t inner);
// CAST of n values (float to integer truncates; to bool: != 0).
template <typename S, typename D>
inline void cast(const S* x, D* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = static_cast<D>(x[i]);
}
// int32 REDUCE_MAX (is_max 1) / REDUCE_MIN (0); x must not be empty.
struct Reduce;
void extreme_i32(const Reduce& g, int is_max, const int32_t* x, int32_t* y);
// LOGICAL_AND (is_or 0) / LOGICAL_OR (1) of bools.
void logical_bool(const Bcast& g, int is_or, const bool* a, const bool* b, bool* y, int row0,
                  int row1);
// ARG_MAX (is_max 1) / ARG_MIN (0) of float32 over the middle axis of [outer][n][inner]: the
// first index of the extreme value, as int32 or int64 (I).
template <typename I>
void arg_extreme_f32(const float* x, I* y, int64_t outer, int64_t n, int64_t inner,
                     int is_max);
// CUMSUM of float32 along the middle axis of [outer][n][inner], left to right (right to left
// when reverse); exclusive shifts the sums by one, starting at 0.
void cumsum_f32(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                int exclusive, int reverse);
// SELECT_V2 of up to 6 dims: y = cond ? a : b, element strides per output dim for each
// operand (0 where broadcast), `elem`-byte values.
void select(const int64_t* shape, const int64_t* sc, const int64_t* sa, const int64_t* sb,
            const bool* cond, const void* a, const void* b, void* y, size_t elem);

// ---------------------------------------------------------------- softmax
void softmax_f32(const float* x, float* y, int rows, int depth, float beta);
// int8: float softmax of the dequantized input (double scale), quantized as AffineQuantize.
void softmax_q8(const int8_t* x, double s_in, int zp_in, float s_out, int zp_out, float beta,
                int8_t* y, int rows, int depth);

// LOG_SOFTMAX over rows of `depth`: x - max - log(sum(exp(x - max))), the sum in NumPy's
// pairwise order.
void log_softmax_f32(const float* x, float* y, int rows, int depth);
// int8: of the dequantized input (double scale), quantized as AffineQuantize.
void log_softmax_q8(const int8_t* x, double s_in, int zp_in, float s_out, int zp_out,
                    int8_t* y, int rows, int depth);

// ---------------------------------------------------------------- pooling
struct PoolGeom {
  int n, h, w, c, fh, fw, sh, sw, oh, ow, pt, pl;
};
void max_pool_f32(const PoolGeom& g, const float* x, int act, float* y, int row0, int row1);
void avg_pool_f32(const PoolGeom& g, const float* x, int act, float* y, int row0, int row1);
void max_pool_q8(const PoolGeom& g, const int8_t* x, int lo, int hi, int8_t* y, int row0,
                 int row1);
void avg_pool_q8(const PoolGeom& g, const int8_t* x, int lo, int hi, int8_t* y, int row0,
                 int row1);

// ---------------------------------------------------------------- reductions
// Input of up to 6 dims; out_stride[d] is the output element stride of input dim d (0 on
// reduced dims).
struct Reduce {
  int64_t shape[6];
  int64_t out_stride[6];
  int64_t out_size;
  int64_t count;  // elements reduced into each output
};
enum RedOp : int { R_MEAN, R_SUM, R_MAX, R_MIN, R_PROD };
void reduce_f32(const Reduce& g, int op, const float* x, float* y);
// Quantized MEAN: sum as int32; spatial mode: clamp(split-rounded mbqm(sum) + bias), else
// clamp(mbqm(sum - zp_in n) + zp_out). `channels` is the innermost output extent and
// channels [0, upward) round upward (spatial mode).
void mean_q8(const Reduce& g, const int8_t* x, int spatial, int32_t m, int s, int zp_in,
             int bias_or_zp, int lo, int hi, int channels, int upward, int8_t* y);

// Quantized SUM (TFLite): round(float(sum) * scale + bias) + zp_out in float32, clamped to
// int8 (scale = s_in / s_out, bias = -zp_in scale n, both prepared by the generator).
void sum_q8(const Reduce& g, const int8_t* x, float scale, float bias, int zp_out, int8_t* y);
// int8 REDUCE_MAX (is_max 1) / REDUCE_MIN (0) of stored values.
void extreme_q8(const Reduce& g, int is_max, const int8_t* x, int8_t* y);

// ---------------------------------------------------------------- normalisation
void instance_norm_f32(const float* x, const float* gamma, const float* beta, int n,
                       int spatial, int c, double eps, int act, float* y);
void layer_norm_f32(const float* x, const float* gamma, const float* beta, int rows, int d,
                    double eps, float* y);

// ---------------------------------------------------------------- data movement
// Transpose of up to 6 dims: y[i] = x[sum(coord[d] * in_stride[d])] over output coords.
void transpose(const void* x, void* y, size_t elem, const int64_t* out_shape,
               const int64_t* in_stride);
// y[i] = x[map[i]] for n `elem`-byte values, or the value at `fill` where map[i] < 0.
void gather_map(const void* x, const int32_t* map, void* y, int64_t n, size_t elem,
                const void* fill);
// Copy `inner` contiguous elements `outer` times from x + part offset (concat / split).
void copy_blocks(const void* x, int64_t x_block, void* y, int64_t y_block, int64_t outer,
                 int64_t inner, size_t elem);
// PAD of up to 6 dims: y (out_shape) filled with the `elem`-byte value `fill`, x (in_shape)
// copied at offset `before`. The axes after the last padded one make contiguous runs: each
// output row (an index of the axes up to the last padded one but that axis) is written once,
// in order, as fill, one copy of the input row, fill (or fill alone outside the input).
// pad_rows writes the output rows [row0, row1) of pad_row_count(...) (a split across threads).
int64_t pad_row_count(const int64_t* out_shape, const int64_t* in_shape, const int64_t* before);
void pad_rows(const void* x, void* y, size_t elem, const int64_t* in_shape,
              const int64_t* out_shape, const int64_t* before, const void* fill, int64_t row0,
              int64_t row1);
void pad(const void* x, void* y, size_t elem, const int64_t* in_shape,
         const int64_t* out_shape, const int64_t* before, const void* fill);
// Float <-> int8
// int8 -> int8 QUANTIZE (TFLite Requantize): clamp(mbqm(x - zp_in, m, s) + zp_out) over n
// values starting at flat index `first`; indices below `upward_end` round ties upward
// (LiteRT's SIMD blocks of 16), the rest away from zero.
void requantize_q8(const int8_t* x, int zp_in, int32_t m, int s, int zp_out, int8_t* y,
                   size_t n, int64_t first, int64_t upward_end);
void quantize_f32_q8(const float* x, float scale, int zp, int8_t* y, size_t n);
void dequantize_q8_f32(const int8_t* x, double scale, int zp, float* y, size_t n);

// ---------------------------------------------------------------- hybrid and integer sequences
// Hybrid FULLY_CONNECTED (TFLite's dynamic-range kernel): float32 rows x [batch, k], int8
// weights as int16 w [ceil(k / 2), o, 2] (pairs of inputs side by side per output, a zero
// pair member for odd k; symmetric) with per-output float32 scales wscale [o]. Each
// row is quantized on the fly (symmetric to [-127, 127], or asymmetric to [-128, 127] with
// `asym`, which needs the weights' sums per output wsum [o]), dotted exactly in integers,
// scaled by row scale * weight scale in float32, the bias added after; then the activation.
void fully_connected_hybrid(const float* x, const int16_t* w, const float* wscale,
                            const int32_t* wsum, const float* bias, int batch, int k, int o,
                            int asym, int act, float* y);

// Integer UNIDIRECTIONAL_SEQUENCE_LSTM (TFLite's 8x8_16 kernel): gates
// in Q3.12 from int8 inputs and weights, gemmlowp's int16 logistic and tanh, a 16-bit cell
// state of scale 2**cell_log2, int8 hidden values (scale and zero point of the hidden
// intermediate). Weights w_in [4, cell, input] and w_rec [4, cell, output], effective biases
// b_in / b_rec [4, cell] and (multiplier, shift) pairs m_in / m_rec [4, 2] in TFLite's gate
// order (input, forget, cell, output); under CIFG the input gate is 1 - forget. Optional
// (nullptr): peephole weights peep [3, cell] (input, forget, output) with pairs m_peep
// [3, 2]; projection weights proj [output, cell] with effective bias proj_bias [output];
// layer norm: coefficients ln [4, cell], gate biases ln_bias [4, cell] (then not folded into
// b_in), pairs m_ln [4, 2] and variance guards ln_guard [4].
// h0 [batch, output] / c0 [batch, cell]: initial states (nullptr: reset).
struct IntLstmGeom {
  int steps, batch, n_input, n_cell, time_major, cifg, cell_log2, cell_clip;
  int32_t hidden_mult;
  int hidden_shift, hidden_zp, h_zp, n_output;
  int32_t proj_mult;
  int proj_shift, proj_clip;
};
void lstm_q8(const IntLstmGeom& g, const int8_t* x, const int8_t* w_in, const int8_t* w_rec,
             const int32_t* b_in, const int32_t* b_rec, const int32_t* m_in,
             const int32_t* m_rec, const int16_t* peep, const int32_t* m_peep,
             const int8_t* proj, const int32_t* proj_bias, const int16_t* ln,
             const int32_t* ln_bias, const int32_t* m_ln, const int32_t* ln_guard,
             const int8_t* h0, const int16_t* c0, int8_t* y);
// gemmlowp's int16 fixed-point logistic of Q3.12 values and tanh of Q(int_bits) values
// (0 <= int_bits <= 6): Q0.15 results.
int32_t logistic_q3_12(int32_t a);
int32_t tanh_q16(int32_t a, int int_bits);

// UNIDIRECTIONAL_SEQUENCE_RNN in float32: h = act(W x + R h + b) per time step, from h0
// [batch, units] (nullptr: zeros). w [units, input], r [units, units], bias [units] or
// nullptr; x [batch, steps, input] ([steps, batch, input] when time_major).
struct RnnGeom {
  int steps, batch, n_input, units, time_major, act;
};
void rnn_f32(const RnnGeom& g, const float* x, const float* w, const float* r,
             const float* bias, const float* h0, float* y);

// RANGE's length: ceil((limit - start) / delta) when positive, else 0; -1 for delta 0.
int64_t range_count(double start, double limit, double delta);

// ---------------------------------------------------------------- AVX2 float kernels
// tk_ops_f32_avx2.cpp (compiled only with AVX2 and FMA); called by the dispatchers above.
namespace avx2 {
// DEPTHWISE_CONV_2D float with channel multiplier 1 on the packed filter of
// depthwise_f32_pre (tk_ops_f32_dw_avx2.cpp): each output its bias plus its in-image taps
// in (ky, kx) order (fused multiply-adds), then the activation (NaN stays).
void depthwise_f32_packed(const ConvGeom& g, const float* x, const float* packed, int act,
                          float* y, int row0, int row1);
// One GEMM tile of `kr` (6 or 7) rows x 16 output channels: the rows of tap k are
// taps[k * ts + t], its c input channels dotted with the panel (stride `ws` floats between
// input channels) in k order (fused multiply-adds), then the bias `b8`, the clamp to
// [lo, hi] (NaN stays) and the first `nvalid` channels of the first `rows` rows stored.
void gemm_tile16(int kr, const float* const* taps, int ts, int ntaps, int c, int ws,
                 const float* panel, const float* b8, float lo, float hi, int nvalid,
                 float* const* dst, int rows);
// Binary float op `op` (BinOp, not the floor ones) then the clamp of `act` (not TANH):
// y[i] = a[i * sa] op b[i * sb] for i < n (sa, sb 0 or 1); false (nothing done) for what it
// does not take.
bool binary_span(int op, const float* a, int64_t sa, const float* b, int64_t sb, int64_t n,
                 int act, float* y);
// The same of a contiguous a [pixels][c] and a per-channel b [c].
bool binary_channel(int op, const float* a, const float* b, int64_t c, int64_t pixels, int act,
                    float* y);
// LOGISTIC float: 1 / (1 + e**-x), e**-x by a polynomial (within 2 ulp of expf; 0 and 1
// beyond +-87).
void logistic_f32(const float* x, float* y, size_t n);
// CONV_2D float as tk::conv2d_f32_direct (tk_ops_f32_conv_avx2.cpp): output channels in
// vectors of 8, tiles of output pixels sharing each filter vector.
void conv2d_f32_direct(const ConvGeom& g, const float* x, const float* w, const float* bias,
                       int act, float* y, int row0, int row1);
// MAX_POOL_2D float as tk::max_pool_f32 (NaN stays), then the clamp to [lo, hi].
void max_pool_f32(const PoolGeom& g, const float* x, float lo, float hi, float* y, int row0,
                  int row1);
}  // namespace avx2

}  // namespace tk

#endif  // TK_OPS_H_
