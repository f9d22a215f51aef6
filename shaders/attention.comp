// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_attention: softmax(q·kᵀ · scale + mask) · v for one (query token, head) per workgroup, keys
// and values from the F16 cache, with the causal mask, an optional sliding window and grouped-query
// heads (query head h reads KV head h / (n_heads / n_kv_heads)). Every float step is the CPU
// backend's (attention_kernels.cpp, attention_row_scalar): q rounded to F16; each score an F16 dot
// product in ggml's lane order (one 8-lane accumulator for batches, four over 32-element steps for a
// single row); exponentials by ggml's expf; their sum in chunks of eight slots, each chunk summed by
// halves and added in double (two floats without 64-bit ones); weights rounded to F16 before the weighted sum of the values, whose
// lanes run over the slot index (padded to 256 slots for a single row). Three passes over the
// keys (maximum, sum, output), so no score array has to fit in shared memory. When `capture` is set
// the weights are written to Wt[t][h][j] (masked entries are left as they are: the caller clears
// the buffer).
#version 450

layout(local_size_x = 128) in;
#define THREADS 128u
#define MAX_HEAD_DIM 512u
#define DIMS (MAX_HEAD_DIM / THREADS)
#define WINDOW 256u

layout(std430, binding = 0) readonly buffer Q { float q[]; };   // [n_tokens][n_heads][head_dim]
layout(std430, binding = 1) readonly buffer KC { uint kc[]; };  // [n_kv_heads][n_ctx][head_dim] F16
layout(std430, binding = 2) readonly buffer VC { uint vc[]; };
layout(std430, binding = 3) writeonly buffer O { float o[]; };  // [n_tokens][n_heads][head_dim]
layout(std430, binding = 4) writeonly buffer Wt { float wt[]; }; // [n_tokens][n_heads][n_keys]
layout(std430, binding = 5) readonly buffer Step { uint step_pos0; }; // pos0 when p.pos0 is ~0u

layout(push_constant) uniform Params {
    uint n_tokens;
    uint n_heads;
    uint n_kv_heads;
    uint head_dim;
    uint pos0;
    uint n_ctx;
    uint window; // 0: full attention
    float scale;
    uint capture;
    uint n_keys; // pos0 + n_tokens
    uint batched;
    float softcap;     // gemma2: q·k ← tanh(q·k · inv_softcap) · softcap before the scale; 0: none
    float inv_softcap; // 1 / softcap, rounded on the host as the CPU rounds it
} p;

#include "cpu_math.glsl"

shared float qs[MAX_HEAD_DIM];
shared float red_m[THREADS];
shared WIDE red_s[THREADS];
shared float pw[WINDOW];

float k_at(uint row, uint d) { return unpackHalf2x16(kc[(row * p.head_dim + d) >> 1])[d & 1u]; }
float v_at(uint row, uint d) { return unpackHalf2x16(vc[(row * p.head_dim + d) >> 1])[d & 1u]; }

// The CPU's attention_score: soft-capped when the model asks, then × scale.
float finish_score(float qk)
{
    if (p.softcap != 0.0) {
        precise float scaled = qk * p.inv_softcap;
        precise float capped = cpu_tanhf(scaled) * p.softcap;
        qk = capped;
    }
    precise float s = qk * p.scale;
    return s;
}

// q·k of cache row `row` times the scale, as dot_f16_order(k, q16, D, batched) · scale.
float score(uint row)
{
    const uint D = p.head_dim;
    if (p.batched != 0u) {
        precise float acc[8];
        for (uint l = 0u; l < 8u; ++l)
            acc[l] = 0.0;
        for (uint i = 0u; i < D; i += 8u)
            for (uint l = 0u; l < 8u; ++l)
                acc[l] = fma_rn(k_at(row, i + l), qs[i + l], acc[l]);
        return finish_score(hsum8_halves(acc));
    }
    precise float acc[4][8];
    for (uint j = 0u; j < 4u; ++j)
        for (uint l = 0u; l < 8u; ++l)
            acc[j][l] = 0.0;
    const uint np = D & ~31u;
    for (uint i = 0u; i < np; i += 32u)
        for (uint j = 0u; j < 4u; ++j)
            for (uint l = 0u; l < 8u; ++l)
                acc[j][l] = fma_rn(k_at(row, i + 8u * j + l), qs[i + 8u * j + l], acc[j][l]);
    WIDE sum = wide_add(WIDE_ZERO, hsum_4x8(acc));
    for (uint i = np; i < D; ++i) {
        precise float prod = k_at(row, i) * qs[i];
        sum = wide_add(sum, prod);
    }
    return finish_score(wide_float(sum));
}

