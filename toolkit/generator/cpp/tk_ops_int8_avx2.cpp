// int8 convolution kernels for AVX2: see tk_ops_int8.h. Integer sums are exact whatever
// their order, and the requantisation below is tk_ops.cpp's requant_t lane by lane, so the
// results equal the portable kernels' bit for bit.
#include "tk_ops_int8.h"

#if defined(__AVX2__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tk {

namespace {

// A scratch buffer of this thread (kept between calls), one per tag.
template <typename T, int kTag>
T* scratch(size_t n) {
  static thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// gemmlowp's SaturatingRoundingDoublingHighMul of 8 lanes (multipliers never INT32_MIN):
// (x m + 2**30) >> 31 on the even and the odd lanes as 64-bit products; the result fits
// int32, so a logical shift leaves the same low 32 bits as an arithmetic one.
// `m_odd` holds the odd lanes' multipliers in the even lanes.
inline __m256i srdhm8(__m256i x, __m256i m, __m256i m_odd) {
  const __m256i half = _mm256_set1_epi64x(int64_t(1) << 30);
  __m256i pe = _mm256_mul_epi32(x, m);
  __m256i po = _mm256_mul_epi32(_mm256_srli_epi64(x, 32), m_odd);
  pe = _mm256_srli_epi64(_mm256_add_epi64(pe, half), 31);
  po = _mm256_slli_epi64(_mm256_srli_epi64(_mm256_add_epi64(po, half), 31), 32);
  return _mm256_blend_epi32(pe, po, 0xAA);
}

// The per-channel constants of requant_t for 8 channels ch0 .. ch0 + n - 1 (lanes past n
// hold zeros and are never stored), prepared once for every pixel of a tile.
struct Requant8 {
  __m256i bias, m, m_odd, l, r, mask, half_mask, rm1, pos_r, up_lanes, big_r, lo, hi, zp;
  bool all_up, any_up, any_big, any_l, all_pos_r;
};

template <bool kPerChannel>
inline Requant8 requant8_prepare(const int32_t* bias, const QuantOut& q, int ch0, int n) {
  Requant8 k;
  const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
  k.bias = bias ? _mm256_maskload_epi32(bias + ch0, valid) : zero;
  k.m = kPerChannel ? _mm256_maskload_epi32(q.mult + ch0, valid) : _mm256_set1_epi32(q.mult[0]);
  const __m256i s =
      kPerChannel ? _mm256_maskload_epi32(q.shift + ch0, valid) : _mm256_set1_epi32(q.shift[0]);
  k.m_odd = _mm256_srli_epi64(k.m, 32);
  k.l = _mm256_max_epi32(s, zero);
  k.any_l = !_mm256_testz_si256(k.l, k.l);
  k.r = _mm256_max_epi32(_mm256_sub_epi32(zero, s), zero);
  k.mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, k.r), one);
  k.half_mask = _mm256_srli_epi32(k.mask, 1);
  k.rm1 = _mm256_max_epi32(_mm256_sub_epi32(k.r, one), zero);
  k.pos_r = _mm256_cmpgt_epi32(k.r, zero);
  k.all_pos_r = _mm256_movemask_ps(_mm256_castsi256_ps(k.pos_r)) == 0xFF;
  const int upward = q.upward_channels - ch0;
  k.up_lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(upward), lane);
  k.all_up = upward >= 8;
  k.any_up = upward > 0;
  k.big_r = _mm256_cmpgt_epi32(k.r, _mm256_set1_epi32(31));
  k.any_big = !_mm256_testz_si256(k.big_r, k.big_r);
  k.lo = _mm256_set1_epi32(q.lo - q.zp_out);
  k.hi = _mm256_set1_epi32(q.hi - q.zp_out);
  k.zp = _mm256_set1_epi32(q.zp_out);
  return k;
}

