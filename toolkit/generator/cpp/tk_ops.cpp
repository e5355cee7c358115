// Operator library of the toolkit's C++ artifacts: see tk_ops.h.
#include "tk_ops.h"
#include "tk_ops_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tk {

namespace {

inline float act1(float v, int act) {
  switch (act) {
    case ACT_RELU: return v < 0.f ? 0.f : v;
    case ACT_RELU_N1_TO_1: return v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    case ACT_RELU6: return v < 0.f ? 0.f : (v > 6.f ? 6.f : v);
    case ACT_TANH: return std::tanh(v);
    default: return v;
  }
}

inline int8_t requant(int64_t acc, const QuantOut& q, int ch) {
  const int k = q.per_channel ? ch : 0;
  int64_t v = ch < q.upward_channels ? mbqm_up(acc, q.mult[k], q.shift[k])
                                     : mbqm(acc, q.mult[k], q.shift[k]);
  v += q.zp_out;
  if (v < q.lo) v = q.lo;
  if (v > q.hi) v = q.hi;
  return static_cast<int8_t>(v);
}

template <bool kPerChannel>
inline void requant_t(const int32_t* __restrict__ acc, const int32_t* __restrict__ bias,
                      const QuantOut& q, int ch0, int n, int8_t* __restrict__ y) {
  const int32_t* __restrict__ mp = q.mult + (kPerChannel ? ch0 : 0);
  const int32_t* __restrict__ sp = q.shift + (kPerChannel ? ch0 : 0);
  const int64_t upward = static_cast<int64_t>(q.upward_channels) - ch0;
  const int64_t zp = q.zp_out, lo = q.lo, hi = q.hi;
  for (int j = 0; j < n; ++j) {
    const int64_t m = kPerChannel ? mp[j] : mp[0];
    const int64_t s = kPerChannel ? sp[j] : sp[0];
    const int64_t l = s > 0 ? s : 0, r = s > 0 ? 0 : -s;
    const int64_t a = static_cast<int64_t>(acc[j]) + (bias ? bias[ch0 + j] : 0);
    const int64_t x = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(a) << l));
    const int64_t p = (x * m + (int64_t(1) << 30)) >> 31;
    const int64_t mask = (int64_t(1) << r) - 1;
    const int64_t up = (p + ((mask + 1) >> 1)) >> r;
    const int64_t away = (p >> r) + ((p & mask) > ((mask >> 1) + (p < 0 ? 1 : 0)) ? 1 : 0);
    int64_t v = (j < upward ? up : away) + zp;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    y[j] = static_cast<int8_t>(v);
  }
}

// requant() of n accumulators (plus bias) of channels ch0 .. ch0 + n - 1, branch-free so that
// it vectorises. The multipliers are QuantizeMultiplier's, in [2**30, 2**31) or 0, so the
// doubling high multiply never saturates.
#if defined(__AVX512F__) && defined(__AVX512BW__)
// gemmlowp's SaturatingRoundingDoublingHighMul of 16 lanes (multipliers never INT32_MIN):
// (x m + 2**30) >> 31 on the even and the odd lanes as 64-bit products.
inline __m512i srdhm16(__m512i x, __m512i m) {
  const __m512i half = _mm512_set1_epi64(int64_t(1) << 30);
  __m512i pe = _mm512_mul_epi32(x, m);
  __m512i po = _mm512_mul_epi32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(m, 32));
  pe = _mm512_srai_epi64(_mm512_add_epi64(pe, half), 31);
  po = _mm512_srai_epi64(_mm512_add_epi64(po, half), 31);
  return _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
}

// requant_t() of 16 channels ch0 .. ch0 + 15 in 32-bit lanes: the same values (the product
// of the doubling high multiply fits int32, the final shift is rounded without overflow, and
// the clamp is applied before the zero point is added).
template <bool kPerChannel>
inline void requant16v(__m512i a, const int32_t* bias, const QuantOut& q, int ch0, int8_t* y) {
  const __m512i one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512();
  const __m512i m = kPerChannel ? _mm512_loadu_si512(q.mult + ch0) : _mm512_set1_epi32(q.mult[0]);
  const __m512i s =
      kPerChannel ? _mm512_loadu_si512(q.shift + ch0) : _mm512_set1_epi32(q.shift[0]);
  const __m512i l = _mm512_max_epi32(s, zero);
  const __m512i r = _mm512_max_epi32(_mm512_sub_epi32(zero, s), zero);
  if (bias) a = _mm512_add_epi32(a, _mm512_loadu_si512(bias + ch0));
  const __m512i p = srdhm16(_mm512_sllv_epi32(a, l), m);
  const __m512i fl = _mm512_srav_epi32(p, r);
  // ties away from zero: + (p mod 2**r > 2**r / 2 - 1 + (p < 0))
  const __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, r), one);
  const __m512i thr = _mm512_add_epi32(_mm512_srli_epi32(mask, 1), _mm512_srli_epi32(p, 31));
  const __m512i away =
      _mm512_mask_add_epi32(fl, _mm512_cmpgt_epi32_mask(_mm512_and_si512(p, mask), thr), fl, one);
  // ties upward: + bit r - 1 of p
  const __m512i bit = _mm512_and_si512(
      _mm512_srav_epi32(p, _mm512_max_epi32(_mm512_sub_epi32(r, one), zero)), one);
  const __m512i up = _mm512_mask_add_epi32(fl, _mm512_cmpgt_epi32_mask(r, zero), fl, bit);
  const int upward = q.upward_channels - ch0;
  const __mmask16 up_lanes = upward >= 16 ? __mmask16(0xFFFF)
                             : upward <= 0 ? __mmask16(0)
                                           : __mmask16((1u << upward) - 1u);
  __m512i v = _mm512_mask_blend_epi32(up_lanes, away, up);
  // shifts beyond 31 bits round every product to 0
  v = _mm512_mask_mov_epi32(v, _mm512_cmpgt_epi32_mask(r, _mm512_set1_epi32(31)), zero);
  v = _mm512_max_epi32(v, _mm512_set1_epi32(q.lo - q.zp_out));
  v = _mm512_min_epi32(v, _mm512_set1_epi32(q.hi - q.zp_out));
  v = _mm512_add_epi32(v, _mm512_set1_epi32(q.zp_out));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm512_cvtepi32_epi8(v));
}

template <bool kPerChannel>
inline void requant16(const int32_t* acc, const int32_t* bias, const QuantOut& q, int ch0,
                      int8_t* y) {
  requant16v<kPerChannel>(_mm512_loadu_si512(acc), bias, q, ch0, y);
}

// requant16v() split in two: the per-channel constants of channels ch0 .. ch0 + 15 prepared
// once (for every pixel of a tile), then applied to accumulators (the same values).
struct Requant16 {
  __m512i bias, m, l, r, mask, rm1, lo, hi, zp;
  __mmask16 up_lanes, big_r, pos_r;
  bool all_up, any_big;
};

template <bool kPerChannel>
inline Requant16 requant16_prepare(const int32_t* bias, const QuantOut& q, int ch0) {
  Requant16 k;
  const __m512i one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512();
  k.bias = bias ? _mm512_loadu_si512(bias + ch0) : zero;
  k.m = kPerChannel ? _mm512_loadu_si512(q.mult + ch0) : _mm512_set1_epi32(q.mult[0]);
  const __m512i s =
      kPerChannel ? _mm512_loadu_si512(q.shift + ch0) : _mm512_set1_epi32(q.shift[0]);
  k.l = _mm512_max_epi32(s, zero);
  k.r = _mm512_max_epi32(_mm512_sub_epi32(zero, s), zero);
  k.mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, k.r), one);
  k.rm1 = _mm512_max_epi32(_mm512_sub_epi32(k.r, one), zero);
  const int upward = q.upward_channels - ch0;
  k.up_lanes = upward >= 16 ? __mmask16(0xFFFF)
               : upward <= 0 ? __mmask16(0)
                             : __mmask16((1u << upward) - 1u);
  k.all_up = k.up_lanes == __mmask16(0xFFFF);
  k.pos_r = _mm512_cmpgt_epi32_mask(k.r, zero);
  k.big_r = _mm512_cmpgt_epi32_mask(k.r, _mm512_set1_epi32(31));
  k.any_big = k.big_r != 0;
  k.lo = _mm512_set1_epi32(q.lo - q.zp_out);
  k.hi = _mm512_set1_epi32(q.hi - q.zp_out);
  k.zp = _mm512_set1_epi32(q.zp_out);
  return k;
}

inline void requant16_apply(__m512i a, const Requant16& k, int8_t* y) {
  const __m512i one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512();
  a = _mm512_add_epi32(a, k.bias);
  const __m512i p = srdhm16(_mm512_sllv_epi32(a, k.l), k.m);
  const __m512i fl = _mm512_srav_epi32(p, k.r);
  // ties upward: + bit r - 1 of p
  const __m512i bit = _mm512_and_si512(_mm512_srav_epi32(p, k.rm1), one);
  __m512i v = _mm512_mask_add_epi32(fl, k.pos_r, fl, bit);
  if (!k.all_up) {  // ties away from zero: + (p mod 2**r > 2**r / 2 - 1 + (p < 0))
    const __m512i thr = _mm512_add_epi32(_mm512_srli_epi32(k.mask, 1), _mm512_srli_epi32(p, 31));
    const __m512i away = _mm512_mask_add_epi32(
        fl, _mm512_cmpgt_epi32_mask(_mm512_and_si512(p, k.mask), thr), fl, one);
    v = _mm512_mask_blend_epi32(k.up_lanes, away, v);
  }
  if (k.any_big) v = _mm512_mask_mov_epi32(v, k.big_r, zero);  // every product rounds to 0
  v = _mm512_min_epi32(_mm512_max_epi32(v, k.lo), k.hi);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm512_cvtepi32_epi8(_mm512_add_epi32(v, k.zp)));
}
#endif

inline void requant_n(const int32_t* acc, const int32_t* bias, const QuantOut& q, int ch0,
                      int n, int8_t* y) {
  int j = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  if (q.per_channel) {
    for (; j + 16 <= n; j += 16) requant16<true>(acc + j, bias, q, ch0 + j, y + j);
  } else {
    for (; j + 16 <= n; j += 16) requant16<false>(acc + j, bias, q, ch0 + j, y + j);
  }
  if (j == n) return;
#endif
  if (q.per_channel) requant_t<true>(acc + j, bias, q, ch0 + j, n - j, y + j);
  else requant_t<false>(acc + j, bias, q, ch0 + j, n - j, y + j);
}

inline int8_t clamp8(int64_t v, int lo, int hi) {
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  return static_cast<int8_t>(v);
}

// round half away from zero, as std::round / TfLiteRound
inline int64_t round_away(float v) {
  if (std::isnan(v)) return 0;
  if (v > 1099511627776.f) return int64_t(1) << 40;
  if (v < -1099511627776.f) return -(int64_t(1) << 40);
  return static_cast<int64_t>(std::round(v));
}

// A scratch buffer of this thread for one kernel call, grown as needed and kept (no heap
// allocation per call once warm); `tag` tells the kernels' buffers apart.
template <typename T, int kTag>
T* scratch(size_t n) {
  static thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

constexpr int kTile = 4;  // output pixels computed together (filter reuse)

// Input rows of the taps of output pixel (oy, ox): pointer per (ky, kx) or the pad row.
template <typename T>
inline const T* tap_ptr(const ConvGeom& g, const T* x, const T* pad, int b, int oy, int ox,
                        int ky, int kx) {
  const int iy = oy * g.sh - g.pt + ky * g.dh;
  const int ix = ox * g.sw - g.pl + kx * g.dw;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return pad;
  return x + ((static_cast<int64_t>(b) * g.h + iy) * g.w + ix) * g.c;
}

}  // namespace

void activate_f32(float* y, size_t n, int act) {
  switch (act) {
    case ACT_RELU: for (size_t i = 0; i < n; ++i) y[i] = y[i] < 0.f ? 0.f : y[i]; break;
    case ACT_RELU6:
      for (size_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], 0.f), 6.f);
      break;
    case ACT_RELU_N1_TO_1:
      for (size_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], -1.f), 1.f);
      break;
    case ACT_TANH: for (size_t i = 0; i < n; ++i) y[i] = std::tanh(y[i]); break;
    default: break;
  }
}

// ---------------------------------------------------------------- convolution
// Float CONV_2D and FULLY_CONNECTED on packed GEMM panels.
namespace {

// The rows of a pixel tile: for each tap, a pointer per row (stride `ts`) to its C input
// channels (the zero row outside the image or past the last pixel).
inline void tile_taps(const ConvGeom& g, const float* x, const float* zero, int b, int pix0,
                      int npix, int ts, const float** taps) {
  int oy = pix0 / g.ow, ox = pix0 % g.ow;
  const float* img = x + static_cast<int64_t>(b) * g.h * g.w * g.c;
  for (int t = 0; t < ts; ++t) {
    const int iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl;
    for (int ky = 0; ky < g.kh; ++ky) {
      const int iy = iy0 + ky * g.dh;
      const bool row_in = t < npix && iy >= 0 && iy < g.h;
      const float* xrow = img + static_cast<int64_t>(iy) * g.w * g.c;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ix = ix0 + kx * g.dw;
        taps[(ky * g.kw + kx) * ts + t] =
            row_in && ix >= 0 && ix < g.w ? xrow + static_cast<int64_t>(ix) * g.c : zero;
      }
    }
    if (++ox == g.ow) ox = 0, ++oy;
  }
}

// The taps of the `npix` pixels from pix0 (every tap in the image) as rows of K = KH KW C
// values in filter order; zero rows after them up to `ts`.
inline void im2col_tile(const ConvGeom& g, const float* x, int b, int pix0, int npix, int ts,
                        float* cols) {
  int oy = pix0 / g.ow, ox = pix0 % g.ow;
  const float* img = x + static_cast<int64_t>(b) * g.h * g.w * g.c;
  const int run = g.kw * g.c;  // one filter row's values, contiguous when dw is 1
  float* d = cols;
  for (int t = 0; t < ts; ++t) {
    if (t >= npix) {
      std::fill(d, d + static_cast<int64_t>(g.kh) * run, 0.f);
      d += static_cast<int64_t>(g.kh) * run;
      continue;
    }
    const int iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl;
    for (int ky = 0; ky < g.kh; ++ky) {
      const float* src = img + (static_cast<int64_t>(iy0 + ky * g.dh) * g.w + ix0) * g.c;
      if (g.dw == 1) {
        int i = 0;
#if defined(__AVX2__)
        for (; i + 8 <= run; i += 8) _mm256_storeu_ps(d + i, _mm256_loadu_ps(src + i));
#endif
        for (; i < run; ++i) d[i] = src[i];
        d += run;
      } else {
        for (int kx = 0; kx < g.kw; ++kx, d += g.c)
          for (int ci = 0; ci < g.c; ++ci) d[ci] = src[static_cast<int64_t>(kx) * g.dw * g.c + ci];
      }
    }
    if (++ox == g.ow) ox = 0, ++oy;
  }
}

// Whether the kMR pixels from pix0 have every tap in the image; if so, `bases` gets each
// pixel's first tap (the others lie at the constant offsets of tap_offsets).
template <int kMR>
inline bool tile_bases(const ConvGeom& g, const float* x, int b, int pix0, const float** bases) {
  int oy = pix0 / g.ow, ox = pix0 % g.ow;
  const float* img = x + static_cast<int64_t>(b) * g.h * g.w * g.c;
  for (int t = 0; t < kMR; ++t) {
    const int iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl;
    if (oy >= g.oh || iy0 < 0 || ix0 < 0 || iy0 + (g.kh - 1) * g.dh >= g.h ||
        ix0 + (g.kw - 1) * g.dw >= g.w)
      return false;
    bases[t] = img + (static_cast<int64_t>(iy0) * g.w + ix0) * g.c;
    if (++ox == g.ow) ox = 0, ++oy;
  }
  return true;
}

// Portable GEMM tile: kMR rows x nr output channels of one panel, every tap and input
// channel in order (k = tap, then channel), then the bias and the activation.
void gemm_tile_ref(const float* const* taps, int ntaps, int c, const float* panel, int nr,
                   const float* bias, int o0, int nvalid, int act, float* const* dst, int rows,
                   int mr) {
  float acc[32];
  for (int t = 0; t < rows; ++t) {
    std::fill(acc, acc + nr, 0.f);
    const float* wp = panel;
    for (int k = 0; k < ntaps; ++k) {
      const float* p = taps[k * mr + t];
      for (int ci = 0; ci < c; ++ci, wp += nr) {
        const float xv = p[ci];
        for (int j = 0; j < nr; ++j) acc[j] = std::fma(xv, wp[j], acc[j]);
      }
    }
    for (int j = 0; j < nvalid; ++j) dst[t][j] = act1(acc[j] + (bias ? bias[o0 + j] : 0.f), act);
  }
}

#if defined(__AVX512F__)
inline __mmask16 lanes(int n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}

// The epilogue of the AVX-512 tiles: bias, then the clamp of the activation as
// min(hi, max(lo, v)), which keeps NaN (the second operand is returned when one is NaN).
struct Epilogue {
  __m512 b0, b1, lo, hi;
  __mmask16 m0, m1;
  inline void store(__m512 v, int half, float* dst) const {
    const __m512 r = _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_add_ps(v, half ? b1 : b0)));
    _mm512_mask_storeu_ps(dst + 16 * half, half ? m1 : m0, r);
  }
};

// One tile of kMR rows x 16 kV output channels, accumulated in registers over every tap
// and input channel of the panel (fused multiply-adds in k order, as gemm_tile_ref), then
// the epilogue for the first `rows` rows. The rows of tap k are `taps[k * ts + t]`, or
// with kInterior `taps[t] + offs[k]`.
template <int kMR, int kV, bool kInterior = false>
inline void gemm_tile_avx512(const float* const* taps, int ts, int ntaps, int c,
                             const float* panel, const Epilogue& ep, float* const* dst,
                             int rows, const int64_t* offs = nullptr) {
  __m512 acc[kMR][kV];
  for (int t = 0; t < kMR; ++t)
    for (int v = 0; v < kV; ++v) acc[t][v] = _mm512_setzero_ps();
  const float* wp = panel;
  for (int k = 0; k < ntaps; ++k) {
    const float* p[kMR];
    for (int t = 0; t < kMR; ++t) p[t] = kInterior ? taps[t] + offs[k] : taps[k * ts + t];
    for (int ci = 0; ci < c; ++ci, wp += 16 * kV) {
      const __m512 w0 = _mm512_loadu_ps(wp);
      const __m512 w1 = kV == 2 ? _mm512_loadu_ps(wp + 16) : w0;
      for (int t = 0; t < kMR; ++t) {
        const __m512 xv = _mm512_set1_ps(p[t][ci]);
        acc[t][0] = _mm512_fmadd_ps(xv, w0, acc[t][0]);
        if (kV == 2) acc[t][1] = _mm512_fmadd_ps(xv, w1, acc[t][1]);
      }
    }
  }
  for (int t = 0; t < kMR && t < rows; ++t)
    for (int v = 0; v < kV; ++v) ep.store(acc[t][v], v, dst[t]);
}

// One row (a matrix-vector product): four partial sums over k in turn (independent
// multiply-add chains), added pairwise at the end.
template <int kV>
inline void gemm_row_avx512(const float* const* taps, int ts, int ntaps, int c,
                            const float* panel, const Epilogue& ep, float* dst) {
  __m512 acc[4][kV];
  for (int u = 0; u < 4; ++u)
    for (int v = 0; v < kV; ++v) acc[u][v] = _mm512_setzero_ps();
  const float* wp = panel;
  for (int k = 0; k < ntaps; ++k) {
    const float* p = taps[k * ts];
    int ci = 0;
    for (; ci + 4 <= c; ci += 4, wp += 64 * kV)
      for (int u = 0; u < 4; ++u)
        for (int v = 0; v < kV; ++v)
          acc[u][v] = _mm512_fmadd_ps(_mm512_set1_ps(p[ci + u]),
                                      _mm512_loadu_ps(wp + 16 * (kV * u + v)), acc[u][v]);
    for (; ci < c; ++ci, wp += 16 * kV)
      for (int v = 0; v < kV; ++v)
        acc[0][v] = _mm512_fmadd_ps(_mm512_set1_ps(p[ci]), _mm512_loadu_ps(wp + 16 * v),
                                    acc[0][v]);
  }
  for (int v = 0; v < kV; ++v)
    ep.store(_mm512_add_ps(_mm512_add_ps(acc[0][v], acc[1][v]),
                           _mm512_add_ps(acc[2][v], acc[3][v])), v, dst);
}

