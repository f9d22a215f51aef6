// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The CUDA backend's kernels, each the body of one warp: `warps(args)` warps run `warp<L>(args, w)`
// for w = 0 … warps − 1, in any order and in parallel (no warp reads what another writes). On the
// device four warps make a block (module/cuda_device.cu); the emulated device runs the same bodies
// over the whole grid on the host (emulated_device.cpp). Lanes (lanes.h) are the only collectives,
// so every sum has one fixed order: the same input gives the same bits on every run and on both.
// Shapes as in backend/forward_pass.h: n tokens, E, H / Hkv heads of D, F, V.
#include "backend/cuda/kernels/lanes.h"
#include "quant/vec_dot_portable.h"
#include "util/ggml_expf.h"
#include "util/glibc_tanhf.h"

namespace engine::cuda {

TS_HD inline uint64_t div_up(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

// The position of a chunk's first token: the argument, or (a replayed decode step) the device word
// the host rewrites before each replay.
TS_HD inline uint32_t first_position(uint32_t pos0, const uint32_t* step)
{
    return step ? *step : pos0;
}

// out[t][i] = embedding row ids[t], element i, × scale. A warp per 32 elements of a row.
struct GetRows {
    struct Args {
        GgmlType type;
        const uint8_t* table;
        uint64_t row_bytes;
        const uint32_t* ids; // [n]
        uint32_t n_tokens, width;
        float scale;
        float* out; // [n][width]
    };
    TS_HD static uint64_t warps(const Args& a) { return uint64_t(a.n_tokens) * div_up(a.width, kWarp); }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        const uint64_t groups = div_up(a.width, kWarp);
        const uint32_t t = uint32_t(w / groups), g = uint32_t(w % groups);
        const uint8_t* row = a.table + uint64_t(a.ids[t]) * a.row_bytes;
        L::each_do([&](uint32_t l) {
            const uint32_t i = g * kWarp + l;
            if (i >= a.width)
                return;
            const float v =
                is_quantized(a.type) ? group_value(unpack_group(a.type, row, g), l) : float_weight(a.type, row, i);
            a.out[uint64_t(t) * a.width + i] = v * a.scale;
        });
    }
};

// out = x / sqrt(mean(x²) + eps) ⊙ weight per row; with `add`, x += add first (written back): the
// residual add fused with the next block's norm. A warp per row; lane l sums elements l, l + 32, ….
struct RmsNorm {
    struct Args {
        float* x;         // [rows][width] (row stride `width`)
        const float* add; // null, or [rows][width] added to x first
        const float* weight;
        float* out; // [rows][width], may be x
        uint32_t width, n_rows;
        float eps;
    };
    TS_HD static uint64_t warps(const Args& a) { return a.n_rows; }
    template <class L> TS_HD static void warp(const Args& a, uint64_t r)
    {
        float* x = a.x + r * a.width;
        // the squares summed in double, as the CPU does: the mean then rounds alike in any order
        const auto partial = L::each([&](uint32_t l) {
            double s = 0.0;
            for (uint32_t i = l; i < a.width; i += kWarp) {
                float v = x[i];
                if (a.add) {
                    v = v + a.add[r * a.width + i];
                    x[i] = v;
                }
                s = s + double(v * v);
            }
            return s;
        });
        const float mean = float(L::sum(partial) / double(a.width));
        const float scale = div_rn(1.0f, sqrt_rn(mean + a.eps));
        L::each_do([&](uint32_t l) {
            for (uint32_t i = l; i < a.width; i += kWarp)
                a.out[r * a.width + i] = (x[i] * scale) * a.weight[i];
        });
    }
};

// Activations into the format the weight type's dot product reads (quant/activation_quant.h), the
// CPU's blocks bit for bit: Q8_0/Q8_1 a warp per block of 32, lane l quantizing element l; Q8_K a
// warp per block of 256, lane l quantizing elements 8l … 8l + 7; F16 and BF16 a warp per 32 elements.
struct QuantizeAct {
    struct Args {
        const float* x; // [rows][cols], cols a multiple of 32 (of 256 for Q8_K; any for F16, BF16)
        uint32_t cols, n_rows;
        ActivationFormat format; // not F32 (the matmul reads x itself then)
        uint8_t* out;            // [rows][activation row bytes]
    };
    TS_HD static uint32_t block(ActivationFormat f) { return f == ActivationFormat::Q8_K ? 256 : 32; }
    TS_HD static uint64_t warps(const Args& a)
    {
        if (a.format == ActivationFormat::F16 || a.format == ActivationFormat::BF16) // any width: 32 elements a warp
            return div_up(uint64_t(a.n_rows) * a.cols, kWarp);
        return uint64_t(a.n_rows) * (a.cols / block(a.format));
    }
    template <class L> TS_HD static void warp(const Args& a, uint64_t b)
    {
        switch (a.format) {
        case ActivationFormat::Q8_K:
            q8_k<L>(a, b);
            return;
        case ActivationFormat::F16:
        case ActivationFormat::BF16: {
            auto* out = reinterpret_cast<uint16_t*>(a.out);
            const bool brain = a.format == ActivationFormat::BF16;
            L::each_do([&](uint32_t l) {
                const uint64_t i = b * kWarp + l;
                if (i < uint64_t(a.n_rows) * a.cols)
                    out[i] = brain ? f32_to_bf16(a.x[i]) : f32_to_half(a.x[i]);
            });
            return;
        }
        default:
            q8_0_or_1<L>(a, b);
        }
    }
    template <class L> TS_HD static void q8_0_or_1(const Args& a, uint64_t b)
    {
        const float* x = a.x + b * kWarp;
        // NaN never becomes the block's largest magnitude, as in the CPU's std::max scan
        const float amax = L::max(L::each([&](uint32_t l) { return max_f(0.0f, abs_f(x[l])); }));
        const float d = div_rn(amax, 127.0f);
        const float id = amax != 0.0f ? div_rn(127.0f, amax) : 0.0f;
        const auto q = L::each([&](uint32_t l) { return nearest_int(x[l] * id); });
        if (a.format == ActivationFormat::Q8_0) {
            BlockQ8_0& o = reinterpret_cast<BlockQ8_0*>(a.out)[b];
            L::each_do([&](uint32_t l) { o.qs[l] = int8_t(L::mine(q, l)); });
            L::once([&] { o.d = f32_to_half(d); });
            return;
        }
        const int32_t sum = L::sum(q);
        BlockQ8_1& o = reinterpret_cast<BlockQ8_1*>(a.out)[b];
        L::each_do([&](uint32_t l) { o.qs[l] = int8_t(L::mine(q, l)); });
        L::once([&] {
            o.d = round_f16(d);
            o.s = round_f16(float(sum) * d);
        });
    }
    // Q8_K: the scale comes from the first value of largest magnitude (the CPU's scan); the sums of
    // 16 quants (bsums) from pairs of lanes.
    template <class L> TS_HD static void q8_k(const Args& a, uint64_t b)
    {
        const float* x = a.x + b * 256;
        BlockQ8_K& o = reinterpret_cast<BlockQ8_K*>(a.out)[b];
        // the CPU's scan (ax > amax) passes over NaN: so does every lane, and amax is one of the values
        const float amax = L::max(L::each([&](uint32_t l) {
            float m = 0.0f;
            for (uint32_t k = 0; k < 8; ++k)
                m = max_f(m, abs_f(x[8 * l + k]));
            return m;
        }));
        if (!(amax > 0.0f)) {
            L::each_do([&](uint32_t l) {
                for (uint32_t k = 0; k < 8; ++k)
                    o.qs[8 * l + k] = 0;
                if (l < 16)
                    o.bsums[l] = 0;
            });
            L::once([&] { o.d = 0.0f; });
            return;
        }
        const uint32_t first = L::min(L::each([&](uint32_t l) {
            for (uint32_t k = 0; k < 8; ++k)
                if (abs_f(x[8 * l + k]) == amax)
                    return 8 * l + k;
            return 0xFFFFFFFFu;
        }));
        const float iscale = div_rn(-127.0f, x[first]);
        const auto sums = L::each([&](uint32_t l) {
            int32_t s = 0;
            for (uint32_t k = 0; k < 8; ++k) {
                const int32_t q = nearest_int(iscale * x[8 * l + k]);
                const int32_t clamped = q < 127 ? q : 127;
                o.qs[8 * l + k] = int8_t(clamped);
                s += clamped;
            }
            return s;
        });
        const auto partner = L::each([&](uint32_t l) { return L::at(sums, l ^ 1u); });
        L::each_do([&](uint32_t l) {
            if (l % 2 == 0)
                o.bsums[l / 2] = int16_t(L::mine(sums, l) + L::mine(partner, l));
        });
        L::once([&] { o.d = div_rn(1.0f, iscale); });
    }
};

// out[t][r] = W.row(r) · x[t] as the CPU backend's matmul computes it for a batch of `order` rows:
// one thread per (row, token) runs the portable dot product (quant/vec_dot_portable.h) over the
// whole row, so the sums follow the CPU's lanes and give its bits. A warp per 32 rows of one token.
struct MatmulRows {
    struct Args {
        GgmlType type;
        const uint8_t* w;
        uint64_t row_bytes;
        uint32_t rows, cols;
        const uint8_t* x; // [n][x_row_bytes] in activation_format(type)
        uint64_t x_row_bytes;
        uint32_t n_tokens, order;
        float* out; // [n][out_stride], rows out_row0 …
        uint32_t out_stride, out_row0;
    };
    TS_HD static uint64_t warps(const Args& a) { return div_up(a.rows, kWarp) * a.n_tokens; }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        const uint64_t groups = div_up(a.rows, kWarp);
        const uint32_t t = uint32_t(w / groups), g = uint32_t(w % groups);
        L::each_do([&](uint32_t l) {
            const uint32_t r = g * kWarp + l;
            if (r >= a.rows)
                return;
            a.out[uint64_t(t) * a.out_stride + a.out_row0 + r] = portable::dot_for_batch(
                a.type, a.w + uint64_t(r) * a.row_bytes, a.x + uint64_t(t) * a.x_row_bytes, a.cols, a.order);
        });
    }
};

