// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace engine {

// An allocator whose blocks start on a 64-byte cache line. The CPU backend's activation buffers use
// it: a matrix product's threads write their own rows of each token's output, and where a buffer
// started 16 bytes into a line (as operator new's large blocks do) two threads' rows shared a line
// at every task boundary, which the cores then passed back and forth (false sharing).
template <class T> struct CacheLineAllocator {
    using value_type = T;
    static constexpr std::align_val_t kAlignment{64};

    CacheLineAllocator() = default;
    template <class U> constexpr CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}

    T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
    void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlignment); }

    template <class U> bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
};

// float rows on cache lines (the CPU backend's activations).
using LineAlignedFloats = std::vector<float, CacheLineAllocator<float>>;

} // namespace engine