// A tile of `rows` rows (at most kMR): the smallest instantiated tile that holds them.
template <int kMR, int kV>
inline void gemm_tail_avx512(const float* const* taps, int ts, int ntaps, int c,
                             const float* panel, const Epilogue& ep, float* const* dst,
                             int rows) {
  if (rows <= 2) return gemm_tile_avx512<2, kV>(taps, ts, ntaps, c, panel, ep, dst, rows);
  if (rows <= 4) return gemm_tile_avx512<4, kV>(taps, ts, ntaps, c, panel, ep, dst, rows);
  if (rows <= 8) return gemm_tile_avx512<8, kV>(taps, ts, ntaps, c, panel, ep, dst, rows);
  gemm_tile_avx512<kMR, kV>(taps, ts, ntaps, c, panel, ep, dst, rows);
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
// The rows of a kMR-row tile (14 for 16-channel panels, 12 for 32) in AVX2 tiles of 7 or 6
// rows x 16 channels (each half of a 32-channel panel in turn): 14 or 12 accumulator
// registers (avx2::gemm_tile16); the tiles divide kMR, so that they read only the tile's
// tap pointers.
template <int kMR>
inline void gemm_rows_avx2(const float* const* taps, int ntaps, int c, const float* panel,
                           int nr, const float* b8, float lo, float hi, int nvalid,
                           float* const* dst, int rows) {
  constexpr int kR = kMR % 7 == 0 ? 7 : 6;
  static_assert(kMR % kR == 0, "the AVX2 tiles divide the row tile");
  for (int h = 0; h < nr; h += 16) {
    float* hd[kMR];
    for (int t = 0; t < kMR; ++t) hd[t] = dst[t] + h;
    for (int r0 = 0; r0 < rows; r0 += kR)
      avx2::gemm_tile16(kR, taps + r0, kMR, ntaps, c, nr, panel + h, b8 + h, lo, hi,
                        nvalid - h, hd + r0, rows - r0);
  }
}
#endif

// CONV_2D float over a packed filter: panels of nr output channels (outer loop: one panel's
// filter stays in cache while every pixel tile of the stripe passes), tiles of kMR output
// pixels (a 1x1 stride-1 convolution reads its rows in place; others through tap pointers).
template <int kMR, int kV>
void conv_packed_run(const ConvGeom& g, const float* x, const float* zero, const float* wp,
                     int nr, const float* bias, int act, float* y, int row0, int row1,
                     int pan0, int pan1) {
  const int o = g.o, c = g.c, ntaps = g.kh * g.kw;
  const int64_t kdim = static_cast<int64_t>(ntaps) * c;
  const bool direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 &&
                      g.pl == 0 && g.h == g.oh && g.w == g.ow;
  const float** taps = scratch<const float*, 2>(static_cast<size_t>(ntaps) * kMR);
  const int npix = (row1 - row0) * g.ow;
#if defined(__AVX512F__)
  const bool vec = act != ACT_TANH && nr == 16 * kV;
  int64_t* offs = scratch<int64_t, 5>(static_cast<size_t>(ntaps));
  for (int ky = 0; ky < g.kh; ++ky)
    for (int kx = 0; kx < g.kw; ++kx)
      offs[ky * g.kw + kx] = (static_cast<int64_t>(ky) * g.dh * g.w + kx * g.dw) * c;
  float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
  if (act == ACT_RELU) lo = 0.f;
  if (act == ACT_RELU6) lo = 0.f, hi = 6.f;
  if (act == ACT_RELU_N1_TO_1) lo = -1.f, hi = 1.f;
#elif defined(__AVX2__) && defined(__FMA__)
  float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
  if (act == ACT_RELU) lo = 0.f;
  if (act == ACT_RELU6) lo = 0.f, hi = 6.f;
  if (act == ACT_RELU_N1_TO_1) lo = -1.f, hi = 1.f;
  float b8[32];  // the panel's bias, zeros past the last channel
  // fewer input channels than a vector: each tile's taps gathered (im2col) into rows of K
  // (tap, channel) values, run as one tap of K channels (the same products in k order)
  float* cols = c < 8 && ntaps > 1 && !direct && act != ACT_TANH && nr == 16 * kV
                    ? scratch<float, 40>(static_cast<size_t>(kMR) * kdim)
                    : nullptr;
#endif
  for (int b = 0; b < g.n; ++b) {
    const int64_t pix_base = (static_cast<int64_t>(b) * g.oh + row0) * g.ow;
    for (int o0 = pan0 * nr; o0 < o && o0 < pan1 * nr; o0 += nr) {
      const float* panel = wp + (o0 / nr) * kdim * nr;
      const int nvalid = std::min(nr, o - o0);
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
      for (int j = 0; j < 32; ++j) b8[j] = bias && j < nvalid ? bias[o0 + j] : 0.f;
#endif
#if defined(__AVX512F__)
      Epilogue ep;
      ep.m0 = lanes(nvalid);
      ep.m1 = lanes(nvalid - 16);
      ep.b0 = bias ? _mm512_maskz_loadu_ps(ep.m0, bias + o0) : _mm512_setzero_ps();
      ep.b1 = bias && kV == 2 ? _mm512_maskz_loadu_ps(ep.m1, bias + o0 + 16)
                              : _mm512_setzero_ps();
      ep.lo = _mm512_set1_ps(lo);
      ep.hi = _mm512_set1_ps(hi);
#endif
      for (int q0 = 0; q0 < npix; q0 += kMR) {
        const int rows = std::min(kMR, npix - q0);
        const int p0 = row0 * g.ow + q0;  // pixel index within the image
        float* dst[kMR];
        for (int t = 0; t < kMR; ++t)
          dst[t] = y + (pix_base + q0 + std::min(t, rows - 1)) * o + o0;
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
        if (cols != nullptr) {
          im2col_tile(g, x, b, p0, rows, kMR, cols);
          const float* rows_k[kMR];
          for (int t = 0; t < kMR; ++t) rows_k[t] = cols + t * kdim;
          gemm_rows_avx2<kMR>(rows_k, 1, static_cast<int>(kdim), panel, nr, b8, lo, hi,
                              nvalid, dst, rows);
          continue;
        }
#endif
#if defined(__AVX512F__)
        if (vec && !direct && rows == kMR && tile_bases<kMR>(g, x, b, p0, taps)) {
          gemm_tile_avx512<kMR, kV, true>(taps, kMR, ntaps, c, panel, ep, dst, kMR, offs);
          continue;
        }
#endif
        if (direct) {
          const float* first = x + (static_cast<int64_t>(b) * g.h * g.w + p0) * c;
          for (int t = 0; t < kMR; ++t)
            taps[t] = t < rows ? first + static_cast<int64_t>(t) * c : zero;
        } else {
          tile_taps(g, x, zero, b, p0, rows, kMR, taps);
        }
#if defined(__AVX512F__)
        if (vec) {
          if (npix == 1) gemm_row_avx512<kV>(taps, kMR, ntaps, c, panel, ep, dst[0]);
          else if (rows == kMR)
            gemm_tile_avx512<kMR, kV>(taps, kMR, ntaps, c, panel, ep, dst, kMR);
          else gemm_tail_avx512<kMR, kV>(taps, kMR, ntaps, c, panel, ep, dst, rows);
          continue;
        }
#elif defined(__AVX2__) && defined(__FMA__)
        if (act != ACT_TANH && nr == 16 * kV) {
          gemm_rows_avx2<kMR>(taps, ntaps, c, panel, nr, b8, lo, hi, nvalid, dst, rows);
          continue;
        }
#endif
        gemm_tile_ref(taps, ntaps, c, panel, nr, bias, o0, nvalid, act, dst, rows, kMR);
      }
    }
  }
}

}  // namespace

void conv2d_f32_few(const ConvGeom& g, const float* x, const float* w, const float* bias,
                    int act, float* y, int row0, int row1) {
  const int k = g.kh * g.kw * g.c;
  const int kp = (k + 7) / 8 * 8;
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
  if (act != ACT_TANH && g.o >= 4 && g.kh * g.kw > 1) {
    // the AVX2 GEMM on one 16-channel panel [K][16] of the filter, zeros past O
    float* panel = scratch<float, 41>(static_cast<size_t>(k) * 16);
    std::fill(panel, panel + static_cast<int64_t>(k) * 16, 0.f);
    for (int o = 0; o < g.o; ++o)
      for (int i = 0; i < k; ++i) panel[i * 16 + o] = w[static_cast<int64_t>(o) * kp + i];
    conv2d_f32_packed(g, x, panel, 16, bias, act, y, row0, row1);
    return;
  }
#endif
  float* patch = scratch<float, 9>(static_cast<size_t>(kp));
  for (int i = k; i < kp; ++i) patch[i] = 0.f;
  const int64_t row = static_cast<int64_t>(g.w) * g.c;
  for (int b = 0; b < g.n; ++b) {
    const float* xb = x + static_cast<int64_t>(b) * g.h * row;
    for (int oy = row0; oy < row1; ++oy) {
      float* yrow = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * g.o;
      for (int ox = 0; ox < g.ow; ++ox) {
        // the pixel's taps in filter order [KH][KW][C], zeros outside the image
        float* p = patch;
        for (int ky = 0; ky < g.kh; ++ky) {
          const int iy = oy * g.sh - g.pt + ky * g.dh;
          for (int kx = 0; kx < g.kw; ++kx, p += g.c) {
            const int ix = ox * g.sw - g.pl + kx * g.dw;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) {
              for (int c = 0; c < g.c; ++c) p[c] = 0.f;
            } else {
              const float* src = xb + iy * row + static_cast<int64_t>(ix) * g.c;
              for (int c = 0; c < g.c; ++c) p[c] = src[c];
            }
          }
        }
        float* out = yrow + static_cast<int64_t>(ox) * g.o;
        for (int o = 0; o < g.o; ++o) {
          const float* wo = w + static_cast<int64_t>(o) * kp;
          float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
          for (int i = 0; i < kp; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += patch[i + j] * wo[i + j];
          float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
          if (bias) sum += bias[o];
          out[o] = act1(sum, act);
        }
      }
    }
  }
}

void conv2d_f32_direct(const ConvGeom& g, const float* x, const float* w, const float* bias,
                       int act, float* y, int row0, int row1) {
#if defined(__AVX2__) && defined(__FMA__)
  avx2::conv2d_f32_direct(g, x, w, bias, act, y, row0, row1);
#else
  const int o8 = (g.o + 7) / 8 * 8;
  float* acc = scratch<float, 57>(static_cast<size_t>(o8));
  for (int b = 0; b < g.n; ++b)
    for (int oy = row0; oy < row1; ++oy) {
      float* yrow = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * g.o;
      for (int ox = 0; ox < g.ow; ++ox) {
        for (int oc = 0; oc < g.o; ++oc) acc[oc] = bias ? bias[oc] : 0.f;
        for (int ky = 0; ky < g.kh; ++ky) {
          const int iy = oy * g.sh - g.pt + ky * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          for (int kx = 0; kx < g.kw; ++kx) {
            const int ix = ox * g.sw - g.pl + kx * g.dw;
            if (ix < 0 || ix >= g.w) continue;
            const float* xp = x + ((static_cast<int64_t>(b) * g.h + iy) * g.w + ix) * g.c;
            const float* wp = w + (static_cast<int64_t>(ky) * g.kw + kx) * g.c * o8;
            for (int ci = 0; ci < g.c; ++ci, wp += o8)
              for (int oc = 0; oc < g.o; ++oc) acc[oc] += xp[ci] * wp[oc];
          }
        }
        float* out = yrow + static_cast<int64_t>(ox) * g.o;
        for (int oc = 0; oc < g.o; ++oc) out[oc] = act1(acc[oc], act);
      }
    }
#endif
}

namespace {

// conv2d_f32_packed's output rows [row0, row1) of the panels [pan0, pan1)
void conv_packed_part(const ConvGeom& g, const float* x, const float* wp, int nr,
                      const float* bias, int act, float* y, int row0, int row1, int pan0,
                      int pan1) {
  float* zero = scratch<float, 3>(static_cast<size_t>(g.c));
  std::fill(zero, zero + g.c, 0.f);
  const auto run = [&](const ConvGeom& gg, const float* xx, float* yy) {
    if (nr <= 16)
      conv_packed_run<14, 1>(gg, xx, zero, wp, nr, bias, act, yy, row0, row1, pan0, pan1);
    else conv_packed_run<12, 2>(gg, xx, zero, wp, nr, bias, act, yy, row0, row1, pan0, pan1);
  };
  // the input rows and columns the stripe's taps reach, in image coordinates [lo, hi)
  const int r_lo = row0 * g.sh - g.pt, r_hi = (row1 - 1) * g.sh - g.pt + (g.kh - 1) * g.dh + 1;
  const int c_lo = -g.pl, c_hi = (g.ow - 1) * g.sw - g.pl + (g.kw - 1) * g.dw + 1;
  if (row1 <= row0 || (r_lo >= 0 && c_lo >= 0 && r_hi <= g.h && c_hi <= g.w))
    return run(g, x, y);
  // taps outside the image: a zero-padded copy of those rows, so that every pixel tile has
  // all its taps at constant offsets (the zeros add as the zero row did)
  const int h2 = r_hi - r_lo, w2 = c_hi - c_lo, c = g.c;
  float* buf = scratch<float, 6>(static_cast<size_t>(h2) * w2 * c);
  ConvGeom g2 = g;
  g2.n = 1, g2.h = h2, g2.w = w2, g2.pt = row0 * g.sh, g2.pl = 0;
  for (int b = 0; b < g.n; ++b) {
    for (int r = 0; r < h2; ++r) {
      const int iy = r + r_lo;
      float* dst = buf + static_cast<int64_t>(r) * w2 * c;
      if (iy < 0 || iy >= g.h) {
        std::fill(dst, dst + static_cast<int64_t>(w2) * c, 0.f);
        continue;
      }
      const int in0 = std::max(0, c_lo), in1 = std::min(g.w, c_hi);  // image columns copied
      const float* src = x + ((static_cast<int64_t>(b) * g.h + iy) * g.w) * c;
      std::fill(dst, dst + static_cast<int64_t>(in0 - c_lo) * c, 0.f);
      std::memcpy(dst + static_cast<int64_t>(in0 - c_lo) * c, src + static_cast<int64_t>(in0) * c,
                  sizeof(float) * c * std::max(0, in1 - in0));
      std::fill(dst + static_cast<int64_t>(std::max(in0, in1) - c_lo) * c,
                dst + static_cast<int64_t>(w2) * c, 0.f);
    }
    run(g2, buf, y + static_cast<int64_t>(b) * g.oh * g.ow * g.o);
  }
}

}  // namespace

void conv2d_f32_packed(const ConvGeom& g, const float* x, const float* wp, int nr,
                       const float* bias, int act, float* y, int row0, int row1) {
  conv_packed_part(g, x, wp, nr, bias, act, y, row0, row1, 0, (g.o + nr - 1) / nr);
}

void conv2d_f32_panels(const ConvGeom& g, const float* x, const float* wp, int nr,
                       const float* bias, int act, float* y, int pan0, int pan1) {
  conv_packed_part(g, x, wp, nr, bias, act, y, 0, g.oh, pan0, pan1);
}

void fully_connected_f32_packed(const float* x, const float* wp, int nr, const float* bias,
                                int batch, int k, int o, int act, float* y) {
  // a 1x1 convolution over a row of `batch` pixels
  conv2d_f32_packed(ConvGeom{1, 1, batch, k, 1, 1, 1, batch, o, 1, 1, 1, 1, 0, 0, 1}, x, wp,
                    nr, bias, act, y, 0, 1);
}

namespace {

// Output columns [lo, hi) whose tap at input column offset `off` (ox * sw + off) lies in the
// image.
inline void tap_columns(const ConvGeom& g, int off, int& lo, int& hi) {
  lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
  const int last = g.w - 1 - off;  // largest ox * sw
  hi = last < 0 ? 0 : std::min(g.ow, last / g.sw + 1);
  if (lo > hi) lo = hi;
}

// Depthwise accumulation of one output row: acc[ox * o + oc] += x[.., oc / m] * w[tap][oc]
// over the in-image taps, in (ky, kx) order for every output.
template <typename X, typename W, typename Acc, typename Load>
void depthwise_row(const ConvGeom& g, const X* x, const W* w, int b, int oy, Acc* acc,
                   Load load) {
  const int o = g.c * g.mult, m = g.mult;
  for (int ky = 0; ky < g.kh; ++ky) {
    const int iy = oy * g.sh - g.pt + ky * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    const X* xrow = x + (static_cast<int64_t>(b) * g.h + iy) * g.w * g.c;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int off = kx * g.dw - g.pl;
      int lo, hi;
      tap_columns(g, off, lo, hi);
      const W* __restrict__ wk = w + static_cast<int64_t>(ky * g.kw + kx) * o;
      for (int ox = lo; ox < hi; ++ox) {
        Acc* __restrict__ a = acc + static_cast<int64_t>(ox) * o;
        const X* __restrict__ p = xrow + static_cast<int64_t>(ox * g.sw + off) * g.c;
        if (m == 1) {
          for (int oc = 0; oc < o; ++oc) a[oc] += load(p[oc]) * static_cast<Acc>(wk[oc]);
        } else {
          for (int oc = 0; oc < o; ++oc) a[oc] += load(p[oc / m]) * static_cast<Acc>(wk[oc]);
        }
      }
    }
  }
}

}  // namespace

#if defined(__AVX512F__)
namespace {

// Depthwise float with channel multiplier 1: per output pixel and block of 16 channels (the
// last one masked), the in-image taps in (ky, kx) order accumulate in one register starting
// from the bias, as depthwise_row accumulates them.
void depthwise_f32_m1(const ConvGeom& g, const float* x, const float* w, const float* bias,
                      float lo, float hi, float* y, int row0, int row1) {
  const int c = g.c;
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      const int iy0 = oy * g.sh - g.pt;
      float* row = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * c;
      for (int ox = 0; ox < g.ow; ++ox) {
        const int ix0 = ox * g.sw - g.pl;
        float* dst = row + static_cast<int64_t>(ox) * c;
        for (int c0 = 0; c0 < c; c0 += 16) {
          const __mmask16 m = c - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - c0)) - 1u);
          __m512 acc = bias ? _mm512_maskz_loadu_ps(m, bias + c0) : _mm512_setzero_ps();
          for (int ky = 0; ky < g.kh; ++ky) {
            const int iy = iy0 + ky * g.dh;
            if (iy < 0 || iy >= g.h) continue;
            const float* xrow = x + (static_cast<int64_t>(b) * g.h + iy) * g.w * c + c0;
            const float* wrow = w + static_cast<int64_t>(ky) * g.kw * c + c0;
            for (int kx = 0; kx < g.kw; ++kx) {
              const int ix = ix0 + kx * g.dw;
              if (ix < 0 || ix >= g.w) continue;
              acc = _mm512_fmadd_ps(
                  _mm512_maskz_loadu_ps(m, xrow + static_cast<int64_t>(ix) * c),
                  _mm512_maskz_loadu_ps(m, wrow + static_cast<int64_t>(kx) * c), acc);
            }
          }
          _mm512_mask_storeu_ps(dst + c0, m, _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc)));  // NaN stays
        }
      }
    }
  }
}

// One output pixel of depthwise_f32_m1 (every block of 16 channels, the last one masked).
inline void dw_f32_pixel(const ConvGeom& g, const float* x, const float* w, const float* bias,
                         __m512 vlo, __m512 vhi, int b, int oy, int ox, float* dst) {
  const int c = g.c;
  const int iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl;
  for (int c0 = 0; c0 < c; c0 += 16) {
    const __mmask16 m = lanes(c - c0);
    __m512 acc = bias ? _mm512_maskz_loadu_ps(m, bias + c0) : _mm512_setzero_ps();
    for (int ky = 0; ky < g.kh; ++ky) {
      const int iy = iy0 + ky * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      const float* xrow = x + (static_cast<int64_t>(b) * g.h + iy) * g.w * c + c0;
      const float* wrow = w + static_cast<int64_t>(ky) * g.kw * c + c0;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ix = ix0 + kx * g.dw;
        if (ix < 0 || ix >= g.w) continue;
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, xrow + static_cast<int64_t>(ix) * c),
                              _mm512_maskz_loadu_ps(m, wrow + static_cast<int64_t>(kx) * c),
                              acc);
      }
    }
    // min(hi, max(lo, v)) keeps NaN
    _mm512_mask_storeu_ps(dst + c0, m, _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc)));
  }
}

// depthwise_f32_m1 with the output columns whose taps all lie in the image in tiles of 4
// pixels (each filter vector loaded once for the 4, four independent sums; the same taps in
// the same order as depthwise_f32_m1), the border columns pixel by pixel.
void depthwise_f32_m1_tiles(const ConvGeom& g, const float* x, const float* w,
                            const float* bias, float lo, float hi, float* y, int row0,
                            int row1) {
  constexpr int kT = 4;
  const int c = g.c;
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const int ox_lo = std::min(g.ow, (g.pl + g.sw - 1) / g.sw);
  const int last = g.w - 1 - (g.kw - 1) * g.dw + g.pl;  // largest ox sw
  const int ox_hi = std::max(ox_lo, last < 0 ? 0 : std::min(g.ow, last / g.sw + 1));
  const int n_in = (ox_hi - ox_lo) / kT * kT;  // tiled interior columns
  if (n_in == 0) return depthwise_f32_m1(g, x, w, bias, lo, hi, y, row0, row1);
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      float* row = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * c;
      const int iy0 = oy * g.sh - g.pt;
      for (int ox = ox_lo; ox < ox_lo + n_in; ox += kT) {
        for (int c0 = 0; c0 < c; c0 += 16) {
          const __mmask16 m = lanes(c - c0);
          const __m512 init = bias ? _mm512_maskz_loadu_ps(m, bias + c0) : _mm512_setzero_ps();
          __m512 acc[kT];
          for (int t = 0; t < kT; ++t) acc[t] = init;
          for (int ky = 0; ky < g.kh; ++ky) {
            const int iy = iy0 + ky * g.dh;
            if (iy < 0 || iy >= g.h) continue;
            const float* xp = x + ((static_cast<int64_t>(b) * g.h + iy) * g.w +
                                   (ox * g.sw - g.pl)) * c + c0;
            const float* wrow = w + static_cast<int64_t>(ky) * g.kw * c + c0;
            for (int kx = 0; kx < g.kw; ++kx) {
              const __m512 wv = _mm512_maskz_loadu_ps(m, wrow + static_cast<int64_t>(kx) * c);
              const float* xk = xp + static_cast<int64_t>(kx) * g.dw * c;
              for (int t = 0; t < kT; ++t)
                acc[t] = _mm512_fmadd_ps(
                    _mm512_maskz_loadu_ps(m, xk + static_cast<int64_t>(t) * g.sw * c), wv,
                    acc[t]);
            }
          }
          for (int t = 0; t < kT; ++t)  // NaN stays
            _mm512_mask_storeu_ps(row + static_cast<int64_t>(ox + t) * c + c0, m,
                                  _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc[t])));
        }
      }
    }
  }
  for (int b = 0; b < g.n; ++b)  // the border columns
    for (int oy = row0; oy < row1; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        if (ox == ox_lo) ox += n_in;
        if (ox >= g.ow) break;
        dw_f32_pixel(g, x, w, bias, vlo, vhi, b, oy, ox,
                     y + ((static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox) * c);
      }
}

}  // namespace
#endif

