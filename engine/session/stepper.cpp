// SPDX-License-Identifier: GPL-3.0-or-later
#include "session/stepper.h"

#include "util/error.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace engine {

namespace {

// The n most probable tokens of a full softmax over logits, best first (ties: lowest id).
std::vector<Candidate> top_of_softmax(std::span<const float> logits, std::size_t n)
{
    float max = -INFINITY;
    for (float l : logits)
        max = std::max(max, l);
    double z = 0.0;
    for (float l : logits)
        z += std::exp(static_cast<double>(l - max));
    std::vector<int32_t> ids(logits.size());
    for (std::size_t i = 0; i < ids.size(); ++i)
        ids[i] = static_cast<int32_t>(i);
    n = std::min(n, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
    std::vector<Candidate> top;
    for (std::size_t i = 0; i < n; ++i) {
        const float l = logits[ids[i]];
        top.push_back({ids[i], l, static_cast<float>(std::exp(static_cast<double>(l - max)) / z)});
    }
    return top;
}

} // namespace

Stepper::Stepper(Session& session) : m_session(session)
{
    m_capture.residuals = true;
}

PrefillReport Stepper::start(std::span<const TokenId> prompt, StopCondition stop, const PrefillProgress& progress)
{
    m_prefill = m_session.prefill(prompt, &m_capture, progress);
    m_steps.clear();
    m_undone.clear();
    m_branches.clear();
    m_stop = std::move(stop);
    m_stop_reason = StopReason::None;
    m_prompt_length = m_prefill.cancelled ? 0 : static_cast<uint32_t>(prompt.size());
    keep_last_residuals();
    return m_prefill;
}

namespace {

uint64_t seed_for(uint64_t seed, std::size_t position)
{
    // splitmix64 of (seed, position): neighbouring positions get unrelated streams.
    uint64_t x = seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(position) + 1);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

} // namespace

SampleResult Stepper::sample_at(std::span<const float> logits, std::span<const TokenId> history,
                                const SamplerConfig& config)
{
    Sampler sampler(config);
    sampler.reseed(seed_for(config.seed, history.size()));
    return sampler.sample(logits, history);
}

SampleResult Stepper::preview(const SamplerConfig& config) const
{
    if (!started())
        throw Error("the stepper has no prompt yet: press Prefill first");
    return sample_at(m_session.logits(), m_session.tokens(), config);
}

const StepRecord& Stepper::step(const SamplerConfig& config, std::optional<TokenId> forced)
{
    const auto s0 = std::chrono::steady_clock::now();
    const SampleResult drawn = preview(config);
    StepRecord record;
    record.sample_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
    record.position = static_cast<uint32_t>(m_session.tokens().size());
    record.forced = forced.has_value();
    record.token = forced.value_or(drawn.token);
    if (record.token < 0 || static_cast<std::size_t>(record.token) >= m_session.model().tokenizer().vocab().size())
        throw Error("token id " + std::to_string(record.token) + " is not in the vocabulary");
    record.probability = 0.0f;
    if (!drawn.stages.empty()) {
        for (const Candidate& c : drawn.stages.back().top)
            if (c.id == record.token)
                record.probability = c.probability;
    } else if (record.token == drawn.token) {
        record.probability = drawn.probability;
    }
    record.reused = record.position;
    const auto t0 = std::chrono::steady_clock::now();
    m_session.decode(record.token, &m_capture);
    record.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    keep_last_residuals();

    // Walking the same path again after Back is not a branch; choosing differently abandons it.
    if (!m_undone.empty()) {
        if (m_undone.back() == record.token) {
            m_undone.pop_back();
        } else {
            StepperBranch branch{record.position, {m_undone.rbegin(), m_undone.rend()}};
            m_branches.push_back(std::move(branch));
            m_undone.clear();
        }
    }
    m_steps.push_back(record);
    const std::vector<TokenId> ids = generated_ids();
    m_stop_reason = m_stop.check(record.token, m_session.model().tokenizer().decode(ids), ids.size());
    return m_steps.back();
}

bool Stepper::back()
{
    if (m_steps.empty())
        return false;
    m_undone.push_back(m_steps.back().token);
    m_steps.pop_back();
    m_session.truncate(static_cast<uint32_t>(m_session.tokens().size()) - 1, &m_capture);
    keep_last_residuals();
    m_stop_reason = StopReason::None;
    return true;
}

void Stepper::set_attention_capture(const CaptureRequest& heads)
{
    m_capture.heads = heads.heads;
    m_capture.all_heads = heads.all_heads;
}

std::vector<TokenId> Stepper::generated_ids() const
{
    const auto& all = m_session.tokens();
    return {all.begin() + std::min<std::size_t>(m_prompt_length, all.size()), all.end()};
}

std::string Stepper::generated_text() const
{
    return m_session.model().tokenizer().decode(generated_ids());
}

void Stepper::keep_last_residuals()
{
    m_residuals.clear();
    const auto& captures = m_session.last_captures();
    if (!captures)
        return;
    const std::size_t E = m_session.model().config().n_embd;
    for (const auto& layer : captures->residuals)
        if (layer.size() >= E)
            m_residuals.emplace_back(layer.end() - static_cast<std::ptrdiff_t>(E), layer.end());
}

std::vector<LensRow> Stepper::logit_lens(std::size_t top_n)
{
    if (m_residuals.empty())
        throw Error("the logit lens needs a forward pass with residual capture: press Prefill first");
    std::vector<LensRow> rows;
    for (std::size_t il = 0; il < m_residuals.size(); ++il) {
        const std::vector<float> logits = m_session.backend().project_to_vocab(m_residuals[il]);
        rows.push_back({static_cast<uint32_t>(il), top_of_softmax(logits, top_n)});
    }
    return rows;
}

} // namespace engine
