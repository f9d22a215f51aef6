// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The machine probe's inner loops (machine_probe.cpp): a streaming read and a chain of
// multiply-adds. Each returns a value derived from all its work, so that the compiler keeps it.

#include <cstddef>
#include <cstdint>

namespace engine::probe {

// Σ of n 32-bit words (wrapping), read once from memory. n: a multiple of 64.
uint64_t read_words_scalar(const uint32_t* words, std::size_t n);
uint64_t read_words_avx2(const uint32_t* words, std::size_t n); // probe_kernels_avx2.cpp (-mavx2)

// Multiply-adds acc = acc · m + a on independent accumulators for `iterations` rounds.
// kScalarFlopsPerIteration / kAvx2FlopsPerIteration FLOP per round (one multiply-add = 2 FLOP).
inline constexpr double kScalarFlopsPerIteration = 16 * 2;   // 16 float accumulators
inline constexpr double kAvx2FlopsPerIteration = 12 * 8 * 2; // 12 registers of 8 floats, FMA
float fma_chain_scalar(uint64_t iterations, float m, float a);
float fma_chain_avx2(uint64_t iterations, float m, float a); // probe_kernels_avx2.cpp (-mavx2 -mfma)

} // namespace engine::probe
