// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "quant/vec_dot.h"

namespace engine::simd {

// AVX2 + FMA dot products for the types hot in decode (nullptr for the others, which then use the
// scalar code). Defined in vec_dot_avx2.cpp, which alone is compiled with -mavx2; call only after
// simd_level() says the CPU has AVX2.
VecDotFn vec_dot_avx2(GgmlType type);
VecDotX4Fn vec_dot_x4_avx2(GgmlType type);
// k-quants in llama.cpp's tiled order (see vec_dot_for_batch); nullptr for other types.
VecDotFn vec_dot_tiled_avx2(GgmlType type);
VecDotX4Fn vec_dot_tiled_x4_avx2(GgmlType type);

} // namespace engine::simd
