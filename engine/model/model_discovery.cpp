// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/model_discovery.h"

#include "gguf/gguf_file.h"
#include "model/model_kind.h"
#include "model/model_locator.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <system_error>
#include <unordered_set>
#include <utility>

namespace engine {

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Bounds of the scan
// ---------------------------------------------------------------------------------------------

constexpr int kMaxDepth = 6;                          // levels below a root (its files are level 1)
constexpr std::size_t kMaxEntriesPerScan = 200'000;   // directory entries looked at, all roots together
constexpr std::uintmax_t kMaxManifestBytes = 1 << 20; // an Ollama manifest is a few hundred bytes
constexpr const char* kOllamaModelMediaType = "application/vnd.ollama.image.model";
constexpr const char* kMiddleDot = " \xC2\xB7 "; // " · "

std::string env_or_empty(const char* name)
{
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::string();
}

// The directories a scan has entered (canonical), so that a directory link never leads in twice,
// and the entries left to look at.
struct ScanState {
    std::set<fs::path> visited;
    std::size_t entries_left = kMaxEntriesPerScan;
};

// Calls on_file(path, relative_path) for every regular file (links followed) in `dir` and below,
// `levels` levels deep at most (1: only the files directly in `dir`). Errors skip the entry.
template <typename OnFile>
void walk(const fs::path& dir, const fs::path& relative, int levels, ScanState& state, OnFile&& on_file)
{
    std::error_code ec;
    const fs::path canonical = fs::canonical(dir, ec);
    if (ec || !state.visited.insert(canonical).second)
        return;
    std::vector<fs::directory_entry> entries;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (state.entries_left == 0)
            break;
        --state.entries_left;
        entries.push_back(*it);
    }
    std::sort(entries.begin(), entries.end()); // stable order: the first of two paths wins
    for (const fs::directory_entry& e : entries) {
        const fs::file_status st = e.status(ec); // follows links; a dangling one is an error
        if (ec)
            continue;
        const fs::path rel = relative / e.path().filename();
        if (fs::is_directory(st)) {
            if (levels > 1)
                walk(e.path(), rel, levels - 1, state, on_file);
        } else if (fs::is_regular_file(st)) {
            on_file(e.path(), rel);
        }
    }
}

