// AVX2 + FMA direct float convolution of the op library (see tk_ops.h, conv2d_f32_direct):
// convolutions with few input channels (first layers, small strided convolutions) read
// their taps in place, without an im2col buffer. Output channels lie in 8-wide vectors;
// a tile of output pixels of one row shares each filter vector it loads. Without AVX2 + FMA
// this file compiles to nothing and tk::conv2d_f32_direct keeps its portable loops.
#include "tk_ops.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tk {
namespace avx2 {
namespace {

// What every tile of one output row and block group shares.
struct DirectRow {
  const float* xb;   // the batch's input image
  const float* w;    // filter [KH][KW][C][o8] from the group's first channel
  int o8;            // floats between input taps in the filter
  int iy0;           // input row of tap ky = 0
  int ky0, ky1;      // the taps' rows inside the image
  __m256 bias[4];    // per vector of the group (zeros without bias)
  __m256i mask[4];   // valid lanes per vector
  bool full[4];      // every lane valid
  __m256 lo, hi;     // the activation's clamp
};

// kR output pixels from column ox (row r.iy0's) x kV vectors of 8 channels (kR kV <= 12):
// every tap of the pixels lies in the image columns. Per filter row inside the image, its
// taps (kx, ci) in order, each filter vector loaded once for the kR pixels; the sums start
// at the bias. The accumulators are named registers, accumulator i = t kV + v holding pixel
// t's vector v (GCC keeps an array of them partly in memory, a store and a load per step).
template <int kR, int kV>
inline void direct_tile(const ConvGeom& g, const DirectRow& r, int ox, float* dst) {
  static_assert(kR * kV <= 12 && kV <= 3, "at most 12 accumulators");
#define TK_INIT(i) __m256 a##i = r.bias[(i) % kV];
  TK_INIT(0) TK_INIT(1) TK_INIT(2) TK_INIT(3) TK_INIT(4) TK_INIT(5)
  TK_INIT(6) TK_INIT(7) TK_INIT(8) TK_INIT(9) TK_INIT(10) TK_INIT(11)
#undef TK_INIT
  const int c = g.c;
  const int64_t ps = static_cast<int64_t>(g.sw) * c;  // floats between the tile's pixels
  const int kwc = g.kw * c;
  for (int ky = r.ky0; ky < r.ky1; ++ky) {
    const float* xr =
        r.xb + (static_cast<int64_t>(r.iy0 + ky * g.dh) * g.w + (ox * g.sw - g.pl)) * c;
    const float* wr = r.w + static_cast<int64_t>(ky) * kwc * r.o8;
    for (int kx = 0; kx < g.kw; ++kx) {
      const float* xk = xr + static_cast<int64_t>(kx) * g.dw * c;
      for (int ci = 0; ci < c; ++ci, wr += r.o8) {
        __m256 w0 = _mm256_loadu_ps(wr);
        __m256 w1 = kV > 1 ? _mm256_loadu_ps(wr + 8) : w0;
        __m256 w2 = kV > 2 ? _mm256_loadu_ps(wr + 16) : w0;
        // in registers, loaded once (GCC would fold a load into every multiply-add)
        asm("" : "+x"(w0), "+x"(w1), "+x"(w2));
        __m256 xv = w0;
#define TK_FMA(i)                                                                    \
  if constexpr ((i) < kR * kV) {                                                   \
    if constexpr ((i) % kV == 0) xv = _mm256_broadcast_ss(xk + (i) / kV * ps + ci); \
    a##i = _mm256_fmadd_ps(xv, (i) % kV == 0 ? w0 : ((i) % kV == 1 ? w1 : w2), a##i); \
  }
        TK_FMA(0) TK_FMA(1) TK_FMA(2) TK_FMA(3) TK_FMA(4) TK_FMA(5)
        TK_FMA(6) TK_FMA(7) TK_FMA(8) TK_FMA(9) TK_FMA(10) TK_FMA(11)
#undef TK_FMA
      }
    }
  }
  const __m256 acc[12] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11};
  for (int t = 0; t < kR; ++t) {
    float* d = dst + static_cast<int64_t>(ox + t) * g.o;
    for (int v = 0; v < kV; ++v) {
      const __m256 s = _mm256_min_ps(r.hi, _mm256_max_ps(r.lo, acc[t * kV + v]));
      if (r.full[v]) _mm256_storeu_ps(d + 8 * v, s);
      else store_prefix8(d + 8 * v, r.mask[v], s);
    }
  }
}

// One output pixel at column ox whose taps may leave the image columns (those are skipped),
// in the order of direct_tile.
template <int kV>
inline void direct_pixel(const ConvGeom& g, const DirectRow& r, int ox, float* dst) {
  __m256 acc[kV];
  for (int v = 0; v < kV; ++v) acc[v] = r.bias[v];
  const int c = g.c, kwc = g.kw * c, ix0 = ox * g.sw - g.pl;
  for (int ky = r.ky0; ky < r.ky1; ++ky) {
    const float* xr = r.xb + static_cast<int64_t>(r.iy0 + ky * g.dh) * g.w * c;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int ix = ix0 + kx * g.dw;
      if (ix < 0 || ix >= g.w) continue;
      const float* xk = xr + static_cast<int64_t>(ix) * c;
      const float* wr = r.w + (static_cast<int64_t>(ky) * kwc + kx * c) * r.o8;
      for (int ci = 0; ci < c; ++ci, wr += r.o8) {
        const __m256 xv = _mm256_broadcast_ss(xk + ci);
        for (int v = 0; v < kV; ++v)
          acc[v] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(wr + 8 * v), acc[v]);
      }
    }
  }
  float* d = dst + static_cast<int64_t>(ox) * g.o;
  for (int v = 0; v < kV; ++v) {
    const __m256 s = _mm256_min_ps(r.hi, _mm256_max_ps(r.lo, acc[v]));
    if (r.full[v]) _mm256_storeu_ps(d + 8 * v, s);
    else store_prefix8(d + 8 * v, r.mask[v], s);
  }
}