void depthwise_f32(const ConvGeom& g, const float* x, const float* w, const float* bias,
                   int act, float* y, int row0, int row1) {
#if defined(__AVX512F__)
  if (g.mult == 1 && act != ACT_TANH) {
    const float inf = std::numeric_limits<float>::infinity();
    float lo = -inf, hi = inf;
    if (act == ACT_RELU) lo = 0.f;
    if (act == ACT_RELU6) lo = 0.f, hi = 6.f;
    if (act == ACT_RELU_N1_TO_1) lo = -1.f, hi = 1.f;
    depthwise_f32_m1_tiles(g, x, w, bias, lo, hi, y, row0, row1);
    return;
  }
#endif
  const int o = g.c * g.mult;
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      float* row = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * o;
      for (int ox = 0; ox < g.ow; ++ox) {
        float* a = row + static_cast<int64_t>(ox) * o;
        if (bias) std::memcpy(a, bias, sizeof(float) * o);
        else std::fill(a, a + o, 0.f);
      }
      depthwise_row(g, x, w, b, oy, row, [](float v) { return v; });
      activate_f32(row, static_cast<size_t>(g.ow) * o, act);
    }
  }
}

void depthwise_f32_pre(const ConvGeom& g, const float* x, const float* w, const float* bias,
                       const float* packed, int act, float* y, int row0, int row1) {
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
  if (g.mult == 1) return avx2::depthwise_f32_packed(g, x, packed, act, y, row0, row1);
#endif
  (void)packed;
  depthwise_f32(g, x, w, bias, act, y, row0, row1);
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
namespace {

// One output pixel of depthwise_q8_m1 (16 channels from c0): its in-image taps.
template <bool kPerChannel>
inline void dw_q8_pixel(const ConvGeom& g, const int8_t* x, __m512i zp, const int16_t* w,
                        const int32_t* bias, const QuantOut& q, int b, int oy, int ox, int c0,
                        int8_t* dst) {
  const int c = g.c;
  const int iy0 = oy * g.sh - g.pt, ix0 = ox * g.sw - g.pl;
  __m512i acc = _mm512_setzero_si512();
  for (int ky = 0; ky < g.kh; ++ky) {
    const int iy = iy0 + ky * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    const int8_t* xrow = x + (static_cast<int64_t>(b) * g.h + iy) * g.w * c + c0;
    const int16_t* wrow = w + static_cast<int64_t>(ky) * g.kw * c + c0;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int ix = ix0 + kx * g.dw;
      if (ix < 0 || ix >= g.w) continue;
      const __m512i xv = _mm512_sub_epi32(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(
              reinterpret_cast<const __m128i*>(xrow + static_cast<int64_t>(ix) * c))),
          zp);
      const __m512i wv = _mm512_cvtepi16_epi32(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(wrow + static_cast<int64_t>(kx) * c)));
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(xv, wv));
    }
  }
  requant16v<kPerChannel>(acc, bias, q, c0, dst + c0);
}

// Depthwise int8 with channel multiplier 1: per output pixel and block of 16 channels, the
// in-image taps accumulate in one register, requantised straight from it; the channels after
// the last full block go through depthwise_row one pixel row at a time.
template <bool kPerChannel>
void depthwise_q8_m1(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                     const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1) {
  const int c = g.c, cb = c / 16 * 16;
  const __m512i zp = _mm512_set1_epi32(zp_in);
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      int8_t* row = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * c;
      for (int ox = 0; ox < g.ow; ++ox)
        for (int c0 = 0; c0 < cb; c0 += 16)
          dw_q8_pixel<kPerChannel>(g, x, zp, w, bias, q, b, oy, ox, c0,
                                   row + static_cast<int64_t>(ox) * c);
      if (cb < c) {
        std::vector<int32_t> acc(static_cast<size_t>(g.ow) * c, 0);
        depthwise_row(g, x, w, b, oy, acc.data(),
                      [zp_in](int8_t v) { return int32_t(v) - zp_in; });
        for (int ox = 0; ox < g.ow; ++ox) {
          const int64_t i = static_cast<int64_t>(ox) * c;
          requant_n(acc.data() + i + cb, bias, q, cb, c - cb, row + i + cb);
        }
      }
    }
  }
}

// depthwise_q8_m1 for channel counts that are multiples of 16: the output columns whose
// taps all lie in the image in tiles of 4 pixels (each filter vector loaded once for the 4,
// four independent sums), the border columns pixel by pixel.
template <bool kPerChannel>
void depthwise_q8_m1_tiles(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                           const int32_t* bias, const QuantOut& q, int8_t* y, int row0,
                           int row1) {
  constexpr int kT = 4;
  const int c = g.c;
  const __m512i zp = _mm512_set1_epi32(zp_in);
  // interior columns [ox_lo, ox_hi): ox sw - pl >= 0 and ox sw - pl + (kw - 1) dw < w
  const int ox_lo = std::min(g.ow, (g.pl + g.sw - 1) / g.sw);
  const int last = g.w - 1 - (g.kw - 1) * g.dw + g.pl;  // largest ox sw
  const int ox_hi = std::max(ox_lo, last < 0 ? 0 : std::min(g.ow, last / g.sw + 1));
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      int8_t* row = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * c;
      const int iy0 = oy * g.sh - g.pt;
      int ox = 0;
      for (; ox < ox_lo; ++ox)
        for (int c0 = 0; c0 < c; c0 += 16)
          dw_q8_pixel<kPerChannel>(g, x, zp, w, bias, q, b, oy, ox, c0, row + ox * c);
      for (; ox + kT <= ox_hi; ox += kT) {
        for (int c0 = 0; c0 < c; c0 += 16) {
          __m512i acc[kT];
          for (int t = 0; t < kT; ++t) acc[t] = _mm512_setzero_si512();
          for (int ky = 0; ky < g.kh; ++ky) {
            const int iy = iy0 + ky * g.dh;
            if (iy < 0 || iy >= g.h) continue;
            const int8_t* xp = x + ((static_cast<int64_t>(b) * g.h + iy) * g.w +
                                    (ox * g.sw - g.pl)) * c + c0;
            const int16_t* wrow = w + static_cast<int64_t>(ky) * g.kw * c + c0;
            for (int kx = 0; kx < g.kw; ++kx) {
              const __m512i wv = _mm512_cvtepi16_epi32(_mm256_loadu_si256(
                  reinterpret_cast<const __m256i*>(wrow + static_cast<int64_t>(kx) * c)));
              const int8_t* xk = xp + static_cast<int64_t>(kx) * g.dw * c;
              for (int t = 0; t < kT; ++t) {
                const __m512i xv = _mm512_sub_epi32(
                    _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                        xk + static_cast<int64_t>(t) * g.sw * c))),
                    zp);
                acc[t] = _mm512_add_epi32(acc[t], _mm512_mullo_epi32(xv, wv));
              }
            }
          }
          const Requant16 k = requant16_prepare<kPerChannel>(bias, q, c0);
          for (int t = 0; t < kT; ++t) requant16_apply(acc[t], k, row + (ox + t) * c + c0);
        }
      }
      for (; ox < g.ow; ++ox)
        for (int c0 = 0; c0 < c; c0 += 16)
          dw_q8_pixel<kPerChannel>(g, x, zp, w, bias, q, b, oy, ox, c0, row + ox * c);
    }
  }
}

}  // namespace
#endif

void depthwise_q8_pre(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                      const int32_t* bias, const int16_t* wi, const int32_t* folded,
                      const QuantOut& q, int8_t* y, int row0, int row1) {
#if defined(__AVX2__) && !(defined(__AVX512F__) && defined(__AVX512BW__))
  if (g.mult == 1) {
    depthwise_q8_m1_avx2(g, x, zp_in, w, bias, q, y, row0, row1, wi, folded);
    return;
  }
#else
  (void)wi, (void)folded;
#endif
  depthwise_q8(g, x, zp_in, w, bias, q, y, row0, row1);
}

void depthwise_q8(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                  const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
  if (g.mult == 1 && g.c % 16 == 0 && g.c > 0) {
    if (q.per_channel) depthwise_q8_m1_tiles<true>(g, x, zp_in, w, bias, q, y, row0, row1);
    else depthwise_q8_m1_tiles<false>(g, x, zp_in, w, bias, q, y, row0, row1);
    return;
  }
  if (g.mult == 1 && g.c >= 16) {
    if (q.per_channel) depthwise_q8_m1<true>(g, x, zp_in, w, bias, q, y, row0, row1);
    else depthwise_q8_m1<false>(g, x, zp_in, w, bias, q, y, row0, row1);
    return;
  }
#elif defined(__AVX2__)
  if (g.mult == 1) {
    depthwise_q8_m1_avx2(g, x, zp_in, w, bias, q, y, row0, row1);
    return;
  }
#endif
  const int o = g.c * g.mult;
  std::vector<int32_t> acc(static_cast<size_t>(g.ow) * o);
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      std::fill(acc.begin(), acc.end(), 0);
      depthwise_row(g, x, w, b, oy, acc.data(),
                    [zp_in](int8_t v) { return int32_t(v) - zp_in; });
      int8_t* row = y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * o;
      for (int ox = 0; ox < g.ow; ++ox) {
        const int64_t i = static_cast<int64_t>(ox) * o;
        requant_n(acc.data() + i, bias, q, 0, o, row + i);
      }
    }
  }
}

namespace {

// One block of kTile pixels x 16 output channels of an int8 convolution over every tap and
// pair of input channels: acc[t][j] += xa * w[2j] + xb * w[2j + 1], exact in int32.
inline void conv_q8_block(const int8_t* const* taps, int ntaps, int c, int o, int zp_in,
                          const int16_t* w, int oo0, int32_t (&acc)[kTile][16]) {
  const int pairs = (c + 1) / 2;
#if defined(__AVX2__)
  __m256i a[kTile][2];
  for (int t = 0; t < kTile; ++t) a[t][0] = a[t][1] = _mm256_setzero_si256();
#endif
  for (int k = 0; k < ntaps; ++k) {
    const int8_t* p[kTile];
    for (int t = 0; t < kTile; ++t) p[t] = taps[k * kTile + t];
    const int16_t* wk = w + static_cast<int64_t>(k) * pairs * o * 2 + oo0 * 2;
    for (int cp = 0; cp < pairs; ++cp) {
      const int ci = 2 * cp;
      const int16_t* wr = wk + static_cast<int64_t>(cp) * o * 2;
      int32_t xs[kTile];
      for (int t = 0; t < kTile; ++t) {
        const int xa = p[t][ci] - zp_in;
        const int xb = ci + 1 < c ? p[t][ci + 1] - zp_in : 0;
        xs[t] = static_cast<int32_t>((static_cast<uint32_t>(xb) << 16) |
                                     (static_cast<uint32_t>(xa) & 0xFFFFu));
      }
#if defined(__AVX2__)
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + 16));
      for (int t = 0; t < kTile; ++t) {
        const __m256i xv = _mm256_set1_epi32(xs[t]);
        a[t][0] = _mm256_add_epi32(a[t][0], _mm256_madd_epi16(xv, w0));
        a[t][1] = _mm256_add_epi32(a[t][1], _mm256_madd_epi16(xv, w1));
      }
#else
      for (int t = 0; t < kTile; ++t) {
        const int32_t xa = static_cast<int16_t>(xs[t] & 0xFFFF);
        const int32_t xb = static_cast<int16_t>(static_cast<uint32_t>(xs[t]) >> 16);
        for (int j = 0; j < 16; ++j) acc[t][j] += xa * wr[2 * j] + xb * wr[2 * j + 1];
      }
#endif
    }
  }
#if defined(__AVX2__)
  for (int t = 0; t < kTile; ++t) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc[t]), a[t][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc[t] + 8), a[t][1]);
  }
#endif
}

}  // namespace

void conv2d_q8(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
               const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1) {
  const int o = g.o, c = g.c, ntaps = g.kh * g.kw, pairs = (c + 1) / 2;
  // the pad row holds the zero point (x - zp = 0), one more for an odd channel count
  std::vector<int8_t> pad(static_cast<size_t>(c) + 1, static_cast<int8_t>(zp_in));
  std::vector<const int8_t*> taps(static_cast<size_t>(ntaps) * kTile);
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      for (int ox0 = 0; ox0 < g.ow; ox0 += kTile) {
        const int tn = std::min(kTile, g.ow - ox0);
        for (int ky = 0; ky < g.kh; ++ky)
          for (int kx = 0; kx < g.kw; ++kx)
            for (int t = 0; t < kTile; ++t)
              taps[(ky * g.kw + kx) * kTile + t] =
                  t < tn ? tap_ptr(g, x, pad.data(), b, oy, ox0 + t, ky, kx) : pad.data();
        const int64_t base = (static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox0;
        int oo0 = 0;
        for (; oo0 + 16 <= o; oo0 += 16) {
          int32_t acc[kTile][16] = {};
          conv_q8_block(taps.data(), ntaps, c, o, zp_in, w, oo0, acc);
          for (int t = 0; t < tn; ++t) requant_n(acc[t], bias, q, oo0, 16, y + (base + t) * o + oo0);
        }
        for (; oo0 < o; ++oo0) {  // remaining channels one by one
          for (int t = 0; t < tn; ++t) {
            int32_t acc = 0;
            for (int k = 0; k < ntaps; ++k) {
              const int8_t* p = taps[k * kTile + t];
              const int16_t* wk = w + static_cast<int64_t>(k) * pairs * o * 2 + oo0 * 2;
              for (int ci = 0; ci < c; ++ci)
                acc += (p[ci] - zp_in) * int32_t(wk[static_cast<int64_t>(ci / 2) * o * 2 + ci % 2]);
            }
            y[(base + t) * o + oo0] =
                requant(static_cast<int64_t>(acc) + (bias ? bias[oo0] : 0), q, oo0);
          }
        }
      }
    }
  }
}

namespace {

constexpr int kTileQ = 8;  // output pixels of one block of conv2d_q8x4

// Four input channels of a pixel as one 32-bit word of unsigned bytes (x + 128); `full` is
// false for the last quad of a channel count that is not a multiple of 4 (the missing bytes
// are 0, their filter bytes are 0 too).
inline uint32_t quad_u8(const int8_t* p, bool full, int valid) {
  uint32_t v = 0;
  if (full) {
    std::memcpy(&v, p, 4);
  } else {
    for (int k = 0; k < valid; ++k)
      v |= static_cast<uint32_t>(static_cast<uint8_t>(p[k])) << (8 * k);
  }
  return v ^ 0x80808080u;
}

// acc[t][j] over every tap and quad for kTileQ pixels and 16 output channels from oo0.
inline void conv_q8x4_block(const int8_t* const* taps, int ntaps, int c, int o16,
                            const int8_t* w, int oo0, int32_t (&acc)[kTileQ][16]) {
  const int quads = (c + 3) / 4, tail = c % 4;
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  __m512i a[kTileQ];
  for (int t = 0; t < kTileQ; ++t) a[t] = _mm512_setzero_si512();
#endif
  for (int k = 0; k < ntaps; ++k) {
    const int8_t* p[kTileQ];
    for (int t = 0; t < kTileQ; ++t) p[t] = taps[k * kTileQ + t];
    const int8_t* wk = w + (static_cast<int64_t>(k) * quads * o16 + oo0) * 4;
    for (int cq = 0; cq < quads; ++cq) {
      const bool full = tail == 0 || cq + 1 < quads;
      const int8_t* wr = wk + static_cast<int64_t>(cq) * o16 * 4;
      uint32_t xs[kTileQ];
      for (int t = 0; t < kTileQ; ++t) xs[t] = quad_u8(p[t] + 4 * cq, full, tail);
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
      const __m512i wv = _mm512_loadu_si512(wr);
      for (int t = 0; t < kTileQ; ++t)
        a[t] = _mm512_dpbusd_epi32(a[t], _mm512_set1_epi32(static_cast<int>(xs[t])), wv);
#else
      for (int t = 0; t < kTileQ; ++t) {
        const int32_t x0 = xs[t] & 0xFF, x1 = (xs[t] >> 8) & 0xFF, x2 = (xs[t] >> 16) & 0xFF,
                      x3 = xs[t] >> 24;
        for (int j = 0; j < 16; ++j)
          acc[t][j] += x0 * wr[4 * j] + x1 * wr[4 * j + 1] + x2 * wr[4 * j + 2] +
                       x3 * wr[4 * j + 3];
      }
#endif
    }
  }
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  for (int t = 0; t < kTileQ; ++t) _mm512_storeu_si512(acc[t], a[t]);
#endif
}

}  // namespace

