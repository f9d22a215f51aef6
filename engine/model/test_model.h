// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "gguf/gguf_writer.h"
#include "quant/ggml_type.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace engine {
namespace gguf {
class GgufFile;
}

// Random-weight models for tests and benchmarks. Every byte follows from the seed through the
// self-written PRNG in util/rng.h and integer arithmetic, so the same seed gives the same file on
// any machine and standard library. Weights are drawn so that a forward pass stays finite and
// non-degenerate: |w| ~ 0.02–0.05 in every tensor type, norm weights near 1.

// The architectures make_test_model builds from scratch: llama, qwen2, qwen3, gemma3, gemma2, granite,
// mistral3, olmo2, phi3, smollm3, and the mixtures of experts qwen3moe, olmoe, granitemoe.
const std::vector<std::string>& test_model_architectures();

// A "shape twin" of `like`: every metadata key (tokenizer included) copied as it is, and the same
// tensors (names, order, shapes, types) with random contents. The writer holds no reference to
// `like` once this returns.
gguf::GgufWriter make_test_model_like(const gguf::GgufFile& like, uint64_t seed);

// A small model of a supported architecture with llama.cpp's metadata keys and tensor layout.
// Its tokenizer is a small built-in byte-level BPE, or, when `vocab` is given, every tokenizer.*
// key of that file (token_embd then has one row per token of that vocabulary).
// Throws UnsupportedError for an architecture not in test_model_architectures().
gguf::GgufWriter make_test_model(std::string_view arch, uint64_t seed, const gguf::GgufFile* vocab = nullptr);

// The same with other dimensions, for tests of shapes the presets do not have (odd head
// dimensions, tiny or prime widths): each field set replaces the architecture's value, the
// metadata and every tensor's shape follow, and every matrix is stored as F32 so that any width is
// a valid tensor.
struct TestModelShape {
    std::optional<uint32_t> n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    // Every matrix (embeddings and output head included) stored as this type instead; norms stay
    // F32. Alone, it keeps the architecture's dimensions; every row must be whole blocks of the type.
    std::optional<GgmlType> matrix_type;
    // The built-in vocabulary padded with unused tokens to this many entries (at least its own count):
    // e.g. a multiple of 8, so that llama.cpp repacks a head tied to the embedding table.
    std::optional<uint32_t> n_vocab;
};
// `vocab`, when given, as above.
gguf::GgufWriter make_test_model(std::string_view arch, uint64_t seed, const TestModelShape& shape,
                                 const gguf::GgufFile* vocab = nullptr);

// Full-size shape twins of published models: gemma3-270m, qwen2.5-0.5b, qwen3-0.6b, llama-3.1-8b,
// olmoe-1b-7b, granite-3.1-1b-a400m
// (their configurations, the built-in vocabulary padded to the real vocabulary's size, the
// Q4_K_M-like mix with llama.cpp's fallbacks for rows that are not whole K-quant super-blocks, or
// every matrix as `matrix_type`).
const std::vector<std::string>& test_model_presets();
// Throws UnsupportedError for a name not in test_model_presets().
gguf::GgufWriter make_test_model_preset(std::string_view name, uint64_t seed,
                                        std::optional<GgmlType> matrix_type = std::nullopt);

// Fills one tensor's bytes with random data of its type (used by both generators; exposed for
// tests). `unit` asks for values near 1 (norm weights) instead of small ones around 0.
// `stream` picks an independent random stream, e.g. a hash of the tensor's name.
void fill_random_tensor(std::span<std::byte> out, GgmlType type, bool unit, uint64_t seed, uint64_t stream);

} // namespace engine
