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

// The file name the setup script gives the default model (Gemma 3 270M, Q4_K_M): a base model, the
// smallest, with sliding-window attention; what the CLI, the tests and the README use by default.
inline constexpr const char* kDefaultModelFileName = "gemma-3-270m-Q4_K_M.gguf";
// The file name the setup script gives the chat model (Qwen2.5-Coder 0.5B Instruct, Q4_K_M): an
// instruct model that answers in the chat.
inline constexpr const char* kChatModelFileName = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

// The chat model in the models directory, or nullopt when it is not installed.
std::optional<std::filesystem::path> find_chat_model();

// The model the desktop app opens at start when none is named: $TOKENSCOPE_MODEL if set, else the
// user's last choice (`last_choice`, when that file still exists), else the chat model when it is
// installed, else find_default_model().
std::optional<std::filesystem::path> find_startup_model(const std::optional<std::filesystem::path>& last_choice);

} // namespace engine
