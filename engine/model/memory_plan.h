// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The memory planner: what loading a GGUF file would take (weights + KV cache at a context +
// working buffers), from its metadata alone, against this machine's memory.

#include "util/system_memory.h" // the machine's memory the plan is held against

#include <cstdint>
#include <string>

namespace engine {

struct MemoryPlan {
    std::string name; // general.name or the file's stem
    std::string architecture;
    uint64_t weight_bytes = 0; // tensor data bytes (all tensors, as the file stores them)
    // Parameters, and those one token goes through (a mixture of experts reads k of E experts per
    // layer; every expert stays in memory all the same). Equal for a dense model.
    uint64_t parameters = 0, active_parameters = 0;
    // The CPU backend's KV cache at its high-water mark while one sequence grows to n_ctx in
    // batches of at most n_batch: paged 32-token F16 blocks, sliding-window layers holding window +
    // reserve + one batch of blocks (kv/kv_sizing.h; the same KvCacheConfig the backend builds).
    uint64_t kv_bytes = 0;
    // The CPU backend's working buffers for a batch of n_batch tokens (floats):
    //   residual, normed input, block output      3 × n_batch × n_embd
    //   queries, attention output                 2 × n_batch × n_head × head_dim
    //   keys, values of the batch                 2 × n_batch × n_head_kv × head_dim
    //   FFN gate and up                           2 × n_batch × max n_ff (or a shared expert's width)
    //   a mixture of experts: the k weighted outputs of every token, one expert's rows in and out,
    //   and the (token, slot) pairs by expert     n_batch × (k·E + 2·E + 2·n_ff_exp), n_batch × k ids
    // (these nine, and a mixture of experts' buffers up to that bound, are what
    // BackendMemory::scratch_bytes reports after such a batch), plus the
    // quantized activations of a batch (n_batch rows of the widest matmul input in its activation
    // format) and, for a batch of 16 or more, their sixteen-token panels for the tiled matmul, one row of logits
    // (n_vocab floats) and the attention's row-pointer tables (2 × n_head_kv × n_ctx pointers).
    uint64_t scratch_bytes = 0;
    uint64_t total_bytes = 0;
    uint32_t n_ctx = 0; // the context planned for (capped at the training context)
    uint32_t n_ctx_requested = 0;
    SystemMemory memory;
    bool fits = true; // total_bytes <= memory.available (true when that is unknown)
    // "needs 1.20 GiB (weights 241.00 MiB + KV cache … at 32,768 tokens + working buffers …);
    // 900.00 MiB of 23.40 GiB is available". When it does not fit it says so and suggests the
    // largest context that would.
    std::string message;
};

// Reads only the GGUF metadata and tensor records (the file is mapped, tensor data never touched).
// Throws the engine's errors (FormatError, IoError) naming the file.
MemoryPlan plan_memory(const std::string& gguf_path, uint32_t n_ctx, uint32_t n_batch = 128);

} // namespace engine