#if defined(__AVX512VNNI__) && defined(__AVX512F__) && defined(__AVX512BW__)
namespace {

// One tile of conv2d_q8x4_vnni: kMR pixels x 16 kV output channels from oo0, summed over
// every tap and quad in registers (VPDPBUSD: unsigned input bytes by signed filter bytes),
// then requantised. The taps point into the unsigned copy of the input, whose 4-byte reads
// past the last channel meet zero filter bytes: `taps[k * kMR + t]`, or with kInterior
// (every tap of every pixel in the image) `taps[t] + offs[k]`.
template <int kMR, int kV, bool kPerChannel, bool kInterior>
inline void q8x4_tile(const uint8_t* const* taps, const int64_t* offs, int ntaps, int quads,
                      int o16, const int8_t* w, int oo0, int o, const int32_t* bias,
                      const QuantOut& q, int8_t* const* dst, int rows) {
  __m512i acc[kMR][kV];
  for (int t = 0; t < kMR; ++t)
    for (int v = 0; v < kV; ++v) acc[t][v] = _mm512_setzero_si512();
  for (int k = 0; k < ntaps; ++k) {
    const uint8_t* p[kMR];
    for (int t = 0; t < kMR; ++t) p[t] = kInterior ? taps[t] + offs[k] : taps[k * kMR + t];
    const int8_t* wr = w + (static_cast<int64_t>(k) * quads * o16 + oo0) * 4;
    for (int cq = 0; cq < quads; ++cq, wr += static_cast<int64_t>(o16) * 4) {
      __m512i wv[kV];
      for (int v = 0; v < kV; ++v) wv[v] = _mm512_loadu_si512(wr + 64 * v);
      for (int t = 0; t < kMR; ++t) {
        int32_t word;
        std::memcpy(&word, p[t] + 4 * cq, 4);
        const __m512i xv = _mm512_set1_epi32(word);
        for (int v = 0; v < kV; ++v) acc[t][v] = _mm512_dpbusd_epi32(acc[t][v], xv, wv[v]);
      }
    }
  }
  for (int v = 0; v < kV; ++v) {
    const int ch = oo0 + 16 * v;
    if (ch + 16 <= o) {
      const Requant16 k = requant16_prepare<kPerChannel>(bias, q, ch);
      for (int t = 0; t < kMR && t < rows; ++t) requant16_apply(acc[t][v], k, dst[t] + ch);
    } else if (ch < o) {
      for (int t = 0; t < kMR && t < rows; ++t) {
        alignas(64) int32_t part[16];
        _mm512_store_si512(part, acc[t][v]);
        requant_n(part, bias, q, ch, o - ch, dst[t] + ch);
      }
    }
  }
}

// q8x4_tile over every block of up to 64 output channels.
template <int kMR, bool kPerChannel, bool kInterior>
inline void q8x4_tiles_over_o(const uint8_t* const* tp, const int64_t* offs, int ntaps,
                              int quads, int o16, const int8_t* w, int o, const int32_t* bias,
                              const QuantOut& q, int8_t* const* dst, int rows) {
  int oo0 = 0;
  for (; oo0 + 64 <= o16; oo0 += 64)
    q8x4_tile<kMR, 4, kPerChannel, kInterior>(tp, offs, ntaps, quads, o16, w, oo0, o, bias, q,
                                              dst, rows);
  const int left = (o16 - oo0) / 16;
  if (left == 3)
    q8x4_tile<kMR, 3, kPerChannel, kInterior>(tp, offs, ntaps, quads, o16, w, oo0, o, bias, q,
                                              dst, rows);
  else if (left == 2)
    q8x4_tile<kMR, 2, kPerChannel, kInterior>(tp, offs, ntaps, quads, o16, w, oo0, o, bias, q,
                                              dst, rows);
  else if (left == 1)
    q8x4_tile<kMR, 1, kPerChannel, kInterior>(tp, offs, ntaps, quads, o16, w, oo0, o, bias, q,
                                              dst, rows);
}

// conv2d_q8x4 with VNNI: the input rows the stripe reads are first copied as unsigned bytes
// (x + 128) with 4 spare bytes, so that every quad is one 4-byte load; tiles of 6 pixels x
// up to 64 output channels.
template <bool kPerChannel>
void conv2d_q8x4_vnni(const ConvGeom& g, const int8_t* x, int zp_in, const int8_t* w,
                      const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1) {
  constexpr int kMR = 6;
  const int o = g.o, c = g.c, ntaps = g.kh * g.kw, o16 = (o + 15) / 16 * 16;
  const int quads = (c + 3) / 4;
  const int64_t img = static_cast<int64_t>(g.h) * g.w * c;
  uint8_t* xu = scratch<uint8_t, 5>(static_cast<size_t>(g.n * img) + 4 * quads + 64);
  uint8_t* pad = xu + g.n * img + 4;  // the zero point (its bytes the bias removes)
  std::fill(pad, pad + 4 * quads + 4, static_cast<uint8_t>(zp_in + 128));
  const int iy_lo = std::max(0, row0 * g.sh - g.pt);
  const int iy_hi = std::min(g.h, (row1 - 1) * g.sh - g.pt + (g.kh - 1) * g.dh + 1);
  for (int b = 0; b < g.n; ++b) {
    if (iy_hi <= iy_lo) break;
    const int64_t first = b * img + static_cast<int64_t>(iy_lo) * g.w * c;
    const int64_t count = static_cast<int64_t>(iy_hi - iy_lo) * g.w * c;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    int64_t i = 0;
    for (; i + 64 <= count; i += 64)
      _mm512_storeu_si512(xu + first + i,
                          _mm512_xor_si512(_mm512_loadu_si512(x + first + i), flip));
    for (; i < count; ++i) xu[first + i] = static_cast<uint8_t>(x[first + i] ^ 0x80);
  }
  std::memset(xu + g.n * img, 0, 4);  // read past the last pixel: zero filter bytes
  const uint8_t** taps = scratch<const uint8_t*, 6>(static_cast<size_t>(ntaps) * kMR);
  int64_t* offs = scratch<int64_t, 7>(static_cast<size_t>(ntaps));
  for (int ky = 0; ky < g.kh; ++ky)
    for (int kx = 0; kx < g.kw; ++kx)
      offs[ky * g.kw + kx] = (static_cast<int64_t>(ky) * g.dh * g.w + kx * g.dw) * c;
  // output pixels whose taps all lie in the image: rows [oy_lo, oy_hi), columns [ox_lo, ox_hi)
  const auto inside = [](int n_in, int n_out, int s, int pad, int span, int& lo, int& hi) {
    lo = std::min(n_out, (pad + s - 1) / s);
    const int last = n_in - 1 - span + pad;
    hi = std::max(lo, last < 0 ? 0 : std::min(n_out, last / s + 1));
  };
  int oy_lo, oy_hi, ox_lo, ox_hi;
  inside(g.h, g.oh, g.sh, g.pt, (g.kh - 1) * g.dh, oy_lo, oy_hi);
  inside(g.w, g.ow, g.sw, g.pl, (g.kw - 1) * g.dw, ox_lo, ox_hi);
  for (int b = 0; b < g.n; ++b) {
    const uint8_t* xb = xu + b * img;
    const int npix = (row1 - row0) * g.ow;
    for (int q0 = 0; q0 < npix; q0 += kMR) {
      const int rows = std::min(kMR, npix - q0);
      int oy = row0 + q0 / g.ow, ox = q0 % g.ow;
      int8_t* dst[kMR];
      bool interior = rows == kMR;
      for (int t = 0; t < kMR; ++t) {
        if (t < rows) {
          dst[t] = y + ((static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox) * o;
          interior = interior && oy >= oy_lo && oy < oy_hi && ox >= ox_lo && ox < ox_hi;
          if (interior)
            taps[t] = xb + (static_cast<int64_t>(oy * g.sh - g.pt) * g.w + ox * g.sw - g.pl) * c;
          if (++ox == g.ow) ox = 0, ++oy;
        } else {
          dst[t] = dst[rows - 1];
          for (int k = 0; k < ntaps; ++k) taps[k * kMR + t] = pad;
        }
      }
      if (!interior) {  // every tap of every pixel (the pad row outside the image)
        int py = row0 + q0 / g.ow, px = q0 % g.ow;
        for (int t = 0; t < rows; ++t) {
          const int iy0 = py * g.sh - g.pt, ix0 = px * g.sw - g.pl;
          for (int ky = 0; ky < g.kh; ++ky) {
            const int iy = iy0 + ky * g.dh;
            for (int kx = 0; kx < g.kw; ++kx) {
              const int ix = ix0 + kx * g.dw;
              taps[(ky * g.kw + kx) * kMR + t] =
                  iy >= 0 && iy < g.h && ix >= 0 && ix < g.w
                      ? xb + (static_cast<int64_t>(iy) * g.w + ix) * c
                      : pad;
            }
          }
          if (++px == g.ow) px = 0, ++py;
        }
      }
      const uint8_t* const* tp = taps;
      if (interior)
        q8x4_tiles_over_o<kMR, kPerChannel, true>(tp, offs, ntaps, quads, o16, w, o, bias, q,
                                                  dst, rows);
      else
        q8x4_tiles_over_o<kMR, kPerChannel, false>(tp, offs, ntaps, quads, o16, w, o, bias, q,
                                                   dst, rows);
    }
  }
}

}  // namespace
#endif

void conv2d_q8x4(const ConvGeom& g, const int8_t* x, int zp_in, const int8_t* w,
                 const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1) {
#if defined(__AVX512VNNI__) && defined(__AVX512F__) && defined(__AVX512BW__)
  if (q.per_channel) conv2d_q8x4_vnni<true>(g, x, zp_in, w, bias, q, y, row0, row1);
  else conv2d_q8x4_vnni<false>(g, x, zp_in, w, bias, q, y, row0, row1);
  return;
#elif defined(__AVX2__)
  conv2d_q8x4_avx2(g, x, zp_in, w, bias, q, y, row0, row1);
  return;
#endif
  const int o = g.o, c = g.c, ntaps = g.kh * g.kw, o16 = (o + 15) / 16 * 16;
  // the pad row holds the zero point: its bytes add (zp_in + 128) w, which the bias removes
  int8_t* pad = scratch<int8_t, 2>(static_cast<size_t>(c) + 4);
  std::fill(pad, pad + c + 4, static_cast<int8_t>(zp_in));
  const int8_t** taps = scratch<const int8_t*, 3>(static_cast<size_t>(ntaps) * kTileQ);
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      for (int ox0 = 0; ox0 < g.ow; ox0 += kTileQ) {
        const int tn = std::min(kTileQ, g.ow - ox0);
        for (int ky = 0; ky < g.kh; ++ky)
          for (int kx = 0; kx < g.kw; ++kx)
            for (int t = 0; t < kTileQ; ++t)
              taps[(ky * g.kw + kx) * kTileQ + t] =
                  t < tn ? tap_ptr(g, x, pad, b, oy, ox0 + t, ky, kx) : pad;
        const int64_t base = (static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox0;
        for (int oo0 = 0; oo0 < o; oo0 += 16) {
          int32_t acc[kTileQ][16] = {};
          conv_q8x4_block(taps, ntaps, c, o16, w, oo0, acc);
          const int n = std::min(16, o - oo0);
          for (int t = 0; t < tn; ++t) requant_n(acc[t], bias, q, oo0, n, y + (base + t) * o + oo0);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- matmul
namespace {

// f(b, oy, ox, acc) for every output pixel, acc[o] the sum over the taps landing on it of
// dot(x pixel, w[o][ky][kx]) computed by dot(acc_o, xp, wp).
template <typename X, typename W, typename Acc, typename Dot, typename Store>
void transpose_conv_loop(const TConvGeom& g, const X* x, const W* w, Dot dot, Store store) {
  std::vector<Acc> acc(static_cast<size_t>(g.o));
  for (int b = 0; b < g.n; ++b)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int ky = 0; ky < g.kh; ++ky) {
          const int ty = oy + g.pt - ky;
          if (ty < 0 || ty % g.sh) continue;
          const int iy = ty / g.sh;
          if (iy >= g.h) continue;
          for (int kx = 0; kx < g.kw; ++kx) {
            const int tx = ox + g.pl - kx;
            if (tx < 0 || tx % g.sw) continue;
            const int ix = tx / g.sw;
            if (ix >= g.w) continue;
            const X* xp = x + ((static_cast<int64_t>(b) * g.h + iy) * g.w + ix) * g.c;
            for (int oc = 0; oc < g.o; ++oc) {
              const W* wp = w + ((static_cast<int64_t>(oc) * g.kh + ky) * g.kw + kx) * g.c;
              acc[oc] += dot(xp, wp, g.c);
            }
          }
        }
        store(b, oy, ox, acc.data());
      }
}

}  // namespace

void transpose_conv_f32_gemm(const TConvGeom& g, const float* x, const float* wp, int nr,
                             const float* bias, int act, float* y) {
  const int row_o = g.kw * g.o;                     // products of one pixel and one ky
  const int64_t slab = static_cast<int64_t>((row_o + nr - 1) / nr) * nr * g.c;  // per ky
  const int64_t out_row = static_cast<int64_t>(g.ow) * g.o;
  if (g.sh == g.kh && g.sw == g.kw && g.pt == 0 && g.pl == 0 && g.oh == g.h * g.kh &&
      g.ow == g.w * g.kw) {
    // the taps tile the output: input row iy and ky give output row iy * kh + ky whole, its
    // pixels' (kx, oc) values side by side, written by the GEMM with bias and activation
    float* tiled = nullptr;  // the bias of each (kx, oc)
    if (bias) {
      tiled = scratch<float, 44>(static_cast<size_t>(row_o));
      for (int j = 0; j < row_o; ++j) tiled[j] = bias[j % g.o];
    }
    for (int b = 0; b < g.n; ++b)
      for (int iy = 0; iy < g.h; ++iy) {
        const float* xr = x + ((static_cast<int64_t>(b) * g.h + iy) * g.w) * g.c;
        for (int ky = 0; ky < g.kh; ++ky)
          conv2d_f32_pointwise(ConvGeom{1, 1, g.w, g.c, 1, 1, 1, g.w, row_o, 1, 1, 1, 1, 0, 0, 1},
                            xr, wp + ky * slab, nr, tiled, act,
                            y + (static_cast<int64_t>(b) * g.oh + iy * g.kh + ky) * out_row, 0, 1);
      }
    return;
  }
  // input rows per block: their products (at most ~256 KiB) stay in cache until scattered
  const int block = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(g.h, (int64_t(1) << 16) / std::max<int64_t>(1, int64_t(g.w) * row_o))));
  float* cols = scratch<float, 43>(static_cast<size_t>(block) * g.w * row_o);
  for (int b = 0; b < g.n; ++b) {
    float* yb = y + b * g.oh * out_row;
    for (int64_t p = 0; p < static_cast<int64_t>(g.oh) * g.ow; ++p)
      for (int oc = 0; oc < g.o; ++oc) yb[p * g.o + oc] = bias ? bias[oc] : 0.f;
    for (int iy0 = 0; iy0 < g.h; iy0 += block) {
      const int rows = std::min(block, g.h - iy0);
      const int px = rows * g.w;
      const float* xb = x + ((static_cast<int64_t>(b) * g.h + iy0) * g.w) * g.c;
      for (int ky = 0; ky < g.kh; ++ky) {
        // the block's pixels times the (kx, oc) filter rows of ky: a 1x1 convolution's GEMM
        conv2d_f32_pointwise(ConvGeom{1, 1, px, g.c, 1, 1, 1, px, row_o, 1, 1, 1, 1, 0, 0, 1}, xb,
                          wp + ky * slab, nr, nullptr, ACT_NONE, cols, 0, 1);
        // each product added to the output pixel its tap lands on
        for (int r = 0; r < rows; ++r) {
          const int oy = (iy0 + r) * g.sh - g.pt + ky;
          if (oy < 0 || oy >= g.oh) continue;
          float* yrow = yb + oy * out_row;
          for (int ix = 0; ix < g.w; ++ix) {
            const float* src = cols + (static_cast<int64_t>(r) * g.w + ix) * row_o;
            const int ox0 = ix * g.sw - g.pl;
            const int k0 = std::max(0, -ox0), k1 = std::min(g.kw, g.ow - ox0);
            if (k1 <= k0) continue;
            float* dst = yrow + static_cast<int64_t>(ox0 + k0) * g.o;
            const float* s = src + k0 * g.o;
            for (int i = 0; i < (k1 - k0) * g.o; ++i) dst[i] += s[i];
          }
        }
      }
    }
    if (act != ACT_NONE)
      for (int64_t i = 0; i < g.oh * out_row; ++i) yb[i] = act1(yb[i], act);
  }
}

void transpose_conv_q8(const TConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                       const int32_t* bias, const QuantOut& q, int8_t* y) {
  transpose_conv_loop<int8_t, int16_t, int32_t>(
      g, x, w,
      [zp_in](const int8_t* xp, const int16_t* wp, int c) {
        int32_t s = 0;
        for (int i = 0; i < c; ++i) s += (static_cast<int32_t>(xp[i]) - zp_in) * wp[i];
        return s;
      },
      [&](int b, int oy, int ox, const int32_t* acc) {
        int8_t* yp = y + ((static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox) * g.o;
        requant_n(acc, bias, q, 0, g.o, yp);
      });
}

void conv3d_f32(const Conv3Geom& g, const float* x, const float* w, const float* bias, int act,
                float* y) {
  std::vector<float> acc(static_cast<size_t>(g.o));
  float* yp = y;
  for (int b = 0; b < g.n; ++b)
    for (int oz = 0; oz < g.od; ++oz)
      for (int oy = 0; oy < g.oh; ++oy)
        for (int ox = 0; ox < g.ow; ++ox, yp += g.o) {
          std::fill(acc.begin(), acc.end(), 0.f);
          for (int a = 0; a < g.kd; ++a) {
            const int iz = oz * g.sd + a * g.dd - g.pd;
            if (iz < 0 || iz >= g.d) continue;
            for (int ky = 0; ky < g.kh; ++ky) {
              const int iy = oy * g.sh + ky * g.dh - g.pt;
              if (iy < 0 || iy >= g.h) continue;
              for (int kx = 0; kx < g.kw; ++kx) {
                const int ix = ox * g.sw + kx * g.dw - g.pl;
                if (ix < 0 || ix >= g.w) continue;
                const float* xp =
                    x + (((static_cast<int64_t>(b) * g.d + iz) * g.h + iy) * g.w + ix) * g.c;
                const float* wp =
                    w + ((static_cast<int64_t>(a) * g.kh + ky) * g.kw + kx) * g.c * g.o;
                for (int oc = 0; oc < g.o; ++oc) {
                  float s = 0.f;
                  for (int ci = 0; ci < g.c; ++ci) s += xp[ci] * wp[static_cast<int64_t>(ci) * g.o + oc];
                  acc[oc] += s;
                }
              }
            }
          }
          for (int oc = 0; oc < g.o; ++oc) {
            const float v = acc[oc] + (bias ? bias[oc] : 0.f);
            yp[oc] = act != ACT_NONE ? act1(v, act) : v;
          }
        }
}

void lstm_f32(const LstmGeom& g, const float* x, const float* w_in, const float* w_rec,
              const float* bias, const float* peep_i, const float* peep_f, const float* peep_o,
              const float* h0, const float* c0, float* y) {
  const int U = g.units, W = g.gates * U;
  std::vector<float> h(static_cast<size_t>(g.batch) * U, 0.f), c(h), gate(W), hn(h);
  if (h0) std::copy(h0, h0 + h.size(), h.begin());
  if (c0) std::copy(c0, c0 + c.size(), c.begin());
  const auto sigmoid = [](float v) { return 1.f / (1.f + std::exp(-v)); };
  const auto act = [&](float v) { return g.act == ACT_TANH ? std::tanh(v) : act1(v, g.act); };
  const int off_f = g.gates == 4 ? U : 0;
  for (int t = 0; t < g.steps; ++t) {
    for (int b = 0; b < g.batch; ++b) {
      const int64_t row = g.time_major ? static_cast<int64_t>(t) * g.batch + b
                                       : static_cast<int64_t>(b) * g.steps + t;
      const float* xp = x + row * g.in;
      // input projection plus bias, then the recurrent product (the reference's order)
      for (int j = 0; j < W; ++j) gate[j] = 0.f;
      for (int k = 0; k < g.in; ++k) {
        const float xv = xp[k];
        const float* wr = w_in + static_cast<int64_t>(k) * W;
        for (int j = 0; j < W; ++j) gate[j] += xv * wr[j];
      }
      for (int j = 0; j < W; ++j) gate[j] += bias[j];
      std::vector<float> rec(static_cast<size_t>(W), 0.f);
      const float* hp = h.data() + static_cast<int64_t>(b) * U;
      for (int k = 0; k < U; ++k) {
        const float hv = hp[k];
        const float* wr = w_rec + static_cast<int64_t>(k) * W;
        for (int j = 0; j < W; ++j) rec[j] += hv * wr[j];
      }
      for (int j = 0; j < W; ++j) gate[j] += rec[j];
      float* cp = c.data() + static_cast<int64_t>(b) * U;
      float* out = hn.data() + static_cast<int64_t>(b) * U;
      for (int u = 0; u < U; ++u) {
        float gf = gate[off_f + u];
        if (peep_f) gf += peep_f[u] * cp[u];
        gf = sigmoid(gf);
        float gi;
        if (g.gates == 4) {
          gi = gate[u];
          if (peep_i) gi += peep_i[u] * cp[u];
          gi = sigmoid(gi);
        } else {
          gi = 1.f - gf;
        }
        const float gc = act(gate[off_f + U + u]);
        float cv = gf * cp[u] + gi * gc;
        if (g.cell_clip > 0.f) cv = std::min(std::max(cv, -g.cell_clip), g.cell_clip);
        cp[u] = cv;
        float go = gate[off_f + 2 * U + u];
        if (peep_o) go += peep_o[u] * cv;
        go = sigmoid(go);
        out[u] = go * act(cv);
      }
      float* yp = y + row * U;
      std::copy(out, out + U, yp);
    }
    h.swap(hn);
  }
}

void resize_bilinear_f32(const ResizeGeom& g, const float* dy, const float* dx, const float* x,
                         float* y) {
  const float one = 1.f;
  for (int b = 0; b < g.n; ++b)
    for (int oy = 0; oy < g.oh; ++oy) {
      const float* r0 = x + (static_cast<int64_t>(b) * g.h + g.y0[oy]) * g.w * g.c;
      const float* r1 = x + (static_cast<int64_t>(b) * g.h + g.y1[oy]) * g.w * g.c;
      const float wy = dy[oy];
      for (int ox = 0; ox < g.ow; ++ox) {
        const float wx = dx[ox];
        const float* tl = r0 + static_cast<int64_t>(g.x0[ox]) * g.c;
        const float* tr = r0 + static_cast<int64_t>(g.x1[ox]) * g.c;
        const float* bl = r1 + static_cast<int64_t>(g.x0[ox]) * g.c;
        const float* br = r1 + static_cast<int64_t>(g.x1[ox]) * g.c;
        float* yp = y + ((static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox) * g.c;
        int ch = 0;
#if defined(__AVX2__)
        {  // 8 channels at a time, the same operations in the same order (no fused ones)
          const __m256 vwy = _mm256_set1_ps(wy), vwx = _mm256_set1_ps(wx);
          const __m256 vny = _mm256_set1_ps(one - wy), vnx = _mm256_set1_ps(one - wx);
          const auto lerp = [&](__m256 a, __m256 b, __m256 c, __m256 d) {
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(a, vny), vnx);
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(b, vwy), vnx));
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(c, vny), vwx));
            return _mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(d, vwy), vwx));
          };
          for (; ch + 8 <= g.c; ch += 8)
            _mm256_storeu_ps(yp + ch, lerp(_mm256_loadu_ps(tl + ch), _mm256_loadu_ps(bl + ch),
                                           _mm256_loadu_ps(tr + ch), _mm256_loadu_ps(br + ch)));
        }
#endif
        for (; ch < g.c; ++ch) {
          // the reference's order: four products, each left to right, summed left to right
          float v = tl[ch] * (one - wy);
          v = v * (one - wx);
          float t = bl[ch] * wy;
          t = t * (one - wx);
          v = v + t;
          t = tr[ch] * (one - wy);
          t = t * wx;
          v = v + t;
          t = br[ch] * wy;
          t = t * wx;
          yp[ch] = v + t;
        }
      }
    }
}

