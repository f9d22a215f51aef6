// SPDX-License-Identifier: GPL-3.0-or-later
// Random-weight GGUF models. Block layouts: shared/reference/quants.md; metadata keys and tensor
// names: gguf.md §7–8 and gemma3.md §6.
//
// Determinism: every value is built from PRNG integers with exact operations (an integer times a
// power of two) or with a single correctly rounded IEEE operation (s / K, c · d), never with a
// multiply followed by an add that a compiler might fuse into an FMA on one machine and not on
// another; float → f16 rounding is done in integers; bytes are stored little-endian explicitly.
#include "model/test_model.h"

#include "gguf/gguf_file.h"
#include "tokenizer/byte_unicode.h"
#include "util/error.h"
#include "util/fp16.h"
#include "util/rng.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

// =============================================================================================
// Numbers and bytes
// =============================================================================================

// binary32 → binary16, round to nearest even (subnormals, overflow to infinity, NaN kept NaN).
uint16_t f32_to_f16(float f)
{
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t exp = (x >> 23) & 0xFFu;
    uint32_t mant = x & 0x7FFFFFu;
    if (exp == 0xFF)
        return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0u));
    const int e = static_cast<int>(exp) - 127 + 15;
    if (e >= 31)
        return static_cast<uint16_t>(sign | 0x7C00u);
    if (e <= 0) {
        if (e < -10)
            return static_cast<uint16_t>(sign);
        mant |= 0x800000u;
        const int shift = 14 - e;
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1);
        const uint32_t halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (h & 1u)))
            ++h; // may carry into the smallest normal, which is the right answer
        return static_cast<uint16_t>(sign | h);
    }
    uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        ++h; // a carry into the exponent is the right answer too
    return static_cast<uint16_t>(h);
}

// The float a value becomes once stored as f16 (scales derived from a stored d must use it).
float f16_round(float v)
{
    return fp16_to_f32(f32_to_f16(v));
}

void put_le(std::byte* p, uint64_t v, int n)
{
    for (int i = 0; i < n; ++i)
        p[i] = static_cast<std::byte>(v >> (8 * i));
}

void put_f16(std::byte* p, float v)
{
    put_le(p, f32_to_f16(v), 2);
}

void random_bytes(Xoshiro256& rng, std::byte* p, std::size_t n)
{
    while (n >= 8) {
        put_le(p, rng.next(), 8);
        p += 8;
        n -= 8;
    }
    if (n)
        put_le(p, rng.next(), static_cast<int>(n));
}

// Uniform in [-1/16, 1/16): a 24-bit integer times 2^-27, exact. Standard deviation ≈ 0.036.
float small_value(Xoshiro256& rng)
{
    const int32_t k = static_cast<int32_t>(rng.next() >> 40) - (1 << 23);
    return static_cast<float>(k) * 0x1p-27f;
}

// Uniform in [0.97, 1.03): (2^23 + k) · 2^-23 with |k| < 2^18, exact.
float unit_value(Xoshiro256& rng)
{
    const int32_t k = static_cast<int32_t>(rng.next() >> 45) - (1 << 18);
    return static_cast<float>((1 << 23) + k) * 0x1p-23f;
}

// The standard deviation a quantized block should have: in [1/32, 1/16), so that |w| ~ 0.025–0.05.
float block_std(Xoshiro256& rng)
{
    return static_cast<float>(64 + rng.below(64)) * 0x1p-11f;
}

// =============================================================================================
// Quantized blocks
// =============================================================================================
// Quant bits are uniformly random. The scale d of a block is set so that the dequantized values
// have the standard deviation block_std: d = std / K, K being the standard deviation of the
// (scale-weighted) integer values of that block layout. Offsets (Q4_1/Q5_1 m, K-quant dmin·min)
// are set to centre the values on zero. K for the IQ*/TQ* layouts is a rough estimate of the
// grid's magnitude: only finite, sensible weights matter there.

