// AVX2 + FMA float depthwise convolution (channel multiplier 1) on the filter packed at
// generation time (see tk_ops.h, depthwise_f32_pre): per group of 8 channels the bias then
// the KH*KW taps, 8 floats each, zeros after the last channel. Used by tk_ops.cpp's
// depthwise_f32_pre on machines with AVX2 and FMA but without AVX-512; without AVX2 + FMA
// this file compiles to nothing.
//
// One output row at a time: the filter rows whose input rows lie in the image, then the
// output columns whose taps all lie in the image columns in tiles of kT pixels x 16 (or 8)
// channels, each filter vector loaded once for the kT pixels (no per-tap branch); the border
// columns pixel by pixel. Every output is its bias plus its in-image taps in (ky, kx) order
// (fused multiply-adds), whichever path computes it, so a split of the rows across threads
// gives the same bits.
#include "tk_ops.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace tk {
namespace avx2 {
namespace {

// The first n (0..8) lanes set.
inline __m256i dw_lanes(int n) {
  static const int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  n = n < 0 ? 0 : (n > 8 ? 8 : n);
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n));
}

template <bool kMasked>
inline __m256 dw_load(const float* p, __m256i m) {
  if constexpr (kMasked) return _mm256_maskload_ps(p, m);
  (void)m;
  return _mm256_loadu_ps(p);
}

template <bool kMasked>
inline void dw_store(float* p, __m256i m, __m256 v) {
  if constexpr (kMasked) {
    _mm256_maskstore_ps(p, m, v);
  } else {
    (void)m;
    _mm256_storeu_ps(p, v);
  }
}

// What one output row's tiles share.
struct DwRow {
  const float* x;   // input pixel (row of filter row ky0, column of tap 0 of output 0), ch 0
  int64_t rs;       // floats between the input rows of consecutive filter rows
  int64_t c;        // channels (floats between input pixels)
  int nky;          // filter rows in the image
  const float* pk;  // packed filter, tap (ky0, 0) of channel group 0
  int64_t gs;       // floats between channel groups of the packed filter (8 (1 + KH KW))
  int64_t bo;       // floats from a tap (ky0, 0) back to its group's bias
  int kw, sw, dw;   // filter columns, strides, dilation (runtime values)
  __m256 lo, hi;    // clamp
};