void resize_bilinear_q8(const ResizeGeom& g, const int32_t* fy, const int32_t* fx,
                        const int8_t* x, int8_t* y) {
  const int64_t one = 1 << 10;
  for (int b = 0; b < g.n; ++b)
    for (int oy = 0; oy < g.oh; ++oy) {
      const int8_t* r0 = x + (static_cast<int64_t>(b) * g.h + g.y0[oy]) * g.w * g.c;
      const int8_t* r1 = x + (static_cast<int64_t>(b) * g.h + g.y1[oy]) * g.w * g.c;
      const int64_t wy = fy[oy];
      for (int ox = 0; ox < g.ow; ++ox) {
        const int64_t wx = fx[ox];
        const int8_t* tl = r0 + static_cast<int64_t>(g.x0[ox]) * g.c;
        const int8_t* tr = r0 + static_cast<int64_t>(g.x1[ox]) * g.c;
        const int8_t* bl = r1 + static_cast<int64_t>(g.x0[ox]) * g.c;
        const int8_t* br = r1 + static_cast<int64_t>(g.x1[ox]) * g.c;
        int8_t* yp = y + ((static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox) * g.c;
        for (int ch = 0; ch < g.c; ++ch) {
          const int64_t acc = tl[ch] * (one - wy) * (one - wx) + bl[ch] * wy * (one - wx) +
                              tr[ch] * (one - wy) * wx + br[ch] * wy * wx;
          const int64_t q = acc + (acc > 0 ? (int64_t(1) << 19) : -(int64_t(1) << 19));
          yp[ch] = static_cast<int8_t>(q / (int64_t(1) << 20));
        }
      }
    }
}

void fully_connected_q8(const int8_t* x, int zp_in, const int16_t* w, const int32_t* bias,
                        int batch, int k, int o, const QuantOut& q, int8_t* y) {
  std::vector<int32_t> acc(static_cast<size_t>(o));
  for (int b = 0; b < batch; ++b) {
    int32_t* __restrict__ a = acc.data();
    std::fill(a, a + o, 0);
    const int8_t* xr = x + static_cast<int64_t>(b) * k;
    for (int i = 0; i < k; ++i) {
      const int32_t xv = xr[i] - zp_in;
      const int16_t* __restrict__ wr = w + static_cast<int64_t>(i) * o;
      for (int oo = 0; oo < o; ++oo) a[oo] += xv * int32_t(wr[oo]);
    }
    requant_n(a, bias, q, 0, o, y + static_cast<int64_t>(b) * o);
  }
}

#if defined(__AVX512F__)
namespace {

// Rows [i0, i0 + rows) x columns [j0, j0 + 16 kV) of one matrix product Y = A B, B's rows
// contiguous (`ldb` floats apart): register accumulators over k in order (fused
// multiply-adds), stored masked to the `n` columns.
template <int kMR, int kV>
inline void mm_tile_avx512(const float* A, int a_rs, int a_cs, const float* B, int ldb, int k,
                           int n, int i0, int rows, int j0, float* Y) {
  __m512 acc[kMR][kV];
  for (int t = 0; t < kMR; ++t)
    for (int v = 0; v < kV; ++v) acc[t][v] = _mm512_setzero_ps();
  const __mmask16 m0 = lanes(n - j0), m1 = lanes(n - j0 - 16);
  const float* ar[kMR];
  for (int t = 0; t < kMR; ++t)
    ar[t] = A + static_cast<int64_t>(i0 + (t < rows ? t : rows - 1)) * a_rs;
  for (int kk = 0; kk < k; ++kk) {
    const float* br = B + static_cast<int64_t>(kk) * ldb + j0;
    const __m512 w0 = _mm512_maskz_loadu_ps(m0, br);
    const __m512 w1 = kV == 2 ? _mm512_maskz_loadu_ps(m1, br + 16) : w0;
    const int64_t off = static_cast<int64_t>(kk) * a_cs;
    for (int t = 0; t < kMR; ++t) {
      const __m512 xv = _mm512_set1_ps(ar[t][off]);
      acc[t][0] = _mm512_fmadd_ps(xv, w0, acc[t][0]);
      if (kV == 2) acc[t][1] = _mm512_fmadd_ps(xv, w1, acc[t][1]);
    }
  }
  for (int t = 0; t < kMR && t < rows; ++t) {
    float* yr = Y + static_cast<int64_t>(i0 + t) * n + j0;
    _mm512_mask_storeu_ps(yr, m0, acc[t][0]);
    if (kV == 2) _mm512_mask_storeu_ps(yr + 16, m1, acc[t][1]);
  }
}

// One product Y [m, n] = A B through mm_tile_avx512; B is first copied row-major into this
// thread's scratch when its rows are not contiguous (a transposed operand).
void matmul_avx512(const MatmulGeom& g, const float* A, const float* B, float* Y) {
  int ldb = g.b_rs;
  if (g.b_cs != 1) {
    float* bt = scratch<float, 4>(static_cast<size_t>(g.k) * g.n);
    for (int kk = 0; kk < g.k; ++kk)
      for (int j = 0; j < g.n; ++j)
        bt[static_cast<int64_t>(kk) * g.n + j] =
            B[static_cast<int64_t>(kk) * g.b_rs + static_cast<int64_t>(j) * g.b_cs];
    B = bt;
    ldb = g.n;
  }
  constexpr int kMR = 8;
  for (int j0 = 0; j0 < g.n; j0 += 32) {
    const bool two = g.n - j0 > 16;
    for (int i0 = 0; i0 < g.m; i0 += kMR) {
      const int rows = std::min(kMR, g.m - i0);
      if (two) mm_tile_avx512<kMR, 2>(A, g.a_rs, g.a_cs, B, ldb, g.k, g.n, i0, rows, j0, Y);
      else mm_tile_avx512<kMR, 1>(A, g.a_rs, g.a_cs, B, ldb, g.k, g.n, i0, rows, j0, Y);
    }
  }
}

}  // namespace
#endif

void batch_matmul_f32(const MatmulGeom& g, const float* a, const float* b, float* y) {
#if defined(__AVX512F__)
  if (g.k > 0) {
    for (int bi = 0; bi < g.batches; ++bi)
      matmul_avx512(g, a + g.a_off[bi], b + g.b_off[bi],
                    y + static_cast<int64_t>(bi) * g.m * g.n);
    return;
  }
#endif
  for (int bi = 0; bi < g.batches; ++bi) {
    const float* A = a + g.a_off[bi];
    const float* B = b + g.b_off[bi];
    float* Y = y + static_cast<int64_t>(bi) * g.m * g.n;
    std::fill(Y, Y + static_cast<int64_t>(g.m) * g.n, 0.f);
    if (g.b_rs == 1 && g.a_cs == 1 && g.k >= 8) {  // B transposed: rows of A dot rows of B
      for (int i = 0; i < g.m; ++i) {
        const float* ar = A + static_cast<int64_t>(i) * g.a_rs;
        float* yr = Y + static_cast<int64_t>(i) * g.n;
        for (int j = 0; j < g.n; ++j) {
          const float* br = B + static_cast<int64_t>(j) * g.b_cs;
          float part[8] = {};
          int kk = 0;
          for (; kk + 8 <= g.k; kk += 8)
            for (int l = 0; l < 8; ++l) part[l] += ar[kk + l] * br[kk + l];
          float total = 0.f;
          for (int l = 0; l < 8; ++l) total += part[l];
          for (; kk < g.k; ++kk) total += ar[kk] * br[kk];
          yr[j] = total;
        }
      }
      continue;
    }
    for (int i = 0; i < g.m; ++i) {
      float* yr = Y + static_cast<int64_t>(i) * g.n;
      for (int kk = 0; kk < g.k; ++kk) {
        const float av = A[static_cast<int64_t>(i) * g.a_rs + static_cast<int64_t>(kk) * g.a_cs];
        const float* br = B + static_cast<int64_t>(kk) * g.b_rs;
        if (g.b_cs == 1) {
          for (int j = 0; j < g.n; ++j) yr[j] += av * br[j];
        } else {
          for (int j = 0; j < g.n; ++j) yr[j] += av * br[static_cast<int64_t>(j) * g.b_cs];
        }
      }
    }
  }
}

void batch_matmul_q8(const MatmulGeom& g, const int8_t* a, int zp_a, const int8_t* b, int zp_b,
                     int32_t mult, int shift, int zp_out, int lo, int hi, int8_t* y) {
  std::vector<int32_t> row(static_cast<size_t>(g.n));
  for (int bi = 0; bi < g.batches; ++bi) {
    const int8_t* A = a + g.a_off[bi];
    const int8_t* B = b + g.b_off[bi];
    int8_t* Y = y + static_cast<int64_t>(bi) * g.m * g.n;
    for (int i = 0; i < g.m; ++i) {
      std::fill(row.begin(), row.end(), 0);
      for (int kk = 0; kk < g.k; ++kk) {
        const int32_t av =
            A[static_cast<int64_t>(i) * g.a_rs + static_cast<int64_t>(kk) * g.a_cs] - zp_a;
        const int8_t* br = B + static_cast<int64_t>(kk) * g.b_rs;
        for (int j = 0; j < g.n; ++j) row[j] += av * (br[static_cast<int64_t>(j) * g.b_cs] - zp_b);
      }
      int8_t* yr = Y + static_cast<int64_t>(i) * g.n;
      for (int j = 0; j < g.n; ++j) yr[j] = clamp8(mbqm(row[j], mult, shift) + zp_out, lo, hi);
    }
  }
}

// ---------------------------------------------------------------- element-wise
namespace {

// Whether a broadcast is a contiguous `a` with a `b` of one value per channel (the last dim,
// of at most 256 values) repeated over every other dim; then `first` and `pixels` are the
// pixels (runs of the last dim) of the rows [row0, row1) of row_dim (all when row_dim < 0).
inline bool channel_operand(const Bcast& g, int row0, int row1, int64_t* first,
                            int64_t* pixels) {
  const int64_t c = g.shape[5];
  if (c < 2 || c > 256 || g.sa[5] != 1 || g.sb[5] != 1) return false;
  int64_t stride = c;
  for (int d = 4; d >= 0; --d) {
    if (g.shape[d] > 1 && (g.sb[d] != 0 || g.sa[d] != stride)) return false;
    stride *= g.shape[d];
  }
  if (g.row_dim == 5) return false;
  if (g.row_dim < 0) {
    *first = 0;
    *pixels = stride / c;
    return *pixels > 1;
  }
  int64_t inner = 1;  // pixels per row of row_dim
  for (int d = g.row_dim + 1; d < 5; ++d) inner *= g.shape[d];
  for (int d = 0; d < g.row_dim; ++d)
    if (g.shape[d] > 1) return false;  // rows of a leading dim: left to the general loop
  *first = int64_t(row0) * inner;
  *pixels = int64_t(row1 - row0) * inner;
  return *pixels > 1;
}

template <typename F>
void bcast_loop(const Bcast& g, int row0, int row1, F&& f) {
  // the rows [row0, row1) of row_dim as a base offset and a count; dims of one element
  // dropped; adjacent dims whose strides chain for a, b and the output merged into one
  int64_t ostride[6];
  ostride[5] = 1;
  for (int d = 4; d >= 0; --d) ostride[d] = ostride[d + 1] * g.shape[d + 1];
  int64_t shp[6] = {1, 1, 1, 1, 1, 1}, sa[6] = {}, sb[6] = {}, so[6] = {};
  int64_t off_a = 0, off_b = 0, off_y = 0;
  int nd = 0;
  for (int d = 0; d < 6; ++d) {
    int64_t lo = 0, n = g.shape[d];
    if (d == g.row_dim) lo = row0, n = row1 - row0;
    if (n <= 0) return;
    off_a += lo * g.sa[d];
    off_b += lo * g.sb[d];
    off_y += lo * ostride[d];
    if (n == 1) continue;
    if (nd > 0 && sa[nd - 1] == g.sa[d] * n && sb[nd - 1] == g.sb[d] * n &&
        so[nd - 1] == ostride[d] * n) {
      shp[nd - 1] *= n;
    } else {
      shp[nd] = n;
      ++nd;
    }
    sa[nd - 1] = g.sa[d], sb[nd - 1] = g.sb[d], so[nd - 1] = ostride[d];
  }
  // right-align the nd dims in 6
  int64_t S[6] = {1, 1, 1, 1, 1, 1}, A[6] = {}, B[6] = {}, O[6] = {};
  for (int i = 0; i < nd; ++i) {
    S[6 - nd + i] = shp[i];
    A[6 - nd + i] = sa[i];
    B[6 - nd + i] = sb[i];
    O[6 - nd + i] = so[i];
  }
  for (int64_t i0 = 0; i0 < S[0]; ++i0)
    for (int64_t i1 = 0; i1 < S[1]; ++i1)
      for (int64_t i2 = 0; i2 < S[2]; ++i2)
        for (int64_t i3 = 0; i3 < S[3]; ++i3)
          for (int64_t i4 = 0; i4 < S[4]; ++i4) {
            const int64_t ia =
                off_a + i0 * A[0] + i1 * A[1] + i2 * A[2] + i3 * A[3] + i4 * A[4];
            const int64_t ib =
                off_b + i0 * B[0] + i1 * B[1] + i2 * B[2] + i3 * B[3] + i4 * B[4];
            const int64_t iy =
                off_y + i0 * O[0] + i1 * O[1] + i2 * O[2] + i3 * O[3] + i4 * O[4];
            f(ia, A[5], ib, B[5], iy, S[5]);
          }
}

template <typename Op>
void binary_run(const Bcast& g, int opcode, const float* a, const float* b, int act, float* y,
                int row0, int row1, Op op) {
  int64_t first = 0, pixels = 0;
  const int64_t c = g.shape[5];
  if (channel_operand(g, row0, row1, &first, &pixels)) {
#if defined(__AVX2__) && defined(__FMA__)
    if (avx2::binary_channel(opcode, a + first * c, b, c, pixels, act, y + first * c)) return;
#endif
    // a contiguous, b one value per channel: pixel by pixel over the channels (the runs of
    // the general loop would be one pixel's channels each)
    const float* __restrict__ pb = b;
    for (int64_t p = first; p < first + pixels; ++p) {
      const float* __restrict__ pa = a + p * c;
      float* __restrict__ py = y + p * c;
      for (int64_t i = 0; i < c; ++i) py[i] = op(pa[i], pb[i]);
      if (act != ACT_NONE)
        for (int64_t i = 0; i < c; ++i) py[i] = act1(py[i], act);
    }
    return;
  }
  bcast_loop(g, row0, row1, [&](int64_t ia, int64_t sa, int64_t ib, int64_t sb, int64_t iy,
                                int64_t n) {
    const float* pa = a + ia;
    const float* pb = b + ib;
    float* py = y + iy;
#if defined(__AVX2__) && defined(__FMA__)
    if (avx2::binary_span(opcode, pa, sa, pb, sb, n, act, py)) return;
#endif
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) py[i] = op(pa[i], pb[i]);
    } else if (sa == 1 && sb == 0) {
      const float bv = pb[0];
      for (int64_t i = 0; i < n; ++i) py[i] = op(pa[i], bv);
    } else if (sa == 0 && sb == 1) {
      const float av = pa[0];
      for (int64_t i = 0; i < n; ++i) py[i] = op(av, pb[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) py[i] = op(pa[i * sa], pb[i * sb]);
    }
    if (act != ACT_NONE)
      for (int64_t i = 0; i < n; ++i) py[i] = act1(py[i], act);
  });
}

}  // namespace

namespace {

template <int kAct>
void add_rows_run(const float* r, int64_t rc, int64_t c0, float* y, int64_t c, int64_t pixels) {
  for (int64_t p = 0; p < pixels; ++p) {
    float* __restrict__ py = y + p * c;
    const float* __restrict__ pr = r + p * rc;
    for (int64_t i = 0; i < rc; ++i) py[c0 + i] += pr[i];
    if (kAct != ACT_NONE)
      for (int64_t i = 0; i < c; ++i) py[i] = act1(py[i], kAct);
  }
}

}  // namespace

void add_rows_f32(const float* r, int64_t rc, int64_t c0, float* y, int64_t c, int64_t n,
                  int64_t h, int64_t w, int act, int row0, int row1) {
  for (int64_t b = 0; b < n; ++b) {
    const int64_t p0 = (b * h + row0) * w, pixels = static_cast<int64_t>(row1 - row0) * w;
    const float* rb = r + p0 * rc;
    float* yb = y + p0 * c;
    switch (act) {
      case ACT_RELU: add_rows_run<ACT_RELU>(rb, rc, c0, yb, c, pixels); break;
      case ACT_RELU_N1_TO_1: add_rows_run<ACT_RELU_N1_TO_1>(rb, rc, c0, yb, c, pixels); break;
      case ACT_RELU6: add_rows_run<ACT_RELU6>(rb, rc, c0, yb, c, pixels); break;
      default: add_rows_run<ACT_NONE>(rb, rc, c0, yb, c, pixels); break;
    }
  }
}

void binary_f32(const Bcast& g, int op, const float* a, const float* b, int act, float* y,
                int row0, int row1) {
  switch (op) {
    case B_ADD: binary_run(g, op, a, b, act, y, row0, row1, [](float u, float v) { return u + v; }); break;
    case B_SUB: binary_run(g, op, a, b, act, y, row0, row1, [](float u, float v) { return u - v; }); break;
    case B_MUL: binary_run(g, op, a, b, act, y, row0, row1, [](float u, float v) { return u * v; }); break;
    case B_DIV: binary_run(g, op, a, b, act, y, row0, row1, [](float u, float v) { return u / v; }); break;
    case B_POW:
      binary_run(g, op, a, b, act, y, row0, row1, [](float u, float v) { return std::pow(u, v); });
      break;
    case B_SQDIFF:
      binary_run(g, op, a, b, act, y, row0, row1, [](float u, float v) {
        const float d = u - v;
        return d * d;
      });
      break;
    case B_MIN:
      binary_run(g, op, a, b, act, y, row0, row1, [](float u, float v) { return v < u ? v : u; });
      break;
    case B_MAX:
      binary_run(g, op, a, b, act, y, row0, row1, [](float u, float v) { return u < v ? v : u; });
      break;
    case B_PRELU:
      binary_run(g, op, a, b, act, y, row0, row1, [](float u, float v) { return u >= 0.f ? u : u * v; });
      break;
    default: break;
  }
}

namespace {

// mbqm() without branches, for multipliers from QuantizeMultiplier (never INT32_MIN) and
// x in int32 range: l = max(shift, 0), r = max(-shift, 0).
inline int64_t mbqm_bf(int64_t x, int64_t m, int l, int r) {
  const int64_t xs = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(x) << l));
  const int64_t p = (xs * m + (int64_t(1) << 30)) >> 31;
  const int64_t mask = (int64_t(1) << r) - 1;
  return (p >> r) + ((p & mask) > ((mask >> 1) + (p < 0 ? 1 : 0)) ? 1 : 0);
}

inline int left_of(int shift) { return shift > 0 ? shift : 0; }
inline int right_of(int shift) { return shift > 0 ? 0 : -shift; }

template <typename F>
void bcast_q8(const Bcast& g, int row0, int row1, const int8_t* a, const int8_t* b, int8_t* y,
              F f) {
  bcast_loop(g, row0, row1, [&](int64_t ia, int64_t sa, int64_t ib, int64_t sb, int64_t iy,
                                int64_t n) {
    const int8_t* __restrict__ pa = a + ia;
    const int8_t* __restrict__ pb = b + ib;
    int8_t* __restrict__ py = y + iy;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i], pb[i]);
    } else if (sa == 1 && sb == 0) {
      const int8_t bv = pb[0];
      for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i], bv);
    } else if (sa == 0 && sb == 1) {
      const int8_t av = pa[0];
      for (int64_t i = 0; i < n; ++i) py[i] = f(av, pb[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i * sa], pb[i * sb]);
    }
  });
}

#if defined(__AVX2__) && !(defined(__AVX512F__) && defined(__AVX512BW__))
// An int8 binary op over broadcast rows: the leading outputs of each run whose inputs are
// contiguous or constant along it by vrun(a, sa, b, sb, y, n) -> outputs written (see
// tk_ops_int8.h), the others by the scalar sf.
template <typename SF, typename VR>
void bcast_q8_runs(const Bcast& g, int row0, int row1, const int8_t* a, const int8_t* b,
                   int8_t* y, SF sf, VR vrun) {
  bcast_loop(g, row0, row1, [&](int64_t ia, int64_t sa, int64_t ib, int64_t sb, int64_t iy,
                                int64_t n) {
    const int8_t* pa = a + ia;
    const int8_t* pb = b + ib;
    int8_t* py = y + iy;
    int64_t i = 0;
    if ((sa == 0 || sa == 1) && (sb == 0 || sb == 1)) i = vrun(pa, sa, pb, sb, py, n);
    for (; i < n; ++i) py[i] = sf(pa[i * sa], pb[i * sb]);
  });
}
#endif

}  // namespace

#if defined(__AVX512F__) && defined(__AVX512BW__)
namespace {

// mbqm_bf() of 16 lanes (int32 x, one multiplier and shift; r <= 31).
inline __m512i mbqm16(__m512i x, __m512i m, int l, int r) {
  const __m512i p = srdhm16(_mm512_sll_epi32(x, _mm_cvtsi32_si128(l)), m);
  const __m512i fl = _mm512_sra_epi32(p, _mm_cvtsi32_si128(r));
  const int32_t mask = static_cast<int32_t>((int64_t(1) << r) - 1);
  const __m512i thr = _mm512_add_epi32(_mm512_set1_epi32(mask >> 1), _mm512_srli_epi32(p, 31));
  const __mmask16 up =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(p, _mm512_set1_epi32(mask)), thr);
  return _mm512_mask_add_epi32(fl, up, fl, _mm512_set1_epi32(1));
}

inline __m512i load16_q8(const int8_t* p, int64_t stride) {
  return stride ? _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
                : _mm512_set1_epi32(p[0]);
}

// An int8 binary op over broadcast rows: 16 outputs at a time by vf(a lanes, b lanes) -> int32
// lanes (clamped and narrowed here) where both inputs are contiguous or constant along the
// row, else (and for the tail) by the scalar sf.
template <typename VF, typename SF>
void bcast_q8_vec(const Bcast& g, int row0, int row1, const int8_t* a, const int8_t* b,
                  int8_t* y, VF vf, SF sf) {
  bcast_loop(g, row0, row1, [&](int64_t ia, int64_t sa, int64_t ib, int64_t sb, int64_t iy,
                                int64_t n) {
    const int8_t* pa = a + ia;
    const int8_t* pb = b + ib;
    int8_t* py = y + iy;
    int64_t i = 0;
    if ((sa == 0 || sa == 1) && (sb == 0 || sb == 1)) {
      for (; i + 16 <= n; i += 16) {
        const __m512i v = vf(load16_q8(pa + i * sa, sa), load16_q8(pb + i * sb, sb));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(py + i), _mm512_cvtepi32_epi8(v));
      }
    }
    for (; i < n; ++i) py[i] = sf(pa[i * sa], pb[i * sb]);
  });
}

inline __m512i clamp_zp16(__m512i v, int zp, int lo, int hi) {
  v = _mm512_max_epi32(v, _mm512_set1_epi32(lo - zp));
  v = _mm512_min_epi32(v, _mm512_set1_epi32(hi - zp));
  return _mm512_add_epi32(v, _mm512_set1_epi32(zp));
}

}  // namespace
#endif

void add_q8(const Bcast& g, const AddQ& q, int sign, const int8_t* a, const int8_t* b,
            int8_t* y, int row0, int row1) {
  const int la = left_of(q.s_a), ra = right_of(q.s_a), lb = left_of(q.s_b), rb = right_of(q.s_b);
  const int lo_ = left_of(q.s_out), ro = right_of(q.s_out);
  const int64_t ma = q.m_a, mb = q.m_b, mo = q.m_out;
  const int ls = q.left_shift, zpa = q.zp_a, zpb = q.zp_b, zpo = q.zp_out, lo = q.lo, hi = q.hi;
  const auto scalar = [=](int8_t av, int8_t bv) {
    const int64_t va = (static_cast<int64_t>(av) - zpa) * (int64_t(1) << ls);
    const int64_t vb = (static_cast<int64_t>(bv) - zpb) * (int64_t(1) << ls);
    const int64_t xa = mbqm_bf(va, ma, la, ra);
    const int64_t xb = mbqm_bf(vb, mb, lb, rb);
    int64_t v = mbqm_bf(sign > 0 ? xa + xb : xa - xb, mo, lo_, ro) + zpo;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return static_cast<int8_t>(v);
  };
#if defined(__AVX512F__) && defined(__AVX512BW__)
  if (ra <= 31 && rb <= 31 && ro <= 31 && ls <= 23) {
    const __m512i vma = _mm512_set1_epi32(q.m_a), vmb = _mm512_set1_epi32(q.m_b),
                  vmo = _mm512_set1_epi32(q.m_out), za = _mm512_set1_epi32(zpa),
                  zb = _mm512_set1_epi32(zpb);
    bcast_q8_vec(g, row0, row1, a, b, y, [&](__m512i av, __m512i bv) {
      const __m512i xa = mbqm16(_mm512_slli_epi32(_mm512_sub_epi32(av, za), ls), vma, la, ra);
      const __m512i xb = mbqm16(_mm512_slli_epi32(_mm512_sub_epi32(bv, zb), ls), vmb, lb, rb);
      const __m512i sum = sign > 0 ? _mm512_add_epi32(xa, xb) : _mm512_sub_epi32(xa, xb);
      return clamp_zp16(mbqm16(sum, vmo, lo_, ro), zpo, lo, hi);
    }, scalar);
    return;
  }
#elif defined(__AVX2__)
  bcast_q8_runs(g, row0, row1, a, b, y, scalar, [&](const int8_t* pa, int64_t sa,
                                                    const int8_t* pb, int64_t sb, int8_t* py,
                                                    int64_t n) {
    return add_q8_run_avx2(q, sign, pa, sa, pb, sb, py, n);
  });
  return;
#endif
  bcast_q8(g, row0, row1, a, b, y, scalar);
}