// The same products for the orders whose float sums sit in the CPU's eight SIMD lanes (the one-row
// orders of Q4_0, Q5_0, Q8_0, Q4_K, Q5_K and Q6_K; F32, F16 and BF16 in both orders): eight threads per row,
// thread k accumulating the CPU's lane k over the whole row, the lanes meeting by shuffles in the
// CPU's horizontal order; neighbouring threads read neighbouring bytes of a block. A warp per 4 rows
// and a tile of up to 4 tokens: each weight block is read once for the tile's tokens (each token
// keeping its own accumulators, so every result is the one-token sum).
struct MatmulLanes {
    struct Args : MatmulRows::Args { // a type of its own: the device's launch overloads tell them apart
    };
    static constexpr uint32_t kRowsPerWarp = kWarp / 8, kTile = 4;
    TS_HD static bool handles(GgmlType type, uint32_t order)
    {
        switch (type) {
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0:
        case GgmlType::F32:
        case GgmlType::F16:
        case GgmlType::BF16:
            return true;
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
        case GgmlType::Q6_K:
            return order < portable::kTiledMinBatch;
        default:
            return false;
        }
    }
    TS_HD static uint64_t warps(const Args& a) { return div_up(a.rows, kRowsPerWarp) * div_up(a.n_tokens, kTile); }
    // float weights in llama.cpp's batched order (dot_for_batch)
    TS_HD static bool batched_float(const Args& a) { return a.order >= 2 && a.cols % 8 == 0; }

