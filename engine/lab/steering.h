// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Steering: a direction in the residual stream from two contrasting prompts (the residual after a
// layer at the last position of `plus` minus that of `minus`), added — times a strength — to the
// residual after that layer at every position, exactly where llama.cpp adds a control vector
// (`direction.N` to the output of layer N, counting from 0; llama.cpp never steers layer 0).

#include "lab/lab_run.h"

#include <filesystem>

namespace engine {

struct SteeringVector {
    uint32_t layer = 0;
    std::vector<float> direction; // n_embd
};

// Throws Error for layer 0 (llama.cpp cannot steer it), a layer the model lacks or an empty prompt.
SteeringVector steering_vector(Backend& backend, std::span<const TokenId> plus, std::span<const TokenId> minus,
                               uint32_t layer);

// The intervention that applies `v` × strength (llama.cpp multiplies the same way: strength · v in
// f32) to every position from `first` on.
Intervention steering_intervention(const SteeringVector& v, float strength, uint32_t first = 0);

// Writes `v` × strength as a llama.cpp control-vector GGUF (one F32 tensor direction.<layer>).
void write_control_vector(const std::filesystem::path& path, const SteeringVector& v, std::string_view model_arch,
                          uint32_t n_layer, float strength = 1.0f);

} // namespace engine