// requant_t of 8 accumulators: clamp(rounded mbqm(acc + bias) + zp_out, lo, hi) as int32.
inline __m256i requant8_apply(__m256i a, const Requant8& k) {
  const __m256i one = _mm256_set1_epi32(1);
  a = _mm256_add_epi32(a, k.bias);
  if (k.any_l) a = _mm256_sllv_epi32(a, k.l);
  const __m256i p = srdhm8(a, k.m, k.m_odd);
  __m256i v;
  if (k.all_up && k.all_pos_r && !k.any_big) {
    // ties upward with 0 < r <= 31: floor((p / 2**(r - 1) + 1) / 2), where the + 1 cannot
    // overflow (the doubling high multiply's results lie in (-2**31, 2**31 - 1))
    v = _mm256_srai_epi32(_mm256_add_epi32(_mm256_srav_epi32(p, k.rm1), one), 1);
    v = _mm256_min_epi32(_mm256_max_epi32(v, k.lo), k.hi);
    return _mm256_add_epi32(v, k.zp);
  }
  const __m256i fl = _mm256_srav_epi32(p, k.r);
  if (k.any_up) {  // ties upward: + bit r - 1 of p (where r > 0)
    const __m256i bit = _mm256_and_si256(_mm256_srav_epi32(p, k.rm1), one);
    v = _mm256_add_epi32(fl, _mm256_and_si256(bit, k.pos_r));
  } else {
    v = fl;
  }
  if (!k.all_up) {  // ties away from zero: + (p mod 2**r > 2**r / 2 - 1 + (p < 0))
    const __m256i thr = _mm256_add_epi32(k.half_mask, _mm256_srli_epi32(p, 31));
    const __m256i away =
        _mm256_sub_epi32(fl, _mm256_cmpgt_epi32(_mm256_and_si256(p, k.mask), thr));
    v = k.any_up ? _mm256_blendv_epi8(away, v, k.up_lanes) : away;
  }
  if (k.any_big) v = _mm256_andnot_si256(k.big_r, v);  // every product rounds to 0
  v = _mm256_min_epi32(_mm256_max_epi32(v, k.lo), k.hi);
  return _mm256_add_epi32(v, k.zp);
}

// The low `n` (1 .. 8) int8 values of 8 int32 lanes already within int8.
inline void store8(__m256i v, int8_t* y, int n) {
  __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_packs_epi16(h, h);
  if (n == 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y), h);
  } else {
    alignas(16) int8_t part[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(part), h);
    std::memcpy(y, part, static_cast<size_t>(n));
  }
}

// ---------------------------------------------------------------- CONV_2D
// One tile of conv2d_q8x4_avx2: kMR pixels x 8 output channels from oo0 over every tap and
// quad. The filter's 16 bytes of 4 channels x 4 inputs widen to 16 int16; the pixel's 4
// int16 inputs broadcast to every group of 4; VPMADDWD leaves two partial sums per channel,
// added at the end. The taps point into the int16 copy of the input: `taps[k * kMR + t]`,
// or with kInterior (every tap of every pixel in the image) `taps[t] + offs[k]`; the first
// kT <= kMR pixels (a tile's last pixels may be missing).
template <int kMR, int kT, bool kInterior>
inline void q8_tile(const int16_t* const* taps, const int64_t* offs, int ntaps, int quads,
                    int o16, const int8_t* w, int oo0, __m256i (&out)[kMR]) {
  __m256i acc[kT][2];
  for (int t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_si256();
  for (int k = 0; k < ntaps; ++k) {
    const int16_t* p[kT];
    for (int t = 0; t < kT; ++t) p[t] = kInterior ? taps[t] + offs[k] : taps[k * kMR + t];
    const int8_t* wr = w + (static_cast<int64_t>(k) * quads * o16 + oo0) * 4;
    for (int cq = 0; cq < quads; ++cq, wr += static_cast<int64_t>(o16) * 4) {
      const __m256i w0 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr)));
      const __m256i w1 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + 16)));
      for (int t = 0; t < kT; ++t) {
        int64_t word;
        std::memcpy(&word, p[t] + 4 * cq, 8);
        const __m256i xv = _mm256_set1_epi64x(word);
        acc[t][0] = _mm256_add_epi32(acc[t][0], _mm256_madd_epi16(xv, w0));
        acc[t][1] = _mm256_add_epi32(acc[t][1], _mm256_madd_epi16(xv, w1));
      }
    }
  }
  // [c0 c0' c1 c1' | c2 c2' c3 c3'] and channels 4 .. 7 likewise -> [c0 .. c7]
  for (int t = 0; t < kT; ++t)
    out[t] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[t][0], acc[t][1]), 0xD8);
}

