// SPDX-License-Identifier: GPL-3.0-or-later
// Structure-aware fuzzer of the saved-run reader: the input is a series of edits to a valid run's
// document and tensors (tests/support/run_mutator), the result is signed again as an attacker would
// and read as the app reads it (file, checksum, document types, validator), with no widgets. Every
// input must end in a refusal (engine::FormatError) or a document the panels can index: for those the
// fuzzer walks every index the panels make (under ASan/UBSan an access outside the data is a crash)
// and writes it again, which must read back valid.
#include "run/run_document.h"
#include "run/run_file.h"
#include "run/run_validate.h"
#include "run_mutator.h"
#include "util/error.h"

#include <cstddef>
#include <cstdint>

namespace {

volatile double g_sink = 0; // keeps the reads below from being optimised away

// The panels' indexing, as a checklist: what the validator lets through must hold it.
void index_like_the_panels(const engine::run::Document& d)
{
    if (d.attention) {
        const auto& a = *d.attention;
        for (const auto& h : a.heads) {
            const std::size_t n = std::size_t(h.n);
            if (n) {
                g_sink = g_sink + h.weights[n * n - 1] + a.tokens[n - 1].probability;
                g_sink = g_sink + h.q[n * std::size_t(h.head_dim) - 1] + h.k.back() + h.v.back();
            }
            g_sink = g_sink + a.heads_per_layer[std::size_t(h.layer)] + a.window[std::size_t(h.layer)];
        }
    }
    for (const auto* heads : {d.head_classes ? &*d.head_classes : nullptr, d.head_scan ? &*d.head_scan : nullptr})
        if (heads)
            for (int l = 0; l < heads->n_layers; ++l)
                for (int h = 0; h < heads->n_heads; ++h)
                    g_sink = g_sink + heads->heads[std::size_t(l * heads->n_heads + h)].kl;
    if (d.patching) {
        const auto& p = *d.patching;
        for (int l = 0; l < p.n_layers; ++l)
            for (int c = 0; c < p.n_columns; ++c)
                g_sink = g_sink + p.effect[std::size_t(l)][std::size_t(c)];
        if (p.over != 3)
            for (int c = 0; c < p.n_columns; ++c)
                g_sink =
                    g_sink + double(p.clean_pieces[std::size_t(c)].size() + p.corrupted_pieces[std::size_t(c)].size());
    }
    if (d.stepper)
        for (const auto& [position, r] : d.stepper->distributions)
            g_sink = g_sink + d.stepper->tokens[std::size_t(position)].probability;
    if (d.kv)
        for (const auto& l : d.kv->layers)
            g_sink = g_sink + double(l.blocks) / double(d.kv->blocks_per_layer ? d.kv->blocks_per_layer : 1);
    if (d.timeline)
        for (const auto& e : d.timeline->events)
            if (e.step >= 0)
                g_sink = g_sink + d.timeline->steps[std::size_t(e.step)].latency_ms;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::vector<std::byte> bytes = testsupport::mutated_run({data, size});
    if (bytes.empty())
        return 0;
    try {
        const engine::run::OpenedRun opened = engine::run::read_run_bytes(bytes, "fuzz.tsrun");
        const engine::run::Document doc = engine::run::checked_document(opened);
        index_like_the_panels(doc);
        // What was accepted is written and read back the same way (one schema, both directions).
        const engine::run::Document again = engine::run::parse_document(engine::run::to_contents(doc, "fuzz"));
        try {
            engine::run::validate(again, opened.tokenizer.get());
        } catch (const engine::FormatError&) {
            __builtin_trap(); // an accepted run that does not survive its own writer
        }
    } catch (const engine::FormatError&) {
        // refused, naming the field: the expected end of most inputs
    }
    return 0;
}