// Q4_K/Q5_K: pack 8 six-bit scales and mins into 12 bytes (quants.md, get_scale_min_k4 inverted).
void pack_k4_scales(std::byte* q, const std::array<uint8_t, 8>& sc, const std::array<uint8_t, 8>& m)
{
    uint8_t b[12] = {};
    for (int j = 0; j < 4; ++j) {
        b[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        b[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        b[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    std::memcpy(q, b, 12);
}

void k4_scales(Xoshiro256& rng, std::byte* q)
{
    // Scales in [16, 31] and mins = 2·scale; with dmin = (mid / 2)·d every sub-block is centred.
    std::array<uint8_t, 8> sc{}, m{};
    for (int j = 0; j < 8; ++j) {
        sc[j] = static_cast<uint8_t>(16 + rng.below(16));
        m[j] = static_cast<uint8_t>(2 * sc[j]);
    }
    pack_k4_scales(q, sc, m);
}

void fill_block(GgmlType type, Xoshiro256& rng, std::byte* b, uint32_t size)
{
    // d for a block whose integer values have standard deviation k.
    const auto scale = [&](float k) { return block_std(rng) / k; };
    switch (type) {
    case GgmlType::Q4_0: // d · qs[16]; (q − 8), std 4.61
        random_bytes(rng, b + 2, 16);
        put_f16(b, scale(4.61f));
        return;
    case GgmlType::Q4_1: { // d · m · qs[16]; q·d + m, m = −7.5·d
        random_bytes(rng, b + 4, 16);
        const float d = f16_round(scale(4.61f));
        put_f16(b, d);
        put_f16(b + 2, -7.5f * d);
        return;
    }
    case GgmlType::Q5_0: // d · qh[4] · qs[16]; (q − 16), std 9.23
        random_bytes(rng, b + 2, 20);
        put_f16(b, scale(9.23f));
        return;
    case GgmlType::Q5_1: { // d · m · qh[4] · qs[16]; m = −15.5·d
        random_bytes(rng, b + 4, 20);
        const float d = f16_round(scale(9.23f));
        put_f16(b, d);
        put_f16(b + 2, -15.5f * d);
        return;
    }
    case GgmlType::Q8_0:   // d · qs[32] int8 in [−127, 127] (what ggml's quantizer produces)
    case GgmlType::Q8_1: { // d · s · qs[32], s = d·Σq
        const int qs_at = type == GgmlType::Q8_0 ? 2 : 4;
        int32_t sum = 0;
        for (int i = 0; i < 32; ++i) {
            const int q = static_cast<int>(rng.below(255)) - 127;
            sum += q;
            b[qs_at + i] = static_cast<std::byte>(static_cast<uint8_t>(q));
        }
        const float d = f16_round(scale(73.6f));
        put_f16(b, d);
        if (type == GgmlType::Q8_1)
            put_f16(b + 2, d * static_cast<float>(sum));
        return;
    }
    case GgmlType::Q2_K: { // scales[16] · qs[64] · d · dmin; d·sc·q − dmin·m, q ∈ [0, 3]
        for (int i = 0; i < 16; ++i) {
            const auto sc = static_cast<uint8_t>(8 + rng.below(8));
            b[i] = static_cast<std::byte>(sc | (sc << 4)); // min = scale, dmin = 1.5·d: centred
        }
        random_bytes(rng, b + 16, 64);
        const float d = f16_round(scale(11.5f * 1.118f));
        put_f16(b + 80, d);
        put_f16(b + 82, 1.5f * d);
        return;
    }
    case GgmlType::Q3_K: { // hmask[32] · qs[64] · scales[12] · d; d·s·(q − 4·!h), s 6-bit signed
        random_bytes(rng, b, 96);
        uint8_t sc[12] = {};
        for (int i = 0; i < 16; ++i) {
            // |s| ∈ [16, 31] with a random sign: Q3_K has no offset, and its values (−4…3) average
            // −0.5, so mixed signs keep the tensor centred. Stored as s + 32.
            const uint32_t r = rng.below(32);
            const uint32_t v = r < 16 ? 32 + 16 + r : 32 - 16 - (r - 16);
            sc[i % 8] |= static_cast<uint8_t>((v & 15) << (4 * (i / 8)));
            sc[8 + i % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (i / 4)));
        }
        std::memcpy(b + 96, sc, 12);
        put_f16(b + 108, scale(23.5f * 2.29f));
        return;
    }
    case GgmlType::Q4_K: { // d · dmin · scales[12] · qs[128]; d·sc·q − dmin·m, q ∈ [0, 15]
        k4_scales(rng, b + 4);
        random_bytes(rng, b + 16, 128);
        const float d = f16_round(scale(23.5f * 4.61f));
        put_f16(b, d);
        put_f16(b + 2, 3.75f * d); // dmin·2sc = 7.5·d·sc
        return;
    }
    case GgmlType::Q5_K: { // d · dmin · scales[12] · qh[32] · qs[128]; q ∈ [0, 31]
        k4_scales(rng, b + 4);
        random_bytes(rng, b + 16, 160);
        const float d = f16_round(scale(23.5f * 9.23f));
        put_f16(b, d);
        put_f16(b + 2, 7.75f * d); // dmin·2sc = 15.5·d·sc
        return;
    }
    case GgmlType::Q6_K: { // ql[128] · qh[64] · scales[16] int8 · d; d·sc·(q − 32)
        random_bytes(rng, b, 192);
        for (int i = 0; i < 16; ++i)
            b[192 + i] = static_cast<std::byte>(8 + rng.below(17)); // [8, 24]
        put_f16(b + 208, scale(16.0f * 18.5f));
        return;
    }
    case GgmlType::Q8_K: { // d f32 · qs[256] int8 · bsums[16] int16 (sums of 16 qs)
        for (int g = 0; g < 16; ++g) {
            int32_t sum = 0;
            for (int i = 0; i < 16; ++i) {
                const int q = static_cast<int>(rng.below(255)) - 127;
                sum += q;
                b[4 + 16 * g + i] = static_cast<std::byte>(static_cast<uint8_t>(q));
            }
            put_le(b + 260 + 2 * g, static_cast<uint16_t>(static_cast<int16_t>(sum)), 2);
        }
        put_le(b, std::bit_cast<uint32_t>(scale(73.6f)), 4);
        return;
    }
    // Layouts with a leading f16 d (ggml-common.h): IQ2_XXS/XS/S, IQ3_XXS/S, IQ1_S, IQ4_NL/XS.
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S:
        random_bytes(rng, b + 2, size - 2);
        put_f16(b, scale(50.0f));
        return;
    case GgmlType::IQ3_XXS:
        random_bytes(rng, b + 2, size - 2);
        put_f16(b, scale(120.0f));
        return;
    case GgmlType::IQ3_S:
        random_bytes(rng, b + 2, size - 2);
        put_f16(b, scale(128.0f));
        return;
    case GgmlType::IQ1_S:
        random_bytes(rng, b + 2, size - 2);
        put_f16(b, scale(6.0f));
        return;
    case GgmlType::IQ4_NL:
        random_bytes(rng, b + 2, size - 2);
        put_f16(b, scale(65.0f));
        return;
    case GgmlType::IQ4_XS:
        random_bytes(rng, b + 2, size - 2);
        put_f16(b, scale(1000.0f));
        return;
    case GgmlType::IQ1_M: { // qs[32] · qh[16] · scales[8]: d's 16 bits are the top nibbles of 4 u16
        random_bytes(rng, b, size);
        const uint16_t d = f32_to_f16(scale(6.0f));
        for (int i = 0; i < 4; ++i) {
            std::byte& hi = b[48 + 2 * i + 1];
            hi = static_cast<std::byte>((static_cast<uint8_t>(hi) & 0x0F) | (((d >> (4 * i)) & 0xF) << 4));
        }
        return;
    }
    case GgmlType::TQ1_0: // qs[48] · qh[4] · d
        random_bytes(rng, b, 52);
        put_f16(b + 52, scale(0.8f));
        return;
    case GgmlType::TQ2_0: // qs[64] · d
        random_bytes(rng, b, 64);
        put_f16(b + 64, scale(0.8f));
        return;
    case GgmlType::MXFP4: // e (E8M0) · qs[16]; values up to ±12 · 2^(e−128)
        random_bytes(rng, b + 1, 16);
        b[0] = static_cast<std::byte>(121 + rng.below(2));
        return;
    default:
        random_bytes(rng, b, size);
        return;
    }
}

uint64_t fnv1a(std::string_view s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 0x100000001B3ull;
    }
    return h;
}

// Norm weights (and Llama 3.1's rope_freqs divisors) must sit near 1, not near 0.
bool wants_unit_values(const std::string& name, uint32_t n_dims)
{
    const auto ends_with = [&](std::string_view suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return n_dims == 1 && (ends_with("norm.weight") || name == "rope_freqs.weight");
}

gguf::GgufWriter::TensorFill random_fill(GgmlType type, bool unit, uint64_t seed, const std::string& name)
{
    const uint64_t stream = fnv1a(name);
    return [=](std::span<std::byte> out) { fill_random_tensor(out, type, unit, seed, stream); };
}

// =============================================================================================
// Built-in tokenizer
// =============================================================================================

// Byte-pair encoding of one pre-token: repeatedly merges the leftmost occurrence of the pair with
// the lowest rank, as llama.cpp and Tokenscope do.
std::vector<std::string> bpe(std::vector<std::string> pieces,
                             const std::map<std::pair<std::string, std::string>, std::size_t>& ranks)
{
    while (pieces.size() > 1) {
        std::size_t best = pieces.size(), best_rank = 0;
        for (std::size_t i = 0; i + 1 < pieces.size(); ++i) {
            const auto it = ranks.find({pieces[i], pieces[i + 1]});
            if (it != ranks.end() && (best == pieces.size() || it->second < best_rank)) {
                best = i;
                best_rank = it->second;
            }
        }
        if (best == pieces.size())
            break;
        pieces[best] += pieces[best + 1];
        pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    return pieces;
}

// A small GPT-2-style byte-level BPE: the 256 byte tokens (in GPT-2's byte → code point form),
// merges that build a few hundred common English words and pieces (with and without a leading
// space), and three control tokens. Enough for llama.cpp and Tokenscope to tokenize any text.
// Returns the number of tokens.
// The built-in vocabulary, padded with unused tokens to `pad_to` entries when that is larger (the
// presets' embedding matrices have the real models' row counts).
uint32_t set_builtin_vocab(gguf::GgufWriter& w, uint32_t pad_to = 0)
{
    static constexpr std::string_view kWords[] = {
        "the",    "of",     "and",   "to",    "in",     "is",    "that",     "for",   "it",        "as",      "was",
        "with",   "be",     "by",    "on",    "not",    "he",    "she",      "this",  "are",       "or",      "his",
        "her",    "from",   "at",    "which", "but",    "have",  "an",       "had",   "they",      "you",     "were",
        "their",  "one",    "all",   "we",    "can",    "has",   "there",    "been",  "if",        "more",    "when",
        "will",   "would",  "who",   "so",    "no",     "what",  "about",    "out",   "up",        "into",    "than",
        "them",   "time",   "some",  "could", "other",  "like",  "then",     "these", "only",      "new",     "people",
        "just",   "model",  "token", "scope", "hello",  "world", "language", "layer", "attention", "weight",  "test",
        "random", "number", "text",  "word",  "first",  "ing",   "ed",       "er",    "es",        "en",      "re",
        "ly",     "al",     "ion",   "tion",  "ation",  "ment",  "ness",     "able",  "ous",       "ive",     "est",
        "ist",    "ity",    "int",   "def",   "return", "self",  "class",    "void",  "const",     "include", "std",
        "12",     "00",     "10",    "20",    "19",     "2020",  "!",        "?",     ",",         ".",       "...",
        "()",     "{}",     "==",    "->",    "//",     "\n\n",  "The",      "This",  "It",        "In",      "We",
        "Hello",  "What",
    };
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(byte_unicode::encode_byte(static_cast<unsigned char>(b)));
        types.push_back(1); // NORMAL: byte-level BPE vocabularies store bytes as ordinary tokens
    }
    std::set<std::string> known(tokens.begin(), tokens.end());
    std::map<std::pair<std::string, std::string>, std::size_t> ranks;
    std::vector<std::string> merges;
    for (auto word : kWords) {
        for (const bool with_space : {true, false}) {
            // Merges are added until BPE itself (lowest rank first, leftmost first) turns the
            // word into one token: a merge list that merely spells words left to right would
            // not, since an earlier merge inside the word can block the later ones.
            std::vector<std::string> word_pieces;
            if (with_space)
                word_pieces.push_back(byte_unicode::encode_byte(' '));
            for (unsigned char c : word)
                word_pieces.push_back(byte_unicode::encode_byte(c));
            while (true) {
                auto pieces = bpe(word_pieces, ranks);
                if (pieces.size() == 1)
                    break;
                ranks.emplace(std::make_pair(pieces[0], pieces[1]), merges.size());
                merges.push_back(pieces[0] + " " + pieces[1]);
                if (known.insert(pieces[0] + pieces[1]).second) {
                    tokens.push_back(pieces[0] + pieces[1]);
                    types.push_back(1);
                }
            }
        }
    }
    const auto first_special = static_cast<uint32_t>(tokens.size());
    for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
        tokens.emplace_back(special);
        types.push_back(3); // CONTROL
    }
    for (std::size_t i = tokens.size(); i < pad_to; ++i) {
        tokens.push_back(fmt::format("<unused{}>", i));
        types.push_back(5); // UNUSED
    }
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "gpt-2");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", merges);
    w.set_u32("tokenizer.ggml.bos_token_id", first_special); // <|endoftext|>, as in GPT-2
    w.set_u32("tokenizer.ggml.eos_token_id", first_special);
    w.set_u32("tokenizer.ggml.padding_token_id", first_special);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    w.set_bool("tokenizer.ggml.add_eos_token", false);
    return static_cast<uint32_t>(tokens.size());
}

// =============================================================================================
// Architectures
// =============================================================================================

struct ArchSpec {
    std::string_view arch;
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_base, norm_eps;
    uint32_t sliding_window;             // 0: none
    bool qkv_bias;                       // qwen2
    bool qk_norm;                        // qwen3, gemma3
    bool post_norms;                     // gemma3: post_attention_norm, post_ffw_norm
    std::optional<GgmlType> output_type; // nullopt: tied to token_embd
    uint32_t extras = 0;                 // ArchExtra flags: what else sets the architecture apart
    // mixture of experts (kMoe): experts, experts per token, each expert's FFN width (written as
    // expert_feed_forward_length where the architecture reads it, else n_ff is it), shared expert width
    uint32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
};

// shared/reference/architectures.md §0b, as llama.cpp's converters write them.
enum ArchExtra : uint32_t {
    kFusedQkv = 1,         // phi3: attn_qkv; ffn_up holds gate|up
    kNoPreNorms = 2,       // olmo2: no attn_norm / ffn_norm; Q and K norms over the whole row
    kSoftCaps = 4,         // gemma2: attention and final logit soft-caps
    kGraniteScales = 8,    // granite: embedding, residual, attention and logit multipliers
    kYarnTemperature = 16, // mistral3: YaRN RoPE scaling and the query temperature
    kMoe = 32,             // experts instead of the FFN: router, stacked gate/up/down (moe.md §2)
    kQkNormWholeRow = 64,  // olmoe: Q and K norms over the whole row, with pre-norms
};

// ne0 of every K-quant tensor is a multiple of 256 (n_embd, n_ff, n_head·head_dim).
// gemma3's head_dim (128) differs from n_embd / n_head (64) as in the real models, so a loader that
// does not read key_length is caught; six layers give five sliding-window layers and one global.
constexpr ArchSpec kArchs[] = {
    {"llama", 4, 256, 4, 2, 64, 512, 2048, 10000.0f, 1e-5f, 0, false, false, false, GgmlType::Q6_K},
    {"qwen2", 4, 256, 4, 2, 64, 512, 2048, 1000000.0f, 1e-6f, 0, true, false, false, std::nullopt},
    {"qwen3", 4, 256, 4, 2, 64, 512, 2048, 1000000.0f, 1e-6f, 0, false, true, false, GgmlType::F16},
    {"gemma3", 6, 256, 4, 2, 128, 512, 2048, 1000000.0f, 1e-6f, 64, false, true, true, std::nullopt},
    // the architectures of users' models (issue 42): each with what sets it apart. gemma2 alternates
    // local and global layers (window 64) and soft-caps; smollm3's layer 3 has no RoPE; mistral3's
    // original context of 256 puts the 600-token prompt past it (YaRN's mix and the temperature act)
    {"gemma2", 4, 256, 4, 2, 128, 512, 2048, 10000.0f, 1e-6f, 64, false, false, true, std::nullopt, kSoftCaps},
    {"granite", 4, 256, 4, 2, 64, 512, 2048, 10000.0f, 1e-5f, 0, false, false, false, std::nullopt, kGraniteScales},
    {"mistral3", 4, 256, 4, 2, 64, 512, 4096, 1000000.0f, 1e-5f, 0, false, false, false, GgmlType::Q6_K,
     kYarnTemperature},
    {"olmo2", 4, 256, 4, 2, 64, 512, 2048, 500000.0f, 1e-6f, 0, false, true, true, GgmlType::Q6_K, kNoPreNorms},
    {"phi3", 4, 256, 4, 2, 64, 512, 2048, 10000.0f, 1e-5f, 0, false, false, false, GgmlType::Q6_K, kFusedQkv},
    {"smollm3", 4, 256, 4, 2, 64, 512, 2048, 2000000.0f, 1e-6f, 0, false, false, false, std::nullopt},
    // mixture of experts (issue 46): 8 experts each; qwen3moe 2 per token, weights normalised, its own
    // expert width; olmoe 3 per token, not normalised, whole-row Q/K norms, untied head; granitemoe 2 per
    // token, normalised, granite's multipliers and a shared expert. The experts take the layer's FFN
    // types (K-quants: llama.cpp's tiled order from 8 rows; Q4_0/Q4_K: its repacked order)
    {"qwen3moe",     4,    256, 4, 2,   64, 512, 2048, 1000000.0f, 1e-6f, 0, false, true, false,
     GgmlType::Q6_K, kMoe, 8,   2, 256, 0},
    {"olmoe",
     4,
     256,
     4,
     4,
     64,
     512,
     2048,
     10000.0f,
     1e-5f,
     0,
     false,
     true,
     false,
     GgmlType::Q6_K,
     kMoe | kQkNormWholeRow,
     8,
     3,
     512,
     0},
    {"granitemoe",          4, 256, 4,   2,  64, 512, 2048, 10000.0f, 1e-6f, 0, false, false, false, std::nullopt,
     kGraniteScales | kMoe, 8, 2,   512, 256},
};

// Full-size shape twins of published models (their configuration files: hidden size, layers,
// heads, KV heads, head size, FFN size, context, RoPE base, norm epsilon, sliding window), with the
// built-in vocabulary padded to the real vocabulary size: benchmarks of real-sized work where the
// model files cannot travel (bench/gpu_check.sh).
struct PresetSpec {
    std::string_view name;
    ArchSpec spec;
    uint32_t n_vocab;
};
constexpr PresetSpec kPresets[] = {
    // Gemma 3 270M: 18 layers, 640 wide, 4 query heads and 1 KV head of 256, FFN 2048, window 512
    {"gemma3-270m",
     {"gemma3", 18, 640, 4, 1, 256, 2048, 32768, 1000000.0f, 1e-6f, 512, false, true, true, std::nullopt},
     262144},
    // Qwen2.5 0.5B: 24 layers, 896 wide, 14 query heads and 2 KV heads of 64, FFN 4864, Q/K/V biases
    {"qwen2.5-0.5b",
     {"qwen2", 24, 896, 14, 2, 64, 4864, 32768, 1000000.0f, 1e-6f, 0, true, false, false, std::nullopt},
     151936},
    // Qwen3 0.6B: 28 layers, 1024 wide, 16 query heads and 8 KV heads of 128, FFN 3072, Q/K norms,
    // tied head; every matrix width a multiple of 256, so K-quants and IQ4_XS apply everywhere
    {"qwen3-0.6b",
     {"qwen3", 28, 1024, 16, 8, 128, 3072, 40960, 1000000.0f, 1e-6f, 0, false, true, false, std::nullopt},
     151936},
    // Llama 3.1 8B: 32 layers, 4096 wide, 32 query heads and 8 KV heads of 128, FFN 14336, untied head
    {"llama-3.1-8b",
     {"llama", 32, 4096, 32, 8, 128, 14336, 131072, 500000.0f, 1e-5f, 0, false, false, false, GgmlType::Q6_K},
     128256},
    // OLMoE-1B-7B-0924: 16 layers, 2048 wide, 16 heads of 128 (no GQA), 64 experts of 1024, 8 per token,
    // weights not normalised, whole-row Q/K norms, untied head (moe.md §6)
    {"olmoe-1b-7b",
     {"olmoe",  16,    2048, 16,    16,   128,   1024,           4096,
      10000.0f, 1e-5f, 0,    false, true, false, GgmlType::Q6_K, kMoe | kQkNormWholeRow,
      64,       8,     1024, 0},
     50304},
    // Granite 3.1 1B-A400M: 24 layers, 1024 wide, 16 query and 8 KV heads of 64, 32 experts of 512, 8 per
    // token, granite's multipliers, tied head
    {"granite-3.1-1b-a400m",
     {"granitemoe",          24, 1024, 16,  8, 64, 512, 4096, 1500000.0f, 1e-6f, 0, false, false, false, std::nullopt,
      kGraniteScales | kMoe, 32, 8,    512, 0},
     49155},
};

// llama.cpp's fallback for rows that are not whole K-quant super-blocks (Gemma's 640, Qwen's 896).
GgmlType fit_row(GgmlType type, uint64_t row)
{
    if (row % 256 == 0)
        return type;
    switch (type) {
    case GgmlType::Q4_K:
        return GgmlType::Q5_0;
    case GgmlType::Q5_K:
        return GgmlType::Q5_1;
    case GgmlType::Q6_K:
        return GgmlType::Q8_0;
    default:
        return type;
    }
}

// llama.cpp's llama_ftype for a file whose matrices all have one type (the K-quants' "_M" variants).
uint32_t file_type_of(GgmlType type)
{
    switch (type) {
    case GgmlType::F32:
        return 0;
    case GgmlType::F16:
        return 1;
    case GgmlType::Q4_0:
        return 2;
    case GgmlType::Q4_1:
        return 3;
    case GgmlType::Q8_0:
        return 7;
    case GgmlType::Q5_0:
        return 8;
    case GgmlType::Q5_1:
        return 9;
    case GgmlType::Q2_K:
        return 10;
    case GgmlType::Q3_K:
        return 12;
    case GgmlType::Q4_K:
        return 15;
    case GgmlType::Q5_K:
        return 17;
    case GgmlType::Q6_K:
        return 18;
    case GgmlType::IQ4_NL:
        return 25;
    case GgmlType::IQ4_XS:
        return 30;
    case GgmlType::BF16:
        return 32;
    default:
        return 15;
    }
}

// A Q4_K_M-like mix that varies with the layer so that every common kernel is exercised.
struct LayerTypes {
    GgmlType q, k, v, o, gate, up, down;
};

LayerTypes layer_types(uint32_t il)
{
    const bool even = il % 2 == 0;
    static constexpr GgmlType kFfn[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q5_0};
    const GgmlType ffn = kFfn[il % 3];
    return {GgmlType::Q4_K,
            GgmlType::Q4_K,
            even ? GgmlType::Q6_K : GgmlType::Q8_0,
            even ? GgmlType::Q4_K : GgmlType::Q5_0,
            ffn,
            ffn,
            even ? GgmlType::Q6_K : GgmlType::Q4_0};
}

} // namespace