template <bool kPerChannel>
void conv2d_q8x4_avx2_t(const ConvGeom& g, const int8_t* x, int zp_in, const int8_t* w,
                        const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1) {
  constexpr int kMR = 6;
  const int o = g.o, c = g.c, ntaps = g.kh * g.kw, o16 = (o + 15) / 16 * 16;
  const int quads = (c + 3) / 4;
  const int64_t img = static_cast<int64_t>(g.h) * g.w * c;
  // the int16 copy (x + 128), 4 spare values read past the last channel (zero filter there),
  // then the pad row: the zero point (x + 128 = zp_in + 128, which the folded bias removes)
  int16_t* xs = scratch<int16_t, 0>(static_cast<size_t>(g.n * img) + 4 * quads + 16);
  int16_t* pad = xs + g.n * img + 4;
  std::fill(xs + g.n * img, xs + g.n * img + 4, int16_t(0));
  std::fill(pad, pad + 4 * quads + 8, static_cast<int16_t>(zp_in + 128));
  const int iy_lo = std::max(0, row0 * g.sh - g.pt);
  const int iy_hi = std::min(g.h, (row1 - 1) * g.sh - g.pt + (g.kh - 1) * g.dh + 1);
  for (int b = 0; b < g.n; ++b) {
    if (iy_hi <= iy_lo) break;
    const int64_t first = b * img + static_cast<int64_t>(iy_lo) * g.w * c;
    const int64_t count = static_cast<int64_t>(iy_hi - iy_lo) * g.w * c;
    const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
    int64_t i = 0;
    for (; i + 16 <= count; i += 16) {
      const __m128i v = _mm_xor_si128(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + first + i)), flip);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xs + first + i), _mm256_cvtepu8_epi16(v));
    }
    for (; i < count; ++i) xs[first + i] = static_cast<int16_t>(x[first + i] + 128);
  }
  Requant8* rq = scratch<Requant8, 10>(static_cast<size_t>(o16 / 8));
  for (int oo0 = 0; oo0 < o; oo0 += 8)
    rq[oo0 / 8] = requant8_prepare<kPerChannel>(bias, q, oo0, std::min(8, o - oo0));
  // Tiles are taken in chunks: for every block of 8 output channels, every tile of the chunk.
  // A filter larger than the L1 cache is then read once per chunk (its block of 8 channels
  // staying in L1 across the chunk) rather than once per tile; the chunk's inputs, at most
  // ~96 KiB as int16, stay in L2. A small filter keeps chunks of one tile (inputs in L1).
  const int64_t filter_bytes = static_cast<int64_t>(ntaps) * quads * 4 * o16;
  const int npix = (row1 - row0) * g.ow, ntiles = (npix + kMR - 1) / kMR;
  const int chunk = filter_bytes <= 32 * 1024
                        ? 1
                        : std::max(1, std::min(ntiles, static_cast<int>(
                              96 * 1024 / (static_cast<int64_t>(kMR) * ntaps * c * 2 + 1))));
  const int16_t** taps = scratch<const int16_t*, 1>(static_cast<size_t>(chunk) * ntaps * kMR);
  int8_t** dsts = scratch<int8_t*, 11>(static_cast<size_t>(chunk) * kMR);
  int* info = scratch<int, 12>(static_cast<size_t>(chunk) * 2);  // rows, interior
  int64_t* offs = scratch<int64_t, 2>(static_cast<size_t>(ntaps));
  for (int ky = 0; ky < g.kh; ++ky)
    for (int kx = 0; kx < g.kw; ++kx)
      offs[ky * g.kw + kx] = (static_cast<int64_t>(ky) * g.dh * g.w + kx * g.dw) * c;
  // output pixels whose taps all lie in the image: rows [oy_lo, oy_hi), columns [ox_lo, ox_hi)
  const auto inside = [](int n_in, int n_out, int s, int p, int span, int& lo, int& hi) {
    lo = std::min(n_out, (p + s - 1) / s);
    const int last = n_in - 1 - span + p;
    hi = std::max(lo, last < 0 ? 0 : std::min(n_out, last / s + 1));
  };
  int oy_lo, oy_hi, ox_lo, ox_hi;
  inside(g.h, g.oh, g.sh, g.pt, (g.kh - 1) * g.dh, oy_lo, oy_hi);
  inside(g.w, g.ow, g.sw, g.pl, (g.kw - 1) * g.dw, ox_lo, ox_hi);
  for (int b = 0; b < g.n; ++b) {
    const int16_t* xb = xs + b * img;
    for (int tile0 = 0; tile0 < ntiles; tile0 += chunk) {
      const int nt = std::min(chunk, ntiles - tile0);
      for (int i = 0; i < nt; ++i) {  // the taps and outputs of every tile of the chunk
        const int q0 = (tile0 + i) * kMR;
        const int rows = std::min(kMR, npix - q0);
        const int16_t** tt = taps + static_cast<int64_t>(i) * ntaps * kMR;
        int8_t** dst = dsts + static_cast<int64_t>(i) * kMR;
        int oy = row0 + q0 / g.ow, ox = q0 % g.ow;
        bool interior = rows == kMR;
        for (int t = 0; t < kMR; ++t) {
          if (t < rows) {
            dst[t] = y + ((static_cast<int64_t>(b) * g.oh + oy) * g.ow + ox) * o;
            interior = interior && oy >= oy_lo && oy < oy_hi && ox >= ox_lo && ox < ox_hi;
            if (interior)
              tt[t] = xb + (static_cast<int64_t>(oy * g.sh - g.pt) * g.w + ox * g.sw - g.pl) * c;
            if (++ox == g.ow) ox = 0, ++oy;
          } else {
            dst[t] = dst[rows - 1];
            for (int k = 0; k < ntaps; ++k) tt[k * kMR + t] = pad;
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
                tt[(ky * g.kw + kx) * kMR + t] =
                    iy >= 0 && iy < g.h && ix >= 0 && ix < g.w
                        ? xb + (static_cast<int64_t>(iy) * g.w + ix) * c
                        : pad;
              }
            }
            if (++px == g.ow) px = 0, ++py;
          }
        }
        info[2 * i] = rows;
        info[2 * i + 1] = interior;
      }
      for (int oo0 = 0; oo0 < o; oo0 += 8) {
        const int n = std::min(8, o - oo0);
        const Requant8& k = rq[oo0 / 8];
        for (int i = 0; i < nt; ++i) {
          const int16_t* const* tt = taps + static_cast<int64_t>(i) * ntaps * kMR;
          int8_t* const* dst = dsts + static_cast<int64_t>(i) * kMR;
          const int rows = info[2 * i];
          __m256i acc[kMR];
          if (info[2 * i + 1]) q8_tile<kMR, kMR, true>(tt, offs, ntaps, quads, o16, w, oo0, acc);
          else if (rows == kMR) q8_tile<kMR, kMR, false>(tt, offs, ntaps, quads, o16, w, oo0, acc);
          else if (rows == 1) q8_tile<kMR, 1, false>(tt, offs, ntaps, quads, o16, w, oo0, acc);
          else if (rows == 2) q8_tile<kMR, 2, false>(tt, offs, ntaps, quads, o16, w, oo0, acc);
          else if (rows == 3) q8_tile<kMR, 3, false>(tt, offs, ntaps, quads, o16, w, oo0, acc);
          else if (rows == 4) q8_tile<kMR, 4, false>(tt, offs, ntaps, quads, o16, w, oo0, acc);
          else q8_tile<kMR, 5, false>(tt, offs, ntaps, quads, o16, w, oo0, acc);
          for (int t = 0; t < kMR && t < rows; ++t)
            store8(requant8_apply(acc[t], k), dst[t] + oo0, n);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- DEPTHWISE_CONV_2D
// 16 int8 values from p widened to int16; `n` < 16 reads only n bytes (the other lanes meet
// zero filter values).
inline __m256i load16(const int8_t* p, int n) {
  if (n >= 16) return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) int8_t part[16] = {};
  std::memcpy(part, p, static_cast<size_t>(n));
  return _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(part)));
}

