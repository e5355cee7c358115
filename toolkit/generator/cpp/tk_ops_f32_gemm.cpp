// Pointwise float convolution of the op library (see tk_ops.h, conv2d_f32_pointwise): a GEMM
// of the input's pixels, read in place, with a filter packed in panels of 8 or 16 output
// channels (8 for a layer of at most 8). With AVX2 + FMA (and not AVX-512) register tiles of
// 7 pixels x 16 channels or 12 pixels x 8 channels (14 or 12 accumulators), the last panel's
// channels in the narrower tile when 8 of them suffice, masked stores past the last channel;
// elsewhere a loop the compiler vectorizes (8 channels) or conv2d_f32_packed's GEMM (16).
#include "tk_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#include <immintrin.h>
#define TK_PW_AVX2 1
#endif

namespace tk {
namespace {

inline void act_range(int act, float& lo, float& hi) {
  lo = -std::numeric_limits<float>::infinity(), hi = -lo;
  if (act == ACT_RELU) lo = 0.f;
  if (act == ACT_RELU6) lo = 0.f, hi = 6.f;
  if (act == ACT_RELU_N1_TO_1) lo = -1.f, hi = 1.f;
}

#if defined(TK_PW_AVX2)
// One tile of kMR pixels (rows a + t * as) x 8 kNV channels of a panel (`ws` floats between
// input channels): every input channel in order (fused multiply-adds from zero), then the
// bias, with kClamp the clamp to [lo, hi] (min(hi, max(lo, v)) keeps NaN), and the store of
// the first `nvalid` channels (kMasked: fewer than 8 kNV) of each row to y + t * ys.
template <int kMR, int kNV, bool kMasked, bool kClamp>
__attribute__((always_inline)) inline void pw_tile(const float* a, int64_t as, int k,
                                                   const float* w, int ws, const float* b,
                                                   __m256 lo, __m256 hi, int nvalid, float* y,
                                                   int64_t ys) {
  __m256 acc[kMR][kNV];
#pragma GCC unroll 16
  for (int t = 0; t < kMR; ++t)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) acc[t][v] = _mm256_setzero_ps();
  const float* ap[kMR];
#pragma GCC unroll 16
  for (int t = 0; t < kMR; ++t) ap[t] = a + t * as;
  for (int i = 0; i < k; ++i, w += ws) {
    __m256 wv[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) wv[v] = _mm256_loadu_ps(w + 8 * v);
#pragma GCC unroll 16
    for (int t = 0; t < kMR; ++t) {
      const __m256 xv = _mm256_broadcast_ss(ap[t] + i);
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) acc[t][v] = _mm256_fmadd_ps(xv, wv[v], acc[t][v]);
    }
  }
  __m256 bv[kNV];
#pragma GCC unroll 4
  for (int v = 0; v < kNV; ++v) bv[v] = _mm256_loadu_ps(b + 8 * v);
  const __m256i m = lanes8(nvalid - 8 * (kNV - 1));
#pragma GCC unroll 16
  for (int t = 0; t < kMR; ++t) {
    float* d = y + t * ys;
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) {
      __m256 r = _mm256_add_ps(acc[t][v], bv[v]);
      if constexpr (kClamp) r = _mm256_min_ps(hi, _mm256_max_ps(lo, r));
      if (kMasked && v == kNV - 1) store_prefix8(d + 8 * v, m, r);
      else _mm256_storeu_ps(d + 8 * v, r);
    }
  }
}

// The rows of a tile of kNV vectors: kMR-row tiles, then one tile of the remaining rows.
template <int kMR, int kNV, bool kMasked, bool kClamp>
void pw_panel(const float* a, int64_t as, int64_t rows, int k, const float* w, int ws,
              const float* b, __m256 lo, __m256 hi, int nvalid, float* y, int64_t ys) {
  int64_t r = 0;
  for (; r + kMR <= rows; r += kMR)
    pw_tile<kMR, kNV, kMasked, kClamp>(a + r * as, as, k, w, ws, b, lo, hi, nvalid, y + r * ys, ys);
  const int left = static_cast<int>(rows - r);
  a += r * as, y += r * ys;
  if constexpr (kMR > 1) {
    // the remaining rows: the tiles of fewer rows, each instantiated once
    switch (left) {
#define TK_PW_LEFT(n) \
  case n: if constexpr (n < kMR) pw_tile<n, kNV, kMasked, kClamp>(a, as, k, w, ws, b, lo, hi, nvalid, y, ys); break;
      TK_PW_LEFT(1) TK_PW_LEFT(2) TK_PW_LEFT(3) TK_PW_LEFT(4) TK_PW_LEFT(5) TK_PW_LEFT(6)
      TK_PW_LEFT(7) TK_PW_LEFT(8) TK_PW_LEFT(9) TK_PW_LEFT(10) TK_PW_LEFT(11)
#undef TK_PW_LEFT
      default: break;
    }
  }
}

// kMR for tiles of kNV vectors: 12 or 7 rows (12 or 14 accumulators, the weights' vectors
// and a broadcast within the 16 registers)
template <int kNV>
constexpr int pw_rows() {
  return kNV == 1 ? 12 : 7;
}

template <int kNV, bool kClamp>
void pw_panel_any(const float* a, int64_t as, int64_t rows, int k, const float* w, int ws,
                  const float* b, __m256 lo, __m256 hi, int nvalid, float* y, int64_t ys) {
  constexpr int kMR = pw_rows<kNV>();
  if (nvalid == 8 * kNV)
    pw_panel<kMR, kNV, false, kClamp>(a, as, rows, k, w, ws, b, lo, hi, nvalid, y, ys);
  else pw_panel<kMR, kNV, true, kClamp>(a, as, rows, k, w, ws, b, lo, hi, nvalid, y, ys);
}

