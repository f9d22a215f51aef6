// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_attention: softmax(q·kᵀ · scale + mask) · v for one (query token, head) per workgroup, keys and
// values from the F16 cache, with the causal mask, an optional sliding window and grouped-query heads
// (query head h reads KV head h / (n_heads / n_kv_heads)). As the CPU backend: q rounded to F16
// before q·k, softmax weights rounded to F16 before the weighted sum of the values. Two passes over
// the keys (running max and sum, then weights and output), so no score array has to fit in shared
// memory. When `capture` is set the weights are written to Wt[t][h][j] (masked entries are left as
// they are: the caller clears the buffer).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 64;
#define MAX_HEAD_DIM 512u
#define ACC (MAX_HEAD_DIM / 64u)

layout(std430, binding = 0) readonly buffer Q { float q[]; };   // [n_tokens][n_heads][head_dim]
layout(std430, binding = 1) readonly buffer KC { uint kc[]; };  // [n_kv_heads][n_ctx][head_dim] F16
layout(std430, binding = 2) readonly buffer VC { uint vc[]; };
layout(std430, binding = 3) writeonly buffer O { float o[]; };  // [n_tokens][n_heads][head_dim]
layout(std430, binding = 4) writeonly buffer Wt { float wt[]; }; // [n_tokens][n_heads][n_keys]

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
} p;

shared float qs[MAX_HEAD_DIM];
shared float red_m[THREADS];
shared float red_l[THREADS];
shared float pw[THREADS];

float round_f16(float v) { return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x; }

float score(uint row_words, uint j)
{
    const uint kb = (row_words + j) * (p.head_dim / 2u);
    float s = 0.0;
    for (uint d = 0u; d < p.head_dim; d += 2u) {
        const vec2 k = unpackHalf2x16(kc[kb + d / 2u]);
        s += qs[d] * k.x;
        s += qs[d + 1u] * k.y;
    }
    return s * p.scale;
}

void main()
{
    const uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
    const uint lane = gl_LocalInvocationID.x;
    const uint D = p.head_dim;
    const uint kvh = h / (p.n_heads / p.n_kv_heads);
    const uint row_words = kvh * p.n_ctx; // first cache row of this KV head
    const uint pos = p.pos0 + t;
    const uint lo = (p.window != 0u && pos + 1u > p.window) ? pos + 1u - p.window : 0u;
    const uint qb = (t * p.n_heads + h) * D;

    for (uint d = lane; d < D; d += THREADS)
        qs[d] = round_f16(q[qb + d]);
    barrier();

    // pass 1: running maximum and sum of exponentials per lane, then merged
    float m = -1.0 / 0.0, l = 0.0;
    for (uint j = lo + lane; j <= pos; j += THREADS) {
        const float s = score(row_words, j);
        if (s > m) {
            l = l * exp(m - s) + 1.0;
            m = s;
        } else {
            l += exp(s - m);
        }
    }
    red_m[lane] = m;
    red_l[lane] = l;
    barrier();
    for (uint k = THREADS / 2u; k > 0u; k >>= 1) {
        if (lane < k) {
            const float m1 = red_m[lane], m2 = red_m[lane + k];
            const float mx = max(m1, m2);
            if (mx != -1.0 / 0.0) {
                const float l1 = m1 == -1.0 / 0.0 ? 0.0 : red_l[lane] * exp(m1 - mx);
                const float l2 = m2 == -1.0 / 0.0 ? 0.0 : red_l[lane + k] * exp(m2 - mx);
                red_m[lane] = mx;
                red_l[lane] = l1 + l2;
            }
        }
        barrier();
    }
    const float mx = red_m[0];
    const float inv = 1.0 / red_l[0];

    // pass 2: weights, then Σ f16(p_j) · v_j over chunks of THREADS keys
    float acc[ACC];
    for (uint a = 0u; a < ACC; ++a)
        acc[a] = 0.0;
    for (uint j0 = lo; j0 <= pos; j0 += THREADS) {
        const uint j = j0 + lane;
        float pj = 0.0;
        if (j <= pos) {
            pj = exp(score(row_words, j) - mx) * inv;
            if (p.capture != 0u)
                wt[(t * p.n_heads + h) * p.n_keys + j] = pj;
        }
        pw[lane] = round_f16(pj);
        barrier();
        const uint cnt = min(THREADS, pos + 1u - j0);
        for (uint a = 0u; a < ACC; ++a) {
            const uint d = lane + a * THREADS;
            if (d >= D)
                break;
            float s = acc[a];
            for (uint jj = 0u; jj < cnt; ++jj) {
                const vec2 v = unpackHalf2x16(vc[(row_words + j0 + jj) * (D / 2u) + d / 2u]);
                s += pw[jj] * ((d & 1u) == 0u ? v.x : v.y);
            }
            acc[a] = s;
        }
        barrier();
    }
    for (uint a = 0u; a < ACC; ++a) {
        const uint d = lane + a * THREADS;
        if (d < D)
            o[qb + d] = acc[a];
    }
}