    struct Tile {
        portable::KLaneAcc t[kTile];
    };
    // Lane k of one row for the tile's nt tokens (activation rows x, x_row_bytes apart).
    template <GgmlType T>
    TS_HD static void blocks(const Args& a, const uint8_t* w, const uint8_t* x, uint32_t nt, int k, Tile& r)
    {
        using B = portable::LaneBlocks<T>;
        for (int64_t b = 0; b < int64_t(a.cols) / B::elements; ++b) {
            const uint8_t* wb = w + b * B::bytes;
            TS_UNROLL
            for (uint32_t t = 0; t < kTile; ++t)
                if (t < nt)
                    B::step(wb, reinterpret_cast<const typename B::Act*>(x + t * a.x_row_bytes)[b], k, r.t[t]);
        }
    }
    TS_HD static Tile lane(const Args& a, const uint8_t* w, const uint8_t* x, uint32_t nt, int k)
    {
        using namespace portable;
        Tile r;
        switch (a.type) {
        case GgmlType::Q4_0:
            blocks<GgmlType::Q4_0>(a, w, x, nt, k, r);
            break;
        case GgmlType::Q5_0:
            blocks<GgmlType::Q5_0>(a, w, x, nt, k, r);
            break;
        case GgmlType::Q8_0:
            blocks<GgmlType::Q8_0>(a, w, x, nt, k, r);
            break;
        case GgmlType::Q4_K:
            blocks<GgmlType::Q4_K>(a, w, x, nt, k, r);
            break;
        case GgmlType::Q5_K:
            blocks<GgmlType::Q5_K>(a, w, x, nt, k, r);
            break;
        case GgmlType::Q6_K:
            blocks<GgmlType::Q6_K>(a, w, x, nt, k, r);
            break;
        default: // F32, F16, BF16: token by token
            TS_UNROLL
            for (uint32_t t = 0; t < kTile; ++t) {
                if (t >= nt)
                    continue;
                const uint8_t* xt = x + t * a.x_row_bytes;
                const bool batched = batched_float(a);
                if (a.type == GgmlType::F32)
                    r.t[t].acc = batched ? float_batched_lane<f32_value>(w, xt, a.cols, k)
                                         : float_lane<f32_value>(w, xt, a.cols, k);
                else if (a.type == GgmlType::BF16)
                    r.t[t].acc = batched ? float_batched_lane<bf16_value>(w, xt, a.cols, k)
                                         : float_lane<bf16_value>(w, xt, a.cols, k);
                else
                    r.t[t].acc = batched ? f16_batched_lane(w, xt, a.cols, k) : f16_lane(w, xt, a.cols, k);
            }
        }
        return r;
    }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        const uint64_t groups = div_up(a.rows, kRowsPerWarp);
        const uint32_t t0 = uint32_t(w / groups) * kTile, r0 = uint32_t(w % groups) * kRowsPerWarp;
        const uint32_t nt = a.n_tokens - t0 < kTile ? a.n_tokens - t0 : kTile;
        const uint8_t* x = a.x + uint64_t(t0) * a.x_row_bytes;
        const auto lanes = L::each([&](uint32_t l) {
            const uint32_t r = r0 + l / 8;
            return r < a.rows ? lane(a, a.w + uint64_t(r) * a.row_bytes, x, nt, int(l % 8)) : Tile{};
        });
        // the CPU's horizontal sums: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), or for F32's and F16's
        // one-row order ((a0+a4)+(a1+a5)) + ((a2+a6)+(a3+a7)); Q4_K's four minimum lanes ((m0+m2)+(m1+m3))
        const bool float_tail =
            (a.type == GgmlType::F32 || a.type == GgmlType::F16 || a.type == GgmlType::BF16) && !batched_float(a);
        const bool hadd = float_tail && a.type != GgmlType::BF16;
        TS_UNROLL
        for (uint32_t t = 0; t < kTile; ++t) {
            if (t >= nt) // the same for the whole warp: the shuffles below stay convergent
                continue;
            const auto acc = L::each([&](uint32_t l) { return L::mine(lanes, l).t[t].acc; });
            const auto mins = L::each([&](uint32_t l) { return L::mine(lanes, l).t[t].mins; });
            const auto sum = L::xor_add(L::xor_add(L::xor_add(acc, 4), hadd ? 1 : 2), hadd ? 2 : 1);
            const auto min_sum = L::xor_add(L::xor_add(mins, 2), 1);
            L::each_do([&](uint32_t l) {
                const uint32_t r = r0 + l / 8;
                if (l % 8 != 0 || r >= a.rows)
                    return;
                const uint8_t* row = a.w + uint64_t(r) * a.row_bytes;
                const uint8_t* xt = x + t * a.x_row_bytes;
                float v = L::mine(sum, l);
                if (a.type == GgmlType::Q4_K)
                    v = v + L::mine(min_sum, l);
                else if (a.type == GgmlType::Q5_K)
                    v = v + L::mine(mins, l);
                else if (float_tail && a.type == GgmlType::F32)
                    v = portable::f32_tail(row, xt, a.cols, v);
                else if (float_tail && a.type == GgmlType::F16)
                    v = portable::f16_tail(row, xt, a.cols, v);
                else if (float_tail)
                    v = portable::double_tail<portable::bf16_value>(row, xt, a.cols, v);
                a.out[uint64_t(t0 + t) * a.out_stride + a.out_row0 + r] = v;
            });
        }
    }
};

