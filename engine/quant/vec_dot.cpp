// SPDX-License-Identifier: GPL-3.0-or-later
// Choosing a dot product: the widest SIMD kernels the CPU has, else the portable ones
// (vec_dot_portable.h, which the CUDA kernels share), in the order llama.cpp uses for the batch.
#include "quant/vec_dot.h"

#include "quant/simd/vec_dot_simd.h"
#include "quant/vec_dot_portable.h"
#include "util/fp16.h"

#include <cmath>
#include <cstdlib>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cstring>
#include <string>

namespace engine {

using namespace portable;

// Here, not in the AVX-512 file: this runs on every CPU, before any AVX-512 code may.
bool simd::avx512_kernels_usable()
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

namespace {

SimdLevel detect_simd()
{
    SimdLevel level = SimdLevel::Scalar;
#if defined(__x86_64__)
    __builtin_cpu_init();
    // F16C is read from CPUID directly: not every compiler's __builtin_cpu_supports knows it.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
        level = SimdLevel::Avx2;
    if (level == SimdLevel::Avx2 && simd::avx512_kernels_usable())
        level = SimdLevel::Avx512;
#endif
    if (const char* cap = std::getenv("TOKENSCOPE_SIMD")) {
        const std::string c(cap);
        if (c == "scalar")
            level = SimdLevel::Scalar;
        else if (c == "avx2" && level != SimdLevel::Scalar)
            level = SimdLevel::Avx2;
    }
    return level;
}

} // namespace

SimdLevel simd_level()
{
    static const SimdLevel level = detect_simd();
    return level;
}

std::string_view simd_level_name(SimdLevel level)
{
    switch (level) {
    case SimdLevel::Scalar:
        return "scalar";
    case SimdLevel::Avx2:
        return "AVX2";
    case SimdLevel::Avx512:
        return "AVX-512 VNNI";
    }
    return "?";
}

VecDotFn vec_dot_scalar(GgmlType type)
{
    switch (type) {
    case GgmlType::F32:
        return dot_f32;
    case GgmlType::F16:
        return dot_f16;
    case GgmlType::BF16:
        return dot_bf16;
    case GgmlType::Q4_0:
        return dot_lanes<GgmlType::Q4_0>;
    case GgmlType::Q4_1:
        return dot_offset<GgmlType::Q4_1>;
    case GgmlType::Q5_0:
        return dot_lanes<GgmlType::Q5_0>;
    case GgmlType::Q5_1:
        return dot_offset<GgmlType::Q5_1>;
    case GgmlType::Q8_0:
        return dot_lanes<GgmlType::Q8_0>;
    case GgmlType::IQ4_NL:
        return dot_iq4_nl_pairs;
    case GgmlType::Q2_K:
        return dot_lanes<GgmlType::Q2_K>;
    case GgmlType::Q3_K:
        return dot_lanes<GgmlType::Q3_K>;
    case GgmlType::Q4_K:
        return dot_q45_k_lanes<false>;
    case GgmlType::Q5_K:
        return dot_q45_k_lanes<true>;
    case GgmlType::Q6_K:
        return dot_lanes<GgmlType::Q6_K>;
    case GgmlType::IQ4_XS:
        return dot_lanes<GgmlType::IQ4_XS>;
    default:
        return nullptr;
    }
}

VecDotFn vec_dot_tiled_scalar(GgmlType type)
{
    switch (type) {
    case GgmlType::Q2_K:
        return dot_k_tiled<GgmlType::Q2_K>;
    case GgmlType::Q3_K:
        return dot_k_tiled<GgmlType::Q3_K>;
    case GgmlType::Q4_K:
        return dot_k_tiled<GgmlType::Q4_K>;
    case GgmlType::Q5_K:
        return dot_k_tiled<GgmlType::Q5_K>;
    case GgmlType::Q6_K:
        return dot_k_tiled<GgmlType::Q6_K>;
    case GgmlType::IQ4_XS:
        return dot_k_tiled<GgmlType::IQ4_XS>;
    default:
        return nullptr;
    }
}

VecDotFn vec_dot_batched_scalar(GgmlType type, int64_t n)
{
    switch (type) {
    case GgmlType::F32:
        return n % 8 == 0 ? dot_f32_batched : nullptr;
    case GgmlType::F16:
        return n % 8 == 0 ? dot_f16_batched : nullptr;
    case GgmlType::BF16:
        return n % 8 == 0 ? dot_bf16_batched : nullptr;
    case GgmlType::IQ4_NL:
        return dot_lanes<GgmlType::IQ4_NL>;
    default:
        return nullptr;
    }
}

BatchOrder batch_order(GgmlType type, int64_t n, int64_t order)
{
    if (order >= 2 && vec_dot_batched_scalar(type, n))
        return BatchOrder::Batched;
    if (order >= kTiledMinBatch && vec_dot_tiled_scalar(type))
        return BatchOrder::Tiled;
    return BatchOrder::Row;
}

VecDotFn vec_dot_for_batch(GgmlType type, int64_t n, int64_t n_tokens)
{
    switch (batch_order(type, n, n_tokens)) {
    case BatchOrder::Batched:
        if (simd_level() == SimdLevel::Avx512)
            if (VecDotFn f = simd::vec_dot_batched_avx512(type, n))
                return f;
        if (simd_level() != SimdLevel::Scalar)
            if (VecDotFn f = simd::vec_dot_batched_avx2(type, n))
                return f;
        return vec_dot_batched_scalar(type, n);
    case BatchOrder::Tiled:
        if (simd_level() == SimdLevel::Avx512)
            if (VecDotFn f = simd::vec_dot_tiled_avx512(type))
                return f;
        if (simd_level() != SimdLevel::Scalar)
            if (VecDotFn f = simd::vec_dot_tiled_avx2(type))
                return f;
        return vec_dot_tiled_scalar(type);
    case BatchOrder::Row:
        break;
    }
    return vec_dot_for(type);
}

VecDotX4Fn vec_dot_x4_for_batch(GgmlType type, int64_t n_tokens)
{
    if (simd_level() == SimdLevel::Scalar)
        return nullptr;
    const bool tiled = n_tokens >= kTiledMinBatch && vec_dot_tiled_scalar(type);
    if (simd_level() == SimdLevel::Avx512)
        if (VecDotX4Fn f = tiled ? simd::vec_dot_tiled_x4_avx512(type) : simd::vec_dot_x4_avx512(type))
            return f;
    return tiled ? simd::vec_dot_tiled_x4_avx2(type) : simd::vec_dot_x4_avx2(type);
}

std::size_t packed8_bytes(ActivationFormat format, int64_t n)
{
    switch (format) {
    case ActivationFormat::Q8_0:
        return static_cast<std::size_t>(n / 32) * 8 * (sizeof(float) + 32);
    case ActivationFormat::Q8_K:
        return static_cast<std::size_t>(n / 256) * 8 * sizeof(BlockQ8_K);
    default:
        return 0;
    }
}

void pack8_activations(ActivationFormat format, const uint8_t* rows, std::size_t row_bytes, int64_t n, void* out)
{
    auto* o = static_cast<uint8_t*>(out);
    if (format == ActivationFormat::Q8_0) {
        for (int64_t b = 0; b < n / 32; ++b) {
            auto* scales = reinterpret_cast<float*>(o);
            for (std::size_t t = 0; t < 8; ++t) {
                const auto& block = reinterpret_cast<const BlockQ8_0*>(rows + t * row_bytes)[b];
                scales[t] = fp16_to_f32(block.d);
                uint8_t* q = o + 8 * sizeof(float) + 32 * t;
                for (int i = 0; i < 32; ++i) // stored + 128, unsigned (see vec_dot.h)
                    q[i] = static_cast<uint8_t>(block.qs[i] + 128);
            }
            o += 8 * (sizeof(float) + 32);
        }
    } else if (format == ActivationFormat::Q8_K) {
        for (int64_t b = 0; b < n / 256; ++b)
            for (std::size_t t = 0; t < 8; ++t, o += sizeof(BlockQ8_K))
                std::memcpy(o, reinterpret_cast<const BlockQ8_K*>(rows + t * row_bytes) + b, sizeof(BlockQ8_K));
    }
}

VecDotX16Fn vec_dot_x16_for_batch(GgmlType type, int64_t n_tokens)
{
    // the plain (not tiled) order only: k-quants from 8 tokens on take the tiled kernels
    if (simd_level() != SimdLevel::Avx512 || (n_tokens >= kTiledMinBatch && vec_dot_tiled_scalar(type)))
        return nullptr;
    return simd::vec_dot_x16_avx512(type);
}

VecDotX8Fn vec_dot_x8_for_batch(GgmlType type, int64_t n_tokens)
{
    if (simd_level() == SimdLevel::Scalar)
        return nullptr;
    const bool tiled = n_tokens >= kTiledMinBatch && vec_dot_tiled_scalar(type);
    if (simd_level() == SimdLevel::Avx512)
        if (VecDotX8Fn f = tiled ? simd::vec_dot_tiled_x8_avx512(type) : simd::vec_dot_x8_avx512(type))
            return f;
    return tiled ? simd::vec_dot_tiled_x8_avx2(type) : simd::vec_dot_x8_avx2(type);
}

bool llama_cpp_repacks(GgmlType type, int64_t rows)
{
    return (type == GgmlType::Q4_0 || type == GgmlType::IQ4_NL || type == GgmlType::Q4_K) && rows % 8 == 0;
}

VecDotFn vec_dot_repacked_scalar(GgmlType type, bool gemm)
{
    switch (type) {
    case GgmlType::Q4_0:
        return dot_repacked_b32<GgmlType::Q4_0>;
    case GgmlType::IQ4_NL:
        return dot_repacked_b32<GgmlType::IQ4_NL>;
    case GgmlType::Q4_K:
        return gemm ? dot_repacked_q4_k_gemm : dot_repacked_q4_k;
    default:
        return nullptr;
    }
}

VecDotFn vec_dot_repacked(GgmlType type, bool gemm)
{
    if (simd_level() != SimdLevel::Scalar)
        if (VecDotFn f = simd::types_avx2::repacked(type, gemm))
            return f;
    return vec_dot_repacked_scalar(type, gemm);
}

VecDotRows8Fn vec_dot_repacked_rows8(GgmlType type, bool gemm)
{
    if (simd_level() == SimdLevel::Avx512 && simd::avx512_kernels_usable())
        if (VecDotRows8Fn f = simd::vec_dot_repacked_rows8_avx512(type, gemm))
            return f;
    return simd_level() != SimdLevel::Scalar ? simd::types_avx2::repacked_rows8(type, gemm) : nullptr;
}

VecDotRows8Fn vec_dot_rows8_of(VecDotFn one_row)
{
    if (one_row && simd_level() == SimdLevel::Avx512 && simd::avx512_kernels_usable())
        return simd::vec_dot_rows8_of_avx512(one_row);
    return nullptr;
}

VecDotRows8x4Fn vec_dot_repacked_rows8x4(GgmlType type, bool gemm)
{
    if (simd_level() == SimdLevel::Avx512 && simd::avx512_kernels_usable())
        if (VecDotRows8x4Fn f = simd::vec_dot_repacked_rows8x4_avx512(type, gemm))
            return f;
    return simd_level() != SimdLevel::Scalar ? simd::types_avx2::repacked_rows8x4(type, gemm) : nullptr;
}

VecDotX4Fn vec_dot_repacked_x4(GgmlType type)
{
    return simd_level() != SimdLevel::Scalar ? simd::types_avx2::repacked_x4(type) : nullptr;
}

VecDotFn vec_dot_for(GgmlType type)
{
    if (simd_level() == SimdLevel::Avx512)
        if (VecDotFn f = simd::vec_dot_avx512(type))
            return f;
    if (simd_level() != SimdLevel::Scalar)
        if (VecDotFn f = simd::vec_dot_avx2(type))
            return f;
    return vec_dot_scalar(type);
}

} // namespace engine