// The sums of one pixel's 16 channels from c0 (n of them) over every pair of taps.
// kPairs > 0: that many pairs (a 3x3 filter: 5), else `pairs`.
template <bool kFull, int kPairs>
inline void dw_block(const int8_t* const* tp, int pairs, int c0, int n, const int16_t* wp,
                     __m256i& lo, __m256i& hi) {
  lo = _mm256_setzero_si256();
  hi = _mm256_setzero_si256();
  const int np = kPairs > 0 ? kPairs : pairs;
  for (int pr = 0; pr < np; ++pr, wp += 32) {
    const __m256i xa = load16(tp[2 * pr] + c0, kFull ? 16 : n);
    const __m256i xb = load16(tp[2 * pr + 1] + c0, kFull ? 16 : n);
    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(
        _mm256_unpacklo_epi16(xa, xb), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp))));
    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(
        _mm256_unpackhi_epi16(xa, xb),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + 16))));
  }
}

// Every output pixel sums x w over all taps, those outside the image reading the zero point,
// so that sum - zp_in (sum of the filter) is the sum of (x - zp_in) w over the in-image taps:
// that term goes into the bias (int32 wrap-around, as requant_t adds it).
template <bool kPerChannel>
void depthwise_q8_m1_avx2_t(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                            const int32_t* bias, const QuantOut& q, int8_t* y, int row0,
                            int row1, const int16_t* wi_pre, const int32_t* folded_pre) {
  const int c = g.c, ntaps = g.kh * g.kw, pairs = (ntaps + 1) / 2, blocks = (c + 15) / 16;
  // the filter of each block of 16 channels and pair of taps (a, b) interleaved as
  // VPUNPCKLWD / VPUNPCKHWD interleave the taps' inputs: [block][pair][lo, hi][16], and the
  // folded bias (below), given or prepared here
  const bool given = wi_pre && folded_pre;
  int16_t* wi = given ? nullptr : scratch<int16_t, 3>(static_cast<size_t>(blocks) * pairs * 32);
  int32_t* folded = given ? nullptr : scratch<int32_t, 7>(static_cast<size_t>(blocks) * 16);
  const __m256i vzp = _mm256_set1_epi32(zp_in);
  for (int cb = 0; cb < blocks && !given; ++cb) {
    const int c0 = cb * 16;
    if (c0 + 16 <= c) {  // a full block: the same values with vector loads
      __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
      for (int k = 0; k < ntaps; ++k) {
        const __m256i v = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(w + static_cast<int64_t>(k) * c + c0));
        s0 = _mm256_add_epi32(s0, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(v)));
        s1 = _mm256_add_epi32(s1, _mm256_cvtepi16_epi32(_mm256_extracti128_si256(v, 1)));
      }
      const __m256i b0 = bias ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + c0))
                              : _mm256_setzero_si256();
      const __m256i b1 = bias
                             ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + c0 + 8))
                             : _mm256_setzero_si256();
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(folded + c0),
                          _mm256_sub_epi32(b0, _mm256_mullo_epi32(s0, vzp)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(folded + c0 + 8),
                          _mm256_sub_epi32(b1, _mm256_mullo_epi32(s1, vzp)));
      for (int pr = 0; pr < pairs; ++pr) {
        const __m256i va = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(w + static_cast<int64_t>(2 * pr) * c + c0));
        const __m256i vb =
            2 * pr + 1 < ntaps
                ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                      w + static_cast<int64_t>(2 * pr + 1) * c + c0))
                : _mm256_setzero_si256();
        int16_t* d = wi + (static_cast<int64_t>(cb) * pairs + pr) * 32;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_unpacklo_epi16(va, vb));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 16), _mm256_unpackhi_epi16(va, vb));
      }
      continue;
    }
    for (int j = 0; j < 16; ++j) {
      const int ch = cb * 16 + j;
      int64_t sum = 0;
      for (int k = 0; k < ntaps && ch < c; ++k) sum += w[static_cast<int64_t>(k) * c + ch];
      const int64_t v = (bias && ch < c ? bias[ch] : 0) - static_cast<int64_t>(zp_in) * sum;
      folded[ch] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
    }
    for (int pr = 0; pr < pairs; ++pr) {
      alignas(32) int16_t wa[16] = {}, wb[16] = {};
      for (int j = 0; j < 16 && cb * 16 + j < c; ++j) {
        wa[j] = w[static_cast<int64_t>(2 * pr) * c + cb * 16 + j];
        if (2 * pr + 1 < ntaps) wb[j] = w[static_cast<int64_t>(2 * pr + 1) * c + cb * 16 + j];
      }
      const __m256i va = _mm256_load_si256(reinterpret_cast<const __m256i*>(wa));
      const __m256i vb = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb));
      int16_t* d = wi + (static_cast<int64_t>(cb) * pairs + pr) * 32;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_unpacklo_epi16(va, vb));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 16), _mm256_unpackhi_epi16(va, vb));
    }
  }
  const int16_t* wiv = given ? wi_pre : wi;
  const int32_t* foldv = given ? folded_pre : folded;
  // the requantisation constants of every block of 8 channels, prepared once
  Requant8* rq = scratch<Requant8, 8>(static_cast<size_t>(blocks) * 2);
  for (int h = 0; h < 2 * blocks; ++h)
    if (h * 8 < c) rq[h] = requant8_prepare<kPerChannel>(foldv, q, h * 8, std::min(8, c - h * 8));
  // taps outside the image read the zero point
  int8_t* pad = scratch<int8_t, 4>(static_cast<size_t>(c) + 16);
  std::fill(pad, pad + c + 16, static_cast<int8_t>(zp_in));
  const int8_t** tp = scratch<const int8_t*, 5>(static_cast<size_t>(2 * pairs));
  tp[2 * pairs - 1] = pad;  // the odd tap out (its filter values are 0)
  int64_t* offs = scratch<int64_t, 9>(static_cast<size_t>(ntaps));
  for (int ky = 0; ky < g.kh; ++ky)
    for (int kx = 0; kx < g.kw; ++kx)
      offs[ky * g.kw + kx] = (static_cast<int64_t>(ky) * g.dh * g.w + kx * g.dw) * c;
  // columns whose taps all lie in the image: [ox_lo, ox_hi)
  const int ox_lo = std::min(g.ow, (g.pl + g.sw - 1) / g.sw);
  const int last = g.w - 1 - (g.kw - 1) * g.dw + g.pl;  // largest ox sw
  const int ox_hi = std::max(ox_lo, last < 0 ? 0 : std::min(g.ow, last / g.sw + 1));
  // Each output row is written to a buffer of this thread, then copied. Stores and the loads
  // that follow them at the same address modulo 4 KiB wait for each other (the CPU matches
  // the low address bits first), and along a row both advance by the same step: the buffer's
  // start within a 4 KiB window is chosen per row as far as possible from the input rows read.
  int8_t* row_mem = scratch<int8_t, 6>(static_cast<size_t>(g.ow) * c + 8192);
  int8_t* row_base = row_mem + ((4096 - reinterpret_cast<uintptr_t>(row_mem) % 4096) % 4096);
  for (int b = 0; b < g.n; ++b) {
    for (int oy = row0; oy < row1; ++oy) {
      const int iy0 = oy * g.sh - g.pt;
      int best = 0, best_gap = -1;
      for (int cand = 0; cand < 4096; cand += 512) {  // output column 0 at row_base + cand
        int gap = 4096;
        for (int ky = 0; ky < g.kh; ++ky)
          for (int kx = 0; kx < g.kw; ++kx) {
            const uintptr_t in = reinterpret_cast<uintptr_t>(x) + static_cast<uintptr_t>(
                ((static_cast<int64_t>(b) * g.h + iy0 + ky * g.dh) * g.w - g.pl + kx * g.dw) *
                c);
            const int d = static_cast<int>((cand + 4096 - in % 4096) % 4096);
            gap = std::min(gap, std::min(d, 4096 - d));
          }
        if (gap > best_gap) best_gap = gap, best = cand;
      }
      int8_t* row = row_base + best;
      const bool rows_in = iy0 >= 0 && iy0 + (g.kh - 1) * g.dh < g.h;
      for (int ox = 0; ox < g.ow; ++ox) {
        const int ix0 = ox * g.sw - g.pl;
        if (rows_in && ox >= ox_lo && ox < ox_hi) {
          const int8_t* base = x + ((static_cast<int64_t>(b) * g.h + iy0) * g.w + ix0) * c;
          for (int k = 0; k < ntaps; ++k) tp[k] = base + offs[k];
        } else {
          for (int ky = 0; ky < g.kh; ++ky) {
            const int iy = iy0 + ky * g.dh;
            for (int kx = 0; kx < g.kw; ++kx) {
              const int ix = ix0 + kx * g.dw;
              tp[ky * g.kw + kx] =
                  iy >= 0 && iy < g.h && ix >= 0 && ix < g.w
                      ? x + ((static_cast<int64_t>(b) * g.h + iy) * g.w + ix) * c
                      : pad;
            }
          }
        }
        int8_t* dst = row + static_cast<int64_t>(ox) * c;
        const int16_t* wp = wiv;
        for (int cb = 0; cb < blocks; ++cb, wp += 32 * pairs) {
          const int c0 = cb * 16, n = std::min(16, c - c0);
          __m256i lo, hi;
          if (n == 16 && pairs == 5) dw_block<true, 5>(tp, pairs, c0, 16, wp, lo, hi);
          else if (n == 16) dw_block<true, 0>(tp, pairs, c0, 16, wp, lo, hi);
          else dw_block<false, 0>(tp, pairs, c0, n, wp, lo, hi);
          // lo: channels 0-3 | 8-11, hi: 4-7 | 12-15
          const __m256i a0 = _mm256_permute2x128_si256(lo, hi, 0x20);
          const __m256i a1 = _mm256_permute2x128_si256(lo, hi, 0x31);
          store8(requant8_apply(a0, rq[2 * cb]), dst + c0, std::min(8, n));
          if (n > 8) store8(requant8_apply(a1, rq[2 * cb + 1]), dst + c0 + 8, n - 8);
        }
      }
      std::memcpy(y + (static_cast<int64_t>(b) * g.oh + oy) * g.ow * c, row,
                  static_cast<size_t>(g.ow) * c);
    }
  }
}

}  // namespace

