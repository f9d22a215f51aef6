// SPDX-License-Identifier: GPL-3.0-or-later
#include "sampling_option.h"

void add_sampling_options(CLI::App* cmd, engine::SamplingSettings& a)
{
    cmd->add_option("--temp", a.temperature, "Temperature (0: greedy)")->capture_default_str();
    cmd->add_option("--top-k", a.top_k, "Top-k (0: off)")->capture_default_str();
    cmd->add_option("--top-p", a.top_p, "Top-p (1: off)")->capture_default_str();
    cmd->add_option("--min-p", a.min_p, "Min-p (0: off)")->capture_default_str();
    cmd->add_option("--repeat-penalty", a.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
    cmd->add_option("-s,--seed", a.seed, "Random seed")->capture_default_str();
}

void add_n_predict_option(CLI::App* cmd, int32_t& n, const std::string& what)
{
    cmd->add_option("-n,--n-predict", n, what + " (0: none, only the prompt is read; -1: no limit)")
        ->check(CLI::Range(-1, INT32_MAX))
        ->capture_default_str();
}
