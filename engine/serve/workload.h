// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Simulated clients for the serving lab: when each request arrives, how long its prompt and reply
// are, and which requests begin with a common system prompt — or a list of real prompts. Prompts are
// real text (a built-in passage, tokenized by the model's own tokenizer), so the engine computes what
// a model would really be asked.
#include "serve/serving_engine.h"
#include "tokenizer/tokenizer.h"

#include <string>
#include <vector>

namespace engine {

struct WorkloadSpec {
    uint32_t clients = 16;
    double arrival_rate = 8.0; // requests per second (exponential gaps); 0: all at once
    uint32_t prompt_min = 32, prompt_max = 96;
    uint32_t output_min = 16, output_max = 48;
    double shared_fraction = 0.5;     // share of requests that begin with the common system prompt
    uint32_t shared_tokens = 64;      // its length in tokens
    std::vector<std::string> prompts; // real prompts (cycled) instead of generated ones; lengths as they are
    float temperature = 0.0f;         // 0: greedy
    // Replies drawn from each prompt (parallel sampling): the replies share the prompt's blocks and
    // copy the last one when they first write into it (copy on write). Sampled: give a temperature.
    uint32_t samples = 1;
    uint64_t seed = 1;
};

// Throws Error for a range that is empty or upside down, or a share outside 0 … 1.
void validate_workload(const WorkloadSpec& spec);
std::vector<ServeRequest> make_workload(const WorkloadSpec& spec, const Tokenizer& tokenizer);

// The same workload as text, for a server (which tokenizes it itself): the same arrivals, reply
// lengths, shares and seeds as make_workload with that spec; a generated prompt is `n` words of the
// built-in passage (a word is one or two tokens for the usual tokenizers), the common system prompt
// `shared_tokens` words. Parallel sampling becomes `samples` requests of the same prompt.
struct TextRequest {
    std::string prompt;
    uint32_t max_new_tokens = 16;
    double arrival_s = 0.0;
    float temperature = 0.0f;
    uint64_t seed = 0;
    uint32_t prompt_words = 0; // of the text (the server counts its tokens)
};
std::vector<TextRequest> make_text_workload(const WorkloadSpec& spec);

} // namespace engine
