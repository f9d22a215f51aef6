// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What lets one source serve both compilers: nvcc builds the CUDA kernels for the device, the
// host compiler builds the same functions into the engine, where the emulated device runs every
// kernel over its whole grid (tests, and the arithmetic checked against the CPU backend's).
#include "util/fp16.h"

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

#ifdef __CUDACC__
#define TS_HD __host__ __device__
#define TS_DEVICE __device__
#else
#define TS_HD
#define TS_DEVICE
#endif

// The C library's expf on the host (what the CPU backend calls where ggml's vector code does not
// reach); the device's expf (within 2 ULP of it) there.
TS_HD inline float libm_expf(float x)
{
#ifdef __CUDA_ARCH__
    return expf(x);
#else
    return __builtin_expf(x);
#endif
}

// Loops whose index selects a register (an array element) must be unrolled on the device, or the
// array goes to local memory.
#ifdef __CUDACC__
#define TS_UNROLL _Pragma("unroll")
#else
#define TS_UNROLL _Pragma("GCC unroll 32")
#endif

namespace engine::cuda {

// The arithmetic of the device code is spelled out: one rounding per operation (the module is
// compiled with --fmad=false, the engine with -ffp-contract=off) and fused multiply-adds only where
// written, so the emulator and the device give the same bits.
TS_HD inline float fma_rn(float a, float b, float c)
{
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return __builtin_fmaf(a, b, c);
#endif
}

TS_HD inline float sqrt_rn(float x)
{
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(x);
#else
    return __builtin_sqrtf(x);
#endif
}

TS_HD inline float div_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

TS_HD inline uint32_t float_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}

TS_HD inline float bits_float(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

TS_HD inline float neg_inf()
{
    return bits_float(0xFF800000u);
}

TS_HD inline float abs_f(float x)
{
    return bits_float(float_bits(x) & 0x7FFFFFFFu);
}

TS_HD inline float max_f(float a, float b)
{
    return b > a ? b : a; // std::max(a, b): a NaN in b is dropped
}

// Round to nearest, ties to even, as ggml's nearest_int (through the float mantissa). A NaN gives 0,
// as on the CPU, whose NaN (the operand's, or x86's default) keeps mantissa 0x400000 through the add;
// a GPU's canonical NaN (0x7FFFFFFF) would give 4194303 (seen on an H200: a Q8_K block's NaN became 127).
TS_HD inline int32_t nearest_int(float v)
{
    if (v != v)
        return 0;
    const float shifted = v + 12582912.f;
    return int32_t(float_bits(shifted) & 0x007fffffu) - 0x00400000;
}

TS_HD inline uint16_t load_u16(const uint8_t* p)
{
    return uint16_t(p[0] | (p[1] << 8));
}

TS_HD inline uint32_t load_u32(const uint8_t* p)
{
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// F16 conversions: the device's instructions (exact, round to nearest even), the host's util/fp16.h
// (the same values; NaN payloads aside).
TS_HD inline float half_to_f32(uint16_t h)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    return fp16_to_f32(h);
#endif
}
// binary32 → bfloat16: to nearest, ties to even; a NaN stays a quiet NaN (ggml's rounding).
TS_HD inline uint16_t f32_to_bf16(float f)
{
    const uint32_t u = float_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return static_cast<uint16_t>((u >> 16) | 64u);
    return static_cast<uint16_t>((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
}

TS_HD inline uint16_t f32_to_half(float f)
{
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__float2half_rn(f));
#else
    return f32_to_fp16(f);
#endif
}

} // namespace engine::cuda
