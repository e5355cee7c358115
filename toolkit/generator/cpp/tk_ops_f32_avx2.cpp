// AVX2 + FMA float kernels of the op library (see tk_ops.h, "AVX2 float kernels"): used by
// the float dispatchers of tk_ops.cpp on machines with AVX2 and FMA but without AVX-512.
// Without AVX2 + FMA this file compiles to nothing and the dispatchers keep their portable
// loops.
#include "tk_ops.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <limits>
#include <vector>
#include <type_traits>

namespace tk {
namespace avx2 {
namespace {

template <bool kFull>
inline __m256 load8(const float* p, __m256i m) {
  if constexpr (kFull) {
    (void)m;
    return _mm256_loadu_ps(p);
  } else {
    return _mm256_maskload_ps(p, m);
  }
}

template <bool kFull>
inline void store8(float* p, __m256i m, __m256 v) {
  if constexpr (kFull) {
    (void)m;
    _mm256_storeu_ps(p, v);
  } else {
    store_prefix8(p, m, v);
  }
}

// min(hi, max(lo, v)) keeps NaN (the second operand is returned when one is NaN)
inline __m256 clamp8(__m256 v, __m256 lo, __m256 hi) {
  return _mm256_min_ps(hi, _mm256_max_ps(lo, v));
}

// ---------------------------------------------------------------- element-wise
// Binary op `kOp` (BinOp) of two vectors, as binary_f32's scalar ops compute it.
template <int kOp>
inline __m256 binop8(__m256 u, __m256 v) {
  if constexpr (kOp == B_ADD) return _mm256_add_ps(u, v);
  if constexpr (kOp == B_SUB) return _mm256_sub_ps(u, v);
  if constexpr (kOp == B_MUL) return _mm256_mul_ps(u, v);
  if constexpr (kOp == B_DIV) return _mm256_div_ps(u, v);
  if constexpr (kOp == B_SQDIFF) {
    const __m256 d = _mm256_sub_ps(u, v);
    return _mm256_mul_ps(d, d);
  }
  if constexpr (kOp == B_MIN) return _mm256_min_ps(v, u);  // v < u ? v : u
  if constexpr (kOp == B_MAX) return _mm256_max_ps(v, u);  // v > u ? v : u
  if constexpr (kOp == B_PRELU)  // u >= 0 ? u : u v
    return _mm256_blendv_ps(_mm256_mul_ps(u, v), u,
                            _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_GE_OQ));
  return u;
}

// y[i] = clamp(a[i * sa] op b[i * sb]) for i < n, sa and sb 0 or 1
template <int kOp>
void span_run(const float* a, int64_t sa, const float* b, int64_t sb, int64_t n, __m256 lo,
              __m256 hi, float* y) {
  int64_t i = 0;
  const __m256 av = _mm256_set1_ps(a[0]), bv = _mm256_set1_ps(b[0]);
  for (; i + 8 <= n; i += 8) {
    const __m256 u = sa ? _mm256_loadu_ps(a + i) : av;
    const __m256 v = sb ? _mm256_loadu_ps(b + i) : bv;
    _mm256_storeu_ps(y + i, clamp8(binop8<kOp>(u, v), lo, hi));
  }
  if (i < n) {
    const __m256i m = lanes8(static_cast<int>(n - i));
    const __m256 u = sa ? _mm256_maskload_ps(a + i, m) : av;
    const __m256 v = sb ? _mm256_maskload_ps(b + i, m) : bv;
    store_prefix8(y + i, m, clamp8(binop8<kOp>(u, v), lo, hi));
  }
}

// y[p][i] = clamp(a[p][i] op b[i]) for pixels p and channels i < c
template <int kOp>
void channel_run(const float* a, const float* b, int64_t c, int64_t pixels, __m256 lo,
                 __m256 hi, float* y) {
  if (c == 8 || c == 16) {  // the operand in registers
    const __m256 b0 = _mm256_loadu_ps(b), b1 = c == 16 ? _mm256_loadu_ps(b + 8) : b0;
    for (int64_t p = 0; p < pixels; ++p, a += c, y += c) {
      _mm256_storeu_ps(y, clamp8(binop8<kOp>(_mm256_loadu_ps(a), b0), lo, hi));
      if (c == 16)
        _mm256_storeu_ps(y + 8, clamp8(binop8<kOp>(_mm256_loadu_ps(a + 8), b1), lo, hi));
    }
    return;
  }
  for (int64_t p = 0; p < pixels; ++p, a += c, y += c) span_run<kOp>(a, 1, b, 1, c, lo, hi, y);
}

template <typename F>
bool binop_switch(int op, F&& f) {
  switch (op) {
    case B_ADD: f(std::integral_constant<int, B_ADD>()); return true;
    case B_SUB: f(std::integral_constant<int, B_SUB>()); return true;
    case B_MUL: f(std::integral_constant<int, B_MUL>()); return true;
    case B_DIV: f(std::integral_constant<int, B_DIV>()); return true;
    case B_SQDIFF: f(std::integral_constant<int, B_SQDIFF>()); return true;
    case B_MIN: f(std::integral_constant<int, B_MIN>()); return true;
    case B_MAX: f(std::integral_constant<int, B_MAX>()); return true;
    case B_PRELU: f(std::integral_constant<int, B_PRELU>()); return true;
    default: return false;
  }
}

// the clamp of a fused activation; false for TANH
bool act_bounds(int act, __m256& lo, __m256& hi) {
  const float inf = std::numeric_limits<float>::infinity();
  float l = -inf, h = inf;
  if (act == ACT_RELU) l = 0.f;
  if (act == ACT_RELU6) l = 0.f, h = 6.f;
  if (act == ACT_RELU_N1_TO_1) l = -1.f, h = 1.f;
  lo = _mm256_set1_ps(l);
  hi = _mm256_set1_ps(h);
  return act != ACT_TANH;
}

}  // namespace

bool binary_span(int op, const float* a, int64_t sa, const float* b, int64_t sb, int64_t n,
                 int act, float* y) {
  __m256 lo, hi;
  if ((sa != 0 && sa != 1) || (sb != 0 && sb != 1) || n <= 0 || !act_bounds(act, lo, hi))
    return false;
  return binop_switch(op, [&](auto k) { span_run<decltype(k)::value>(a, sa, b, sb, n, lo, hi, y); });
}

bool binary_channel(int op, const float* a, const float* b, int64_t c, int64_t pixels, int act,
                    float* y) {
  __m256 lo, hi;
  if (!act_bounds(act, lo, hi)) return false;
  return binop_switch(op,
                      [&](auto k) { channel_run<decltype(k)::value>(a, b, c, pixels, lo, hi, y); });
}

namespace {

// e**x for x in [-87, 88] (clamped there; NaN stays NaN): x = n ln2 + r, |r| <= ln2 / 2,
// e**r by its degree-7 polynomial (Cephes' expf), times 2**n built in the exponent bits.
inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.f), x);  // max(lo, NaN) is NaN
  x = _mm256_min_ps(_mm256_set1_ps(88.f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline __m256 logistic8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

}  // namespace

void logistic_f32(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, logistic8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = lanes8(static_cast<int>(n - i));
    store_prefix8(y + i, m, logistic8(_mm256_maskload_ps(x + i, m)));
  }
}