// =============================================================================================
// Public
// =============================================================================================

void fill_random_tensor(std::span<std::byte> out, GgmlType type, bool unit, uint64_t seed, uint64_t stream)
{
    uint64_t s = seed;
    uint64_t t = splitmix64(s) ^ stream;
    Xoshiro256 rng(splitmix64(t));
    std::byte* p = out.data();
    const std::size_t n = out.size();
    const auto value = [&] { return unit ? unit_value(rng) : small_value(rng); };
    switch (type) {
    case GgmlType::F32:
        for (std::size_t i = 0; i + 4 <= n; i += 4)
            put_le(p + i, std::bit_cast<uint32_t>(value()), 4);
        return;
    case GgmlType::F16:
        for (std::size_t i = 0; i + 2 <= n; i += 2)
            put_le(p + i, f32_to_f16(value()), 2);
        return;
    case GgmlType::BF16:
        for (std::size_t i = 0; i + 2 <= n; i += 2)
            put_le(p + i, f32_to_bf16(value()), 2);
        return;
    case GgmlType::F64:
        for (std::size_t i = 0; i + 8 <= n; i += 8)
            put_le(p + i, std::bit_cast<uint64_t>(static_cast<double>(value())), 8);
        return;
    case GgmlType::I8:
    case GgmlType::I16:
    case GgmlType::I32:
    case GgmlType::I64: {
        // Integer tensors (rare; e.g. index tables): small non-negative values.
        const std::size_t width = type == GgmlType::I8 ? 1 : type == GgmlType::I16 ? 2 : type == GgmlType::I32 ? 4 : 8;
        for (std::size_t i = 0; i + width <= n; i += width)
            put_le(p + i, rng.below(16), static_cast<int>(width));
        return;
    }
    default:
        break;
    }
    const auto traits = ggml_type_traits(type);
    for (std::size_t at = 0; at + traits.block_bytes <= n; at += traits.block_bytes)
        fill_block(type, rng, p + at, traits.block_bytes);
}