// x[i] += y[i % period] (the residual add: period = n; a bias: period = its width). A warp per 32.
struct Add {
    struct Args {
        float* x;
        const float* y;
        uint64_t n;
        uint64_t period;
    };
    TS_HD static uint64_t warps(const Args& a) { return div_up(a.n, kWarp); }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        L::each_do([&](uint32_t l) {
            const uint64_t i = w * kWarp + l;
            if (i < a.n)
                a.x[i] = a.x[i] + a.y[i % a.period];
        });
    }
};

// Rotary embedding in place, then × scale, with the host's cos/sin table (the CPU's angles). A warp
// per (token, head); lane l takes pairs l, l + 32, ….
struct Rope {
    struct Args {
        float* x;        // [n][heads][head_dim]
        const float* cs; // [n][n_rot / 2][2] (cos, sin)
        uint32_t n_tokens, n_heads, head_dim, n_rot;
        bool neox;
        float scale;
        const float* temperature = nullptr; // [n][2]: (t, 0), the queries' temperature (mistral3), or null
    };
    TS_HD static uint64_t warps(const Args& a) { return uint64_t(a.n_tokens) * a.n_heads; }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        const uint32_t t = uint32_t(w / a.n_heads), half = a.n_rot / 2;
        float* x = a.x + w * a.head_dim;
        // × the temperature (exactly 1 without one), then × scale, as the CPU multiplies
        const float temp = a.temperature ? a.temperature[uint64_t(t) * 2] : 1.0f;
        L::each_do([&](uint32_t l) {
            for (uint32_t i = l; i < a.head_dim / 2; i += kWarp) {
                if (i < half) {
                    const float c = a.cs[(uint64_t(t) * half + i) * 2], s = a.cs[(uint64_t(t) * half + i) * 2 + 1];
                    const uint32_t p = a.neox ? i : 2 * i, q = a.neox ? i + half : 2 * i + 1;
                    const float x0 = x[p], x1 = x[q];
                    const float r0 = fma_rn(x0, c, -(x1 * s)) * temp, r1 = fma_rn(x0, s, x1 * c) * temp;
                    x[p] = r0 * a.scale;
                    x[q] = r1 * a.scale;
                } else {
                    const uint32_t p = a.n_rot + 2 * (i - half);
                    const float r0 = x[p] * temp, r1 = x[p + 1] * temp;
                    x[p] = r0 * a.scale;
                    x[p + 1] = r1 * a.scale;
                }
            }
        });
    }
};