void mul_q8(const Bcast& g, int zp_a, int zp_b, int32_t m, int s, int zp_out, int lo, int hi,
            const int8_t* a, const int8_t* b, int8_t* y, int row0, int row1) {
  const int l = left_of(s), r = right_of(s);
  const int64_t mm = m;
  const auto scalar = [=](int8_t av, int8_t bv) {
    const int64_t p = (static_cast<int64_t>(av) - zp_a) * (static_cast<int64_t>(bv) - zp_b);
    int64_t v = mbqm_bf(p, mm, l, r) + zp_out;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return static_cast<int8_t>(v);
  };
#if defined(__AVX512F__) && defined(__AVX512BW__)
  if (r <= 31) {
    const __m512i vm = _mm512_set1_epi32(m), za = _mm512_set1_epi32(zp_a),
                  zb = _mm512_set1_epi32(zp_b);
    bcast_q8_vec(g, row0, row1, a, b, y, [&](__m512i av, __m512i bv) {
      const __m512i p = _mm512_mullo_epi32(_mm512_sub_epi32(av, za), _mm512_sub_epi32(bv, zb));
      return clamp_zp16(mbqm16(p, vm, l, r), zp_out, lo, hi);
    }, scalar);
    return;
  }
#elif defined(__AVX2__)
  bcast_q8_runs(g, row0, row1, a, b, y, scalar, [&](const int8_t* pa, int64_t sa,
                                                    const int8_t* pb, int64_t sb, int8_t* py,
                                                    int64_t n) {
    return mul_q8_run_avx2(zp_a, zp_b, m, s, zp_out, lo, hi, pa, sa, pb, sb, py, n);
  });
  return;
#endif
  bcast_q8(g, row0, row1, a, b, y, scalar);
}

namespace {

const Bcast kPairs{{1, 1, 1, 1, 256, 256}, {0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 0, 1}, -1};

void all_pairs(int8_t* a, int8_t* b) {
  for (int v = 0; v < 256; ++v) a[v] = b[v] = static_cast<int8_t>(v - 128);
}

}  // namespace

void add_table_q8(const AddQ& q, int sign, int8_t* table) {
  int8_t a[256], b[256];
  all_pairs(a, b);
  add_q8(kPairs, q, sign, a, b, table, 0, 0);
}

void mul_table_q8(int zp_a, int zp_b, int32_t m, int s, int zp_out, int lo, int hi,
                  int8_t* table) {
  int8_t a[256], b[256];
  all_pairs(a, b);
  mul_q8(kPairs, zp_a, zp_b, m, s, zp_out, lo, hi, a, b, table, 0, 0);
}

void mul_gate_table_q8(const int8_t* gate, int x_first, int zp_a, int zp_b, int32_t m, int s,
                       int zp_out, int lo, int hi, int8_t* table) {
  int8_t xs[256], gs[256];
  for (int v = 0; v < 256; ++v) xs[v] = static_cast<int8_t>(v - 128), gs[v] = gate[v];
  const Bcast row{{1, 1, 1, 1, 1, 256}, {0, 0, 0, 0, 0, 1}, {0, 0, 0, 0, 0, 1}, -1};
  mul_q8(row, zp_a, zp_b, m, s, zp_out, lo, hi, x_first ? xs : gs, x_first ? gs : xs, table, 0,
         0);
}

void minmax_q8(const Bcast& g, int is_max, const int8_t* a, const int8_t* b, int8_t* y,
               int row0, int row1) {
  if (is_max)
    bcast_q8(g, row0, row1, a, b, y, [](int8_t u, int8_t v) { return u < v ? v : u; });
  else
    bcast_q8(g, row0, row1, a, b, y, [](int8_t u, int8_t v) { return v < u ? v : u; });
}

void prelu_q8(const Bcast& g, const int8_t* x, int zp_x, const int8_t* alpha, int zp_a,
              int32_t m_pos, int s_pos, int32_t m_neg, int s_neg, int zp_out, int8_t* y,
              int row0, int row1) {
  bcast_q8(g, row0, row1, x, alpha, y, [=](int8_t xv, int8_t av) {
    const int64_t v = static_cast<int64_t>(xv) - zp_x;
    const int64_t r = v >= 0 ? mbqm(v, m_pos, s_pos)
                             : mbqm(v * (static_cast<int64_t>(av) - zp_a), m_neg, s_neg);
    return clamp8(r + zp_out, -128, 127);
  });
}

namespace {

template <typename T, typename F>
void compare_run(const Bcast& g, int op, const T* a, const T* b, bool* y, int row0, int row1,
                 F value) {
  bcast_loop(g, row0, row1, [&](int64_t ia, int64_t sa, int64_t ib, int64_t sb, int64_t iy,
                                int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const auto u = value(0, a[ia + i * sa]);
      const auto v = value(1, b[ib + i * sb]);
      bool r = false;
      switch (op) {
        case C_EQ: r = u == v; break;
        case C_NE: r = u != v; break;
        case C_LT: r = u < v; break;
        case C_LE: r = u <= v; break;
        case C_GT: r = u > v; break;
        case C_GE: r = u >= v; break;
        default: break;
      }
      y[iy + i] = r;
    }
  });
}

}  // namespace

void compare_f32(const Bcast& g, int op, const float* a, const float* b, bool* y, int row0,
                 int row1) {
  compare_run(g, op, a, b, y, row0, row1, [](int, float v) { return v; });
}

void compare_q8(const Bcast& g, int op, const int8_t* a, int zp_a, int32_t m_a, int s_a,
                const int8_t* b, int zp_b, int32_t m_b, int s_b, bool* y, int row0, int row1) {
  compare_run(g, op, a, b, y, row0, row1, [=](int which, int8_t q) {
    return which == 0 ? mbqm((static_cast<int64_t>(q) - zp_a) * 256, m_a, s_a)
                      : mbqm((static_cast<int64_t>(q) - zp_b) * 256, m_b, s_b);
  });
}

void compare_i32(const Bcast& g, int op, const int32_t* a, const int32_t* b, bool* y,
                 int row0, int row1) {
  compare_run(g, op, a, b, y, row0, row1, [](int, int32_t v) { return v; });
}

void binary_i32(const Bcast& g, int op, const int32_t* a, const int32_t* b, int64_t lo,
                int64_t hi, int32_t* y, int row0, int row1) {
  bcast_loop(g, row0, row1, [&](int64_t ia, int64_t sa, int64_t ib, int64_t sb, int64_t iy,
                                int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t u = a[ia + i * sa], v = b[ib + i * sb];
      int64_t r = 0;
      switch (op) {
        case B_ADD: r = u + v; break;
        case B_SUB: r = u - v; break;
        case B_MUL: r = u * v; break;
        case B_MIN: r = v < u ? v : u; break;
        case B_MAX: r = u < v ? v : u; break;
        case B_FLOOR_MOD:
          r = v == 0 ? 0 : u % v;
          if (r != 0 && ((r < 0) != (v < 0))) r += v;
          break;
        case B_FLOOR_DIV:
          r = v == 0 ? 0 : u / v;
          if (v != 0 && (u % v != 0) && ((u < 0) != (v < 0))) --r;
          break;
        default: break;
      }
      r = r < lo ? lo : r;
      r = r > hi ? hi : r;
      y[iy + i] = static_cast<int32_t>(r);
    }
  });
}

template <typename I>
bool gather(const void* x, const I* idx, void* y, size_t elem, int64_t outer, int64_t axis_n,
            int64_t inner, int64_t n_idx) {
  for (int64_t i = 0; i < n_idx; ++i)
    if (idx[i] < 0 || static_cast<int64_t>(idx[i]) >= axis_n) return false;
  const auto* xb = static_cast<const unsigned char*>(x);
  auto* yb = static_cast<unsigned char*>(y);
  const size_t row = static_cast<size_t>(inner) * elem;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n_idx; ++i)
      std::memcpy(yb + (o * n_idx + i) * row, xb + (o * axis_n + idx[i]) * row, row);
  return true;
}

bool gather_nd(const void* x, const int32_t* idx, void* y, size_t elem, int64_t n_idx, int k,
               const int64_t* dims, const int64_t* strides, int64_t inner) {
  const auto* xb = static_cast<const unsigned char*>(x);
  auto* yb = static_cast<unsigned char*>(y);
  const size_t row = static_cast<size_t>(inner) * elem;
  for (int64_t i = 0; i < n_idx; ++i)
    for (int j = 0; j < k; ++j)
      if (idx[i * k + j] < 0 || idx[i * k + j] >= dims[j]) return false;
  for (int64_t i = 0; i < n_idx; ++i) {
    int64_t off = 0;
    for (int j = 0; j < k; ++j) off += idx[i * k + j] * strides[j];
    std::memcpy(yb + i * row, xb + off * static_cast<int64_t>(elem), row);
  }
  return true;
}

void logical_bool(const Bcast& g, int is_or, const bool* a, const bool* b, bool* y, int row0,
                  int row1) {
  bcast_loop(g, row0, row1, [&](int64_t ia, int64_t sa, int64_t ib, int64_t sb, int64_t iy,
                                int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const bool u = a[ia + i * sa], v = b[ib + i * sb];
      y[iy + i] = is_or ? (u || v) : (u && v);
    }
  });
}

template <typename I>
void arg_extreme_f32(const float* x, I* y, int64_t outer, int64_t n, int64_t inner,
                     int is_max) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      const float* p = x + o * n * inner + k;
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i) {
        const float v = p[i * inner], b = p[best * inner];
        if (is_max ? v > b : v < b) best = i;
      }
      y[o * inner + k] = static_cast<I>(best);
    }
}

template void arg_extreme_f32<int32_t>(const float*, int32_t*, int64_t, int64_t, int64_t, int);
template void arg_extreme_f32<int64_t>(const float*, int64_t*, int64_t, int64_t, int64_t, int);

void cumsum_f32(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                int exclusive, int reverse) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      const float* p = x + o * n * inner + k;
      float* q = y + o * n * inner + k;
      float sum = 0.f;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t i = reverse ? n - 1 - j : j;
        if (exclusive) {
          q[i * inner] = sum;
          sum += p[i * inner];
        } else {
          sum = j == 0 ? p[i * inner] : sum + p[i * inner];
          q[i * inner] = sum;
        }
      }
    }
}

template bool gather<int32_t>(const void*, const int32_t*, void*, size_t, int64_t, int64_t,
                              int64_t, int64_t);
template bool gather<int64_t>(const void*, const int64_t*, void*, size_t, int64_t, int64_t,
                              int64_t, int64_t);

namespace {

template <typename T>
void select_run(const int64_t* shape, const int64_t* sc, const int64_t* sa, const int64_t* sb,
                const bool* cond, const T* a, const T* b, T* y) {
  int64_t iy = 0;
  for (int64_t i0 = 0; i0 < shape[0]; ++i0)
    for (int64_t i1 = 0; i1 < shape[1]; ++i1)
      for (int64_t i2 = 0; i2 < shape[2]; ++i2)
        for (int64_t i3 = 0; i3 < shape[3]; ++i3)
          for (int64_t i4 = 0; i4 < shape[4]; ++i4) {
            const int64_t c0 = i0 * sc[0] + i1 * sc[1] + i2 * sc[2] + i3 * sc[3] + i4 * sc[4];
            const int64_t a0 = i0 * sa[0] + i1 * sa[1] + i2 * sa[2] + i3 * sa[3] + i4 * sa[4];
            const int64_t b0 = i0 * sb[0] + i1 * sb[1] + i2 * sb[2] + i3 * sb[3] + i4 * sb[4];
            for (int64_t i5 = 0; i5 < shape[5]; ++i5, ++iy)
              y[iy] = cond[c0 + i5 * sc[5]] ? a[a0 + i5 * sa[5]] : b[b0 + i5 * sb[5]];
          }
}

}  // namespace

void select(const int64_t* shape, const int64_t* sc, const int64_t* sa, const int64_t* sb,
            const bool* cond, const void* a, const void* b, void* y, size_t elem) {
  switch (elem) {
    case 1:
      select_run(shape, sc, sa, sb, cond, static_cast<const uint8_t*>(a),
                 static_cast<const uint8_t*>(b), static_cast<uint8_t*>(y));
      break;
    case 2:
      select_run(shape, sc, sa, sb, cond, static_cast<const uint16_t*>(a),
                 static_cast<const uint16_t*>(b), static_cast<uint16_t*>(y));
      break;
    case 4:
      select_run(shape, sc, sa, sb, cond, static_cast<const uint32_t*>(a),
                 static_cast<const uint32_t*>(b), static_cast<uint32_t*>(y));
      break;
    default:
      select_run(shape, sc, sa, sb, cond, static_cast<const uint64_t*>(a),
                 static_cast<const uint64_t*>(b), static_cast<uint64_t*>(y));
      break;
  }
}

void lookup2_q8(const Bcast& g, const int8_t* table, const int8_t* a, const int8_t* b,
                int8_t* y, int row0, int row1) {
  bcast_q8(g, row0, row1, a, b, y, [table](int8_t av, int8_t bv) {
    return table[(static_cast<int>(av) + 128) * 256 + (static_cast<int>(bv) + 128)];
  });
}

void unary_f32(int op, const float* x, float* y, size_t n) {
  switch (op) {
    case U_RELU: for (size_t i = 0; i < n; ++i) y[i] = x[i] < 0.f ? 0.f : x[i]; break;
    case U_RELU6:
      for (size_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], 0.f), 6.f);
      break;
    case U_RELU_N1_TO_1:
      for (size_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], -1.f), 1.f);
      break;
    case U_RELU_0_TO_1:
      for (size_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], 0.f), 1.f);
      break;
    case U_TANH: for (size_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]); break;
    case U_LOGISTIC:
#if defined(__AVX2__) && defined(__FMA__)
      avx2::logistic_f32(x, y, n);
      break;
#endif
      for (size_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-x[i]));
      break;
    case U_RSQRT: for (size_t i = 0; i < n; ++i) y[i] = 1.f / std::sqrt(x[i]); break;
    case U_SQRT: for (size_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]); break;
    case U_EXP: for (size_t i = 0; i < n; ++i) y[i] = std::exp(x[i]); break;
    case U_NEG: for (size_t i = 0; i < n; ++i) y[i] = -x[i]; break;
    case U_ABS: for (size_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]); break;
    case U_LOG: for (size_t i = 0; i < n; ++i) y[i] = std::log(x[i]); break;
    case U_GELU:  // 0.5 x erfc(-x / sqrt 2), erfc in double
      for (size_t i = 0; i < n; ++i) {
        const float a = x[i] * -0.70710678118654752f;
        y[i] = 0.5f * x[i] * static_cast<float>(std::erfc(static_cast<double>(a)));
      }
      break;
    case U_GELU_TANH:
      for (size_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.f + std::tanh(inner));
      }
      break;
    case U_HARD_SWISH:
      for (size_t i = 0; i < n; ++i)
        y[i] = x[i] * std::min(6.f, std::max(0.f, x[i] + 3.f)) / 6.f;
      break;
    case U_ELU: for (size_t i = 0; i < n; ++i) y[i] = x[i] < 0.f ? std::expm1(x[i]) : x[i]; break;
    case U_SQUARE: for (size_t i = 0; i < n; ++i) y[i] = x[i] * x[i]; break;
    case U_FLOOR: for (size_t i = 0; i < n; ++i) y[i] = std::floor(x[i]); break;
    case U_CEIL: for (size_t i = 0; i < n; ++i) y[i] = std::ceil(x[i]); break;
    case U_ROUND:  // half to even (the default rounding mode)
      for (size_t i = 0; i < n; ++i) y[i] = std::nearbyint(x[i]);
      break;
    case U_SIN: for (size_t i = 0; i < n; ++i) y[i] = std::sin(x[i]); break;
    case U_COS: for (size_t i = 0; i < n; ++i) y[i] = std::cos(x[i]); break;
    default: break;
  }
}

void relu_q8(const int8_t* x, int zp_in, int32_t m, int s, int zp_out, int lo, int hi,
             int8_t* y, size_t n) {
  int8_t table[256];
  for (int v = -128; v < 128; ++v)
    table[v + 128] = clamp8(mbqm(v - zp_in, m, s) + zp_out, lo, hi);
  for (size_t i = 0; i < n; ++i) y[i] = table[x[i] + 128];
}

void leaky_relu_f32(const float* x, float alpha, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : x[i] * alpha;
}

void leaky_table_q8(int zp_in, int32_t m_id, int s_id, int32_t m_alpha, int s_alpha,
                    int zp_out, int8_t* table) {
  for (int v = -128; v < 128; ++v) {
    const int64_t d = v - zp_in;
    const int64_t r = d >= 0 ? mbqm(d, m_id, s_id) : mbqm(d, m_alpha, s_alpha);
    table[v + 128] = clamp8(r + zp_out, -128, 127);
  }
}

void requantize_q8(const int8_t* x, int zp_in, int32_t m, int s, int zp_out, int8_t* y,
                   size_t n, int64_t first, int64_t upward_end) {
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(x[i]) - zp_in;
    const int64_t r = first + static_cast<int64_t>(i) < upward_end ? mbqm_up(v, m, s)
                                                                   : mbqm(v, m, s);
    y[i] = clamp8(r + zp_out, -128, 127);
  }
}

void lut_q8(const int8_t* x, const int8_t* table, int8_t* y, size_t n) {
  size_t i = 0;
#if defined(__AVX512VBMI__) && defined(__AVX512BW__)
  // 64 values at a time: the index x + 128 picks from the table's lower half (bit 7 clear)
  // or upper half, each half two 64-byte registers addressed by the low 7 bits
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64),
                t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (; i < n; i += 64) {
    const __mmask64 m = n - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - i)) - 1;
    const __m512i idx = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + i), flip);
    const __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1);
    const __m512i hi = _mm512_permutex2var_epi8(t2, idx, t3);
    _mm512_mask_storeu_epi8(y + i, m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi));
  }
#elif defined(__AVX2__)
  i = lut_q8_avx2(x, table, y, n);
#endif
  for (; i < n; ++i) y[i] = table[x[i] + 128];
}

void relu_table_q8(int zp_in, int32_t m, int s, int zp_out, int lo, int hi, int8_t* table) {
  for (int v = -128; v < 128; ++v)
    table[v + 128] = clamp8(mbqm(v - zp_in, m, s) + zp_out, lo, hi);
}

// ---------------------------------------------------------------- softmax
namespace {

// Softmax with the C library's expf and a sequential sum: the int8 softmax's float
// arithmetic (its results must not move with the vector instructions of the host).
void softmax_f32_scalar(const float* x, float* y, int rows, int depth, float beta) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * depth;
    float* yr = y + static_cast<int64_t>(r) * depth;
    float mx = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < depth; ++i) mx = std::max(mx, xr[i]);
    float sum = 0.f;
    for (int i = 0; i < depth; ++i) {
      float e = xr[i] - mx;
      if (beta != 1.f) e *= beta;
      e = std::exp(e);
      yr[i] = e;
      sum += e;
    }
    for (int i = 0; i < depth; ++i) yr[i] /= sum;
  }
}

#if defined(__AVX512F__)
// e**x of 16 lanes: 2**n p(r) with n = round(x log2 e), r = x - n ln 2 (in two parts) and
// Cephes' degree-7 polynomial of expf (within about 1 ulp of expf); x is clamped to
// [-104, 89] first (e**-104 is 0 in float32, e**89 is inf) and NaN stays NaN.
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.f), x);  // max(lo, NaN) is NaN
  x = _mm512_min_ps(_mm512_set1_ps(89.f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);  // p 2**n, 0 or inf beyond float32's exponents
}
#endif

}  // namespace

void softmax_f32(const float* x, float* y, int rows, int depth, float beta) {
#if defined(__AVX512F__)
  // blocks of 16 (the last one masked): the maximum, e**(beta (x - max)) with exp16 and the
  // sum in 16 lanes, then each value divided by the sum
  const __m512 vbeta = _mm512_set1_ps(beta);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * depth;
    float* yr = y + static_cast<int64_t>(r) * depth;
    __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int i = 0; i < depth; i += 16) {
      const __mmask16 m = lanes(depth - i);
      vmax = _mm512_mask_max_ps(vmax, m, vmax, _mm512_maskz_loadu_ps(m, xr + i));
    }
    const float mx = _mm512_reduce_max_ps(vmax);
    const __m512 vmx = _mm512_set1_ps(mx);
    __m512 vsum = _mm512_setzero_ps();
    for (int i = 0; i < depth; i += 16) {
      const __mmask16 m = lanes(depth - i);
      const __m512 e = exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + i), vmx),
                                           vbeta));
      _mm512_mask_storeu_ps(yr + i, m, e);
      vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
    }
    const __m512 sum = _mm512_set1_ps(_mm512_reduce_add_ps(vsum));
    for (int i = 0; i < depth; i += 16) {
      const __mmask16 m = lanes(depth - i);
      _mm512_mask_storeu_ps(yr + i, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, yr + i), sum));
    }
  }
#else
  softmax_f32_scalar(x, y, rows, depth, beta);
#endif
}

void softmax_q8(const int8_t* x, double s_in, int zp_in, float s_out, int zp_out, float beta,
                int8_t* y, int rows, int depth) {
  std::vector<float> real(static_cast<size_t>(depth)), e(static_cast<size_t>(depth));
  for (int r = 0; r < rows; ++r) {
    const int8_t* xr = x + static_cast<int64_t>(r) * depth;
    for (int i = 0; i < depth; ++i)
      real[i] = static_cast<float>(s_in * (static_cast<int64_t>(xr[i]) - zp_in));
    softmax_f32_scalar(real.data(), e.data(), 1, depth, beta);
    int8_t* yr = y + static_cast<int64_t>(r) * depth;
    for (int i = 0; i < depth; ++i) yr[i] = clamp8(round_away(e[i] / s_out) + zp_out, -128, 127);
  }
}

namespace {

// NumPy's pairwise float32 sum of n values (8 partial sums up to 128 values, halves above).
float pairwise_sum(const float* a, int64_t n) {
  if (n < 8) {
    float r = -0.f;
    for (int64_t i = 0; i < n; ++i) r += a[i];
    return r;
  }
  if (n <= 128) {
    float r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

}  // namespace

void log_softmax_f32(const float* x, float* y, int rows, int depth) {
  std::vector<float> e(static_cast<size_t>(depth));
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * depth;
    float* yr = y + static_cast<int64_t>(r) * depth;
    float mx = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < depth; ++i) mx = std::max(mx, xr[i]);
    for (int i = 0; i < depth; ++i) {
      yr[i] = xr[i] - mx;
      e[i] = std::exp(yr[i]);
    }
    const float lse = std::log(pairwise_sum(e.data(), depth));
    for (int i = 0; i < depth; ++i) yr[i] -= lse;
  }
}