namespace {
// The names of a table's entries, in its order.
template <typename Entry, std::size_t N>
std::vector<std::string> names_of(const Entry (&table)[N], std::string_view (*name)(const Entry&))
{
    std::vector<std::string> v;
    for (const Entry& e : table)
        v.emplace_back(name(e));
    return v;
}
} // namespace

const std::vector<std::string>& test_model_architectures()
{
    static const auto names = names_of(
        kArchs, +[](const ArchSpec& a) { return a.arch; });
    return names;
}

gguf::GgufWriter make_test_model_like(const gguf::GgufFile& like, uint64_t seed)
{
    gguf::GgufWriter w;
    for (const auto& e : like.metadata())
        w.set_value(e.key, e.value);
    for (const auto& t : like.tensors()) {
        const std::vector<uint64_t> dims(t.ne.begin(), t.ne.begin() + std::max<uint32_t>(t.n_dims, 1));
        w.add_tensor(t.name, t.type.type, dims,
                     random_fill(t.type.type, wants_unit_values(t.name, t.n_dims), seed, t.name));
    }
    return w;
}

namespace {
gguf::GgufWriter make_test_model_impl(std::string_view arch, uint64_t seed, const gguf::GgufFile* vocab,
                                      const TestModelShape* shape, const PresetSpec* preset = nullptr);
} // namespace

