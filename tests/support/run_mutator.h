// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Hostile saved runs made the way an attacker makes them: a valid run's document and tensors edited,
// then signed again (the checksum guards against damage, not against people). The fuzzer (fuzz_run)
// draws the edits from its input; test_saved_runs replays the fuzzer's minimized corpus through the
// same edits and opens each result in the app. No Qt.

#include "run/run_file.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace testsupport {

// The valid runs every edit starts from: the committed fixtures, with a patching, an attribution, a
// head scan, an ablation and a serving lab added so that every part of the schema is there to be edited.
struct RunSeeds {
    std::vector<engine::run::OpenedRun> runs;
    static const RunSeeds& get(); // read once from tests/data/runs
};

// Adds the lab parts named above, and a small serving lab part, to a document (nlohmann JSON text in,
// JSON text out).
std::string with_every_lab_part(const std::string& document);

// Applies the edits `input` describes to one of the seeds and returns the signed file's bytes (empty
// when the edited document no longer fits a run file, which the writer refuses itself).
std::vector<std::byte> mutated_run(std::span<const uint8_t> input);

} // namespace testsupport