// The output columns of one row for a group of kV vectors: tiles of kR pixels over the
// columns whose taps all lie in the image (the last tile moved back to end at the last of
// them: its overlap is computed again, to the same values), single pixels elsewhere.
template <int kV>
void direct_row(const ConvGeom& g, const DirectRow& r, int ox_lo, int ox_hi, float* dst) {
  // a broadcast input value feeds kV multiply-adds: one vector (kV 1) is bound by the
  // broadcasts whatever kR, 4 pixels x 2 or 3 vectors beat 6 x 2 (measured on Zen 3)
  constexpr int kR = kV == 1 ? 12 : 4;
  for (int ox = 0; ox < ox_lo; ++ox) direct_pixel<kV>(g, r, ox, dst);
  if (ox_hi - ox_lo >= kR) {
    for (int ox = ox_lo;; ox += kR) {
      if (ox + kR > ox_hi) ox = ox_hi - kR;
      direct_tile<kR, kV>(g, r, ox, dst);
      if (ox + kR == ox_hi) break;
    }
  } else {
    int ox = ox_lo;
    for (; ox + 2 <= ox_hi; ox += 2) direct_tile<2, kV>(g, r, ox, dst);
    if (ox < ox_hi) direct_tile<1, kV>(g, r, ox, dst);
  }
  for (int ox = std::max(ox_lo, ox_hi); ox < g.ow; ++ox) direct_pixel<kV>(g, r, ox, dst);
}

}  // namespace

void conv2d_f32_direct(const ConvGeom& g, const float* x, const float* w, const float* bias,
                       int act, float* y, int row0, int row1) {
  const float inf = std::numeric_limits<float>::infinity();
  float lo = -inf, hi = inf;  // TANH: applied to each row after its sums
  if (act == ACT_RELU) lo = 0.f;
  if (act == ACT_RELU6) lo = 0.f, hi = 6.f;
  if (act == ACT_RELU_N1_TO_1) lo = -1.f, hi = 1.f;
  const int o = g.o, o8 = (o + 7) / 8 * 8, blocks = o8 / 8;
  // the output columns whose taps all lie in the image columns: [ox_lo, ox_hi)
  const int ox_lo = std::min(g.ow, (g.pl + g.sw - 1) / g.sw);
  const int last = g.w - 1 - (g.kw - 1) * g.dw + g.pl;  // largest ox sw
  const int ox_hi = std::max(ox_lo, last < 0 ? 0 : std::min(g.ow, last / g.sw + 1));
  DirectRow r;
  r.o8 = o8;
  r.lo = _mm256_set1_ps(lo);
  r.hi = _mm256_set1_ps(hi);
  for (int b = 0; b < g.n; ++b) {
    r.xb = x + static_cast<int64_t>(b) * g.h * g.w * g.c;
    for (int oy = row0; oy < row1; ++oy) {
      r.iy0 = oy * g.sh - g.pt;
      // the filter rows inside the image: iy0 + ky dh in [0, h)
      r.ky0 = r.iy0 >= 0 ? 0 : (-r.iy0 + g.dh - 1) / g.dh;
      r.ky1 = g.h - 1 - r.iy0 < 0 ? 0 : std::min(g.kh, (g.h - 1 - r.iy0) / g.dh + 1);
      if (r.ky1 < r.ky0) r.ky1 = r.ky0;
      float* row = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * o;
      // groups of 3 vectors, then 2 or 1
      for (int j0 = 0; j0 < blocks;) {
        const int nv = std::min(blocks - j0, 3);
        r.w = w + 8 * j0;
        for (int v = 0; v < nv; ++v) {
          const int valid = o - 8 * (j0 + v);
          r.mask[v] = lanes8(valid);
          r.full[v] = valid >= 8;
          r.bias[v] = bias ? _mm256_maskload_ps(bias + 8 * (j0 + v), r.mask[v])
                           : _mm256_setzero_ps();
        }
        float* dst = row + 8 * j0;
        if (nv == 1) direct_row<1>(g, r, ox_lo, ox_hi, dst);
        else if (nv == 2) direct_row<2>(g, r, ox_lo, ox_hi, dst);
        else direct_row<3>(g, r, ox_lo, ox_hi, dst);
        j0 += nv;
      }
      if (act == ACT_TANH)
        for (int64_t i = 0; i < static_cast<int64_t>(g.ow) * o; ++i) row[i] = std::tanh(row[i]);
    }
  }
}

}  // namespace avx2
}  // namespace tk

#endif  // __AVX2__ && __FMA__