void log_softmax_q8(const int8_t* x, double s_in, int zp_in, float s_out, int zp_out,
                    int8_t* y, int rows, int depth) {
  std::vector<float> real(static_cast<size_t>(depth)), l(static_cast<size_t>(depth));
  for (int r = 0; r < rows; ++r) {
    const int8_t* xr = x + static_cast<int64_t>(r) * depth;
    for (int i = 0; i < depth; ++i)
      real[i] = static_cast<float>(s_in * (static_cast<int64_t>(xr[i]) - zp_in));
    log_softmax_f32(real.data(), l.data(), 1, depth);
    int8_t* yr = y + static_cast<int64_t>(r) * depth;
    for (int i = 0; i < depth; ++i) {
      const float q = l[i] / s_out;
      yr[i] = std::isnan(q) ? clamp8(zp_out, -128, 127)
                            : clamp8(round_away(std::max(-1099511627776.f,
                                                         std::min(1099511627776.f, q))) + zp_out,
                                     -128, 127);
    }
  }
}

// ---------------------------------------------------------------- pooling
namespace {

// Per output pixel, the channels' accumulators in a row (vectorised over channels) folded
// over the window's pixels in row-major order, as a per-channel loop would fold them.
template <typename T, typename Init, typename Step, typename Done>
void pool_loop(const PoolGeom& g, const T* x, T* y, int row0, int row1, Init init, Step step,
               Done done) {
  using Acc = decltype(init());
  std::vector<Acc> acc(static_cast<size_t>(g.c));
  Acc* __restrict__ a = acc.data();
  const int c = g.c;
  for (int b = 0; b < g.n; ++b)
    for (int oy = row0; oy < row1; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        const int y0 = std::max(0, oy * g.sh - g.pt), y1 = std::min(g.h, oy * g.sh - g.pt + g.fh);
        const int x0 = std::max(0, ox * g.sw - g.pl), x1 = std::min(g.w, ox * g.sw - g.pl + g.fw);
        T* dst = y + ((static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox) * c;
        for (int ch = 0; ch < c; ++ch) a[ch] = init();
        for (int iy = y0; iy < y1; ++iy)
          for (int ix = x0; ix < x1; ++ix) {
            const T* __restrict__ p = x + ((static_cast<int64_t>(b) * g.h + iy) * g.w + ix) * c;
            for (int ch = 0; ch < c; ++ch) a[ch] = step(a[ch], p[ch]);
          }
        const int count = std::max(0, y1 - y0) * std::max(0, x1 - x0);
        for (int ch = 0; ch < c; ++ch) dst[ch] = done(a[ch], count);
      }
}

}  // namespace

#if defined(__AVX512F__) && defined(__AVX512BW__)
namespace {

// MAX_POOL_2D in blocks of 16 (float) or 64 (int8) channels, the last one masked: per output
// pixel the maximum over the window's in-image pixels in row-major order, then the clamp.
// `vmax(v, a)` folds as the scalar kernel does (float: NaN where either is NaN).
template <typename T, int kLanes, typename Load, typename Max, typename Done>
void max_pool_vec(const PoolGeom& g, const T* x, T* y, int row0, int row1, Load load, Max vmax,
                  Done done) {
  const int c = g.c;
  for (int b = 0; b < g.n; ++b)
    for (int oy = row0; oy < row1; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        const int y0 = std::max(0, oy * g.sh - g.pt), y1 = std::min(g.h, oy * g.sh - g.pt + g.fh);
        const int x0 = std::max(0, ox * g.sw - g.pl), x1 = std::min(g.w, ox * g.sw - g.pl + g.fw);
        T* dst = y + ((static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox) * c;
        for (int c0 = 0; c0 < c; c0 += kLanes) {
          const int left = c - c0;
          auto acc = load(nullptr, left);  // the initial value
          for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix)
              acc = vmax(load(x + ((static_cast<int64_t>(b) * g.h + iy) * g.w + ix) * c + c0,
                              left),
                         acc);
          done(acc, dst + c0, left);
        }
      }
}

}  // namespace
#endif

void max_pool_f32(const PoolGeom& g, const float* x, int act, float* y, int row0, int row1) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
  if (act != ACT_TANH) {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (act == ACT_RELU) lo = 0.f;
    if (act == ACT_RELU6) lo = 0.f, hi = 6.f;
    if (act == ACT_RELU_N1_TO_1) lo = -1.f, hi = 1.f;
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    max_pool_vec<float, 16>(
        g, x, y, row0, row1,
        [](const float* p, int left) {
          return p ? _mm512_maskz_loadu_ps(lanes(left), p)
                   : _mm512_set1_ps(-std::numeric_limits<float>::infinity());
        },
        [](__m512 v, __m512 a) {  // NaN where either is NaN
          return _mm512_mask_add_ps(_mm512_max_ps(v, a), _mm512_cmp_ps_mask(v, a, _CMP_UNORD_Q),
                                    v, a);
        },
        [vlo, vhi](__m512 a, float* dst, int left) {
          _mm512_mask_storeu_ps(dst, lanes(left), _mm512_min_ps(vhi, _mm512_max_ps(vlo, a)));
        });
    return;
  }
#elif defined(__AVX2__) && defined(__FMA__)
  if (act != ACT_TANH) {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (act == ACT_RELU) lo = 0.f;
    if (act == ACT_RELU6) lo = 0.f, hi = 6.f;
    if (act == ACT_RELU_N1_TO_1) lo = -1.f, hi = 1.f;
    avx2::max_pool_f32(g, x, lo, hi, y, row0, row1);
    return;
  }
#endif
  pool_loop(g, x, y, row0, row1, [] { return -std::numeric_limits<float>::infinity(); },
            [](float a, float v) { return v > a || v != v ? v : a; },  // NaN stays
            [act](float a, int) { return act1(a, act); });
}

void avg_pool_f32(const PoolGeom& g, const float* x, int act, float* y, int row0, int row1) {
  pool_loop(g, x, y, row0, row1, [] { return 0.f; }, [](float a, float v) { return a + v; },
            [act](float a, int count) { return act1(a / static_cast<float>(count), act); });
}

void max_pool_q8(const PoolGeom& g, const int8_t* x, int lo, int hi, int8_t* y, int row0,
                 int row1) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
  const __m512i vlo = _mm512_set1_epi8(static_cast<char>(lo)),
                vhi = _mm512_set1_epi8(static_cast<char>(hi));
  const auto mask64 = [](int left) {
    return left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
  };
  max_pool_vec<int8_t, 64>(
      g, x, y, row0, row1,
      [mask64](const int8_t* p, int left) {
        return p ? _mm512_maskz_loadu_epi8(mask64(left), p) : _mm512_set1_epi8(-128);
      },
      [](__m512i v, __m512i a) { return _mm512_max_epi8(v, a); },
      [vlo, vhi, mask64](__m512i a, int8_t* dst, int left) {
        _mm512_mask_storeu_epi8(dst, mask64(left), _mm512_min_epi8(vhi, _mm512_max_epi8(vlo, a)));
      });
  return;
#endif
  pool_loop(g, x, y, row0, row1, [] { return int32_t(-128); },
            [](int32_t a, int8_t v) { return v > a ? int32_t(v) : a; },
            [lo, hi](int32_t a, int) { return clamp8(a, lo, hi); });
}

void avg_pool_q8(const PoolGeom& g, const int8_t* x, int lo, int hi, int8_t* y, int row0,
                 int row1) {
  pool_loop(g, x, y, row0, row1, [] { return int32_t(0); },
            [](int32_t a, int8_t v) { return a + v; },
            [lo, hi](int32_t a, int count) {
              const int32_t cnt = std::max(count, 1), half = cnt / 2;
              const int32_t v = a > 0 ? (a + half) / cnt : (a - half) / cnt;
              return clamp8(v, lo, hi);
            });
}

// ---------------------------------------------------------------- reductions
namespace {

template <typename F>
void reduce_loop(const Reduce& g, F&& f) {
  const int64_t* s = g.shape;
  const int64_t* o = g.out_stride;
  int64_t in = 0;
  for (int64_t i0 = 0; i0 < s[0]; ++i0)
    for (int64_t i1 = 0; i1 < s[1]; ++i1)
      for (int64_t i2 = 0; i2 < s[2]; ++i2)
        for (int64_t i3 = 0; i3 < s[3]; ++i3)
          for (int64_t i4 = 0; i4 < s[4]; ++i4) {
            const int64_t base = i0 * o[0] + i1 * o[1] + i2 * o[2] + i3 * o[3] + i4 * o[4];
            for (int64_t i5 = 0; i5 < s[5]; ++i5) f(base + i5 * o[5], in++);
          }
}

}  // namespace

void reduce_f32(const Reduce& g, int op, const float* x, float* y) {
  float init = 0.f;
  if (op == R_MAX) init = -std::numeric_limits<float>::infinity();
  if (op == R_MIN) init = std::numeric_limits<float>::infinity();
  if (op == R_PROD) init = 1.f;
  std::fill(y, y + g.out_size, init);
  if ((op == R_MEAN || op == R_SUM) && g.out_stride[5] == 0 && g.shape[5] >= 16) {
    // innermost axis reduced: each row summed in 16 partial sums (pairs of 8 lanes), as
    // NumPy's pairwise sums, then the partial sums added together
    const int64_t n = g.shape[5];
    const int64_t rows = g.shape[0] * g.shape[1] * g.shape[2] * g.shape[3] * g.shape[4];
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * n;
      float part[16] = {};
      int64_t i = 0;
      for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) part[j] += xr[i + j];
      float total = 0.f;
      for (int j = 0; j < 16; ++j) total += part[j];
      for (; i < n; ++i) total += xr[i];
      int64_t oi = 0, rest = r;
      for (int d = 4; d >= 0; --d) {
        oi += (rest % g.shape[d]) * g.out_stride[d];
        rest /= g.shape[d];
      }
      y[oi] += total;
    }
    if (op == R_MEAN) {
      const float cnt = static_cast<float>(g.count);
      for (int64_t i = 0; i < g.out_size; ++i) y[i] /= cnt;
    }
    return;
  }
  switch (op) {
    case R_MEAN:
    case R_SUM: reduce_loop(g, [&](int64_t oi, int64_t ii) { y[oi] += x[ii]; }); break;
    case R_MAX: reduce_loop(g, [&](int64_t oi, int64_t ii) { y[oi] = std::max(y[oi], x[ii]); }); break;
    case R_MIN: reduce_loop(g, [&](int64_t oi, int64_t ii) { y[oi] = std::min(y[oi], x[ii]); }); break;
    case R_PROD: reduce_loop(g, [&](int64_t oi, int64_t ii) { y[oi] *= x[ii]; }); break;
    default: break;
  }
  if (op == R_MEAN) {
    const float n = static_cast<float>(g.count);
    for (int64_t i = 0; i < g.out_size; ++i) y[i] /= n;
  }
}

void mean_q8(const Reduce& g, const int8_t* x, int spatial, int32_t m, int s, int zp_in,
             int bias_or_zp, int lo, int hi, int channels, int upward, int8_t* y) {
  std::vector<int64_t> total(static_cast<size_t>(g.out_size), 0);
#if defined(__AVX2__)
  if (g.out_stride[5] == 1 && g.shape[5] >= 16 && g.count < (int64_t(1) << 23)) {
    // the kept innermost axis a row of int32 sums, whole input rows added at a time (the
    // sums of at most 2**23 int8 values fit int32)
    std::vector<int32_t> t32(static_cast<size_t>(g.out_size), 0);
    const int64_t* sh = g.shape;
    const int64_t* o = g.out_stride;
    const int8_t* row = x;
    for (int64_t i0 = 0; i0 < sh[0]; ++i0)
      for (int64_t i1 = 0; i1 < sh[1]; ++i1)
        for (int64_t i2 = 0; i2 < sh[2]; ++i2)
          for (int64_t i3 = 0; i3 < sh[3]; ++i3)
            for (int64_t i4 = 0; i4 < sh[4]; ++i4, row += sh[5])
              add_row_q8_avx2(row, sh[5],
                              t32.data() + i0 * o[0] + i1 * o[1] + i2 * o[2] + i3 * o[3] +
                                  i4 * o[4]);
    for (int64_t i = 0; i < g.out_size; ++i) total[i] = t32[i];
  } else {
    reduce_loop(g, [&](int64_t oi, int64_t ii) { total[oi] += x[ii]; });
  }
#else
  reduce_loop(g, [&](int64_t oi, int64_t ii) { total[oi] += x[ii]; });
#endif
  for (int64_t i = 0; i < g.out_size; ++i) {
    int64_t v;
    if (spatial) {
      const int ch = static_cast<int>(i % channels);
      v = (ch < upward ? mbqm_up(total[i], m, s) : mbqm(total[i], m, s)) + bias_or_zp;
    } else {
      v = mbqm(total[i] - static_cast<int64_t>(zp_in) * g.count, m, s) + bias_or_zp;
    }
    y[i] = clamp8(v, lo, hi);
  }
}

void sum_q8(const Reduce& g, const int8_t* x, float scale, float bias, int zp_out, int8_t* y) {
  std::vector<int64_t> total(static_cast<size_t>(g.out_size), 0);
  reduce_loop(g, [&](int64_t oi, int64_t ii) { total[oi] += x[ii]; });
  for (int64_t i = 0; i < g.out_size; ++i) {
    const float scaled = static_cast<float>(total[i]) * scale;  // two roundings, no FMA
    const float shifted = scaled + bias;
    y[i] = clamp8(static_cast<int64_t>(std::round(shifted)) + zp_out, -128, 127);
  }
}

void extreme_i32(const Reduce& g, int is_max, const int32_t* x, int32_t* y) {
  std::fill(y, y + g.out_size, is_max ? std::numeric_limits<int32_t>::min()
                                      : std::numeric_limits<int32_t>::max());
  if (is_max)
    reduce_loop(g, [&](int64_t oi, int64_t ii) { y[oi] = std::max(y[oi], x[ii]); });
  else
    reduce_loop(g, [&](int64_t oi, int64_t ii) { y[oi] = std::min(y[oi], x[ii]); });
}

void extreme_q8(const Reduce& g, int is_max, const int8_t* x, int8_t* y) {
  std::fill(y, y + g.out_size, static_cast<int8_t>(is_max ? -128 : 127));
  if (is_max)
    reduce_loop(g, [&](int64_t oi, int64_t ii) { y[oi] = std::max(y[oi], x[ii]); });
  else
    reduce_loop(g, [&](int64_t oi, int64_t ii) { y[oi] = std::min(y[oi], x[ii]); });
}

// ---------------------------------------------------------------- normalisation
void instance_norm_f32(const float* x, const float* gamma, const float* beta, int n,
                       int spatial, int c, double eps, int act, float* y) {
  std::vector<double> mean(static_cast<size_t>(c)), var(static_cast<size_t>(c));
  for (int b = 0; b < n; ++b) {
    const float* xb = x + static_cast<int64_t>(b) * spatial * c;
    float* yb = y + static_cast<int64_t>(b) * spatial * c;
    std::fill(mean.begin(), mean.end(), 0.0);
    std::fill(var.begin(), var.end(), 0.0);
    for (int64_t i = 0; i < spatial; ++i)
      for (int ch = 0; ch < c; ++ch) mean[ch] += xb[i * c + ch];
    for (int ch = 0; ch < c; ++ch) mean[ch] /= spatial;
    for (int64_t i = 0; i < spatial; ++i)
      for (int ch = 0; ch < c; ++ch) {
        const double d = xb[i * c + ch] - mean[ch];
        var[ch] += d * d;
      }
    for (int ch = 0; ch < c; ++ch) var[ch] = std::sqrt(var[ch] / spatial + eps);
    for (int64_t i = 0; i < spatial; ++i)
      for (int ch = 0; ch < c; ++ch) {
        const double v = (xb[i * c + ch] - mean[ch]) / var[ch] * (gamma ? gamma[ch] : 1.0) +
                         (beta ? beta[ch] : 0.0);
        yb[i * c + ch] = act1(static_cast<float>(v), act);
      }
  }
}

void layer_norm_f32(const float* x, const float* gamma, const float* beta, int rows, int d,
                    double eps, float* y) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * d;
    float* yr = y + static_cast<int64_t>(r) * d;
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < d; ++i) mean += xr[i];
    mean /= d;
    for (int i = 0; i < d; ++i) {
      const double t = xr[i] - mean;
      var += t * t;
    }
    const double den = std::sqrt(var / d + eps);
    for (int i = 0; i < d; ++i)
      yr[i] = static_cast<float>((xr[i] - mean) / den * (gamma ? gamma[i] : 1.0) +
                                 (beta ? beta[i] : 0.0));
  }
}

// ---------------------------------------------------------------- data movement
namespace {

template <typename T>
void transpose_t(const T* src, T* dst, const int64_t* s, const int64_t* st) {
  for (int64_t i0 = 0; i0 < s[0]; ++i0)
    for (int64_t i1 = 0; i1 < s[1]; ++i1)
      for (int64_t i2 = 0; i2 < s[2]; ++i2)
        for (int64_t i3 = 0; i3 < s[3]; ++i3)
          for (int64_t i4 = 0; i4 < s[4]; ++i4) {
            const T* p = src + i0 * st[0] + i1 * st[1] + i2 * st[2] + i3 * st[3] + i4 * st[4];
            const int64_t n = s[5], step = st[5];
            if (step == 1) {
              std::memcpy(dst, p, sizeof(T) * static_cast<size_t>(n));
            } else {
              for (int64_t i5 = 0; i5 < n; ++i5) dst[i5] = p[i5 * step];
            }
            dst += n;
          }
}

}  // namespace

void gather_map(const void* x, const int32_t* map, void* y, int64_t n, size_t elem,
                const void* fill) {
  const auto* src = static_cast<const unsigned char*>(x);
  auto* dst = static_cast<unsigned char*>(y);
  for (int64_t i = 0; i < n; ++i, dst += elem)
    std::memcpy(dst, map[i] < 0 ? fill : src + static_cast<int64_t>(map[i]) * elem, elem);
}

void transpose(const void* x, void* y, size_t elem, const int64_t* out_shape,
               const int64_t* in_stride) {
  if (elem == 4) {
    transpose_t(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y), out_shape, in_stride);
    return;
  }
  if (elem == 1) {
    transpose_t(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), out_shape, in_stride);
    return;
  }
  const char* src = static_cast<const char*>(x);
  char* dst = static_cast<char*>(y);
  const int64_t* s = out_shape;
  const int64_t* st = in_stride;
  for (int64_t i0 = 0; i0 < s[0]; ++i0)
    for (int64_t i1 = 0; i1 < s[1]; ++i1)
      for (int64_t i2 = 0; i2 < s[2]; ++i2)
        for (int64_t i3 = 0; i3 < s[3]; ++i3)
          for (int64_t i4 = 0; i4 < s[4]; ++i4) {
            const int64_t base = i0 * st[0] + i1 * st[1] + i2 * st[2] + i3 * st[3] + i4 * st[4];
            for (int64_t i5 = 0; i5 < s[5]; ++i5) {
              std::memcpy(dst, src + (base + i5 * st[5]) * static_cast<int64_t>(elem), elem);
              dst += elem;
            }
          }
}

void copy_blocks(const void* x, int64_t x_block, void* y, int64_t y_block, int64_t outer,
                 int64_t inner, size_t elem) {
  const char* src = static_cast<const char*>(x);
  char* dst = static_cast<char*>(y);
  for (int64_t i = 0; i < outer; ++i)
    std::memcpy(dst + i * y_block * static_cast<int64_t>(elem),
                src + i * x_block * static_cast<int64_t>(elem),
                static_cast<size_t>(inner) * elem);
}

namespace {

// The last padded axis of a PAD (-1: none).
int last_padded_axis(const int64_t* out_shape, const int64_t* in_shape) {
  for (int d = 5; d >= 0; --d)
    if (out_shape[d] != in_shape[d]) return d;
  return -1;
}

// n values of `elem` bytes, each `fill`.
void fill_values(char* dst, const void* fill, size_t elem, int64_t n) {
  if (n <= 0) return;
  const unsigned char* f = static_cast<const unsigned char*>(fill);
  bool same = true;
  for (size_t k = 1; k < elem; ++k) same = same && f[k] == f[0];
  if (same) {
    std::memset(dst, f[0], static_cast<size_t>(n) * elem);
  } else if (elem == 4) {
    uint32_t v;
    std::memcpy(&v, fill, 4);
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + 4 * i, &v, 4);
  } else {
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * static_cast<int64_t>(elem), fill, elem);
  }
}

// `rows` output rows of `lead` fill values, `body` values copied from src, `trail` fill
// values each (the input rows consecutive).
template <typename T>
void pad_run_rows(const T* __restrict__ src, T* __restrict__ dst, T v, int64_t lead,
                  int64_t body, int64_t trail, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < lead; ++i) dst[i] = v;
    dst += lead;
    std::memcpy(dst, src, static_cast<size_t>(body) * sizeof(T));
    dst += body;
    src += body;
    for (int64_t i = 0; i < trail; ++i) dst[i] = v;
    dst += trail;
  }
}

// pad_run_rows for values of `elem` bytes; false for a size it does not take.
bool pad_run(const char* src, char* dst, size_t elem, const void* fill, int64_t lead,
             int64_t body, int64_t trail, int64_t rows) {
  switch (elem) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, fill, 1);
      pad_run_rows(reinterpret_cast<const uint8_t*>(src), reinterpret_cast<uint8_t*>(dst), v,
                   lead, body, trail, rows);
      return true;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, fill, 2);
      pad_run_rows(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<uint16_t*>(dst), v,
                   lead, body, trail, rows);
      return true;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, fill, 4);
      pad_run_rows(reinterpret_cast<const uint32_t*>(src), reinterpret_cast<uint32_t*>(dst), v,
                   lead, body, trail, rows);
      return true;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, fill, 8);
      pad_run_rows(reinterpret_cast<const uint64_t*>(src), reinterpret_cast<uint64_t*>(dst), v,
                   lead, body, trail, rows);
      return true;
    }
    default: return false;
  }
}

}  // namespace