// K and V rows of the chunk into a layer's F16 cache, [Hkv][n_ctx][D]: a warp per (token, KV head).
struct KvStore {
    struct Args {
        const float* k; // [n][Hkv][D]
        const float* v;
        uint16_t* k_cache;
        uint16_t* v_cache;
        uint32_t n_tokens, n_kv_heads, head_dim, pos0, n_ctx;
        const uint32_t* step;
    };
    TS_HD static uint64_t warps(const Args& a) { return uint64_t(a.n_tokens) * a.n_kv_heads; }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        const uint32_t t = uint32_t(w / a.n_kv_heads), h = uint32_t(w % a.n_kv_heads);
        const uint64_t cell = (uint64_t(h) * a.n_ctx + first_position(a.pos0, a.step) + t) * a.head_dim;
        L::each_do([&](uint32_t l) {
            for (uint32_t d = l; d < a.head_dim; d += kWarp) {
                a.k_cache[cell + d] = f32_to_half(a.k[w * a.head_dim + d]);
                a.v_cache[cell + d] = f32_to_half(a.v[w * a.head_dim + d]);
            }
        });
    }
};

// Which keys query t of a chunk sees: [lo, pos] with the causal mask and an optional window.
struct KeyRange {
    uint32_t lo, pos;
};
TS_HD inline KeyRange key_range(uint32_t pos0, uint32_t t, uint32_t window)
{
    const uint32_t pos = pos0 + t;
    return {window != 0 && pos + 1 > window ? pos + 1 - window : 0u, pos};
}

