// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include "backend/forward_pass.h"

#include <array>
#include <cstddef>

namespace engine {

// One buffer per activation of the pass (Act), looked up by the name the pass hands an operation.
// The GPU backends hold their device buffers in one of these, each with its own Buffer type, so the
// mapping from Act to a buffer is written once.
template <class Buffer> class ActivationBuffers {
public:
    Buffer& operator[](Act a) { return m_buffers[index(a)]; }
    const Buffer& operator[](Act a) const { return m_buffers[index(a)]; }

private:
    static constexpr std::size_t kCount = static_cast<std::size_t>(Act::Up) + 1; // Up is the last Act
    static std::size_t index(Act a) { return static_cast<std::size_t>(a); }
    std::array<Buffer, kCount> m_buffers{};
};

} // namespace engine
