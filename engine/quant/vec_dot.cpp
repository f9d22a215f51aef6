// SPDX-License-Identifier: GPL-3.0-or-later
// Portable dot products of quantized weight rows with quantized activations: the types that have
// AVX2 kernels in those kernels' exact order (the bit-exact reference), the others in the shape of
// ggml's reference vec_dot functions (integer sums per block, then d_weight · d_activation).
#include "quant/vec_dot.h"

#include "quant/simd/vec_dot_simd.h"
#include "util/fp16.h"

#include <cmath>
#include <cstdlib>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cstring>
#include <string>

namespace engine {

namespace {

inline float half(const uint8_t* p)
{
    return fp16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// ---- the AVX2 kernels' order ---------------------------------------------------------------------
// The portable path computes what the AVX2 kernels compute, bit for bit: their integer partial sums
// land in eight lanes (lane l holds elements 4l…4l+3 of each 32-element step, exact integers in
// any order), each lane is scaled into its own float accumulator with a fused multiply-add per block,
// and the lanes are summed in _mm256's horizontal order at the end. So a machine without AVX2 gives
// the same logits as the bit-exact reference (test_vec_dot compares every kernel's bits).

// The AVX2 horizontal sum: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
inline float hsum8(const float* a)
{
    const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
    return (t0 + t2) + (t1 + t3);
}

// One 32-element block of signed weights q (already decoded) × a Q8_0 block into the lanes.
inline void q8_0_block_lanes(const int* q, const BlockQ8_0& y, float d, float* acc)
{
    for (int l = 0; l < 8; ++l) {
        int s = 0;
        for (int j = 4 * l; j < 4 * l + 4; ++j)
            s += q[j] * y.qs[j];
        acc[l] = std::fma(d, static_cast<float>(s), acc[l]);
    }
}

float dot_q4_0(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float acc[8] = {};
    for (int64_t b = 0; b < n / 32; ++b, x += 18) {
        int q[32];
        for (int j = 0; j < 16; ++j) {
            q[j] = (x[2 + j] & 0x0F) - 8;
            q[j + 16] = (x[2 + j] >> 4) - 8;
        }
        q8_0_block_lanes(q, y[b], half(x) * fp16_to_f32(y[b].d), acc);
    }
    return hsum8(acc);
}

float dot_q5_0(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float acc[8] = {};
    for (int64_t b = 0; b < n / 32; ++b, x += 22) {
        uint32_t qh;
        std::memcpy(&qh, x + 2, 4);
        int q[32];
        for (int j = 0; j < 16; ++j) {
            q[j] = ((x[6 + j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4)) - 16;
            q[j + 16] = ((x[6 + j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - 16;
        }
        q8_0_block_lanes(q, y[b], half(x) * fp16_to_f32(y[b].d), acc);
    }
    return hsum8(acc);
}

float dot_q8_0(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float acc[8] = {};
    for (int64_t b = 0; b < n / 32; ++b, x += 34) {
        int q[32];
        for (int j = 0; j < 32; ++j)
            q[j] = static_cast<int8_t>(x[2 + j]);
        q8_0_block_lanes(q, y[b], half(x) * fp16_to_f32(y[b].d), acc);
    }
    return hsum8(acc);
}

// ---- legacy blocks with a minimum × Q8_1 (no AVX2 kernel: ggml's reference order) ---------------

float dot_q4_1(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b, x += 20) {
        int isum = 0;
        for (int j = 0; j < 16; ++j)
            isum += (x[4 + j] & 0x0F) * y[b].qs[j] + (x[4 + j] >> 4) * y[b].qs[j + 16];
        sum += (half(x) * y[b].d) * static_cast<float>(isum) + half(x + 2) * y[b].s;
    }
    return sum;
}

float dot_q5_1(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b, x += 24) {
        uint32_t qh;
        std::memcpy(&qh, x + 4, 4);
        int isum = 0;
        for (int j = 0; j < 16; ++j) {
            const int lo = (x[8 + j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
            const int hi = (x[8 + j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
            isum += lo * y[b].qs[j] + hi * y[b].qs[j + 16];
        }
        sum += (half(x) * y[b].d) * static_cast<float>(isum) + half(x + 2) * y[b].s;
    }
    return sum;
}

// ---- k-quants × Q8_K ---------------------------------------------------------------------------
// One function per type computes a super-block's exact integer sums; the two summation orders
// below (llama.cpp's vec_dot, and its tiled matmul for batches of 8+ rows) only differ in how they
// scale and accumulate them.

struct KBlockSums {
    int s1 = 0; // Σ scale · (q · q8) over the block
    int s2 = 0; // Σ min · (sum of q8 over the sub-block), for the formats with mins
};

// Σ over 16-element groups g of scale[g] · (q · q8 over the group), for q already decoded.
inline int group_dot(const int8_t* q, const int8_t* q8, const int* scale_of_16)
{
    int total = 0;
    for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int l = 0; l < 16; ++l)
            s += q[g * 16 + l] * q8[g * 16 + l];
        total += scale_of_16[g] * s;
    }
    return total;
}

KBlockSums sums_q2_k(const uint8_t* x, const BlockQ8_K& y)
{ // scales[16] · qs[64] · d half · dmin half
    const uint8_t* sc = x;
    const uint8_t* qs = x + 16;
    int8_t q[256];
    int scale[16];
    KBlockSums r;
    for (int e = 0; e < 256; ++e)
        q[e] = static_cast<int8_t>((qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
    for (int g = 0; g < 16; ++g) {
        scale[g] = sc[g] & 0x0F;
        r.s2 += y.bsums[g] * (sc[g] >> 4);
    }
    r.s1 = group_dot(q, y.qs, scale);
    return r;
}

KBlockSums sums_q3_k(const uint8_t* x, const BlockQ8_K& y)
{ // hmask[32] · qs[64] · scales[12] · d half
    const uint8_t* hmask = x;
    const uint8_t* qs = x + 32;
    const uint8_t* sc = x + 96;
    int8_t q[256];
    int scale[16];
    for (int i = 0; i < 16; ++i) {
        const int low4 = i < 8 ? (sc[i] & 0x0F) : (sc[i - 8] >> 4);
        const int high2 = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
        scale[i] = (low4 | (high2 << 4)) - 32;
    }
    for (int e = 0; e < 256; ++e) {
        const int low = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        const bool high = (hmask[e % 32] >> (e / 32)) & 1;
        q[e] = static_cast<int8_t>(low - (high ? 0 : 4));
    }
    return {group_dot(q, y.qs, scale), 0};
}

void scale_min_k4(const uint8_t* q, int* sc, int* m)
{
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            sc[j] = q[j] & 63;
            m[j] = q[j + 4] & 63;
        } else {
            sc[j] = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
            m[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        }
    }
}

template <bool Five> KBlockSums sums_q45_k(const uint8_t* x, const BlockQ8_K& y)
{ // d half · dmin half · scales[12] · (qh[32] for Q5_K) · qs[128]
    int sc[8], m[8];
    scale_min_k4(x + 4, sc, m);
    const uint8_t* qh = x + 16;
    const uint8_t* qs = x + (Five ? 48 : 16);
    KBlockSums r;
    for (int sub = 0; sub < 8; ++sub) {
        int s = 0;
        for (int l = 0; l < 32; ++l) {
            const uint8_t byte = qs[32 * (sub / 2) + l];
            int q = (sub % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
            if constexpr (Five)
                q |= ((qh[l] >> sub) & 1) << 4;
            s += q * y.qs[sub * 32 + l];
        }
        r.s1 += sc[sub] * s;
        r.s2 += m[sub] * (y.bsums[2 * sub] + y.bsums[2 * sub + 1]);
    }
    return r;
}

KBlockSums sums_q6_k(const uint8_t* x, const BlockQ8_K& y)
{ // ql[128] · qh[64] · scales[16] int8 · d half
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(x + 192);
    int8_t q[256];
    int scale[16];
    for (int e = 0; e < 256; ++e) {
        const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
        const uint8_t lbyte = ql[64 * h + l + 32 * (quarter % 2)];
        const int low = quarter < 2 ? (lbyte & 0x0F) : (lbyte >> 4);
        const int high = (qh[32 * h + l] >> (2 * quarter)) & 3;
        q[e] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
    for (int g = 0; g < 16; ++g)
        scale[g] = scales[g];
    return {group_dot(q, y.qs, scale), 0};
}

// Where each format keeps its f16 scale d and, if it has mins, dmin.
struct KQuantLayout {
    int block_bytes;
    int d_offset;
    int dmin_offset; // −1: no mins
    KBlockSums (*sums)(const uint8_t*, const BlockQ8_K&);
};
constexpr KQuantLayout kQ2K{84, 80, 82, sums_q2_k};
constexpr KQuantLayout kQ3K{110, 108, -1, sums_q3_k};
constexpr KQuantLayout kQ4K{144, 0, 2, sums_q45_k<false>};
constexpr KQuantLayout kQ5K{176, 0, 2, sums_q45_k<true>};
constexpr KQuantLayout kQ6K{210, 208, -1, sums_q6_k};

// llama.cpp's vec_dot order: per block sum += (d·d8)·s1 − (dmin·d8)·s2.
template <const KQuantLayout& L> float dot_k(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += L.block_bytes) {
        const KBlockSums r = L.sums(x, y[b]);
        const float d = y[b].d * half(x + L.d_offset);
        if constexpr (L.dmin_offset >= 0)
            sum += d * static_cast<float>(r.s1) - y[b].d * half(x + L.dmin_offset) * static_cast<float>(r.s2);
        else
            sum += d * static_cast<float>(r.s1);
    }
    return sum;
}

// llama.cpp's tiled order (batches of 8+ rows): res = d·s1, res = fma(−dmin, s2, res),
// acc = fma(res, d8, acc).
template <const KQuantLayout& L> float dot_k_tiled(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += L.block_bytes) {
        const KBlockSums r = L.sums(x, y[b]);
        float res = half(x + L.d_offset) * static_cast<float>(r.s1);
        if constexpr (L.dmin_offset >= 0)
            res = std::fma(-half(x + L.dmin_offset), static_cast<float>(r.s2), res);
        acc = std::fma(res, y[b].d, acc);
    }
    return acc;
}

// The AVX2 kernels' order for Q4_K and Q5_K (see "the AVX2 kernels' order" above): byte j of each
// 32-byte chunk c feeds lane j/4 with its low nibble × y[64c + j] (scale of sub-block 2c) and its
// high nibble × y[64c + 32 + j] (sub-block 2c + 1). Q4_K keeps the minimums in four lanes of their
// own; Q5_K folds them into one float with a fused multiply-add per block.
template <bool Five> float dot_q45_k_lanes(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc[8] = {}, acc_m[4] = {}, summs = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += Five ? 176 : 144) {
        int sc[8], m[8];
        scale_min_k4(x + 4, sc, m);
        const uint8_t* hbits = x + 16;
        const uint8_t* qs = x + (Five ? 48 : 16);
        int isum[8] = {};
        for (int c = 0; c < 4; ++c)
            for (int j = 0; j < 32; ++j) {
                int lo = qs[32 * c + j] & 0x0F, hi = qs[32 * c + j] >> 4;
                if constexpr (Five) {
                    lo |= ((hbits[j] >> (2 * c)) & 1) << 4;
                    hi |= ((hbits[j] >> (2 * c + 1)) & 1) << 4;
                }
                isum[j / 4] += sc[2 * c] * lo * y[b].qs[64 * c + j] + sc[2 * c + 1] * hi * y[b].qs[64 * c + 32 + j];
            }
        const float d = y[b].d * half(x);
        const float neg_dmin = -y[b].d * half(x + 2);
        if constexpr (Five) {
            int s2 = 0;
            for (int sub = 0; sub < 8; ++sub)
                s2 += m[sub] * (y[b].bsums[2 * sub] + y[b].bsums[2 * sub + 1]);
            summs = std::fma(neg_dmin, static_cast<float>(s2), summs);
        } else {
            for (int l = 0; l < 4; ++l) {
                const int mins = m[2 * l] * (y[b].bsums[4 * l] + y[b].bsums[4 * l + 1]) +
                                 m[2 * l + 1] * (y[b].bsums[4 * l + 2] + y[b].bsums[4 * l + 3]);
                acc_m[l] = std::fma(neg_dmin, static_cast<float>(mins), acc_m[l]);
            }
        }
        for (int l = 0; l < 8; ++l)
            acc[l] = std::fma(d, static_cast<float>(isum[l]), acc[l]);
    }
    if constexpr (Five)
        return hsum8(acc) + summs;
    return hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

// Q6_K in the AVX2 kernel's order: for each half h and quarter q, byte j of the 32 decoded values
// feeds lane j/4, with the scale of 16-group 8h + 2q for j < 16 and of the next group above; the
// stored +32 comes off lane l as 32 · (scale · bsum) of groups 2l and 2l + 1.
float dot_q6_k_lanes(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc[8] = {};
    for (int64_t b = 0; b < n / 256; ++b, x += 210) {
        const uint8_t* ql = x;
        const uint8_t* qh = x + 128;
        const auto* scales = reinterpret_cast<const int8_t*>(x + 192);
        int isum[8] = {};
        for (int h = 0; h < 2; ++h)
            for (int q = 0; q < 4; ++q) {
                const int g = 8 * h + 2 * q;
                for (int j = 0; j < 32; ++j) {
                    const uint8_t lbyte = ql[64 * h + 32 * (q % 2) + j];
                    const int low = q < 2 ? (lbyte & 0x0F) : (lbyte >> 4);
                    const int value = low | (((qh[32 * h + j] >> (2 * q)) & 3) << 4);
                    isum[j / 4] += scales[j < 16 ? g : g + 1] * value * y[b].qs[128 * h + 32 * q + j];
                }
            }
        const float d = half(x + 208) * y[b].d;
        for (int l = 0; l < 8; ++l) {
            isum[l] -= 32 * (scales[2 * l] * y[b].bsums[2 * l] + scales[2 * l + 1] * y[b].bsums[2 * l + 1]);
            acc[l] = std::fma(d, static_cast<float>(isum[l]), acc[l]);
        }
    }
    return hsum8(acc);
}

// ---- float weights × f32 activations -------------------------------------------------------------

// The AVX2 kernel's order: two 8-lane accumulators over 16-element steps, added lane by lane and
// summed horizontally, then the tail one product at a time.
float dot_f32(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const float*>(w);
    const auto* y = static_cast<const float*>(a);
    float acc0[8] = {}, acc1[8] = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 8; ++l) {
            acc0[l] = std::fma(x[i + l], y[i + l], acc0[l]);
            acc1[l] = std::fma(x[i + 8 + l], y[i + 8 + l], acc1[l]);
        }
    for (int l = 0; l < 8; ++l)
        acc0[l] += acc1[l];
    float sum = hsum8(acc0);
    for (; i < n; ++i)
        sum += x[i] * y[i];
    return sum;
}

// F16 weights × F16 activations in ggml's AVX2 order: four 8-lane accumulators over 32-element
// steps, reduced pairwise, then the tail in double.
float dot_f16(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const uint16_t*>(a);
    float acc[4][8] = {};
    const int64_t np = n & ~int64_t(31);
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 8; ++l)
                acc[j][l] = std::fma(fp16_to_f32(x[i + 8 * j + l]), fp16_to_f32(y[i + 8 * j + l]), acc[j][l]);
    for (int l = 0; l < 8; ++l) {
        acc[0][l] += acc[2][l];
        acc[1][l] += acc[3][l];
        acc[0][l] += acc[1][l];
    }
    const float t0 = acc[0][0] + acc[0][4], t1 = acc[0][1] + acc[0][5], t2 = acc[0][2] + acc[0][6],
                t3 = acc[0][3] + acc[0][7];
    double sum = (t0 + t1) + (t2 + t3);
    for (int64_t i = np; i < n; ++i)
        sum += static_cast<double>(fp16_to_f32(x[i]) * fp16_to_f32(y[i]));
    return static_cast<float>(sum);
}

// The same product as llama.cpp's tiled matmul computes it for batches of 2+ rows: one 8-lane
// accumulator, summed by halves. Only valid when n is a multiple of 8.
float dot_f16_batched(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const uint16_t*>(a);
    float acc[8] = {};
    for (int64_t i = 0; i < n; i += 8)
        for (int l = 0; l < 8; ++l)
            acc[l] = std::fma(fp16_to_f32(x[i + l]), fp16_to_f32(y[i + l]), acc[l]);
    return hsum8(acc);
}

float dot_bf16(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const float*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i)
        sum += bf16_to_f32(x[i]) * y[i];
    return sum;
}

} // namespace

// Here, not in the AVX-512 file: this runs on every CPU, before any AVX-512 code may.
bool simd::avx512_kernels_usable()
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

namespace {

SimdLevel detect_simd()
{
    SimdLevel level = SimdLevel::Scalar;
#if defined(__x86_64__)
    __builtin_cpu_init();
    // F16C is read from CPUID directly: not every compiler's __builtin_cpu_supports knows it.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
        level = SimdLevel::Avx2;
    if (level == SimdLevel::Avx2 && simd::avx512_kernels_usable())
        level = SimdLevel::Avx512;
#endif
    if (const char* cap = std::getenv("TOKENSCOPE_SIMD")) {
        const std::string c(cap);
        if (c == "scalar")
            level = SimdLevel::Scalar;
        else if (c == "avx2" && level != SimdLevel::Scalar)
            level = SimdLevel::Avx2;
    }
    return level;
}

} // namespace

SimdLevel simd_level()
{
    static const SimdLevel level = detect_simd();
    return level;
}

std::string_view simd_level_name(SimdLevel level)
{
    switch (level) {
    case SimdLevel::Scalar:
        return "scalar";
    case SimdLevel::Avx2:
        return "AVX2";
    case SimdLevel::Avx512:
        return "AVX-512 VNNI";
    }
    return "?";
}

VecDotFn vec_dot_scalar(GgmlType type)
{
    switch (type) {
    case GgmlType::F32:
        return dot_f32;
    case GgmlType::F16:
        return dot_f16;
    case GgmlType::BF16:
        return dot_bf16;
    case GgmlType::Q4_0:
        return dot_q4_0;
    case GgmlType::Q4_1:
        return dot_q4_1;
    case GgmlType::Q5_0:
        return dot_q5_0;
    case GgmlType::Q5_1:
        return dot_q5_1;
    case GgmlType::Q8_0:
        return dot_q8_0;
    case GgmlType::Q2_K:
        return dot_k<kQ2K>;
    case GgmlType::Q3_K:
        return dot_k<kQ3K>;
    case GgmlType::Q4_K:
        return dot_q45_k_lanes<false>;
    case GgmlType::Q5_K:
        return dot_q45_k_lanes<true>;
    case GgmlType::Q6_K:
        return dot_q6_k_lanes;
    default:
        return nullptr;
    }
}

VecDotFn vec_dot_tiled_scalar(GgmlType type)
{
    switch (type) {
    case GgmlType::Q2_K:
        return dot_k_tiled<kQ2K>;
    case GgmlType::Q3_K:
        return dot_k_tiled<kQ3K>;
    case GgmlType::Q4_K:
        return dot_k_tiled<kQ4K>;
    case GgmlType::Q5_K:
        return dot_k_tiled<kQ5K>;
    case GgmlType::Q6_K:
        return dot_k_tiled<kQ6K>;
    default:
        return nullptr;
    }
}

namespace {
constexpr int64_t kTiledMinBatch = 8; // llama.cpp's k-quant tiled matmul takes over from 8 rows
}

VecDotFn vec_dot_for_batch(GgmlType type, int64_t n, int64_t n_tokens)
{
    if (type == GgmlType::F16 && n_tokens >= 2 && n % 8 == 0)
        return dot_f16_batched;
    if (n_tokens >= kTiledMinBatch) {
        if (simd_level() == SimdLevel::Avx512)
            if (VecDotFn f = simd::vec_dot_tiled_avx512(type))
                return f;
        if (simd_level() != SimdLevel::Scalar)
            if (VecDotFn f = simd::vec_dot_tiled_avx2(type))
                return f;
        if (VecDotFn f = vec_dot_tiled_scalar(type))
            return f;
    }
    return vec_dot_for(type);
}

VecDotX4Fn vec_dot_x4_for_batch(GgmlType type, int64_t n_tokens)
{
    if (simd_level() == SimdLevel::Scalar)
        return nullptr;
    const bool tiled = n_tokens >= kTiledMinBatch && vec_dot_tiled_scalar(type);
    if (simd_level() == SimdLevel::Avx512)
        if (VecDotX4Fn f = tiled ? simd::vec_dot_tiled_x4_avx512(type) : simd::vec_dot_x4_avx512(type))
            return f;
    return tiled ? simd::vec_dot_tiled_x4_avx2(type) : simd::vec_dot_x4_avx2(type);
}

std::size_t packed8_bytes(ActivationFormat format, int64_t n)
{
    switch (format) {
    case ActivationFormat::Q8_0:
        return static_cast<std::size_t>(n / 32) * 8 * (sizeof(float) + 32);
    case ActivationFormat::Q8_K:
        return static_cast<std::size_t>(n / 256) * 8 * sizeof(BlockQ8_K);
    default:
        return 0;
    }
}

void pack8_activations(ActivationFormat format, const uint8_t* rows, std::size_t row_bytes, int64_t n, void* out)
{
    auto* o = static_cast<uint8_t*>(out);
    if (format == ActivationFormat::Q8_0) {
        for (int64_t b = 0; b < n / 32; ++b) {
            auto* scales = reinterpret_cast<float*>(o);
            for (std::size_t t = 0; t < 8; ++t) {
                const auto& block = reinterpret_cast<const BlockQ8_0*>(rows + t * row_bytes)[b];
                scales[t] = fp16_to_f32(block.d);
                uint8_t* q = o + 8 * sizeof(float) + 32 * t;
                for (int i = 0; i < 32; ++i) // stored + 128, unsigned (see vec_dot.h)
                    q[i] = static_cast<uint8_t>(block.qs[i] + 128);
            }
            o += 8 * (sizeof(float) + 32);
        }
    } else if (format == ActivationFormat::Q8_K) {
        for (int64_t b = 0; b < n / 256; ++b)
            for (std::size_t t = 0; t < 8; ++t, o += sizeof(BlockQ8_K))
                std::memcpy(o, reinterpret_cast<const BlockQ8_K*>(rows + t * row_bytes) + b, sizeof(BlockQ8_K));
    }
}

VecDotX8Fn vec_dot_x8_for_batch(GgmlType type, int64_t n_tokens)
{
    if (simd_level() != SimdLevel::Avx512)
        return nullptr;
    const bool tiled = n_tokens >= kTiledMinBatch && vec_dot_tiled_scalar(type);
    return tiled ? simd::vec_dot_tiled_x8_avx512(type) : simd::vec_dot_x8_avx512(type);
}

VecDotFn vec_dot_for(GgmlType type)
{
    if (simd_level() == SimdLevel::Avx512)
        if (VecDotFn f = simd::vec_dot_avx512(type))
            return f;
    if (simd_level() != SimdLevel::Scalar)
        if (VecDotFn f = simd::vec_dot_avx2(type))
            return f;
    return vec_dot_scalar(type);
}

} // namespace engine