gguf::GgufWriter make_test_model(std::string_view arch, uint64_t seed, const gguf::GgufFile* vocab)
{
    return make_test_model_impl(arch, seed, vocab, nullptr);
}

gguf::GgufWriter make_test_model(std::string_view arch, uint64_t seed, const TestModelShape& shape,
                                 const gguf::GgufFile* vocab)
{
    return make_test_model_impl(arch, seed, vocab, &shape);
}

const std::vector<std::string>& test_model_presets()
{
    static const auto names = names_of(
        kPresets, +[](const PresetSpec& p) { return p.name; });
    return names;
}

gguf::GgufWriter make_test_model_preset(std::string_view name, uint64_t seed, std::optional<GgmlType> matrix_type)
{
    TestModelShape shape;
    shape.matrix_type = matrix_type;
    for (const auto& p : kPresets)
        if (p.name == name)
            return make_test_model_impl(p.spec.arch, seed, nullptr, matrix_type ? &shape : nullptr, &p);
    std::string known;
    for (const auto& n : test_model_presets())
        known += (known.empty() ? "" : ", ") + n;
    throw UnsupportedError(fmt::format("no test-model preset named '{}' (presets: {})", name, known));
}

namespace {
gguf::GgufWriter make_test_model_impl(std::string_view arch, uint64_t seed, const gguf::GgufFile* vocab,
                                      const TestModelShape* shape, const PresetSpec* preset)
{
    const ArchSpec* spec = preset ? &preset->spec : nullptr;
    for (const auto& a : kArchs)
        if (!spec && a.arch == arch)
            spec = &a;
    if (!spec) {
        std::string known;
        for (const auto& a : test_model_architectures())
            known += (known.empty() ? "" : ", ") + a;
        throw UnsupportedError(
            fmt::format("cannot generate a test model of architecture '{}' (supported: {})", arch, known));
    }
    ArchSpec s = *spec;
    if (shape) {
        s.n_layer = shape->n_layer.value_or(s.n_layer);
        s.n_embd = shape->n_embd.value_or(s.n_embd);
        s.n_head = shape->n_head.value_or(s.n_head);
        s.n_head_kv = shape->n_head_kv.value_or(s.n_head_kv);
        s.head_dim = shape->head_dim.value_or(s.head_dim);
        s.n_ff = shape->n_ff.value_or(s.n_ff);
        if (shape->n_ff && s.n_expert && s.arch != "qwen3moe") // their experts are feed_forward_length wide
            s.n_ff_exp = s.n_ff;
        if (s.output_type)
            s.output_type = GgmlType::F32;
    }
    const std::string p = std::string(s.arch) + ".";

    gguf::GgufWriter w;
    w.set_string("general.architecture", s.arch);
    w.set_string("general.type", "model");
    // (phi3 as "phi_3": llama.cpp sets token attributes for models whose name says "phi3" or "phi-3",
    // by tokens such as </s> that the built-in vocabulary does not have, and refuses the file)
    w.set_string("general.name", preset ? fmt::format("tokenscope-twin-{}", preset->name)
                                        : fmt::format("tokenscope-test-{}", s.arch == "phi3" ? "phi_3" : s.arch));
    w.set_string(
        "general.description",
        fmt::format("Random weights for tests and benchmarks, generated by tokenscope make-test-model (seed {})",
                    seed));
    // informational (llama.cpp's llama_ftype): the mix below resembles Q4_K_M, or one type throughout
    w.set_u32("general.file_type", shape && shape->matrix_type ? file_type_of(*shape->matrix_type) : 15);
    w.set_u32("general.quantization_version", 2);
    w.set_u32(p + "context_length", s.n_ctx);
    w.set_u32(p + "embedding_length", s.n_embd);
    w.set_u32(p + "block_count", s.n_layer);
    w.set_u32(p + "feed_forward_length", s.n_ff);
    w.set_u32(p + "attention.head_count", s.n_head);
    w.set_u32(p + "attention.head_count_kv", s.n_head_kv);
    w.set_u32(p + "attention.key_length", s.head_dim);
    w.set_u32(p + "attention.value_length", s.head_dim);
    w.set_u32(p + "rope.dimension_count", s.head_dim); // llama requires n_rot = head_dim
    w.set_f32(p + "rope.freq_base", s.rope_base);
    w.set_f32(p + "attention.layer_norm_rms_epsilon", s.norm_eps);
    if (s.sliding_window)
        w.set_u32(p + "attention.sliding_window", s.sliding_window);
    if (s.extras & kSoftCaps) {
        w.set_f32(p + "attn_logit_softcapping", 50.0f);
        w.set_f32(p + "final_logit_softcapping", 30.0f);
    }
    if (s.extras & kGraniteScales) { // Granite 3's values (architectures.md §3)
        w.set_f32(p + "embedding_scale", 12.0f);
        w.set_f32(p + "residual_scale", 0.22f);
        w.set_f32(p + "attention.scale", 0.015625f);
        w.set_f32(p + "logit_scale", 6.0f);
    }
    if (s.extras & kMoe) {
        w.set_u32(p + "expert_count", s.n_expert);
        w.set_u32(p + "expert_used_count", s.n_expert_used);
        if (s.arch == "qwen3moe")
            w.set_u32(p + "expert_feed_forward_length", s.n_ff_exp);
        if (s.n_ff_shexp)
            w.set_u32(p + "expert_shared_feed_forward_length", s.n_ff_shexp);
    }
    if (s.extras & kYarnTemperature) { // Ministral 3's kind, with a short original context
        w.set_string(p + "rope.scaling.type", "yarn");
        w.set_f32(p + "rope.scaling.factor", 16.0f);
        w.set_u32(p + "rope.scaling.original_context_length", 256);
        w.set_f32(p + "rope.scaling.yarn_beta_fast", 32.0f);
        w.set_f32(p + "rope.scaling.yarn_beta_slow", 1.0f);
        w.set_f32(p + "rope.scaling.yarn_log_multiplier", 1.0f);
        w.set_f32(p + "attention.temperature_scale", 0.1f);
    }

    uint64_t n_vocab = 0;
    if (vocab) {
        for (const auto& e : vocab->metadata())
            if (e.key.starts_with("tokenizer."))
                w.set_value(e.key, e.value);
        const auto* tokens = vocab->get_array("tokenizer.ggml.tokens");
        if (!tokens || tokens->count == 0)
            throw FormatError(
                fmt::format("{}: has no tokenizer.ggml.tokens to take the vocabulary from", vocab->name()));
        n_vocab = tokens->count;
    } else {
        n_vocab = set_builtin_vocab(w, preset ? preset->n_vocab : shape ? shape->n_vocab.value_or(0) : 0);
        if (!preset && shape && shape->n_vocab && n_vocab != *shape->n_vocab)
            throw UnsupportedError(fmt::format("a vocabulary of {} tokens: the built-in one has {} and is only padded",
                                               *shape->n_vocab, n_vocab));
    }

    const bool reshaped = shape && (shape->n_layer || shape->n_embd || shape->n_head || shape->n_head_kv ||
                                    shape->head_dim || shape->n_ff);
    const std::optional<GgmlType> matrix_type = shape ? shape->matrix_type : std::nullopt;
    const auto add = [&](const std::string& name, GgmlType type, std::vector<uint64_t> dims) {
        if (name.ends_with("ffn_gate_inp.weight")) { // the router: never quantized (llama-quantize)
            w.add_tensor(name, GgmlType::F32, dims, random_fill(GgmlType::F32, false, seed, name));
            return;
        }
        if (matrix_type && dims.size() >= 2) {
            const auto traits = ggml_type_traits(*matrix_type);
            if (dims[0] % traits.block_elements != 0)
                throw UnsupportedError(fmt::format("{} rows of {} values are not whole {} blocks of {}", name, dims[0],
                                                   traits.name, traits.block_elements));
            type = *matrix_type;
        } else {
            if (reshaped)
                type = GgmlType::F32; // any width is a valid F32 row
            type = fit_row(type, dims[0]);
        }
        const bool unit = wants_unit_values(name, static_cast<uint32_t>(dims.size()));
        w.add_tensor(name, type, dims, random_fill(type, unit, seed, name));
    };
    const uint64_t q_dim = uint64_t{s.n_head} * s.head_dim;
    const uint64_t kv_dim = uint64_t{s.n_head_kv} * s.head_dim;
    add("token_embd.weight", GgmlType::Q8_0, {s.n_embd, n_vocab});
    if (s.output_type)
        add("output.weight", *s.output_type, {s.n_embd, n_vocab});
    add("output_norm.weight", GgmlType::F32, {s.n_embd});
    for (uint32_t il = 0; il < s.n_layer; ++il) {
        const std::string b = fmt::format("blk.{}.", il);
        const LayerTypes t = layer_types(il);
        const bool pre_norms = !(s.extras & kNoPreNorms);
        if (pre_norms)
            add(b + "attn_norm.weight", GgmlType::F32, {s.n_embd});
        if (s.extras & kFusedQkv) {
            add(b + "attn_qkv.weight", t.q, {s.n_embd, q_dim + 2 * kv_dim});
        } else {
            add(b + "attn_q.weight", t.q, {s.n_embd, q_dim});
            if (s.qkv_bias)
                add(b + "attn_q.bias", GgmlType::F32, {q_dim});
            add(b + "attn_k.weight", t.k, {s.n_embd, kv_dim});
            if (s.qkv_bias)
                add(b + "attn_k.bias", GgmlType::F32, {kv_dim});
            add(b + "attn_v.weight", t.v, {s.n_embd, kv_dim});
            if (s.qkv_bias)
                add(b + "attn_v.bias", GgmlType::F32, {kv_dim});
        }
        add(b + "attn_output.weight", t.o, {q_dim, s.n_embd});
        if (s.qk_norm) { // per head, or over the whole row (olmo2 without pre-norms, olmoe with them)
            const bool whole_row = !pre_norms || (s.extras & kQkNormWholeRow);
            add(b + "attn_q_norm.weight", GgmlType::F32, {whole_row ? q_dim : s.head_dim});
            add(b + "attn_k_norm.weight", GgmlType::F32, {whole_row ? kv_dim : s.head_dim});
        }
        if (s.post_norms)
            add(b + "post_attention_norm.weight", GgmlType::F32, {s.n_embd});
        if (pre_norms)
            add(b + "ffn_norm.weight", GgmlType::F32, {s.n_embd});
        if (s.extras & kMoe) {
            add(b + "ffn_gate_inp.weight", GgmlType::F32, {s.n_embd, s.n_expert});
            add(b + "ffn_gate_exps.weight", t.gate, {s.n_embd, s.n_ff_exp, s.n_expert});
            add(b + "ffn_up_exps.weight", t.up, {s.n_embd, s.n_ff_exp, s.n_expert});
            add(b + "ffn_down_exps.weight", t.down, {s.n_ff_exp, s.n_embd, s.n_expert});
            if (s.n_ff_shexp) {
                add(b + "ffn_gate_shexp.weight", t.gate, {s.n_embd, s.n_ff_shexp});
                add(b + "ffn_up_shexp.weight", t.up, {s.n_embd, s.n_ff_shexp});
                add(b + "ffn_down_shexp.weight", t.down, {s.n_ff_shexp, s.n_embd});
            }
        } else if (s.extras & kFusedQkv) {
            add(b + "ffn_up.weight", t.up, {s.n_embd, 2 * uint64_t{s.n_ff}});
        } else {
            add(b + "ffn_gate.weight", t.gate, {s.n_embd, s.n_ff});
            add(b + "ffn_up.weight", t.up, {s.n_embd, s.n_ff});
        }
        if (!(s.extras & kMoe))
            add(b + "ffn_down.weight", t.down, {s.n_ff, s.n_embd});
        if (s.post_norms)
            add(b + "post_ffw_norm.weight", GgmlType::F32, {s.n_embd});
    }
    return w;
}

} // namespace

} // namespace engine
