// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What the GPU kernel suites (test_vulkan_kernels, test_cuda_kernels) build their inputs from:
// random activations and weight matrices of random blocks with their f32 decoding.
#include "model/test_model.h"
#include "quant/dequant.h"
#include "quant/ggml_type.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace testsupport {

using engine::GgmlType;

inline std::vector<float> random_floats(std::size_t n, uint32_t seed, float scale = 1.0f)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v)
        x = dist(rng);
    return v;
}

// A weight matrix of random blocks (the test-model generator's distributions) and its f32 decoding.
struct HostMatrix {
    GgmlType type;
    uint32_t cols, rows;
    uint64_t row_bytes;
    std::vector<std::byte> bytes;
    std::vector<float> f32; // [rows][cols]
};

// Index of the first element where two float arrays differ in their bits, or −1.
inline long first_difference(const float* a, const float* b, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i)
        if (std::memcmp(a + i, b + i, sizeof(float)) != 0)
            return long(i);
    return -1;
}

inline HostMatrix random_matrix(GgmlType type, uint32_t cols, uint32_t rows, uint64_t seed)
{
    HostMatrix m{type, cols, rows, engine::ggml_row_bytes(engine::ggml_type_traits(type), cols), {}, {}};
    m.bytes.resize(m.row_bytes * rows);
    engine::fill_random_tensor(m.bytes, type, false, seed, 7);
    m.f32.resize(std::size_t(cols) * rows);
    for (uint32_t r = 0; r < rows; ++r)
        engine::dequantize_row(type, m.bytes.data() + r * m.row_bytes, m.f32.data() + std::size_t(r) * cols, cols);
    return m;
}

} // namespace testsupport