void conv2d_q8x4_avx2(const ConvGeom& g, const int8_t* x, int zp_in, const int8_t* w,
                      const int32_t* bias, const QuantOut& q, int8_t* y, int row0, int row1) {
  if (q.per_channel) conv2d_q8x4_avx2_t<true>(g, x, zp_in, w, bias, q, y, row0, row1);
  else conv2d_q8x4_avx2_t<false>(g, x, zp_in, w, bias, q, y, row0, row1);
}

void depthwise_q8_m1_avx2(const ConvGeom& g, const int8_t* x, int zp_in, const int16_t* w,
                          const int32_t* bias, const QuantOut& q, int8_t* y, int row0,
                          int row1, const int16_t* wi, const int32_t* folded) {
  if (q.per_channel)
    depthwise_q8_m1_avx2_t<true>(g, x, zp_in, w, bias, q, y, row0, row1, wi, folded);
  else
    depthwise_q8_m1_avx2_t<false>(g, x, zp_in, w, bias, q, y, row0, row1, wi, folded);
}

// ---------------------------------------------------------------- element-wise
namespace {

// mbqm_bf() of 8 lanes (one multiplier, l = max(shift, 0), r = max(-shift, 0) <= 31): the
// shifted value truncated to int32, the doubling high multiply, the shift right rounded
// to nearest with ties away from zero.
struct Mbqm8 {
  __m256i m, m_odd, mask, half_mask;
  __m128i l, r;
};

inline Mbqm8 mbqm8_prepare(int32_t m, int l, int r) {
  Mbqm8 k;
  k.m = _mm256_set1_epi32(m);
  k.m_odd = k.m;
  const int32_t mask = static_cast<int32_t>((int64_t(1) << r) - 1);
  k.mask = _mm256_set1_epi32(mask);
  k.half_mask = _mm256_set1_epi32(mask >> 1);
  k.l = _mm_cvtsi32_si128(l);
  k.r = _mm_cvtsi32_si128(r);
  return k;
}

inline __m256i mbqm8(__m256i x, const Mbqm8& k) {
  const __m256i p = srdhm8(_mm256_sll_epi32(x, k.l), k.m, k.m_odd);
  const __m256i fl = _mm256_sra_epi32(p, k.r);
  const __m256i thr = _mm256_add_epi32(k.half_mask, _mm256_srli_epi32(p, 31));
  return _mm256_sub_epi32(fl, _mm256_cmpgt_epi32(_mm256_and_si256(p, k.mask), thr));
}

// 8 int8 values as int32 lanes: p[0 .. 7] (stride 1) or p[0] repeated (stride 0).
inline __m256i load8_q8(const int8_t* p, int64_t stride) {
  return stride ? _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))
                : _mm256_set1_epi32(p[0]);
}

