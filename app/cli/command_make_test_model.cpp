// SPDX-License-Identifier: GPL-3.0-or-later
// `make-test-model (--like MODEL | --arch NAME | --preset NAME) --out FILE [--seed S] [--vocab FILE] [--type T]`:
// writes a random-weight GGUF: a shape twin of an existing model, a small model from scratch, or a
// full-size twin of a published model's configuration.
#include "commands.h"

#include "gguf/gguf_file.h"
#include "model/test_model.h"
#include "util/error.h"

#include <filesystem>
#include <spdlog/fmt/fmt.h>

namespace {

struct MakeTestModelArgs {
    std::string like;
    std::string arch;
    std::string preset;
    std::string out;
    std::string vocab;
    std::string type; // every matrix of this type
    uint64_t seed = 1;
    uint32_t layers = 0;     // 0: the architecture's own count
    uint32_t vocab_size = 0; // 0: the built-in vocabulary's own count
};

int run_make_test_model(const MakeTestModelArgs& a)
{
    if (int(!a.like.empty()) + int(!a.arch.empty()) + int(!a.preset.empty()) != 1)
        throw engine::Error("give exactly one of --like MODEL, --arch NAME or --preset NAME");
    if (!a.preset.empty() && !a.vocab.empty())
        throw engine::Error("--vocab only applies to --arch");
    if (!a.like.empty() && !a.vocab.empty())
        throw engine::Error("--vocab only applies to --arch; --like copies the model's own tokenizer");
    if (a.out.empty())
        throw engine::Error("--out FILE is required");
    if (a.layers && a.arch.empty())
        throw engine::Error("--layers only applies to --arch");
    std::optional<engine::GgmlType> matrix_type;
    if (!a.type.empty()) {
        if (!a.like.empty())
            throw engine::Error("--type applies to --arch and --preset; --like copies the model's own types");
        matrix_type = engine::ggml_type_from_name(a.type);
        if (!matrix_type || !engine::ggml_type_traits(*matrix_type).dequantizable)
            throw engine::Error(fmt::format("--type {}: not a weight type Tokenscope reads (F32, F16, BF16, Q4_0, "
                                            "Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
                                            a.type));
    }
    if (a.vocab_size && (a.arch.empty() || !a.vocab.empty()))
        throw engine::Error("--vocab-size only applies to --arch with the built-in vocabulary");
    if (a.vocab_size > 1u << 20)
        throw engine::Error(
            fmt::format("--vocab-size {} is more than the 1,048,576 a test model may have", a.vocab_size));
    if (a.layers > 512)
        throw engine::Error(fmt::format("--layers {} is more than the 512 a test model may have", a.layers));

    engine::gguf::GgufWriter writer;
    if (!a.like.empty()) {
        const auto like = engine::gguf::GgufFile::open(a.like);
        writer = engine::make_test_model_like(*like, a.seed);
    } else if (!a.preset.empty()) {
        writer = engine::make_test_model_preset(a.preset, a.seed, matrix_type);
    } else {
        std::shared_ptr<const engine::gguf::GgufFile> vocab;
        if (!a.vocab.empty())
            vocab = engine::gguf::GgufFile::open(a.vocab);
        if (a.layers || matrix_type || a.vocab_size) {
            // Deep models for layout checks (a 30-layer model in every panel): matrices F32 unless
            // --type names one; one type throughout for the weight-type suites.
            engine::TestModelShape shape;
            if (a.layers)
                shape.n_layer = a.layers;
            shape.matrix_type = matrix_type;
            if (a.vocab_size)
                shape.n_vocab = a.vocab_size;
            writer = engine::make_test_model(a.arch, a.seed, shape, vocab.get());
        } else {
            writer = engine::make_test_model(a.arch, a.seed, vocab.get());
        }
    }
    writer.write(a.out);

    const auto written = std::filesystem::file_size(a.out);
    fmt::print("wrote {} ({} bytes): {} tensors, {} metadata keys, seed {}\n", a.out, written, writer.tensor_count(),
               writer.metadata_count(), a.seed);
    return 0;
}

} // namespace

CommandRunner add_make_test_model_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("make-test-model",
                                   "Write a GGUF with random weights: a shape twin of a model (--like), a small "
                                   "model of an architecture (--arch) or a full-size twin of a published "
                                   "configuration (--preset)");
    auto a = std::make_shared<MakeTestModelArgs>();
    std::string archs;
    for (const auto& name : engine::test_model_architectures())
        archs += (archs.empty() ? "" : "|") + name;
    cmd->add_option("--like", a->like, "Copy this model's metadata, tensor names, shapes and types");
    cmd->add_option("--arch", a->arch, "Build a small model of this architecture (" + archs + ")");
    std::string presets;
    for (const auto& name : engine::test_model_presets())
        presets += (presets.empty() ? "" : "|") + name;
    cmd->add_option("--preset", a->preset,
                    "Build a full-size twin of a published model's configuration (" + presets + ")");
    cmd->add_option("-o,--out", a->out, "Output GGUF file (written atomically)")->required();
    cmd->add_option("--layers", a->layers,
                    "With --arch: this many layers instead of the architecture's (matrices F32)");
    cmd->add_option("--type", a->type,
                    "With --arch or --preset: store every matrix (embeddings and output head included) as this "
                    "type, e.g. Q4_1 or IQ4_XS; norms stay F32");
    cmd->add_option("--seed", a->seed, "Random seed; the same seed gives a byte-identical file (default 1)");
    cmd->add_option("--vocab-size", a->vocab_size,
                    "With --arch: pad the built-in vocabulary with unused tokens to this many (e.g. a multiple of 8, "
                    "as real vocabularies are)");
    cmd->add_option("--vocab", a->vocab,
                    "With --arch: take every tokenizer.* key from this GGUF instead of the "
                    "built-in byte-level BPE");
    return [a] { return run_make_test_model(*a); };
}
