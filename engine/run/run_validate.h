// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The one check between a saved run's bytes and the panels. A run is shared like a document — a
// lesson sent to a class — so it is untrusted: its document is checked as a whole before any panel
// sees it. Every array's length against the counts that index it, every id against the saved
// vocabulary, every number in its range, every size against the limits below (README: "Saved runs",
// limits). Each limit is above what a legitimate run of that size produces; a refusal names the field
// and the limit.

#include "run/run_document.h"

#include <cstddef>
#include <cstdint>

namespace engine {
class Tokenizer;
}

namespace engine::run {

struct RunLimits {
    // One sequence: the stepper's tokens, its history and distributions, the timeline's steps. A
    // 128K-context model's whole context.
    static constexpr int64_t kSequenceTokens = 131072;
    // Tokens of a text analysis (read in windows, so not bounded by a context).
    static constexpr int64_t kAnalysisTokens = 65536;
    // Tokens of a recorded attention (the app records up to 2,048; the CLI's trace the sequence).
    static constexpr int64_t kAttentionTokens = 8192;
    static constexpr int64_t kContextTokens = int64_t(1) << 24; // the largest context the engine makes
    static constexpr int64_t kKvBlockCells = int64_t(1) << 22;  // layers × blocks drawn in the KV view
    static constexpr int64_t kLayers = 1024;
    static constexpr int64_t kHeadsPerLayer = 1024;
    static constexpr int64_t kHeads = 65536; // layers × heads of one snapshot
    static constexpr int64_t kHeadDim = 4096;
    static constexpr int64_t kVocabulary = int64_t(1) << 22; // logits of one step
    static constexpr int64_t kEmbedding = 65536;             // a steering direction
    static constexpr int64_t kCandidates = 4096;             // of one sampling stage, lens row or list
    static constexpr int64_t kStages = 32;
    static constexpr int64_t kGridCells = int64_t(1) << 21;         // a patching grid: layers × columns
    static constexpr int64_t kListEntries = 4096;                   // stop strings, branches, attribution parts
    static constexpr std::size_t kTokenTextBytes = 4096;            // one token's text, a label, a name
    static constexpr std::size_t kTextBytes = std::size_t(1) << 20; // a generated, steered or analysed text
    static constexpr int64_t kTimelineEvents = 8 * kSequenceTokens + 64;
    static constexpr int64_t kTimelineSpanNs = int64_t(7) * 24 * 3600 * 1000000000; // one week
    static constexpr uint64_t kBytes = uint64_t(1) << 56;                           // any byte count
};

// Throws FormatError ("the run is refused: stepper.tokens[7].id is 300000, outside the saved
// vocabulary of 262144 tokens") for the first field that breaks a rule. `vocabulary` may be null
// (a run saved without one): ids are then only checked to be non-negative.
void validate(const Document& doc, const Tokenizer* vocabulary);

// What every reader of a saved run calls: the opened file's document parsed and validated against its
// own saved vocabulary, so that no caller can take the document without the checks.
Document checked_document(const OpenedRun& opened);

} // namespace engine::run