// Two vectors of 8 int32 values within int8 as 16 bytes, in order.
inline void store16_q8(__m256i v0, __m256i v1, int8_t* y) {
  const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0xD8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y),
                   _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
}

template <typename F>
int64_t run16_q8(const int8_t* a, int64_t sa, const int8_t* b, int64_t sb, int8_t* y,
                 int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i v0 = f(load8_q8(a + i * sa, sa), load8_q8(b + i * sb, sb));
    const __m256i v1 = f(load8_q8(a + (i + 8) * sa, sa), load8_q8(b + (i + 8) * sb, sb));
    store16_q8(v0, v1, y + i);
  }
  return i;
}

}  // namespace

int64_t add_q8_run_avx2(const AddQ& q, int sign, const int8_t* a, int64_t sa, const int8_t* b,
                        int64_t sb, int8_t* y, int64_t n) {
  const auto left = [](int s) { return s > 0 ? s : 0; };
  const auto right = [](int s) { return s > 0 ? 0 : -s; };
  if (right(q.s_a) > 31 || right(q.s_b) > 31 || right(q.s_out) > 31 || q.left_shift > 23 ||
      q.left_shift < 0)
    return 0;
  const Mbqm8 ka = mbqm8_prepare(q.m_a, left(q.s_a), right(q.s_a));
  const Mbqm8 kb = mbqm8_prepare(q.m_b, left(q.s_b), right(q.s_b));
  const Mbqm8 ko = mbqm8_prepare(q.m_out, left(q.s_out), right(q.s_out));
  const __m256i za = _mm256_set1_epi32(q.zp_a), zb = _mm256_set1_epi32(q.zp_b);
  const __m256i lo = _mm256_set1_epi32(q.lo - q.zp_out), hi = _mm256_set1_epi32(q.hi - q.zp_out);
  const __m256i zo = _mm256_set1_epi32(q.zp_out);
  const __m128i ls = _mm_cvtsi32_si128(q.left_shift);
  // the input of the larger scale has the multiplier 1/2 exactly (2**30, no shift): its
  // mbqm of an even value (a left shift >= 1) is that value shifted right by 1
  const bool half_a = q.m_a == (1 << 30) && q.s_a == 0 && q.left_shift >= 1;
  const bool half_b = q.m_b == (1 << 30) && q.s_b == 0 && q.left_shift >= 1;
  const __m128i ls1 = _mm_cvtsi32_si128(q.left_shift - 1);
  return run16_q8(a, sa, b, sb, y, n, [&](__m256i av, __m256i bv) {
    const __m256i da = _mm256_sub_epi32(av, za), db = _mm256_sub_epi32(bv, zb);
    const __m256i xa = half_a ? _mm256_sll_epi32(da, ls1) : mbqm8(_mm256_sll_epi32(da, ls), ka);
    const __m256i xb = half_b ? _mm256_sll_epi32(db, ls1) : mbqm8(_mm256_sll_epi32(db, ls), kb);
    const __m256i sum = sign > 0 ? _mm256_add_epi32(xa, xb) : _mm256_sub_epi32(xa, xb);
    const __m256i v = _mm256_min_epi32(_mm256_max_epi32(mbqm8(sum, ko), lo), hi);
    return _mm256_add_epi32(v, zo);
  });
}

