// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

// The model library: GGUF files found in Tokenscope's own directory and in the caches of other
// tools (Hugging Face, LM Studio, Ollama), each read only as far as its header.

inline constexpr const char* kSourceTokenscope = "Tokenscope";
inline constexpr const char* kSourceHuggingFace = "Hugging Face";
inline constexpr const char* kSourceLmStudio = "LM Studio";
inline constexpr const char* kSourceOllama = "Ollama";
inline constexpr const char* kSourceRecent = "Recent";

// How the files under a root are laid out, which decides what is a candidate and how it is named.
enum class RootLayout {
    Plain,       // *.gguf anywhere below; named by the path relative to the root
    HuggingFace, // models--org--name/snapshots/<revision>/**/*.gguf; named "org/name · file.gguf"
    LmStudio,    // publisher/model/file.gguf; named "publisher/model · file.gguf"
    OllamaBlobs, // sha256-<hex> files recognised by the GGUF magic; named from ../manifests
};

struct DiscoveryRoot {
    std::filesystem::path directory;
    std::string source; // shown to the user: one of the kSource* names
    RootLayout layout = RootLayout::Plain;
};

struct DiscoveryRoots {
    std::vector<DiscoveryRoot> directories;          // earlier roots win when two reach the same file
    std::vector<std::filesystem::path> recent_files; // listed under "Recent" unless found above
};

struct DiscoveredModel {
    std::filesystem::path path; // as reached (a Hugging Face snapshot link, not its blob)
    std::string display_name;
    std::string source; // "Tokenscope", "Hugging Face", "LM Studio", "Ollama", "Recent"
    uint64_t file_size = 0;
    std::string architecture;         // general.architecture; empty when unknown
    std::string file_type;            // "Q4_K_M" from general.file_type, else the dominant tensor type
    bool instruct = false;            // model_kind(): tuned to answer (instruct/chat) rather than a base model
    std::string kind_reason;          // the rule that decided it: "it has a chat template", …
    std::optional<std::string> error; // the loader's message when the header cannot be read
};

// Tokenscope's models directory, the Hugging Face hub cache ($HF_HUB_CACHE, $HF_HOME/hub,
// $XDG_CACHE_HOME/huggingface/hub or ~/.cache/huggingface/hub), LM Studio (~/.lmstudio/models,
// ~/.cache/lm-studio/models) and Ollama ($OLLAMA_MODELS/blobs, ~/.ollama/models/blobs,
// /usr/share/ollama/.ollama/models/blobs), in that order.
DiscoveryRoots default_discovery_roots();

// Scans the roots (missing ones are skipped; at most 6 levels deep; directory links are followed
// but never twice into the same directory), opens each candidate's header, and returns the models
// sorted by source (in root order, "Recent" last) then display name. A file reached through two
// roots is listed once, under the first. A file whose header cannot be read is listed with its
// error. Never throws on anything found on disk.
std::vector<DiscoveredModel> discover_models(const DiscoveryRoots& roots);

// llama.cpp's name for a general.file_type value ("Q4_K_M" for 15), or nullopt when unknown.
std::optional<std::string_view> file_type_name(uint32_t file_type);

} // namespace engine
