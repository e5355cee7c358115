// AVX2 + FMA float depthwise convolution (channel multiplier 1) on the filter packed at
// generation time (see tk_ops.h, depthwise_f32_pre): per group of 8 channels the bias then
// the KH*KW taps, 8 floats each, zeros after the last channel. Used by tk_ops.cpp's
// depthwise_f32_pre on machines with AVX2 and FMA but without AVX-512; without AVX2 + FMA
// this file compiles to nothing.
//
// One output row at a time: the filter rows whose input rows lie in the image, then the
// output columns whose taps all lie in the image columns in tiles of 8 (or 4) pixels x 8
// channels (16 x 4 for pixels of 256 channels and more), each filter vector loaded once for
// the tile's pixels (no per-tap branch; TANH applied to the row after); the border columns
// pixel by pixel, four groups of 8 channels at a time. Every output is its bias plus its in-image taps in (ky, kx) order
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

template <bool kMasked>
inline __m256 dw_load(const float* p, __m256i m) {
  if constexpr (kMasked) return _mm256_maskload_ps(p, m);
  (void)m;
  return _mm256_loadu_ps(p);
}

template <bool kMasked>
inline void dw_store(float* p, __m256i m, __m256 v) {
  if constexpr (kMasked) {
    store_prefix8(p, m, v);
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

// kT output pixels from column ox (all their taps in the image columns) x 8 channels of
// group g (channels 8 g ...): loads and stores masked by m when kMasked. kT independent
// sums; each filter vector loaded once for the kT pixels and, at stride 1, each input vector
// once for the kKW taps that read it.
template <int kT, bool kMasked, int kKW, int kSW, int kDW>
inline void dw_tile(const DwRow& r, int ox, int g, __m256i m, float* dst) {
  const int kw = kKW ? kKW : r.kw;
  const int64_t c = r.c;
  const int64_t xs = static_cast<int64_t>(kSW ? kSW : r.sw) * c;
  const int64_t ds = static_cast<int64_t>(kDW ? kDW : r.dw) * c;
  const float* xp = r.x + ox * xs + 8 * g;
  const float* wp = r.pk + r.gs * g;
  __m256 acc[kT];
  {
    const __m256 b = _mm256_loadu_ps(wp - r.bo);
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) acc[t] = b;
  }
  for (int ky = 0; ky < r.nky; ++ky, xp += r.rs, wp += 8 * kw) {
    if constexpr (kKW > 0 && kSW == 1 && kDW == 1) {
      // the kT + kKW - 1 input vectors of the row, each loaded once
      __m256 wv[kKW];
#pragma GCC unroll 8
      for (int kx = 0; kx < kKW; ++kx) wv[kx] = _mm256_loadu_ps(wp + 8 * kx);
#pragma GCC unroll 16
      for (int j = 0; j < kT + kKW - 1; ++j) {
        const __m256 xv = dw_load<kMasked>(xp + j * c, m);
#pragma GCC unroll 8
        for (int kx = kKW - 1; kx >= 0; --kx) {  // pixel j - kx: taps in kx order per pixel
          const int t = j - kx;
          if (t >= 0 && t < kT) acc[t] = _mm256_fmadd_ps(xv, wv[kx], acc[t]);
        }
      }
    } else {
#pragma GCC unroll 8
      for (int kx = 0; kx < kw; ++kx) {
        const __m256 wv = _mm256_loadu_ps(wp + 8 * kx);
#pragma GCC unroll 8
        for (int t = 0; t < kT; ++t)
          acc[t] = _mm256_fmadd_ps(dw_load<kMasked>(xp + t * xs + kx * ds, m), wv, acc[t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kT; ++t)  // min(hi, max(lo, v)) keeps NaN
    dw_store<kMasked>(dst + t * c + 8 * g, m,
                      _mm256_min_ps(r.hi, _mm256_max_ps(r.lo, acc[t])));
}

// 4 output pixels from column ox (all their taps in the image columns) x 16 channels of
// groups g and g + 1: the two halves of a 64-byte line of each input pixel read together
// (wide pixels, whose lines would leave the L1 cache between two tiles of 8 channels).
template <int kKW, int kSW, int kDW>
inline void dw_tile16(const DwRow& r, int ox, int g, float* dst) {
  constexpr int kT = 4;
  const int kw = kKW ? kKW : r.kw;
  const int64_t c = r.c;
  const int64_t xs = static_cast<int64_t>(kSW ? kSW : r.sw) * c;
  const int64_t ds = static_cast<int64_t>(kDW ? kDW : r.dw) * c;
  const float* xp = r.x + ox * xs + 8 * g;
  const float* wp = r.pk + r.gs * g;
  __m256 a0[kT], a1[kT];
  {
    const __m256 b0 = _mm256_loadu_ps(wp - r.bo), b1 = _mm256_loadu_ps(wp - r.bo + r.gs);
#pragma GCC unroll 4
    for (int t = 0; t < kT; ++t) a0[t] = b0, a1[t] = b1;
  }
  for (int ky = 0; ky < r.nky; ++ky, xp += r.rs, wp += 8 * kw) {
#pragma GCC unroll 8
    for (int kx = 0; kx < kw; ++kx) {
      const __m256 w0 = _mm256_loadu_ps(wp + 8 * kx), w1 = _mm256_loadu_ps(wp + 8 * kx + r.gs);
#pragma GCC unroll 4
      for (int t = 0; t < kT; ++t) {
        const float* p = xp + t * xs + kx * ds;
        a0[t] = _mm256_fmadd_ps(_mm256_loadu_ps(p), w0, a0[t]);
        a1[t] = _mm256_fmadd_ps(_mm256_loadu_ps(p + 8), w1, a1[t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < kT; ++t) {  // min(hi, max(lo, v)) keeps NaN
    _mm256_storeu_ps(dst + t * c + 8 * g, _mm256_min_ps(r.hi, _mm256_max_ps(r.lo, a0[t])));
    _mm256_storeu_ps(dst + t * c + 8 * g + 8, _mm256_min_ps(r.hi, _mm256_max_ps(r.lo, a1[t])));
  }
}

// Every channel of kT pixels from column ox: groups of 8 channels, the last one masked when
// short; wide pixels (256 channels and more) 16 channels by 4 pixels at a time.
template <int kT, int kKW, int kSW, int kDW>
inline void dw_tiles(const DwRow& r, int ox, float* dst) {
  const int c = static_cast<int>(r.c);
  int g = 0;
  if (c >= 256) {
    for (; 8 * g + 16 <= c; g += 2) {
#pragma GCC unroll 2
      for (int t = 0; t < kT; t += 4)
        dw_tile16<kKW, kSW, kDW>(r, ox + t, g, dst + static_cast<int64_t>(t) * c);
    }
  }
  for (; 8 * g + 8 <= c; ++g) dw_tile<kT, false, kKW, kSW, kDW>(r, ox, g, __m256i(), dst);
  if (8 * g < c) dw_tile<kT, true, kKW, kSW, kDW>(r, ox, g, lanes8(c - 8 * g), dst);
}

// One output pixel from column ox, its taps kx in [kx0, kx1) (those in the image columns) x
// kG groups of 8 channels from group g, kG independent sums (the last group masked by m when
// kMasked).
template <int kG, bool kMasked>
inline void dw_pixel_groups(const DwRow& r, int ox, int kx0, int kx1, int g, __m256i m,
                            float* dst) {
  const int64_t c = r.c;
  const float* xp = r.x + (static_cast<int64_t>(ox) * r.sw + kx0 * r.dw) * c + 8 * g;
  const float* wp = r.pk + r.gs * g + 8 * kx0;
  __m256 acc[kG];
#pragma GCC unroll 4
  for (int i = 0; i < kG; ++i) acc[i] = _mm256_loadu_ps(wp - 8 * kx0 - r.bo + i * r.gs);
  const int64_t ds = static_cast<int64_t>(r.dw) * c;
  for (int ky = 0; ky < r.nky; ++ky, xp += r.rs, wp += 8 * r.kw) {
    for (int kx = 0; kx < kx1 - kx0; ++kx) {
#pragma GCC unroll 4
      for (int i = 0; i < kG; ++i) {
        const float* p = xp + kx * ds + 8 * i;
        const __m256 xv = (kMasked && i == kG - 1) ? dw_load<true>(p, m) : dw_load<false>(p, m);
        acc[i] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(wp + 8 * kx + i * r.gs), acc[i]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < kG; ++i) {  // min(hi, max(lo, v)) keeps NaN
    const __m256 o = _mm256_min_ps(r.hi, _mm256_max_ps(r.lo, acc[i]));
    if (kMasked && i == kG - 1) dw_store<true>(dst + 8 * (g + i), m, o);
    else dw_store<false>(dst + 8 * (g + i), m, o);
  }
}

// One output pixel (a border one: its taps in the image columns only), every channel: four
// groups of 8 channels at a time, then one at a time, the last one masked when short.
inline void dw_pixel(const ConvGeom& gm, const DwRow& r, int ox, float* dst) {
  const int ix0 = ox * gm.sw - gm.pl;
  const int kx0 = ix0 >= 0 ? 0 : (-ix0 + gm.dw - 1) / gm.dw;
  const int kx1 = gm.w - 1 - ix0 < 0 ? 0 : std::min(gm.kw, (gm.w - 1 - ix0) / gm.dw + 1);
  const int full = gm.c / 8;
  int g = 0;
  for (; g + 4 <= full; g += 4)
    dw_pixel_groups<4, false>(r, ox, kx0, std::max(kx0, kx1), g, __m256i(), dst);
  for (; g < full; ++g)
    dw_pixel_groups<1, false>(r, ox, kx0, std::max(kx0, kx1), g, __m256i(), dst);
  if (8 * g < gm.c)
    dw_pixel_groups<1, true>(r, ox, kx0, std::max(kx0, kx1), g, lanes8(gm.c - 8 * g), dst);
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
      const auto at = [&](int o) { return row + static_cast<int64_t>(o) * c; };
      for (int ox = 0; ox < ox_lo; ++ox) dw_pixel(g, r, ox, at(ox));
      // the interior in tiles of 8 pixels, then one of 8 or 4 ending at ox_hi that may
      // overlap the tile before (its pixels computed again, to the same bits)
      int ox = ox_lo;
      for (; ox + 8 <= ox_hi; ox += 8) dw_tiles<8, kKW, kSW, kDW>(r, ox, at(ox));
      if (ox < ox_hi && ox_hi - ox_lo >= 4) {
        if (ox_hi - ox > 4 && ox_hi - ox_lo >= 8) {
          dw_tiles<8, kKW, kSW, kDW>(r, ox_hi - 8, at(ox_hi - 8));
        } else {
          if (ox_hi - ox > 4) dw_tiles<4, kKW, kSW, kDW>(r, ox, at(ox));  // 5 to 7 in all
          dw_tiles<4, kKW, kSW, kDW>(r, ox_hi - 4, at(ox_hi - 4));
        }
      } else {
        for (; ox < ox_hi; ++ox) dw_pixel(g, r, ox, at(ox));
      }
      for (ox = ox_hi; ox < g.ow; ++ox) dw_pixel(g, r, ox, at(ox));
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