int64_t mul_q8_run_avx2(int zp_a, int zp_b, int32_t m, int s, int zp_out, int lo, int hi,
                        const int8_t* a, int64_t sa, const int8_t* b, int64_t sb, int8_t* y,
                        int64_t n) {
  const int l = s > 0 ? s : 0, r = s > 0 ? 0 : -s;
  if (r > 31) return 0;
  const Mbqm8 k = mbqm8_prepare(m, l, r);
  const __m256i za = _mm256_set1_epi32(zp_a), zb = _mm256_set1_epi32(zp_b);
  const __m256i vlo = _mm256_set1_epi32(lo - zp_out), vhi = _mm256_set1_epi32(hi - zp_out);
  const __m256i zo = _mm256_set1_epi32(zp_out);
  return run16_q8(a, sa, b, sb, y, n, [&](__m256i av, __m256i bv) {
    // (a - zp_a) (b - zp_b) within +-65025: the low 32 bits of the even/odd 64-bit products
    const __m256i p = _mm256_mullo_epi32(_mm256_sub_epi32(av, za), _mm256_sub_epi32(bv, zb));
    const __m256i v = _mm256_min_epi32(_mm256_max_epi32(mbqm8(p, k), vlo), vhi);
    return _mm256_add_epi32(v, zo);
  });
}