// The CPU backend's F16 dot products (backend/cpu/attention_kernels.cpp), in its order: one thread
// computes a whole dot, so it can follow the CPU's eight lanes exactly. A query evaluated with others
// (batched): one accumulator per lane (W = 8), summed in halves; a single query: four accumulators
// per lane over 32-element steps (W = 32), folded and summed pairwise, the tail in double.
template <uint32_t W> struct F16Dot {
    float acc[W] = {};
    // Adds x(i)·y(i) for i in [lo, end) to accumulator i mod W (the CPU adds 0·0 elsewhere: no change).
    template <class X, class Y> TS_HD void add(uint32_t lo, uint32_t end, X x, Y y)
    {
        for (uint32_t i0 = lo - lo % W; i0 < end; i0 += W) {
            TS_UNROLL
            for (uint32_t l = 0; l < W; ++l) {
                const uint32_t i = i0 + l;
                if (i >= lo && i < end)
                    acc[l] = fma_rn(x(i), y(i), acc[l]);
            }
        }
    }
    // The lanes summed as the CPU sums them (a single query: before its double tail).
    TS_HD float total()
    {
        if constexpr (W == 8) {
            const float r0 = acc[4] + acc[0], r1 = acc[5] + acc[1], r2 = acc[6] + acc[2], r3 = acc[7] + acc[3];
            return (r0 + r2) + (r1 + r3);
        } else {
            TS_UNROLL
            for (uint32_t l = 0; l < 8; ++l) {
                acc[l] = acc[l] + acc[16 + l];
                acc[8 + l] = acc[8 + l] + acc[24 + l];
            }
            TS_UNROLL
            for (uint32_t l = 0; l < 8; ++l)
                acc[l] = acc[l] + acc[8 + l];
            const float t0 = acc[0] + acc[4], t1 = acc[1] + acc[5], t2 = acc[2] + acc[6], t3 = acc[3] + acc[7];
            return (t0 + t1) + (t2 + t3);
        }
    }
};

// Σ x(i)·y(i) over [lo, end) in the CPU's order for a batched or a single query (`n`: the dot's whole
// length; a single query's elements past its last 32-step go to the double tail).
template <class X, class Y> TS_HD inline float f16_dot(bool batched, uint32_t lo, uint32_t end, uint32_t n, X x, Y y)
{
    if (batched) {
        F16Dot<8> dot;
        dot.add(lo, end, x, y);
        return dot.total();
    }
    F16Dot<32> dot;
    const uint32_t steps = n & ~31u;
    dot.add(lo, end < steps ? end : steps, x, y);
    double sum = dot.total(); // then the tail one product at a time, in double, as the CPU adds it
    for (uint32_t i = steps > lo ? steps : lo; i < end; ++i)
        sum += double(x(i) * y(i));
    return float(sum);
}

// The attention's three steps, split over keys so that long contexts spread over the device.
struct AttnShape {
    const uint32_t* step; // null: pos0 below
    uint32_t n_tokens, n_heads, n_kv_heads, head_dim, pos0, n_ctx, window;
    uint32_t key_stride; // floats per score row (≥ pos0 + n_tokens)
    bool batched;        // the CPU's order for a query evaluated with others
};