// The immediate subdirectories of `dir` (links followed), sorted.
std::vector<fs::path> subdirectories(const fs::path& dir, ScanState& state)
{
    std::vector<fs::path> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (state.entries_left == 0)
            break;
        --state.entries_left;
        if (it->is_directory(ec) && !ec)
            out.push_back(it->path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool has_gguf_extension(const fs::path& p)
{
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return ext == ".gguf";
}

bool starts_with_gguf_magic(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::array<char, 4> magic{};
    return in.read(magic.data(), magic.size()) && std::string_view(magic.data(), 4) == "GGUF";
}

// ---------------------------------------------------------------------------------------------
// Candidates, per layout
// ---------------------------------------------------------------------------------------------

struct Candidate {
    fs::path path;
    std::string display_name;
    std::string source;
};

using CandidateSink = std::vector<Candidate>;

void collect_plain(const DiscoveryRoot& root, ScanState& state, CandidateSink& out)
{
    walk(root.directory, {}, kMaxDepth, state, [&](const fs::path& p, const fs::path& rel) {
        if (has_gguf_extension(p))
            out.push_back({p, rel.generic_string(), root.source});
    });
}

void collect_lm_studio(const DiscoveryRoot& root, ScanState& state, CandidateSink& out)
{
    walk(root.directory, {}, kMaxDepth, state, [&](const fs::path& p, const fs::path& rel) {
        if (!has_gguf_extension(p))
            return;
        // publisher/model/file.gguf; anything else is named by its relative path.
        std::vector<std::string> parts;
        for (const fs::path& part : rel)
            parts.push_back(part.string());
        std::string name = parts.size() == 3 ? parts[0] + "/" + parts[1] + kMiddleDot + parts[2] : rel.generic_string();
        out.push_back({p, std::move(name), root.source});
    });
}

// "models--org--name" -> "org/name" (or "name" for a repository without an organisation).
std::string hf_repo_name(const std::string& dir_name)
{
    std::string repo = dir_name.substr(std::string("models--").size());
    if (const auto sep = repo.find("--"); sep != std::string::npos)
        repo.replace(sep, 2, "/");
    return repo;
}

void collect_hugging_face(const DiscoveryRoot& root, ScanState& state, CandidateSink& out)
{
    // hub/models--org--name/snapshots/<revision>/<file>; the files are links into ../../blobs.
    for (const fs::path& repo_dir : subdirectories(root.directory, state)) {
        const std::string dir_name = repo_dir.filename().string();
        if (!dir_name.starts_with("models--") || dir_name.size() == std::string("models--").size())
            continue;
        const std::string repo = hf_repo_name(dir_name);
        for (const fs::path& snapshot : subdirectories(repo_dir / "snapshots", state))
            walk(snapshot, {}, kMaxDepth - 3, state, [&](const fs::path& p, const fs::path& rel) {
                if (has_gguf_extension(p))
                    out.push_back({p, repo + kMiddleDot + rel.generic_string(), root.source});
            });
    }
}

// Ollama's manifests (manifests/<host>/<namespace>/<model>/<tag>, JSON) name the blobs:
// blob file name ("sha256-<hex>") -> "model:tag" names, sorted.
std::map<std::string, std::vector<std::string>> ollama_blob_names(const fs::path& manifests, ScanState& state)
{
    std::map<std::string, std::vector<std::string>> names;
    walk(manifests, {}, 5, state, [&](const fs::path& p, const fs::path& rel) {
        std::vector<std::string> parts;
        for (const fs::path& part : rel)
            parts.push_back(part.string());
        if (parts.size() < 2)
            return;
        std::error_code ec;
        const auto size = fs::file_size(p, ec);
        if (ec || size > kMaxManifestBytes)
            return;
        std::ifstream in(p, std::ios::binary);
        std::string text(static_cast<std::size_t>(size), '\0');
        if (!in.read(text.data(), static_cast<std::streamsize>(text.size())))
            return;
        const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array())
            return;

        // registry.ollama.ai/library/gemma3/270m -> "gemma3:270m"; other namespaces and hosts stay.
        std::size_t first = 0;
        if (parts.size() >= 3 && parts[0] == "registry.ollama.ai")
            first = parts[1] == "library" ? 2 : 1;
        std::string name;
        for (std::size_t i = first; i + 1 < parts.size(); ++i)
            name += (name.empty() ? "" : "/") + parts[i];
        name += ":" + parts.back();

        for (const nlohmann::json& layer : j["layers"]) {
            if (!layer.is_object() || layer.value("mediaType", std::string()) != kOllamaModelMediaType)
                continue;
            const std::string digest = layer.value("digest", std::string());
            if (!digest.starts_with("sha256:"))
                continue;
            auto& list = names["sha256-" + digest.substr(7)];
            if (std::find(list.begin(), list.end(), name) == list.end())
                list.push_back(name);
        }
    });
    for (auto& [blob, list] : names)
        std::sort(list.begin(), list.end());
    return names;
}

void collect_ollama(const DiscoveryRoot& root, ScanState& state, CandidateSink& out)
{
    std::error_code ec;
    if (!fs::is_directory(root.directory, ec))
        return;
    const auto names = ollama_blob_names(root.directory.parent_path() / "manifests", state);
    walk(root.directory, {}, 1, state, [&](const fs::path& p, const fs::path&) {
        const std::string file = p.filename().string();
        if (!file.starts_with("sha256") || file.ends_with("-partial") || !starts_with_gguf_magic(p))
            return; // configs, templates, licences and downloads in progress share the directory
        std::string name;
        if (const auto it = names.find(file); it != names.end()) {
            for (const std::string& n : it->second)
                name += (name.empty() ? "" : ", ") + n;
        } else {
            name = file.substr(0, std::min<std::size_t>(file.size(), 19)); // "sha256-" + 12 hex digits
        }
        out.push_back({p, std::move(name), root.source});
    });
}

// ---------------------------------------------------------------------------------------------
// Reading a candidate's header
// ---------------------------------------------------------------------------------------------

// general.file_type by name, else the tensor type holding the most bytes.
std::string file_type_of(const gguf::GgufFile& file)
{
    if (const auto ft = file.get_int("general.file_type"); ft && *ft >= 0 && *ft <= 0xFFFFFFFFll)
        if (const auto name = file_type_name(static_cast<uint32_t>(*ft)))
            return std::string(*name);
    std::map<std::string_view, uint64_t> bytes_by_type;
    for (const gguf::TensorInfo& t : file.tensors())
        bytes_by_type[t.type.name] += t.n_bytes;
    const auto dominant = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                           [](const auto& a, const auto& b) { return a.second < b.second; });
    return dominant == bytes_by_type.end() ? std::string() : std::string(dominant->first);
}

