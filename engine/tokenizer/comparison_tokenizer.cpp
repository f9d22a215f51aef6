// SPDX-License-Identifier: GPL-3.0-or-later
#include "tokenizer/comparison_tokenizer.h"

#include "gguf/gguf_file.h"
#include "tokenizer/tiktoken.h"
#include "util/error.h"
#include "util/mapped_file.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

// ---- GGUF vocabulary --------------------------------------------------------------------------

class GgufComparison final : public ComparisonTokenizer {
public:
    GgufComparison(std::string label, Vocab vocab) : m_label(std::move(label)), m_tokenizer(std::move(vocab)) {}

    std::string name() const override
    {
        const Vocab& v = m_tokenizer.vocab();
        if (v.model == TokenizerModel::Spm)
            return fmt::format("{} (SentencePiece)", m_label);
        return fmt::format("{} (BPE {})", m_label, v.pre);
    }
    std::string kind() const override
    {
        return m_tokenizer.vocab().model == TokenizerModel::Spm ? "SentencePiece" : "BPE";
    }
    std::size_t vocab_size() const override { return m_tokenizer.vocab().size(); }
    // The text alone: no BOS/EOS, control-token strings stay text (see the class comment).
    std::vector<Token> encode(std::string_view text) const override
    {
        return m_tokenizer.encode(text, {.add_special = false, .parse_special = false});
    }
    std::string piece(TokenId id) const override { return m_tokenizer.token_to_piece(id, true); }

private:
    std::string m_label;
    Tokenizer m_tokenizer;
};

// ---- tiktoken rank file -----------------------------------------------------------------------

class TiktokenComparison final : public ComparisonTokenizer {
public:
    explicit TiktokenComparison(std::unique_ptr<TiktokenEncoder> encoder) : m_encoder(std::move(encoder)) {}

    std::string name() const override { return fmt::format("{} (tiktoken)", m_encoder->spec().name); }
    std::string kind() const override { return "tiktoken"; }
    std::size_t vocab_size() const override { return m_encoder->n_vocab(); }
    std::vector<Token> encode(std::string_view text) const override { return m_encoder->encode_ordinary(text); }
    std::string piece(TokenId id) const override { return m_encoder->piece(id); }

private:
    std::unique_ptr<TiktokenEncoder> m_encoder;
};

bool starts_with_gguf_magic(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::array<char, 4> magic{};
    return in && in.read(magic.data(), magic.size()) && std::string_view(magic.data(), magic.size()) == "GGUF";
}

} // namespace

std::unique_ptr<ComparisonTokenizer> make_gguf_comparison(const std::string& path)
{
    // The GgufFile maps the file and parses the header, metadata and tensor records only; the
    // vocabulary copies what it needs, so the mapping is released when `file` goes out of scope.
    const auto file = gguf::GgufFile::open(path);
    Vocab vocab = Vocab::from_gguf(*file);
    std::string label(file->get_string("general.name").value_or(""));
    if (label.empty())
        label = std::filesystem::path(path).stem().string();
    try {
        return std::make_unique<GgufComparison>(std::move(label), std::move(vocab));
    } catch (const UnsupportedError& e) {
        throw UnsupportedError(fmt::format("{}: {}", path, e.what())); // e.g. an unknown BPE pre-tokenizer
    }
}

std::unique_ptr<ComparisonTokenizer> make_tiktoken_comparison(const std::string& path)
{
    const std::string stem = std::filesystem::path(path).stem().string();
    const TiktokenEncodingSpec* spec = find_tiktoken_encoding(stem);
    if (!spec)
        throw UnsupportedError(fmt::format("{}: the encoding of a .tiktoken file is chosen by its name, and '{}' is "
                                           "not one this program knows (supported: {}; rename the file to e.g. "
                                           "cl100k_base.tiktoken)",
                                           path, stem, supported_tiktoken_encodings()));
    const MappedFile file(path);
    const auto bytes = file.bytes();
    const std::string_view contents(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    auto ranks = parse_tiktoken_ranks(contents, path);
    return std::make_unique<TiktokenComparison>(std::make_unique<TiktokenEncoder>(*spec, std::move(ranks), path));
}

std::unique_ptr<ComparisonTokenizer> ComparisonTokenizer::open(const std::string& path)
{
    if (starts_with_gguf_magic(path))
        return make_gguf_comparison(path);
    const std::string extension = std::filesystem::path(path).extension().string();
    if (extension == ".tiktoken")
        return make_tiktoken_comparison(path);
    if (extension == ".gguf" || !std::filesystem::exists(path))
        return make_gguf_comparison(path); // its reader names what is wrong (or that the file is missing)
    throw FormatError(fmt::format("{}: neither a GGUF file (it does not start with 'GGUF') nor a tiktoken rank "
                                  "file (whose name ends in .tiktoken)",
                                  path));
}

} // namespace engine