void main()
{
    const uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
    const uint lane = gl_LocalInvocationID.x;
    const uint D = p.head_dim;
    const uint kvh = h / (p.n_heads / p.n_kv_heads);
    const uint row0 = kvh * p.n_ctx; // first cache row of this KV head
    // a recording replayed for every decode step reads the position from a buffer the host rewrites
    const uint pos = (p.pos0 == 0xFFFFFFFFu ? step_pos0 : p.pos0) + t;
    const uint lo = (p.window != 0u && pos + 1u > p.window) ? pos + 1u - p.window : 0u;
    const uint qb = (t * p.n_heads + h) * D;
    const uint n_slots = pos + 1u;

    for (uint d = lane; d < D; d += THREADS)
        qs[d] = round_f16(q[qb + d]);
    barrier();

    // pass 1: the largest score
    float m = -1.0 / 0.0;
    for (uint j = lo + lane; j <= pos; j += THREADS)
        m = max(m, score(row0 + j));
    red_m[lane] = m;
    barrier();
    for (uint k = THREADS / 2u; k > 0u; k >>= 1) {
        if (lane < k)
            red_m[lane] = max(red_m[lane], red_m[lane + k]);
        barrier();
    }
    const float mx = red_m[0];

    // pass 2: exponentials in chunks of eight slots, each chunk summed by halves, chunks in double
    WIDE sum = WIDE_ZERO;
    for (uint c = lo / 8u + lane; 8u * c < n_slots; c += THREADS) {
        float e[8];
        for (uint l = 0u; l < 8u; ++l) {
            const uint j = 8u * c + l;
            precise float diff = j >= lo && j <= pos ? score(row0 + j) - mx : 0.0;
            e[l] = j >= lo && j <= pos ? cpu_expf(diff) : 0.0;
        }
        sum = wide_add(sum, hsum8_halves(e));
    }
    red_s[lane] = sum;
    barrier();
    for (uint k = THREADS / 2u; k > 0u; k >>= 1) {
        if (lane < k)
            red_s[lane] = wide_add2(red_s[lane], red_s[lane + k]);
        barrier();
    }
#ifdef EXACT_F64
    const float inv = float(1.0lf / red_s[0]);
#else
    // 1 / (hi + lo) rounded once: 1/hi corrected by the exact remainder and lo
    const vec2 total = red_s[0];
    const float q0 = div_rn(1.0, total.x);
    precise float rem = fma_rn(-q0, total.x, 1.0) - q0 * total.y;
    const float inv = fma_rn(q0, rem, q0);
#endif

    // pass 3: weights, rounded to F16, then out[d] = Σ_j f16(p_j) · v_j[d] with the slot's lane
    precise float acc[DIMS][32];
    for (uint a = 0u; a < DIMS; ++a)
        for (uint l = 0u; l < 32u; ++l)
            acc[a][l] = 0.0;
    const uint first = lo & ~(WINDOW - 1u);
    for (uint j0 = first; j0 <= pos; j0 += WINDOW) {
        for (uint jj = lane; jj < WINDOW; jj += THREADS) {
            const uint j = j0 + jj;
            float pj = 0.0;
            if (j >= lo && j <= pos) {
                precise float diff = score(row0 + j) - mx;
                precise float w = cpu_expf(diff) * inv;
                pj = w;
                if (p.capture != 0u)
                    wt[(t * p.n_heads + h) * p.n_keys + j] = w;
            }
            pw[jj] = round_f16(pj);
        }
        barrier();
        const uint j_lo = max(lo, j0), j_hi = min(pos + 1u, j0 + WINDOW);
        for (uint a = 0u; a < DIMS; ++a) {
            const uint d = lane + a * THREADS;
            if (d >= D)
                break;
            for (uint j = j_lo; j < j_hi; ++j) {
                const uint l = p.batched != 0u ? (j & 7u) : (j & 31u);
                acc[a][l] = fma_rn(v_at(row0 + j, d), pw[j - j0], acc[a][l]);
            }
        }
        barrier();
    }
    for (uint a = 0u; a < DIMS; ++a) {
        const uint d = lane + a * THREADS;
        if (d >= D)
            break;
        if (p.batched != 0u) {
            float r[8];
            for (uint l = 0u; l < 8u; ++l)
                r[l] = acc[a][l];
            o[qb + d] = hsum8_halves(r);
        } else {
            // accumulator group (j % 32) / 8, lane j % 8
            float groups[4][8];
            for (uint g = 0u; g < 4u; ++g)
                for (uint l = 0u; l < 8u; ++l)
                    groups[g][l] = acc[a][8u * g + l];
            o[qb + d] = hsum_4x8(groups);
        }
    }
}
