// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include "backend/forward_pass.h"
#include "model/model.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace engine {

// The widest row, in floats, of each activation over the model's layers (layers may differ in
// heads and FFN width): a backend's scratch holds a chunk's rows at these widths.
struct ActivationWidths {
    uint64_t embd = 0;  // E: X, H, O
    uint64_t heads = 0; // the most query heads of a layer
    uint64_t q = 0;     // H·D: Q, Attn
    uint64_t kv = 0;    // Hkv·D: K, V
    uint64_t ff = 0;    // F: Gate, Up

    static ActivationWidths of(const ModelConfig& c)
    {
        const uint64_t d = c.head_dim_k;
        const uint64_t h = *std::max_element(c.n_head.begin(), c.n_head.end());
        const uint64_t h_kv = *std::max_element(c.n_head_kv.begin(), c.n_head_kv.end());
        const uint64_t f = *std::max_element(c.n_ff.begin(), c.n_ff.end());
        return {.embd = c.n_embd, .heads = h, .q = h * d, .kv = h_kv * d, .ff = f};
    }
    uint64_t row(Act a) const
    {
        switch (a) {
        case Act::X:
        case Act::H:
        case Act::O:
            return embd;
        case Act::Q:
        case Act::Attn:
            return q;
        case Act::K:
        case Act::V:
            return kv;
        case Act::Gate:
        case Act::Up:
            return ff;
        }
        throw std::logic_error("unknown activation buffer");
    }
    // The widest row a matrix product takes as input (K and V are only ever outputs).
    uint64_t widest() const { return std::max({embd, q, ff}); }
};

// One buffer per activation of the pass (Act), looked up by the name the pass hands an operation.
// The GPU backends hold their device buffers in one of these, each with its own Buffer type, so the
// mapping from Act to a buffer and its size is written once.
template <class Buffer> class ActivationBuffers {
public:
    Buffer& operator[](Act a) { return m_buffers[index(a)]; }
    const Buffer& operator[](Act a) const { return m_buffers[index(a)]; }

    // Every buffer made for `rows` rows of its width: make(floats) returns a Buffer.
    template <class Make> void allocate(uint64_t rows, const ActivationWidths& widths, Make make)
    {
        for (std::size_t i = 0; i < kCount; ++i)
            m_buffers[i] = make(rows * widths.row(static_cast<Act>(i)));
    }

private:
    static constexpr std::size_t kCount = static_cast<std::size_t>(Act::Up) + 1; // Up is the last Act
    static std::size_t index(Act a) { return static_cast<std::size_t>(a); }
    std::array<Buffer, kCount> m_buffers{};
};

} // namespace engine