namespace {

// ---------------------------------------------------------------- max pool
// NaN where either is NaN, else the larger
inline __m256 max_nan8(__m256 v, __m256 a) {
  return _mm256_blendv_ps(_mm256_max_ps(v, a), _mm256_add_ps(v, a),
                          _mm256_cmp_ps(v, a, _CMP_UNORD_Q));
}

template <bool kFull>
inline void pool_block(const PoolGeom& g, const float* x, int b, int y0, int y1, int x0,
                       int x1, int c0, __m256i m, __m256 lo, __m256 hi, float* dst) {
  __m256 acc = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int iy = y0; iy < y1; ++iy) {
    const float* row = x + ((static_cast<int64_t>(b) * g.h + iy) * g.w) * g.c + c0;
    for (int ix = x0; ix < x1; ++ix)
      acc = max_nan8(load8<kFull>(row + static_cast<int64_t>(ix) * g.c, m), acc);
  }
  store8<kFull>(dst + c0, m, clamp8(acc, lo, hi));
}

}  // namespace

void max_pool_f32(const PoolGeom& g, const float* x, float lo, float hi, float* y, int row0,
                  int row1) {
  const int c = g.c, cfull = c / 8 * 8;
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256i mfull = lanes8(8), mtail = lanes8(c - cfull);
  for (int b = 0; b < g.n; ++b)
    for (int oy = row0; oy < row1; ++oy) {
      const int y0 = std::max(0, oy * g.sh - g.pt), y1 = std::min(g.h, oy * g.sh - g.pt + g.fh);
      for (int ox = 0; ox < g.ow; ++ox) {
        const int x0 = std::max(0, ox * g.sw - g.pl);
        const int x1 = std::min(g.w, ox * g.sw - g.pl + g.fw);
        float* dst = y + ((static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox) * c;
        for (int c0 = 0; c0 < cfull; c0 += 8)
          pool_block<true>(g, x, b, y0, y1, x0, x1, c0, mfull, vlo, vhi, dst);
        if (cfull < c) pool_block<false>(g, x, b, y0, y1, x0, x1, cfull, mtail, vlo, vhi, dst);
      }
    }
}

namespace {

// ---------------------------------------------------------------- GEMM tile
// The accumulators are named registers (an array of them is kept in memory by GCC, which
// then stores every accumulator on every step of the k loop).
template <int kR>
void gemm_tile16(const float* const* taps, int ts, int ntaps, int c, int ws,
                 const float* panel, const float* b8, float lo, float hi, int nvalid,
                 float* const* dst, int rows) {
  static_assert(kR == 6 || kR == 7, "tiles of 6 or 7 rows");
  const __m256 z = _mm256_setzero_ps();
  __m256 a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z, a40 = z,
         a41 = z, a50 = z, a51 = z, a60 = z, a61 = z;
  const float* wp = panel;
  for (int k = 0; k < ntaps; ++k) {
    const float* const* p = taps + static_cast<int64_t>(k) * ts;
    const float *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3], *p4 = p[4], *p5 = p[5];
    const float* p6 = kR > 6 ? p[kR - 1] : p0;
    for (int ci = 0; ci < c; ++ci, wp += ws) {
      const __m256 w0 = _mm256_loadu_ps(wp), w1 = _mm256_loadu_ps(wp + 8);
      __m256 xv;
#define TK_ROW(t)                                  \
  xv = _mm256_broadcast_ss(p##t + ci);             \
  a##t##0 = _mm256_fmadd_ps(xv, w0, a##t##0);      \
  a##t##1 = _mm256_fmadd_ps(xv, w1, a##t##1);
      TK_ROW(0) TK_ROW(1) TK_ROW(2) TK_ROW(3) TK_ROW(4) TK_ROW(5)
      if constexpr (kR > 6) {
        TK_ROW(6)
      }
#undef TK_ROW
    }
  }
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256 bb0 = _mm256_loadu_ps(b8), bb1 = _mm256_loadu_ps(b8 + 8);
  const __m256i m0 = lanes8(nvalid), m1 = lanes8(nvalid - 8);
  const __m256 acc[7][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31},
                            {a40, a41}, {a50, a51}, {a60, a61}};
  for (int t = 0; t < kR && t < rows; ++t) {
    const __m256 r0 = clamp8(_mm256_add_ps(acc[t][0], bb0), vlo, vhi);
    const __m256 r1 = clamp8(_mm256_add_ps(acc[t][1], bb1), vlo, vhi);
    if (nvalid >= 16) {
      _mm256_storeu_ps(dst[t], r0);
      _mm256_storeu_ps(dst[t] + 8, r1);
    } else {
      store_prefix8(dst[t], m0, r0);
      store_prefix8(dst[t] + 8, m1, r1);
    }
  }
}

}  // namespace

void gemm_tile16(int kr, const float* const* taps, int ts, int ntaps, int c, int ws,
                 const float* panel, const float* b8, float lo, float hi, int nvalid,
                 float* const* dst, int rows) {
  if (kr == 7) gemm_tile16<7>(taps, ts, ntaps, c, ws, panel, b8, lo, hi, nvalid, dst, rows);
  else gemm_tile16<6>(taps, ts, ntaps, c, ws, panel, b8, lo, hi, nvalid, dst, rows);
}

}  // namespace avx2
}  // namespace tk

#endif  // __AVX2__ && __FMA__
