// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <string>

namespace engine {

class Model;

// The tensor types of a model's file, most bytes first: "Q8_0, Q5_0, Q4_K, Q6_K, F32".
std::string quant_mix(const Model& model);

} // namespace engine