int64_t pad_row_count(const int64_t* out_shape, const int64_t* in_shape, const int64_t* before) {
  (void)before;
  const int d = last_padded_axis(out_shape, in_shape);
  int64_t rows = 1;
  for (int k = 0; k < d; ++k) rows *= out_shape[k];
  return rows;
}

void pad_rows(const void* x, void* y, size_t elem, const int64_t* in_shape,
              const int64_t* out_shape, const int64_t* before, const void* fill, int64_t row0,
              int64_t row1) {
  const char* src = static_cast<const char*>(x);
  char* dst = static_cast<char*>(y);
  const int d = last_padded_axis(out_shape, in_shape);
  int64_t inner = 1;  // values after the last padded axis (unpadded)
  for (int k = d + 1; k < 6; ++k) inner *= in_shape[k];
  if (d < 0) {  // no padding: a copy
    if (row0 == 0 && row1 > 0) std::memcpy(dst, src, static_cast<size_t>(inner) * elem);
    return;
  }
  const int64_t e = static_cast<int64_t>(elem);
  const int64_t lead = before[d] * inner, body = in_shape[d] * inner;
  const int64_t row_out = out_shape[d] * inner, trail = row_out - lead - body;
  bool outer_padded = false;  // any axis before d padded
  for (int k = 0; k < d; ++k) outer_padded = outer_padded || out_shape[k] != in_shape[k];
  if (!outer_padded && pad_run(src + row0 * body * e, dst + row0 * row_out * e, elem, fill,
                               lead, body, trail, row1 - row0))
    return;
  // output row -> its coordinates on the axes before d, and the input row they read
  int64_t idx[6] = {0, 0, 0, 0, 0, 0};
  int64_t r = row0;
  for (int k = d - 1; k >= 0; --k) {
    idx[k] = r % out_shape[k];
    r /= out_shape[k];
  }
  for (int64_t row = row0; row < row1; ++row) {
    char* o = dst + row * row_out * e;
    bool inside = true;
    int64_t in_row = 0;
    for (int k = 0; k < d; ++k) {
      const int64_t i = idx[k] - before[k];
      inside = inside && i >= 0 && i < in_shape[k];
      in_row = in_row * in_shape[k] + i;
    }
    if (inside && pad_run(src + in_row * body * e, o, elem, fill, lead, body, trail, 1)) {
      // (one row of the fill, the input row, the fill)
    } else if (inside) {
      fill_values(o, fill, elem, lead);
      std::memcpy(o + lead * e, src + in_row * body * e, static_cast<size_t>(body * e));
      fill_values(o + (lead + body) * e, fill, elem, trail);
    } else {
      fill_values(o, fill, elem, row_out);
    }
    for (int k = d - 1; k >= 0; --k) {  // next row
      if (++idx[k] < out_shape[k]) break;
      idx[k] = 0;
    }
  }
}

void pad(const void* x, void* y, size_t elem, const int64_t* in_shape,
         const int64_t* out_shape, const int64_t* before, const void* fill) {
  pad_rows(x, y, elem, in_shape, out_shape, before, fill, 0,
           pad_row_count(out_shape, in_shape, before));
}

void quantize_f32_q8(const float* x, float scale, int zp, int8_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = clamp8(round_away(x[i] / scale) + zp, -128, 127);
}

void dequantize_q8_f32(const int8_t* x, double scale, int zp, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i)
    y[i] = static_cast<float>(scale * (static_cast<int64_t>(x[i]) - zp));
}

// ---------------------------------------------------------------- hybrid and integer sequences
// Float arithmetic here must round as the reference runtime's float32 NumPy does: no fused
// multiply-add contraction.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
namespace {

// std::round (ties away from zero) without the library call: truncation is exact, so is
// the distance to it.
inline float round_ties_away(float v) {
  const float t = std::trunc(v);
  return std::fabs(v - t) >= 0.5f ? t + std::copysign(1.f, v) : t;
}

// One row quantized as TFLite's BatchQuantizeFloats (ties away from zero): the int8
// values, the row's float32 scale and its zero point (offset).
void quantize_row_hybrid(const float* v, int k, int asym, int8_t* q, float* scale,
                         int32_t* offset) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  float mn = 0.f, mx = 0.f;
  for (int j = 0; j < k; ++j) {
    mn = std::min(mn, v[j]);
    mx = std::max(mx, v[j]);
  }
  *scale = 1.f;
  *offset = 0;
  if (!asym) {
    const float range = std::max(std::fabs(mn), std::fabs(mx));
    if (range == 0.f) {
      std::fill(q, q + k, int8_t(0));
      return;
    }
    *scale = range / 127.f;
    const float inv = 127.f / range;
    for (int j = 0; j < k; ++j) {
      const float r = round_ties_away(v[j] * inv);
      q[j] = static_cast<int8_t>(std::min(127.f, std::max(-127.f, r)));
    }
    return;
  }
  const double rmin = mn, rmax = mx;
  if (rmin == rmax) {
    std::fill(q, q + k, int8_t(0));
    return;
  }
  const double s = (rmax - rmin) / 255.0;
  const double zp_min = -128.0 - rmin / s, zp_max = 127.0 - rmax / s;
  const double err_min = 128.0 + std::fabs(rmin / s), err_max = 127.0 + std::fabs(rmax / s);
  const double zp = err_min < err_max ? zp_min : zp_max;
  const int32_t nudged = zp <= -128.0 ? -128 : (zp >= 127.0 ? 127
                                                 : static_cast<int32_t>(std::round(zp)));
  *scale = static_cast<float>(s);
  *offset = nudged;
  // LiteRT rounds the scaled value, then adds the zero point
  const float inv = 1.f / *scale;
  for (int j = 0; j < k; ++j) {
    const float r = round_ties_away(v[j] * inv) + static_cast<float>(nudged);
    q[j] = static_cast<int8_t>(std::min(127.f, std::max(-128.f, r)));
  }
}

}  // namespace

void fully_connected_hybrid(const float* x, const int16_t* w, const float* wscale,
                            const int32_t* wsum, const float* bias, int batch, int k, int o,
                            int asym, int act, float* y) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  const int kp = (k + 1) / 2;
  int8_t* q = scratch<int8_t, 170>(static_cast<size_t>(2 * kp));
  int32_t* a = scratch<int32_t, 171>(static_cast<size_t>(o));
  int32_t* qpair = scratch<int32_t, 172>(static_cast<size_t>(kp));
  for (int b = 0; b < batch; ++b) {
    float scale;
    int32_t offset;
    quantize_row_hybrid(x + static_cast<size_t>(b) * k, k, asym, q, &scale, &offset);
    if (k % 2) q[k] = 0;
    // exact integer dot products over pairs of input values: weights [k / 2, o, 2]
    for (int jp = 0; jp < kp; ++jp)
      qpair[jp] = static_cast<int32_t>(
          (static_cast<uint32_t>(static_cast<uint16_t>(int16_t(q[2 * jp + 1]))) << 16) |
          static_cast<uint16_t>(int16_t(q[2 * jp])));
    int i = 0;
#if defined(__AVX2__)
    for (; i + 8 <= o; i += 8) {
      __m256i acc = _mm256_setzero_si256();
      for (int jp = 0; jp < kp; ++jp) {
        const __m256i wv = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(w + (static_cast<size_t>(jp) * o + i) * 2));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(wv, _mm256_set1_epi32(qpair[jp])));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + i), acc);
    }
#endif
    for (; i < o; ++i) {
      int32_t s = 0;
      for (int jp = 0; jp < kp; ++jp) {
        const int16_t* wp = w + (static_cast<size_t>(jp) * o + i) * 2;
        s += int32_t(q[2 * jp]) * wp[0] + int32_t(q[2 * jp + 1]) * wp[1];
      }
      a[i] = s;
    }
    float* yr = y + static_cast<size_t>(b) * o;
    for (i = 0; i < o; ++i) {
      int64_t dot = a[i];
      if (asym) dot -= int64_t(offset) * wsum[i];
      const float factor = scale * wscale[i];
      const float v = static_cast<float>(dot) * factor;
      yr[i] = bias ? bias[i] + v : v;
    }
    activate_f32(yr, static_cast<size_t>(o), act);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

// Integer LSTM: gemmlowp's int16 fixed point (values held in int32; "w16" wraps as int16
// arithmetic does, "s16" saturates).
namespace {

inline int32_t w16(int32_t x) { return static_cast<int16_t>(static_cast<uint16_t>(x)); }
inline int32_t s16(int32_t x) { return std::min(32767, std::max(-32768, x)); }

inline int32_t srdhm16(int32_t a, int32_t b) {
  if (a == -32768 && b == -32768) return 32767;
  const int32_t ab = a * b;
  return (ab + (ab >= 0 ? (1 << 14) : (1 - (1 << 14)))) / (1 << 15);
}

inline int32_t rdbpot32(int32_t x, int e) {
  return e > 0 ? static_cast<int32_t>(rounding_divide_by_pot(x, e)) : x;
}

// SaturatingRoundingMultiplyByPOT<e> on int16 values.
inline int32_t srmpot16(int32_t x, int e) {
  if (e < 0) return rdbpot32(x, -e);
  if (e == 0) return x;
  const int32_t threshold = (1 << (15 - e)) - 1;
  if (x > threshold) return 32767;
  if (x < -threshold) return -32768;
  return w16(x * (1 << e));
}

// gemmlowp's int16 constant from its int32 raw value.
inline int32_t const16(int32_t raw32) { return rdbpot32(raw32, 16); }

int32_t exp_quarter16(int32_t a) {
  const int32_t constant_term = const16(1895147668), one_third = const16(715827883);
  const int32_t x = w16(a + (1 << 12));
  const int32_t x2 = srdhm16(x, x), x3 = srdhm16(x2, x), x4 = srdhm16(x2, x2);
  const int32_t x4_over_4 = srmpot16(x4, -2);
  const int32_t poly = srmpot16(w16(srdhm16(w16(x4_over_4 + x3), one_third) + x2), -1);
  return s16(constant_term + srdhm16(constant_term, w16(x + poly)));
}

int32_t exp_negative16(int32_t a, int int_bits) {
  static const int32_t kBarrel[7][2] = {{-2, 1672461947}, {-1, 1302514674}, {0, 790015084},
                                        {1, 290630308}, {2, 39332535}, {3, 720401}, {4, 242}};
  const int frac = 15 - int_bits;
  const int32_t quarter = 1 << (frac - 2);
  const int32_t a_mod = w16((a & (quarter - 1)) - quarter);
  int32_t result = exp_quarter16(srmpot16(a_mod, int_bits));
  const int32_t remainder = w16(a_mod - a);
  for (const auto& b : kBarrel) {
    const int exponent = b[0];
    if (int_bits > exponent && (remainder & (1 << (frac + exponent))))
      result = srdhm16(result, const16(b[1]));
  }
  if (int_bits > 5 && a < const16(-(1 << (36 - int_bits)))) result = 0;
  return a == 0 ? 32767 : result;
}

// Newton-Raphson for 1 / (1 + a), a in Q0.15 [0, 1]: x ~ 1 / half-denominator in Q2.13.
int32_t newton16(int32_t a) {
  const int32_t s = a + 32767;
  const int32_t half = (s + (s >= 0 ? 1 : -1)) / 2;
  int32_t x = w16(const16(1515870810) + srdhm16(half, const16(-1010580540)));
  for (int i = 0; i < 3; ++i) {
    const int32_t one_minus = w16(8192 - srdhm16(half, x));
    x = w16(x + srmpot16(srdhm16(x, one_minus), 2));
  }
  return x;
}

}  // namespace

int32_t logistic_q3_12(int32_t a) {
  if (a == 0) return const16(1 << 30);
  const bool pos = a > 0;
  const int32_t abs_in = pos ? a : w16(-a);
  const int32_t rp = srmpot16(newton16(exp_negative16(w16(-abs_in), 3)), 1);
  return pos ? rp : w16(32767 - rp);
}

int32_t tanh_q16(int32_t a, int int_bits) {
  if (a == 0) return 0;
  const bool neg = a < 0;
  const int32_t n = neg ? a : w16(-a);
  const int32_t t = srmpot16(w16(newton16(exp_negative16(n, int_bits + 1)) - 8192), 2);
  return neg ? w16(-t) : t;
}

namespace {

inline int32_t srmpot32(int32_t x, int e) {  // e > 0
  const int32_t threshold = static_cast<int32_t>((int64_t(1) << (31 - e)) - 1);
  if (x > threshold) return INT32_MAX;
  if (x < -threshold) return INT32_MIN;
  return x * (1 << e);
}

inline int32_t wrap32(int64_t x) { return static_cast<int32_t>(static_cast<uint32_t>(x)); }

// TFLite GetInvSqrtQuantizedMultiplierExp(v, reverse_shift = -1).
void inv_sqrt_multiplier(int32_t v, int32_t* mult, int* shift) {
  if (v <= 1) {
    *mult = INT32_MAX;
    *shift = 0;
    return;
  }
  int s = 11;
  while (v >= (1 << 29)) {
    v /= 4;
    ++s;
  }
  int bits = 0;
  for (uint32_t u = static_cast<uint32_t>(v); u; u >>= 1) ++bits;
  const int pairs = (32 - bits - 1) / 2 - 1;
  s -= pairs;
  v <<= 2 * pairs;
  const int32_t half_input = rdbpot32(v >> 1, 1);
  const int32_t half_three = (1 << 28) + (1 << 27);
  int32_t x = 1 << 28;
  for (int i = 0; i < 5; ++i) {
    const int32_t x3 = srmpot32(static_cast<int32_t>(srdhm(srdhm(x, x), x)), 6);
    x = srmpot32(wrap32(srdhm(half_three, x) - srdhm(half_input, x3)), 3);
  }
  x = static_cast<int32_t>(srdhm(x, 1518500250));
  if (s < 0) {
    x = wrap32(static_cast<int64_t>(x) * (int64_t(1) << -s));
    s = 0;
  }
  *mult = x;
  *shift = -s;
}

// TFLite's integer ApplyLayerNorm of one row of n int16 values (in place, to Q3.12).
void layer_norm_q16(int32_t* v, int n, const int16_t* w, const int32_t* bias, int32_t a,
                    int b, int32_t guard) {
  int64_t sum = 0, sq = 0;
  for (int j = 0; j < n; ++j) {
    sum += v[j];
    sq += int64_t(v[j]) * v[j];
  }
  const int32_t mean = static_cast<int32_t>(sum * 1024 / n);
  const int64_t variance = sq * ((1 << 20) / n) - int64_t(mean) * mean;
  int32_t var2 = static_cast<int32_t>(variance / (1 << 20));
  if (var2 < 1) var2 = guard;
  int32_t ia;
  int is;
  inv_sqrt_multiplier(var2, &ia, &is);
  for (int j = 0; j < n; ++j) {
    const int32_t rescaled = static_cast<int32_t>(mbqm(1024 * int64_t(v[j]) - mean, ia, is));
    const int64_t val3 = wrap32(int64_t(rescaled) * w[j] + bias[j]);
    const int64_t val4 = (val3 > 0 ? val3 + 512 : val3 - 512) / 1024;
    v[j] = s16(static_cast<int32_t>(mbqm(val4, a, b + 12)));
  }
}

}  // namespace

void lstm_q8(const IntLstmGeom& g, const int8_t* x, const int8_t* w_in, const int8_t* w_rec,
             const int32_t* b_in, const int32_t* b_rec, const int32_t* m_in,
             const int32_t* m_rec, const int16_t* peep, const int32_t* m_peep,
             const int8_t* proj, const int32_t* proj_bias, const int16_t* ln,
             const int32_t* ln_bias, const int32_t* m_ln, const int32_t* ln_guard,
             const int8_t* h0, const int16_t* c0, int8_t* y) {
  const int nc = g.n_cell, ni = g.n_input, no = g.n_output;
  std::vector<int8_t> h(static_cast<size_t>(no)), hidden(static_cast<size_t>(nc));
  std::vector<int32_t> c(static_cast<size_t>(nc));
  std::vector<int32_t> gate(static_cast<size_t>(4) * nc);
  // with a projection the hidden values carry minus the hidden zero point (TFLite)
  const int32_t hidden_zp = proj ? -g.hidden_zp : g.hidden_zp;
  auto peephole = [&](int k, int j, int32_t pre) {
    const int64_t v = mbqm(int64_t(peep[k * nc + j]) * c[j], m_peep[2 * k], m_peep[2 * k + 1]);
    return s16(static_cast<int32_t>(pre + v));
  };
  auto norm = [&](int k) {  // layer norm of gate k's row
    layer_norm_q16(gate.data() + static_cast<size_t>(k) * nc, nc, ln + k * nc,
                   ln_bias + k * nc, m_ln[2 * k], m_ln[2 * k + 1], ln_guard[k]);
  };
  for (int b = 0; b < g.batch; ++b) {
    for (int j = 0; j < no; ++j)
      h[j] = h0 ? h0[static_cast<size_t>(b) * no + j] : static_cast<int8_t>(g.h_zp);
    for (int j = 0; j < nc; ++j) c[j] = c0 ? c0[static_cast<size_t>(b) * nc + j] : 0;
    for (int t = 0; t < g.steps; ++t) {
      const size_t row = g.time_major ? static_cast<size_t>(t) * g.batch + b
                                      : static_cast<size_t>(b) * g.steps + t;
      const int8_t* xr = x + row * ni;
      for (int k = g.cifg ? 1 : 0; k < 4; ++k) {  // pre-activations
        for (int j = 0; j < nc; ++j) {
          const int8_t* wr = w_in + (static_cast<size_t>(k) * nc + j) * ni;
          int32_t acc = b_in[k * nc + j];
          for (int i = 0; i < ni; ++i) acc += int32_t(xr[i]) * int32_t(wr[i]);
          const int32_t v = s16(static_cast<int32_t>(mbqm(acc, m_in[2 * k], m_in[2 * k + 1])));
          const int8_t* rr = w_rec + (static_cast<size_t>(k) * nc + j) * no;
          int32_t acc2 = b_rec[k * nc + j];
          for (int i = 0; i < no; ++i) acc2 += int32_t(h[i]) * int32_t(rr[i]);
          const int32_t r = static_cast<int32_t>(mbqm(acc2, m_rec[2 * k], m_rec[2 * k + 1]));
          int32_t pre = s16(r + v);
          if (peep && k < 2) pre = peephole(k, j, pre);  // input, forget: the old cell
          gate[k * nc + j] = pre;
        }
        if (ln && k < 3) norm(k);
        if (k < 3) {
          for (int j = 0; j < nc; ++j) {
            int32_t& v = gate[k * nc + j];
            v = k == 2 ? tanh_q16(v, 3) : logistic_q3_12(v);
          }
        }
      }
      for (int j = 0; j < nc; ++j) {
        const int32_t f = gate[nc + j], cg = gate[2 * nc + j];
        const int32_t in = g.cifg ? w16(32767 - f) : gate[j];
        int32_t cv = w16(rdbpot32(f * c[j], 15));
        cv = s16(cv + w16(rdbpot32(in * cg, 30 + g.cell_log2)));
        if (g.cell_clip > 0) cv = std::min(g.cell_clip, std::max(-g.cell_clip, cv));
        c[j] = cv;
        if (peep) gate[3 * nc + j] = peephole(2, j, gate[3 * nc + j]);  // the new cell
      }
      if (ln) norm(3);
      for (int j = 0; j < nc; ++j) {
        const int32_t o = logistic_q3_12(gate[3 * nc + j]);
        const int32_t th = tanh_q16(c[j], 15 + g.cell_log2);
        const int64_t hv = mbqm(int64_t(o) * th, g.hidden_mult, g.hidden_shift) + hidden_zp;
        hidden[j] = static_cast<int8_t>(std::min<int64_t>(127, std::max<int64_t>(-128, hv)));
      }
      int8_t* yr = y + row * no;
      if (proj) {
        for (int i = 0; i < no; ++i) {
          const int8_t* pr = proj + static_cast<size_t>(i) * nc;
          int32_t acc = proj_bias[i];
          for (int j = 0; j < nc; ++j) acc += int32_t(hidden[j]) * int32_t(pr[j]);
          int64_t v = mbqm(acc, g.proj_mult, g.proj_shift) + g.h_zp;
          v = std::min<int64_t>(127, std::max<int64_t>(-128, v));
          if (g.proj_clip > 0)
            v = std::min<int64_t>(g.proj_clip, std::max<int64_t>(-g.proj_clip, v));
          yr[i] = static_cast<int8_t>(v);
        }
      } else {
        std::memcpy(yr, hidden.data(), static_cast<size_t>(nc));
      }
      std::memcpy(h.data(), yr, static_cast<size_t>(no));
    }
  }
}

void rnn_f32(const RnnGeom& g, const float* x, const float* w, const float* r,
             const float* bias, const float* h0, float* y) {
  const int nu = g.units, ni = g.n_input;
  std::vector<float> h(static_cast<size_t>(g.batch) * nu), next(h.size());
  for (size_t k = 0; k < h.size(); ++k) h[k] = h0 ? h0[k] : 0.f;
  for (int t = 0; t < g.steps; ++t) {
    for (int b = 0; b < g.batch; ++b) {
      const size_t row = g.time_major ? static_cast<size_t>(t) * g.batch + b
                                      : static_cast<size_t>(b) * g.steps + t;
      const float* xr = x + row * ni;
      const float* hr = h.data() + static_cast<size_t>(b) * nu;
      float* yr = y + row * nu;
      for (int u = 0; u < nu; ++u) {
        const float* wr = w + static_cast<size_t>(u) * ni;
        const float* rr = r + static_cast<size_t>(u) * nu;
        float a = 0.f, c = 0.f;
        for (int i = 0; i < ni; ++i) a += xr[i] * wr[i];
        for (int j = 0; j < nu; ++j) c += hr[j] * rr[j];
        const float v = act1(a + c + (bias ? bias[u] : 0.f), g.act);
        yr[u] = v;
        next[static_cast<size_t>(b) * nu + u] = v;
      }
    }
    h.swap(next);
  }
}

int64_t range_count(double start, double limit, double delta) {
  if (delta == 0) return -1;
  const double n = std::ceil((limit - start) / delta);
  return n > 0 ? static_cast<int64_t>(n) : 0;
}

}  // namespace tk
