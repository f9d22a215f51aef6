// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What the speculation view and its client exchange: the comparison asked for (a prompt, a draft
// source, k, the sampling), and its result as an immutable snapshot — after every speculative step
// while it runs, then with the plain loop's figures beside it.
#include "sampling/sampling_settings.h"
#include "speculative/speculative.h"

#include <QMetaType>
#include <QString>
#include <map>
#include <memory>
#include <vector>

namespace engine {
class Tokenizer;
}

namespace tokenscope::ui {

struct SpeculationSettings {
    QString prompt;
    // The chat's last request instead of `prompt`: its whole prompt (every turn, as the template
    // rendered it) and as many tokens as its reply had.
    bool from_chat = false;
    QString source = "lookup"; // engine::DraftSource text: lookup, early-exit:L, draft:FILE
    int draft_max = 4;
    int tokens = 48;
    engine::SamplingSettings sampling{.temperature = 0.0f}; // ≤ 0: greedy
};

struct SpeculationSnapshot {
    quint64 request_id = 0;
    QString error;
    bool cancelled = false;
    bool finished = false; // false: a step of a run still going (the plain loop has not run yet)
    SpeculationSettings settings;
    QString model, drafter, backend;
    bool deterministic = false;
    int prompt_tokens = 0;
    std::vector<int32_t> prompt_ids;
    QString prompt_text; // what was continued (the chat's rendered prompt for from_chat)
    engine::SpeculativeResult result;
    std::vector<int32_t> plain_tokens; // the plain loop's, same prompt and seed (once finished)
    std::vector<engine::TokenChoice> plain_choices;
    double speculative_s = 0, plain_s = 0;
    int parted = -1;                   // greedy: the first token where the two differ (−1: none)
    std::map<int32_t, QString> pieces; // every token shown, as the panels show tokens

    QString piece(int32_t id) const
    {
        const auto it = pieces.find(id);
        return it != pieces.end() ? it->second : QString::number(id);
    }
    double tokensPerSecond() const { return speculative_s > 0 ? double(result.tokens.size()) / speculative_s : 0; }
    double plainTokensPerSecond() const { return plain_s > 0 ? double(plain_tokens.size()) / plain_s : 0; }
    double speedup() const { return plainTokensPerSecond() > 0 ? tokensPerSecond() / plainTokensPerSecond() : 0; }
};

// Fills `pieces` with every token the snapshot shows, as the panels show tokens.
void fill_pieces(SpeculationSnapshot& s, const engine::Tokenizer& tokenizer);

} // namespace tokenscope::ui

Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::SpeculationSnapshot>)
