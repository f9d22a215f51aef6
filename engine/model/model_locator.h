// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace engine {

// Where Tokenscope keeps models: $XDG_DATA_HOME/tokenscope/models, default
// ~/.local/share/tokenscope/models. The setup script links the default model there.
std::filesystem::path models_directory();

// The model to open when the user names none: $TOKENSCOPE_MODEL if set, else the default model's
// file name in the models directory, else the only or first (by name) .gguf file there.
// nullopt when nothing is found; `searched` (if given) receives the places looked at, for messages.
std::optional<std::filesystem::path> find_default_model(std::vector<std::string>* searched = nullptr);

// The file name the setup script gives the default model (Gemma 3 270M, Q4_K_M).
inline constexpr const char* kDefaultModelFileName = "gemma-3-270m-Q4_K_M.gguf";

} // namespace engine
