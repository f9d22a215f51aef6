// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The arithmetic and memory traffic of one forward pass, for the latency timeline's roofline:
// prefill is bound by FLOP/s, decode by the bytes of weights and KV cache it reads.

#include <cstdint>

namespace engine {

class Model;

struct ForwardCost {
    // Matrix products: 2 × weight elements × tokens for every layer matrix (q, k, v, output, gate,
    // up, down), and 2 × the output head's elements once (the engine computes the logits of the
    // last position only). Attention: q·k and p·v, 4 × n_head × head_dim × keys seen, per token per
    // layer, a sliding-window layer's keys capped at its window. Norms, RoPE and activations are
    // not counted (they are O(n_embd) per token). A mixture-of-experts layer counts its router, its
    // shared expert and the k experts each token goes through.
    double flops = 0.0;
    // Bytes of weights read, each tensor once per pass as the file stores it: the layer matrices,
    // the output head read fully (for a tied model that is token_embd), plus one token_embd row per
    // new token for the embedding lookup (counted even when the head is the same tensor: it is read
    // again). Norm and bias vectors are decoded at load and not read from the weights. Experts: only
    // those read (k for one token; for more, the count a uniform router would touch).
    double weight_bytes = 0.0;
    // K and V bytes read by attention (F16): per token per layer, keys seen × n_head_kv × head_dim
    // × 2 (K and V) × 2 B (each KV head's rows read once, shared by its group of query heads).
    double kv_bytes_read = 0.0;
};

// A forward pass of n_tokens new tokens after n_past cached ones.
ForwardCost forward_cost(const Model& model, uint32_t n_tokens, uint32_t n_past);

} // namespace engine
