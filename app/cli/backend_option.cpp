// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend_option.h"

#include "backend/backend_factory.h"
#include "util/error.h"
#include "util/thread_pool.h"

#include <cctype>
#include <cstdio>
#include <string>

void add_backend_options(CLI::App* cmd, BackendArgs& a)
{
    cmd->add_option("--backend", a.backend,
                    "Compute backend: cpu, cuda, vulkan or auto (a CUDA device if there is one, else a Vulkan GPU, "
                    "else the CPU)")
        ->check(CLI::IsMember({"cpu", "cuda", "vulkan", "auto"}, CLI::ignore_case))
        ->capture_default_str();
    cmd->add_option("--device", a.device,
                    "Vulkan or CUDA device index (see `tokenscope-cli devices`; -1: the best one)")
        ->capture_default_str();
    cmd->add_flag("--vulkan-exact", a.vulkan_exact,
                  "Vulkan: 64-bit arithmetic, the CPU backend's results by construction (slow on GPUs). Default: "
                  "f32 in the same order, equal to the CPU's in the test suites");
    cmd->add_flag("--no-repack", a.no_repack,
                  "CPU: llama.cpp's plain summation order, as its --no-repack runs. Default: its default order, which "
                  "on a CPU with AVX2 repacks Q4_0, IQ4_NL and Q4_K matrices and sums them in another order");
    cmd->add_option("--flash-attn", a.flash_attn,
                    "CPU: llama.cpp's attention order, as its -fa on|off|auto runs: auto (its default) is on for the "
                    "CPU, the order of llama-server and llama-cli as they run by default; off: its -fa off order. "
                    "GPU backends keep their own attention")
        ->check(CLI::IsMember({"on", "off", "auto"}, CLI::ignore_case))
        ->capture_default_str();
    cmd->add_flag("--deterministic", a.deterministic,
                  "CPU: batch-invariant sums — a token's logits are the same bits whether it is evaluated alone or "
                  "in a batch of any size (no longer llama.cpp's order, which depends on the batch size)");
    for (auto [flag, target] :
         {std::pair{"--cache-type-k", &a.cache_type_k}, std::pair{"--cache-type-v", &a.cache_type_v}})
        cmd->add_option(flag, *target,
                        std::string("KV cache type of the ") + (target == &a.cache_type_k ? "keys" : "values") +
                            ", as llama.cpp's -ctk/-ctv: f16, q8_0 or q4_0. A quantized cache is read by flash "
                            "attention (llama.cpp's -fa on order) and runs on the CPU backend only")
            ->check(CLI::IsMember({"f16", "q8_0", "q4_0"}, CLI::ignore_case))
            ->capture_default_str();
}

bool flash_attention_of(const BackendArgs& a)
{
    // llama.cpp resolves auto to on wherever its device runs flash attention, a CPU included.
    std::string v = a.flash_attn;
    for (char& c : v)
        c = char(std::tolower(static_cast<unsigned char>(c)));
    return v != "off";
}

engine::KvCacheTypes kv_cache_types_of(const BackendArgs& a)
{
    return {engine::parse_kv_cache_type(a.cache_type_k).value_or(engine::GgmlType::F16),
            engine::parse_kv_cache_type(a.cache_type_v).value_or(engine::GgmlType::F16)};
}

std::unique_ptr<engine::Backend> make_cli_backend(const BackendArgs& a, std::shared_ptr<const engine::Model> model,
                                                  uint32_t n_ctx, int threads)
{
    if (threads > engine::max_thread_count()) {
        std::fprintf(stderr, "note: --threads %d is more than this machine's %d hardware threads; using %d\n", threads,
                     engine::max_thread_count(), engine::max_thread_count());
        threads = engine::max_thread_count();
    }
    if (threads < 0)
        throw engine::Error("--threads must be 0 (all cores) or a positive count, not " + std::to_string(threads));
    const auto kind = engine::parse_backend_kind(a.backend).value_or(engine::BackendKind::Cpu);
    std::string note;
    auto backend = engine::make_backend(kind, std::move(model), n_ctx, threads, &note, a.device, a.vulkan_exact,
                                        a.no_repack ? engine::WeightOrder::Plain : engine::WeightOrder::LlamaCppDefault,
                                        kv_cache_types_of(a), flash_attention_of(a));
    // Asked for CUDA by name and not given it: an error, not a quiet run on the CPU (a benchmark or a
    // script that wants the GPU must not measure the CPU instead).
    if (!note.empty() && kind == engine::BackendKind::Cuda)
        throw engine::UnsupportedError("--backend cuda: " + note.substr(0, note.rfind("; using the CPU")));
    if (!note.empty() && kind == engine::BackendKind::Vulkan)
        std::fprintf(stderr, "note: %s\n", note.c_str());
    return backend;
}