// scores[t][h][j] = f16(q[t][h]) · k[j] × scale for visible keys j, −inf for masked ones: a warp per
// (token, head, 32 keys), lane l takes key 32·group + l.
struct AttnScores {
    struct Args {
        AttnShape s;
        const float* q; // [n][H][D]
        const uint16_t* k_cache;
        float scale;
        float* scores;            // [n][H][key_stride]
        float softcap = 0.0f;     // gemma2: q·k ← tanh(q·k · inv_softcap) · softcap before the scale; 0: none
        float inv_softcap = 0.0f; // 1 / softcap, rounded as the CPU rounds it
    };
    TS_HD static uint64_t warps(const Args& a)
    {
        return uint64_t(a.s.n_tokens) * a.s.n_heads * div_up(a.s.key_stride, kWarp);
    }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        const AttnShape& s = a.s;
        const uint64_t groups = div_up(s.key_stride, kWarp);
        const uint64_t th = w / groups;
        const uint32_t g = uint32_t(w % groups), t = uint32_t(th / s.n_heads), h = uint32_t(th % s.n_heads);
        const uint32_t kv = h / (s.n_heads / s.n_kv_heads);
        const uint32_t pos0 = first_position(s.pos0, s.step);
        const KeyRange range = key_range(pos0, t, s.window);
        const float* q = a.q + th * s.head_dim;
        L::each_do([&](uint32_t l) {
            const uint32_t j = g * kWarp + l;
            if (j >= s.key_stride)
                return;
            float score = neg_inf();
            if (j >= range.lo && j <= range.pos) {
                const uint16_t* k = a.k_cache + (uint64_t(kv) * s.n_ctx + j) * s.head_dim;
                score = f16_dot(
                    s.batched, 0, s.head_dim, s.head_dim, [&](uint32_t d) { return half_to_f32(k[d]); },
                    [&](uint32_t d) { return round_f16(q[d]); });
                if (a.softcap != 0.0f) {
                    const float scaled = score * a.inv_softcap;
                    score = glibc_tanhf(scaled) * a.softcap;
                }
                score = score * a.scale;
            }
            a.scores[th * s.key_stride + j] = score;
        });
    }
};

// Softmax of each score row in place (masked entries 0): a warp per (token, head). As on the CPU the
// exponentials go in chunks of 8 summed in halves, the chunks' sums added in double (any order of
// those rounds alike), and the weights are e · f32(1 / sum).
struct AttnSoftmax {
    struct Args {
        AttnShape s;
        float* scores;
    };
    TS_HD static uint64_t warps(const Args& a) { return uint64_t(a.s.n_tokens) * a.s.n_heads; }
    template <class L> TS_HD static void warp(const Args& a, uint64_t th)
    {
        const AttnShape& s = a.s;
        const uint32_t t = uint32_t(th / s.n_heads);
        const KeyRange range = key_range(first_position(s.pos0, s.step), t, s.window);
        float* row = a.scores + th * s.key_stride;
        const float max = L::max(L::each([&](uint32_t l) {
            float m = neg_inf();
            for (uint32_t j = range.lo + l; j <= range.pos; j += kWarp)
                m = max_f(m, row[j]);
            return m;
        }));
        const auto e = [&](uint32_t j) { return j >= range.lo && j <= range.pos ? ggml_expf(row[j] - max) : 0.0f; };
        const double sum = L::sum(L::each([&](uint32_t l) {
            double acc = 0.0;
            for (uint32_t c = 8 * l; c <= range.pos; c += 8 * kWarp) {
                float v[8];
                for (uint32_t k = 0; k < 8; ++k)
                    v[k] = e(c + k);
                const float r0 = v[4] + v[0], r1 = v[5] + v[1], r2 = v[6] + v[2], r3 = v[7] + v[3];
                acc = acc + double((r0 + r2) + (r1 + r3));
            }
            return acc;
        }));
        const float inv = float(1.0 / sum);
        L::each_do([&](uint32_t l) {
            for (uint32_t j = l; j < s.key_stride; j += kWarp)
                row[j] = e(j) * inv;
        });
    }
};