size_t lut_q8_avx2(const int8_t* x, const int8_t* table, int8_t* y, size_t n) {
  if (n < 32) return 0;
  // The index u = x + 128 (x with its top bit flipped). Stage k (0 .. 8) shuffles slice T_k
  // by u - 16 k (wrapping), stages 9 .. 15 by that minus 16 (k - 8) with signed saturation: a
  // byte shuffle reads the low 4 bits, or gives 0 where the top bit is set. For u < 128 the
  // stages 0 .. u / 16 read, for u >= 128 the stages u / 16 - 7 .. u / 16; the slices are
  // chosen so that the XOR of the reading stages' values is table[u]:
  // T_0 = t_0, T_k = t_k ^ t_{k-1} (k < 8), T_k = t_k ^ t_{k-1} ^ T_{k-8} (k >= 8).
  __m256i T[16];
  __m128i prev = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table));
  __m128i t128[16];
  t128[0] = prev;
  for (int k = 1; k < 16; ++k) {
    const __m128i tk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * k));
    __m128i v = _mm_xor_si128(tk, prev);
    if (k >= 8) v = _mm_xor_si128(v, t128[k - 8]);
    t128[k] = v;
    prev = tk;
  }
  for (int k = 0; k < 16; ++k) T[k] = _mm256_broadcastsi128_si256(t128[k]);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i off = _mm256_set1_epi8(16);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i u = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)),
                                 flip);
    __m256i v = _mm256_shuffle_epi8(T[0], u);
    for (int k = 1; k <= 8; ++k) {
      u = _mm256_sub_epi8(u, off);
      v = _mm256_xor_si256(v, _mm256_shuffle_epi8(T[k], u));
    }
    for (int k = 9; k < 16; ++k) {
      u = _mm256_subs_epi8(u, off);
      v = _mm256_xor_si256(v, _mm256_shuffle_epi8(T[k], u));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), v);
  }
  return i;
}

void add_row_q8_avx2(const int8_t* x, int64_t n, int32_t* acc) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i v =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    __m256i* a = reinterpret_cast<__m256i*>(acc + i);
    _mm256_storeu_si256(a, _mm256_add_epi32(_mm256_loadu_si256(a),
                                            _mm256_cvtepi16_epi32(_mm256_castsi256_si128(v))));
    _mm256_storeu_si256(a + 1,
                        _mm256_add_epi32(_mm256_loadu_si256(a + 1),
                                         _mm256_cvtepi16_epi32(_mm256_extracti128_si256(v, 1))));
  }
  for (; i < n; ++i) acc[i] += x[i];
}

}  // namespace tk

#endif  // __AVX2__
