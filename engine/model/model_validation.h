// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

namespace engine {

struct ModelConfig;
struct ModelWeights;
struct Vocab;
namespace gguf {
class GgufFile;
}

// GGUF files come from strangers: every hyperparameter is checked against what the kernels handle
// and against the tensors before anything computes with the model. Each check throws a FormatError
// (or an UnsupportedError for a well-formed shape the engine does not implement) naming the key or
// tensor, the value found and what was expected.

// The hyperparameters alone: counts positive and within bounds, KV heads dividing query heads, one
// head layout for every layer, head dimensions the kernels handle, RoPE and norm constants finite
// and positive, sliding windows and soft-caps sane.
void validate_hyperparameters(const gguf::GgufFile& file, const ModelConfig& config);

// After the weights are bound (shapes already checked against the hyperparameters): the vocabulary
// against the embedding rows, the RoPE frequency factors (length n_rot / 2, finite, positive), and
// every small float tensor (norms, biases, factors) scanned for NaN and infinity.
void validate_weights(const gguf::GgufFile& file, const ModelConfig& config, const ModelWeights& weights,
                      const Vocab& vocab);

// Bounds on what a model may ask for; shared with the tests.
inline constexpr unsigned kMaxEmbedding = 1u << 16;   // n_embd
inline constexpr unsigned kMaxHeads = 1024;           // query heads per layer
inline constexpr unsigned kMaxHeadDim = 1024;         // key/value length
inline constexpr unsigned kHeadDimMultiple = 8;       // SIMD width of the attention kernels
inline constexpr unsigned kMaxFeedForward = 1u << 20; // n_ff
inline constexpr unsigned kMaxExperts = 1024;         // expert_count (llama.cpp's limit)
inline constexpr unsigned kMaxVocabulary = 1u << 22;  // tokens

} // namespace engine
