// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// A warp's collectives, written once for two executors. Kernels are bodies of one warp (kernels.h)
// over "lane values": on the device each thread holds its own lane's value and the collectives are
// shuffles (DeviceLanes); on the host one call holds all 32 lanes and the collectives are loops in
// the same xor-butterfly order (HostLanes), so the emulated grid computes the device's bits.
#include "backend/cuda/kernels/block_math.h"

#ifndef __CUDACC__
#include <array>
#endif

namespace engine::cuda {

#ifdef __CUDACC__
struct DeviceLanes {
    // Lane l's value of f(l), held by lane l.
    template <class F> __device__ static auto each(F f) { return f(threadIdx.x % kWarp); }
    // Runs f(l) on every lane (its side effects).
    template <class F> __device__ static void each_do(F f) { f(threadIdx.x % kWarp); }
    // Runs f() once for the warp.
    template <class F> __device__ static void once(F f)
    {
        if (threadIdx.x % kWarp == 0)
            f();
    }
    template <class T> __device__ static T sum(T v)
    {
        for (uint32_t off = kWarp / 2; off > 0; off /= 2)
            v = v + __shfl_xor_sync(0xFFFFFFFFu, v, off);
        return v;
    }
    __device__ static float max(float v)
    {
        for (uint32_t off = kWarp / 2; off > 0; off /= 2)
            v = max_f(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
        return v;
    }
    __device__ static uint32_t min(uint32_t v)
    {
        for (uint32_t off = kWarp / 2; off > 0; off /= 2) {
            const uint32_t o = __shfl_xor_sync(0xFFFFFFFFu, v, off);
            v = o < v ? o : v;
        }
        return v;
    }
    // Lane `lane`'s value, for every lane.
    template <class T> __device__ static T at(T v, uint32_t lane) { return __shfl_sync(0xFFFFFFFFu, v, lane); }
    // Inside each/each_do: lane l's own value.
    template <class T> __device__ static const T& mine(const T& v, uint32_t) { return v; }
    // Lane l's value plus lane l ^ off's, on every lane (one step of a butterfly within a group).
    __device__ static float xor_add(float v, uint32_t off) { return v + __shfl_xor_sync(0xFFFFFFFFu, v, off); }
};
#else
struct HostLanes {
    template <class F> static auto each(F f)
    {
        std::array<decltype(f(0u)), kWarp> v;
        for (uint32_t l = 0; l < kWarp; ++l)
            v[l] = f(l);
        return v;
    }
    template <class F> static void each_do(F f)
    {
        for (uint32_t l = 0; l < kWarp; ++l)
            f(l);
    }
    template <class F> static void once(F f) { f(); }
    // Lane l adds lane l ^ off's value, off = 16 … 1 (every lane ends with the same bits; a + b and
    // b + a round alike), and the warp's result is lane 0's.
    template <class T> static T sum(std::array<T, kWarp> v)
    {
        for (uint32_t off = kWarp / 2; off > 0; off /= 2) {
            const auto prev = v;
            for (uint32_t l = 0; l < kWarp; ++l)
                v[l] = prev[l] + prev[l ^ off];
        }
        return v[0];
    }
    static float max(std::array<float, kWarp> v)
    {
        for (uint32_t off = kWarp / 2; off > 0; off /= 2) {
            const auto prev = v;
            for (uint32_t l = 0; l < kWarp; ++l)
                v[l] = max_f(prev[l], prev[l ^ off]);
        }
        return v[0];
    }
    static uint32_t min(const std::array<uint32_t, kWarp>& v)
    {
        uint32_t m = v[0];
        for (uint32_t x : v)
            m = x < m ? x : m; // integers: any order agrees
        return m;
    }
    template <class T> static T at(const std::array<T, kWarp>& v, uint32_t lane) { return v[lane]; }
    template <class T> static const T& mine(const std::array<T, kWarp>& v, uint32_t lane) { return v[lane]; }
    static std::array<float, kWarp> xor_add(const std::array<float, kWarp>& v, uint32_t off)
    {
        std::array<float, kWarp> r;
        for (uint32_t l = 0; l < kWarp; ++l)
            r[l] = v[l] + v[l ^ off];
        return r;
    }
};
#endif

} // namespace engine::cuda