// out[t][h][d] = Σ_j f16(weight_j) · v[j][d] over the visible keys, in the CPU's order: a warp per
// (token, head, 32 dimensions), lane l takes dimension 32·group + l.
struct AttnValues {
    struct Args {
        AttnShape s;
        const float* weights; // [n][H][key_stride]
        const uint16_t* v_cache;
        float* out; // [n][H][D]
    };
    TS_HD static uint64_t warps(const Args& a)
    {
        return uint64_t(a.s.n_tokens) * a.s.n_heads * div_up(a.s.head_dim, kWarp);
    }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        const AttnShape& s = a.s;
        const uint64_t groups = div_up(s.head_dim, kWarp);
        const uint64_t th = w / groups;
        const uint32_t g = uint32_t(w % groups), t = uint32_t(th / s.n_heads), h = uint32_t(th % s.n_heads);
        const uint32_t kv = h / (s.n_heads / s.n_kv_heads);
        const KeyRange range = key_range(first_position(s.pos0, s.step), t, s.window);
        const float* p = a.weights + th * s.key_stride;
        L::each_do([&](uint32_t l) {
            const uint32_t d = g * kWarp + l;
            if (d >= s.head_dim)
                return;
            // keys outside the range add 0·0 on the CPU (its padding to 256 too, so no tail): skipped here
            const uint16_t* v = a.v_cache + uint64_t(kv) * s.n_ctx * s.head_dim + d;
            a.out[th * s.head_dim + d] = f16_dot(
                s.batched, range.lo, range.pos + 1, 0xFFFFFFFFu,
                [&](uint32_t j) { return half_to_f32(v[uint64_t(j) * s.head_dim]); },
                [&](uint32_t j) { return round_f16(p[j]); });
        });
    }
};

// gate = act(gate) ⊙ up: GELU through the CPU's F16 table, SiLU with ggml's exponential (and, as
// on the CPU, the C library's for the last width mod 8 elements of each row).
struct Glu {
    struct Args {
        float* gate;
        const float* up;
        uint64_t n;
        uint32_t width; // of a row
        bool gelu;
        const uint16_t* gelu_table; // [65536]
    };
    TS_HD static uint64_t warps(const Args& a) { return div_up(a.n, kWarp); }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        L::each_do([&](uint32_t l) {
            const uint64_t i = w * kWarp + l;
            if (i >= a.n)
                return;
            const float x = a.gate[i];
            float y;
            if (!a.gelu && i % a.width < (a.width & ~7u))
                y = div_rn(x, 1.0f + ggml_expf(-x)) * a.up[i];
            else if (!a.gelu)
                y = div_rn(x, 1.0f + libm_expf(-x)) * a.up[i];
            else if (x <= -10.0f)
                y = 0.0f;
            else if (x >= 10.0f)
                y = x * a.up[i];
            else
                y = half_to_f32(a.gelu_table[f32_to_half(x)]) * a.up[i];
            a.gate[i] = y;
        });
    }
};

// An intervention's edit of rows of a buffer (forward_pass.h RowEdit): a warp per (row, 32 columns).
struct EditRows {
    struct Args {
        float* target;
        const float* values; // [n_rows][cols], or [cols] for every row
        uint32_t row_width, row0, n_rows, col0, cols;
        bool per_row, add;
    };
    TS_HD static uint64_t warps(const Args& a) { return uint64_t(a.n_rows) * div_up(a.cols, kWarp); }
    template <class L> TS_HD static void warp(const Args& a, uint64_t w)
    {
        const uint64_t groups = div_up(a.cols, kWarp);
        const uint32_t r = uint32_t(w / groups), g = uint32_t(w % groups);
        L::each_do([&](uint32_t l) {
            const uint32_t c = g * kWarp + l;
            if (c >= a.cols)
                return;
            const float v = a.values[uint64_t(a.per_row ? r : 0) * a.cols + c];
            float& x = a.target[uint64_t(a.row0 + r) * a.row_width + a.col0 + c];
            x = a.add ? x + v : v;
        });
    }
};

// Every kernel, for the device interface's launch overloads and the executors' instantiations.
#define TOKENSCOPE_CUDA_KERNELS(X)                                                                                     \
    X(GetRows)                                                                                                         \
    X(RmsNorm)                                                                                                         \
    X(QuantizeAct)                                                                                                     \
    X(MatmulRows)                                                                                                      \
    X(MatmulLanes)                                                                                                     \
    X(Add)                                                                                                             \
    X(Rope)                                                                                                            \
    X(KvStore)                                                                                                         \
    X(AttnScores)                                                                                                      \
    X(AttnSoftmax)                                                                                                     \
    X(AttnValues)                                                                                                      \
    X(Glu)                                                                                                             \
    X(EditRows)

} // namespace engine::cuda
