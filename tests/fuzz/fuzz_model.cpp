// SPDX-License-Identifier: GPL-3.0-or-later
// Structure-aware fuzzer of the model loader and the forward pass: the input picks the shape of a
// small random-weight model (layers, width, heads, KV heads, head dimension, FFN width) and then a
// series of hyperparameter edits (each key set to 0, 1, an odd or prime size, a huge value, NaN,
// Inf, a negative or a random one), the file is written, loaded and run for a few tokens on the
// CPU backend. Every input must end in finite logits or a typed engine::Error; under ASan/UBSan any
// out-of-bounds access or undefined arithmetic is a crash the fuzzer reports.
#include "backend/backend.h"
#include "model/model.h"
#include "model/test_model.h"
#include "session/session.h"
#include "util/error.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <unistd.h>

namespace {

struct Bytes {
    const uint8_t* p;
    size_t n;
    uint8_t next() { return n ? (--n, *p++) : 0; }
    uint32_t u32()
    {
        return uint32_t(next()) | uint32_t(next()) << 8 | uint32_t(next()) << 16 | uint32_t(next()) << 24;
    }
};

const char* const kKeys[] = {
    "block_count",          "embedding_length",         "attention.head_count", "attention.head_count_kv",
    "attention.key_length", "attention.value_length",   "feed_forward_length",  "rope.dimension_count",
    "context_length",       "attention.sliding_window",
};
const char* const kFloatKeys[] = {"rope.freq_base", "attention.layer_norm_rms_epsilon", "rope.scaling.factor",
                                  "final_logit_softcapping"};
const char* const kTokenKeys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                  "tokenizer.ggml.padding_token_id"};

uint32_t pick_count(Bytes& in)
{
    switch (in.next() % 8) {
    case 0:
        return 0;
    case 1:
        return 1;
    case 2:
        return 2 + in.next() % 7 * 2 + 1; // odd
    case 3: {
        constexpr uint32_t primes[] = {3, 5, 7, 11, 13, 17, 37, 101};
        return primes[in.next() % 8];
    }
    case 4:
        return 0xFFFFFFFFu;
    case 5:
        return 1u << (in.next() % 32);
    case 6:
        return 8u * (1 + in.next() % 16);
    default:
        return in.u32();
    }
}

float pick_float(Bytes& in)
{
    switch (in.next() % 7) {
    case 0:
        return 0.0f;
    case 1:
        return std::numeric_limits<float>::quiet_NaN();
    case 2:
        return std::numeric_limits<float>::infinity();
    case 3:
        return -1.0f;
    case 4:
        return 1e-30f;
    case 5:
        return 1e30f;
    default: {
        const uint32_t b = in.u32();
        float f;
        static_assert(sizeof f == 4);
        __builtin_memcpy(&f, &b, 4);
        return f;
    }
    }
}

std::string scratch_path()
{
    static const std::string path = [] {
        const char* dir = std::getenv("TMPDIR");
        return std::string(dir && *dir ? dir : "/tmp") + "/tokenscope-fuzz-model-" + std::to_string(::getpid()) +
               ".gguf";
    }();
    return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    Bytes in{data, size};
    const char* arch = (in.next() & 1) ? "llama" : "qwen2";
    engine::TestModelShape shape;
    shape.n_layer = 1 + in.next() % 3;
    shape.n_embd = 1 + in.next() % 64;
    shape.n_head = 1 + in.next() % 6;
    shape.n_head_kv = 1 + in.next() % 6;
    shape.head_dim = 1 + in.next() % 40;
    shape.n_ff = 1 + in.next() % 96;
    try {
        engine::gguf::GgufWriter w = engine::make_test_model(arch, in.next(), shape);
        const std::string p = std::string(arch) + ".";
        for (int edits = in.next() % 5; edits > 0; --edits) {
            switch (in.next() % 3) {
            case 0:
                w.set_u32(p + kKeys[in.next() % std::size(kKeys)], pick_count(in));
                break;
            case 1:
                w.set_f32(p + kFloatKeys[in.next() % std::size(kFloatKeys)], pick_float(in));
                break;
            default:
                w.set_i32(kTokenKeys[in.next() % std::size(kTokenKeys)], int32_t(in.u32() % 2048) - 1024);
                break;
            }
        }
        w.write(scratch_path());
        const auto model = engine::Model::load(scratch_path());
        engine::Session session(model, engine::make_cpu_backend(model, {.threads = 1, .n_ctx = 64}));
        const std::vector<engine::TokenId> prompt{1, 2, 3};
        session.prefill(prompt);
        session.decode(4);
        for (float v : session.logits())
            if (!std::isfinite(v))
                __builtin_trap(); // a non-finite logit must have been an Error
    } catch (const engine::Error&) {
    }
    return 0;
}