// kT output pixels from column ox (all their taps in the image columns) x kNV vectors of 8
// channels from group g (channel 8 g): the last vector masked by m when kMasked.
template <int kT, int kNV, bool kMasked, int kKW, int kSW, int kDW>
inline void dw_tile(const DwRow& r, int ox, int g, __m256i m, float* dst) {
  const int kw = kKW ? kKW : r.kw;
  const int64_t c = r.c;
  const int64_t xs = static_cast<int64_t>(kSW ? kSW : r.sw) * c;
  const int64_t ds = static_cast<int64_t>(kDW ? kDW : r.dw) * c;
  const float* xp = r.x + ox * xs + 8 * g;
  const float* wp = r.pk + r.gs * g;
  __m256 acc[kT][kNV];
#pragma GCC unroll 2
  for (int v = 0; v < kNV; ++v) {
    const __m256 b = _mm256_loadu_ps(wp - r.bo + v * r.gs);
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) acc[t][v] = b;
  }
  for (int ky = 0; ky < r.nky; ++ky, xp += r.rs, wp += 8 * kw) {
#pragma GCC unroll 7
    for (int kx = 0; kx < kw; ++kx) {
      __m256 wv[kNV];
#pragma GCC unroll 2
      for (int v = 0; v < kNV; ++v) wv[v] = _mm256_loadu_ps(wp + 8 * kx + v * r.gs);
#pragma GCC unroll 8
      for (int t = 0; t < kT; ++t) {
        const float* p = xp + t * xs + kx * ds;
#pragma GCC unroll 2
        for (int v = 0; v < kNV; ++v) {
          const __m256 xv = (kMasked && v == kNV - 1) ? dw_load<true>(p + 8 * v, m)
                                                      : dw_load<false>(p + 8 * v, m);
          acc[t][v] = _mm256_fmadd_ps(xv, wv[v], acc[t][v]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kT; ++t) {
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) {
      // min(hi, max(lo, v)) keeps NaN
      const __m256 o = _mm256_min_ps(r.hi, _mm256_max_ps(r.lo, acc[t][v]));
      float* q = dst + t * c + 8 * (g + v);
      if (kMasked && v == kNV - 1) dw_store<true>(q, m, o);
      else dw_store<false>(q, m, o);
    }
  }
}

// Every channel of kT pixels from column ox: groups of 16 channels, then the rest (8, or
// up to 16 with the last vector masked, or fewer than 8 masked).
template <int kT, int kKW, int kSW, int kDW>
inline void dw_tiles(const DwRow& r, int ox, float* dst) {
  const int c = static_cast<int>(r.c);
  int g = 0;
  for (; 8 * g + 16 <= c; g += 2) dw_tile<kT, 2, false, kKW, kSW, kDW>(r, ox, g, __m256i(), dst);
  const int rest = c - 8 * g;
  if (rest > 8) {
    dw_tile<kT, 2, true, kKW, kSW, kDW>(r, ox, g, dw_lanes(rest - 8), dst);
  } else if (rest == 8) {
    dw_tile<kT, 1, false, kKW, kSW, kDW>(r, ox, g, __m256i(), dst);
  } else if (rest > 0) {
    dw_tile<kT, 1, true, kKW, kSW, kDW>(r, ox, g, dw_lanes(rest), dst);
  }
}

// One border output pixel (some taps outside the image columns): every group of 8 channels,
// the in-image taps in (ky, kx) order.
inline void dw_border(const ConvGeom& gm, const DwRow& r, int ox, float* dst) {
  const int c = gm.c;
  const int ix0 = ox * gm.sw - gm.pl;
  for (int g = 0; 8 * g < c; ++g) {
    const __m256i m = dw_lanes(c - 8 * g);
    const bool full = c - 8 * g >= 8;
    const float* wp = r.pk + r.gs * g;
    __m256 acc = _mm256_loadu_ps(wp - r.bo);
    const float* xrow = r.x + 8 * g;  // input row of ky0 at column ox * sw - pl... shifted
    for (int ky = 0; ky < r.nky; ++ky, xrow += r.rs, wp += 8 * gm.kw) {
      for (int kx = 0; kx < gm.kw; ++kx) {
        const int ix = ix0 + kx * gm.dw;
        if (ix < 0 || ix >= gm.w) continue;
        const float* p = xrow + static_cast<int64_t>(ix + gm.pl) * c;
        const __m256 xv = full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
        acc = _mm256_fmadd_ps(xv, _mm256_loadu_ps(wp + 8 * kx), acc);
      }
    }
    const __m256 o = _mm256_min_ps(r.hi, _mm256_max_ps(r.lo, acc));
    if (full) _mm256_storeu_ps(dst + 8 * g, o);
    else _mm256_maskstore_ps(dst + 8 * g, m, o);
  }
}

template <int kKW, int kSW, int kDW>
void dw_rows(const ConvGeom& g, const float* x, const float* packed, int act, float* y,
             int row0, int row1) {
  const int c = g.c;
  const int taps = g.kh * g.kw;
  const float inf = std::numeric_limits<float>::infinity();
  float lo = -inf, hi = inf;
  if (act == ACT_RELU) lo = 0.f;
  if (act == ACT_RELU6) lo = 0.f, hi = 6.f;
  if (act == ACT_RELU_N1_TO_1) lo = -1.f, hi = 1.f;
  DwRow r;
  r.rs = static_cast<int64_t>(g.dh) * g.w * c;
  r.c = c;
  r.gs = 8 * static_cast<int64_t>(1 + taps);
  r.kw = g.kw, r.sw = g.sw, r.dw = g.dw;
  r.lo = _mm256_set1_ps(lo), r.hi = _mm256_set1_ps(hi);
  // the output columns whose taps all lie in the image columns: [ox_lo, ox_hi)
  const int ox_lo = std::min(g.ow, (g.pl + g.sw - 1) / g.sw);
  const int last = g.w - 1 - (g.kw - 1) * g.dw + g.pl;  // largest ox sw
  const int ox_hi = std::max(ox_lo, last < 0 ? 0 : std::min(g.ow, last / g.sw + 1));
  const bool few = c <= 8;  // one vector per pixel: more pixels per tile
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      const int iy0 = oy * g.sh - g.pt;
      const int ky0 = iy0 >= 0 ? 0 : (-iy0 + g.dh - 1) / g.dh;
      const int ky1 = g.h - 1 - iy0 < 0 ? 0 : std::min(g.kh, (g.h - 1 - iy0) / g.dh + 1);
      r.nky = std::max(0, ky1 - ky0);
      r.x = x + ((static_cast<int64_t>(b) * g.h + iy0 + ky0 * g.dh) * g.w - g.pl) * c;
      r.pk = packed + 8 + 8 * static_cast<int64_t>(ky0) * g.kw;
      r.bo = 8 + 8 * static_cast<int64_t>(ky0) * g.kw;
      float* row = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * c;
      for (int ox = 0; ox < ox_lo; ++ox) dw_border(g, r, ox, row + static_cast<int64_t>(ox) * c);
      int ox = ox_lo;
      if (few) {
        for (; ox + 8 <= ox_hi; ox += 8)
          dw_tiles<8, kKW, kSW, kDW>(r, ox, row + static_cast<int64_t>(ox) * c);
      }
      for (; ox + 4 <= ox_hi; ox += 4)
        dw_tiles<4, kKW, kSW, kDW>(r, ox, row + static_cast<int64_t>(ox) * c);
      for (; ox < ox_hi; ++ox)
        dw_tiles<1, kKW, kSW, kDW>(r, ox, row + static_cast<int64_t>(ox) * c);
      for (ox = ox_hi; ox < g.ow; ++ox)
        dw_border(g, r, ox, row + static_cast<int64_t>(ox) * c);
      if (act == ACT_TANH) activate_f32(row, static_cast<size_t>(g.ow) * c, act);
    }
  }
}

}  // namespace

void depthwise_f32_packed(const ConvGeom& g, const float* x, const float* packed, int act,
                          float* y, int row0, int row1) {
  if (g.dw == 1) {
    if (g.kw == 3 && g.sw == 1) return dw_rows<3, 1, 1>(g, x, packed, act, y, row0, row1);
    if (g.kw == 3 && g.sw == 2) return dw_rows<3, 2, 1>(g, x, packed, act, y, row0, row1);
    if (g.kw == 5 && g.sw == 1) return dw_rows<5, 1, 1>(g, x, packed, act, y, row0, row1);
    if (g.kw == 5 && g.sw == 2) return dw_rows<5, 2, 1>(g, x, packed, act, y, row0, row1);
    if (g.kw == 1 && g.sw == 1) return dw_rows<1, 1, 1>(g, x, packed, act, y, row0, row1);
  }
  dw_rows<0, 0, 0>(g, x, packed, act, y, row0, row1);
}

}  // namespace avx2
}  // namespace tk

#endif  // __AVX2__ && __FMA__