DiscoveredModel read_model(Candidate c)
{
    DiscoveredModel m;
    m.path = std::move(c.path);
    m.display_name = std::move(c.display_name);
    m.source = std::move(c.source);
    std::error_code ec;
    const auto size = fs::file_size(m.path, ec);
    m.file_size = ec ? 0 : static_cast<uint64_t>(size);
    try {
        const auto file = gguf::GgufFile::open(m.path);
        if (const auto arch = file->get_string("general.architecture"))
            m.architecture = std::string(*arch);
        m.file_type = file_type_of(*file);
        ModelKindVerdict kind = model_kind_verdict(*file);
        m.instruct = kind.kind == ModelKind::Instruct;
        m.kind_reason = std::move(kind.reason);
    } catch (const Error& e) {
        m.error = e.what();
    } catch (const std::exception& e) { // e.g. bad_alloc: still one bad file, not a failed scan
        m.error = m.path.string() + ": " + e.what();
    }
    return m;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------------------------

std::optional<std::string_view> file_type_name(uint32_t file_type)
{
    // llama.cpp's llama_ftype; 4-6 and 33-35 are retired.
    static constexpr std::array<std::string_view, 41> kNames = {
        "F32",   "F16",     "Q4_0",      "Q4_1",   "",       "",        "",       "Q8_0",   "Q5_0",
        "Q5_1",  "Q2_K",    "Q3_K_S",    "Q3_K_M", "Q3_K_L", "Q4_K_S",  "Q4_K_M", "Q5_K_S", "Q5_K_M",
        "Q6_K",  "IQ2_XXS", "IQ2_XS",    "Q2_K_S", "IQ3_XS", "IQ3_XXS", "IQ1_S",  "IQ4_NL", "IQ3_S",
        "IQ3_M", "IQ2_S",   "IQ2_M",     "IQ4_XS", "IQ1_M",  "BF16",    "",       "",       "",
        "TQ1_0", "TQ2_0",   "MXFP4_MOE", "NVFP4",  "Q1_0",
    };
    if (file_type >= kNames.size() || kNames[file_type].empty())
        return std::nullopt;
    return kNames[file_type];
}

DiscoveryRoots default_discovery_roots()
{
    const std::string home_env = env_or_empty("HOME");
    const fs::path home = home_env.empty() ? fs::path(".") : fs::path(home_env);

    DiscoveryRoots roots;
    auto add = [&](fs::path dir, const char* source, RootLayout layout) {
        roots.directories.push_back({std::move(dir), source, layout});
    };
    add(models_directory(), kSourceTokenscope, RootLayout::Plain);

    // huggingface_hub: $HF_HUB_CACHE, else $HF_HOME/hub, else ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub.
    fs::path hf_hub;
    if (const std::string v = env_or_empty("HF_HUB_CACHE"); !v.empty())
        hf_hub = v;
    else if (const std::string h = env_or_empty("HF_HOME"); !h.empty())
        hf_hub = fs::path(h) / "hub";
    else if (const std::string x = env_or_empty("XDG_CACHE_HOME"); !x.empty())
        hf_hub = fs::path(x) / "huggingface" / "hub";
    else
        hf_hub = home / ".cache" / "huggingface" / "hub";
    add(hf_hub, kSourceHuggingFace, RootLayout::HuggingFace);

    add(home / ".lmstudio" / "models", kSourceLmStudio, RootLayout::LmStudio);
    add(home / ".cache" / "lm-studio" / "models", kSourceLmStudio, RootLayout::LmStudio);

    if (const std::string v = env_or_empty("OLLAMA_MODELS"); !v.empty())
        add(fs::path(v) / "blobs", kSourceOllama, RootLayout::OllamaBlobs);
    add(home / ".ollama" / "models" / "blobs", kSourceOllama, RootLayout::OllamaBlobs);
    add("/usr/share/ollama/.ollama/models/blobs", kSourceOllama, RootLayout::OllamaBlobs);
    return roots;
}

std::vector<DiscoveredModel> discover_models(const DiscoveryRoots& roots)
{
    ScanState state;
    CandidateSink candidates;
    for (const DiscoveryRoot& root : roots.directories) {
        std::error_code ec;
        if (!fs::is_directory(root.directory, ec))
            continue; // a tool that is not installed
        switch (root.layout) {
        case RootLayout::Plain:
            collect_plain(root, state, candidates);
            break;
        case RootLayout::HuggingFace:
            collect_hugging_face(root, state, candidates);
            break;
        case RootLayout::LmStudio:
            collect_lm_studio(root, state, candidates);
            break;
        case RootLayout::OllamaBlobs:
            collect_ollama(root, state, candidates);
            break;
        }
    }
    for (const fs::path& p : roots.recent_files) {
        std::error_code ec;
        if (fs::is_regular_file(p, ec)) // a recent file that has since gone is not listed
            candidates.push_back({p, p.filename().string(), kSourceRecent});
    }

    // Sources rank in root order, "Recent" last.
    std::map<std::string, std::size_t> rank;
    for (const DiscoveryRoot& root : roots.directories)
        rank.emplace(root.source, rank.size());
    rank.emplace(kSourceRecent, rank.size());

    // One entry per file: the first root that reached it names it.
    std::unordered_set<std::string> seen;
    std::vector<DiscoveredModel> models;
    for (Candidate& c : candidates) {
        std::error_code ec;
        fs::path key = fs::canonical(c.path, ec);
        if (ec)
            key = fs::absolute(c.path, ec).lexically_normal();
        if (!seen.insert(key.string()).second)
            continue;
        models.push_back(read_model(std::move(c)));
    }

    std::sort(models.begin(), models.end(), [&](const DiscoveredModel& a, const DiscoveredModel& b) {
        const std::size_t ra = rank.at(a.source), rb = rank.at(b.source);
        if (ra != rb)
            return ra < rb;
        if (a.display_name != b.display_name)
            return a.display_name < b.display_name;
        return a.path < b.path;
    });
    return models;
}

} // namespace engine