// `rows` pixels (rows of `c` floats from x) through every panel: blocks of pixels through
// every panel in turn (the block's rows stay in cache while a filter of up to 32 KiB
// passes), or with a larger filter each panel over every pixel (the panel stays in cache).
void pointwise_avx2(const float* x, int64_t rows, int c, const float* wp, int nr,
                    const float* bias, int o, int act, float* y) {
  float flo, fhi;
  act_range(act, flo, fhi);
  const __m256 lo = _mm256_set1_ps(flo), hi = _mm256_set1_ps(fhi);
  const int npan = (o + nr - 1) / nr;
  const auto panel = [&](int p, const float* xa, int64_t n, float* ya) {
    const int o0 = p * nr, nvalid = std::min(nr, o - o0);
    float b16[16];  // the panel's bias, zeros past the last channel
    for (int j = 0; j < 16; ++j) b16[j] = bias && j < nvalid ? bias[o0 + j] : 0.f;
    const float* w = wp + static_cast<int64_t>(p) * c * nr;
    // without an activation no clamp (its bounds are infinite: the same values)
    const bool clamp = act != ACT_NONE;
    if (nvalid <= 8 && clamp)
      pw_panel_any<1, true>(xa, c, n, c, w, nr, b16, lo, hi, nvalid, ya + o0, o);
    else if (nvalid <= 8)
      pw_panel_any<1, false>(xa, c, n, c, w, nr, b16, lo, hi, nvalid, ya + o0, o);
    else if (clamp)
      pw_panel_any<2, true>(xa, c, n, c, w, nr, b16, lo, hi, nvalid, ya + o0, o);
    else pw_panel_any<2, false>(xa, c, n, c, w, nr, b16, lo, hi, nvalid, ya + o0, o);
  };
  const int64_t wbytes = static_cast<int64_t>(c) * npan * nr * 4;
  if (npan > 1 && wbytes > 32 * 1024) {
    for (int p = 0; p < npan; ++p) panel(p, x, rows, y);
    return;
  }
  // pixels per block: about 32 KiB of input rows, a multiple of every tile's rows (84)
  const int64_t block = std::max<int64_t>(1, 32 * 1024 / (84 * 4 * static_cast<int64_t>(c))) * 84;
  for (int64_t r = 0; r < rows; r += block) {
    const int64_t n = std::min(block, rows - r);
    for (int p = 0; p < npan; ++p) panel(p, x + r * c, n, y + r * o);
  }
}
#else
// A tile of kMR pixels x kNR channels in arrays the compiler vectorizes: the sums of
// gemm's reference tile (fused multiply-adds from zero in channel order, then the bias and
// the activation).
template <int kMR, int kNR>
void pw_tile_ref(const float* a, int64_t as, int rows, int k, const float* w,
                 const float* b, int nvalid, int act, float* y, int64_t ys) {
  float acc[kMR][kNR] = {};
  for (int i = 0; i < k; ++i, w += kNR)
    for (int t = 0; t < kMR; ++t) {
      const float xv = a[(t < rows ? t : 0) * as + i];
      for (int j = 0; j < kNR; ++j) acc[t][j] = std::fma(xv, w[j], acc[t][j]);
    }
  for (int t = 0; t < rows; ++t)
    for (int j = 0; j < nvalid; ++j) {
      const float v = acc[t][j] + (b ? b[j] : 0.f);
      y[t * ys + j] = act == ACT_RELU ? (v < 0.f ? 0.f : v)
                      : act == ACT_RELU6 ? (v < 0.f ? 0.f : (v > 6.f ? 6.f : v))
                      : act == ACT_RELU_N1_TO_1 ? (v < -1.f ? -1.f : (v > 1.f ? 1.f : v))
                      : act == ACT_TANH ? std::tanh(v) : v;
    }
}

template <int kNR>
void pointwise_ref(const float* x, int64_t rows, int c, const float* wp, const float* bias,
                   int o, int act, float* y) {
  constexpr int kMR = 4;
  for (int o0 = 0; o0 < o; o0 += kNR) {
    const float* w = wp + static_cast<int64_t>(o0 / kNR) * c * kNR;
    const int nvalid = std::min(kNR, o - o0);
    for (int64_t r = 0; r < rows; r += kMR)
      pw_tile_ref<kMR, kNR>(x + r * c, c, static_cast<int>(std::min<int64_t>(kMR, rows - r)),
                            c, w, bias ? bias + o0 : nullptr, nvalid, act, y + r * o + o0, o);
  }
}
#endif

}  // namespace

void conv2d_f32_pointwise(const ConvGeom& g, const float* x, const float* wp, int nr,
                          const float* bias, int act, float* y, int row0, int row1) {
  const int64_t pix = static_cast<int64_t>(g.ow) * (row1 - row0);
  for (int b = 0; b < g.n && row1 > row0; ++b) {
    const int64_t first = (static_cast<int64_t>(b) * g.oh + row0) * g.ow;
    const float* xb = x + first * g.c;
    float* yb = y + first * g.o;
#if defined(TK_PW_AVX2)
    if (act != ACT_TANH && (nr == 8 || nr == 16)) {
      pointwise_avx2(xb, pix, g.c, wp, nr, bias, g.o, act, yb);
      continue;
    }
#else
    if (nr == 8) {
      pointwise_ref<8>(xb, pix, g.c, wp, bias, g.o, act, yb);
      continue;
    }
#endif
    ConvGeom g1 = g;
    g1.n = 1;
    conv2d_f32_packed(g1, x + static_cast<int64_t>(b) * g.h * g.w * g.c, wp, nr, bias, act,
                      y + static_cast<int64_t>(b) * g.oh * g.ow * g.o, row0, row1);
  }
}

}  // namespace tk
