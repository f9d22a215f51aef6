// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// A saved run as the panels know it: the snapshots they showed, converted to and from the engine's
// run file (engine/run/run_file.h; the document's schema is in the README, "Saved runs"). The
// conversion is exact: every number reads back with the bits it had, except the attention weights
// and q/k/v, which the file stores as F16 (they read back as their F16 roundings).

#include "bridge/analysis_types.h"
#include "bridge/engine_types.h"
#include "bridge/experts_types.h"
#include "bridge/lab_types.h"
#include "bridge/serving_types.h"
#include "bridge/speculation_types.h"
#include "run/run_file.h"
#include "sampling/sampler.h"

#include <QString>
#include <map>
#include <memory>

namespace engine::gguf {
class GgufFile;
}

namespace tokenscope::ui {

struct RunDocument {
    std::shared_ptr<const ModelSummary> model;
    QString model_sha256; // empty until computed (when saving from a loaded model)
    QString writer;       // who wrote the file (read back)
    QString saved_at;     // ISO 8601, UTC
    StepperSettings stepper_settings;
    std::shared_ptr<const StepperState> stepper;
    std::map<int, engine::SampleResult> distributions; // position → the distribution its token was drawn from
    std::shared_ptr<const KvSnapshot> kv;
    std::shared_ptr<const TimelineSnapshot> timeline;
    std::shared_ptr<const AttentionSnapshot> attention;
    std::shared_ptr<const TextAnalysisSnapshot> text;
    std::shared_ptr<const PatchingSnapshot> patching;
    std::shared_ptr<const AttributionSnapshot> attribution;
    std::shared_ptr<const HeadsSnapshot> head_classes, head_scan;
    std::shared_ptr<const AblationSnapshot> ablation;
    std::shared_ptr<const SteeringSnapshot> steering;
    std::shared_ptr<const ServingSnapshot> serving;
    std::shared_ptr<const SpeculationSnapshot> speculation;
    std::shared_ptr<const ExpertsSnapshot> experts;
    // Read back: the saved vocabulary and the file (whose tokenizer keys a re-save copies).
    std::shared_ptr<const engine::Tokenizer> tokenizer;
    std::shared_ptr<const engine::gguf::GgufFile> file;
    QString path;
    quint64 file_size = 0;

    bool empty() const
    {
        return !stepper && !kv && !timeline && !attention && !text && !patching && !attribution && !head_classes &&
               !head_scan && !ablation && !steering && !serving && !speculation && !experts;
    }
    // "stepper (12 tokens), attention (3 heads), …": what the run holds, for messages.
    QString parts() const;
};

engine::run::RunContents to_run_contents(const RunDocument& doc);
// Throws engine::FormatError naming what is missing or malformed.
RunDocument run_document_from(const engine::run::OpenedRun& opened, const QString& path);

} // namespace tokenscope::ui
