// SPDX-License-Identifier: GPL-3.0-or-later
// `check-run FILE.tsrun`: a saved run read and checked exactly as the app opens it, without a window
// (the file, its checksum, its document's types, then the validator), so a run can be checked before
// it is sent, and tests can measure what opening a hostile run costs.
#include "commands.h"

#include "run/run_document.h"
#include "run/run_file.h"
#include "run/run_validate.h"
#include "tokenizer/tokenizer.h"

#include <cstdio>
#include <spdlog/fmt/fmt.h>

namespace {

int run_check(const std::string& path)
{
    const engine::run::OpenedRun opened = engine::run::read_run_file(path);
    const engine::run::Document doc = engine::run::checked_document(opened);
    std::vector<std::string> parts;
    if (doc.stepper)
        parts.push_back(fmt::format("stepper ({} tokens, {} steps)", doc.stepper->tokens.size(), doc.stepper->steps));
    if (doc.kv)
        parts.push_back("KV cache");
    if (doc.timeline)
        parts.push_back(fmt::format("timeline ({} steps)", doc.timeline->steps.size()));
    if (doc.attention)
        parts.push_back(fmt::format("attention ({} heads over {} tokens)", doc.attention->heads.size(),
                                    doc.attention->tokens.size()));
    if (doc.text_analysis)
        parts.push_back(fmt::format("text analysis ({} tokens)", doc.text_analysis->tokens.size()));
    for (const auto& [present, name] : {std::pair{doc.patching.has_value(), "patching"},
                                        {doc.attribution.has_value(), "attribution"},
                                        {doc.head_classes.has_value(), "head classes"},
                                        {doc.head_scan.has_value(), "ablation scan"},
                                        {doc.ablation.has_value(), "ablation"},
                                        {doc.steering.has_value(), "steering"}})
        if (present)
            parts.push_back(name);
    std::string joined;
    for (const auto& p : parts)
        joined += (joined.empty() ? "" : ", ") + p;
    std::printf("%s: a valid run of %s (format %u, %s), %s\n", path.c_str(), doc.model->name.c_str(), opened.format,
                opened.tokenizer ? fmt::format("{} tokens of vocabulary", opened.tokenizer->vocab().size()).c_str()
                                 : "no vocabulary",
                joined.empty() ? "nothing recorded" : joined.c_str());
    return 0;
}

} // namespace

CommandRunner add_check_run_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("check-run", "Check a saved run (.tsrun) as the app opens it, without a window");
    auto path = std::make_shared<std::string>();
    cmd->add_option("run", *path, "the .tsrun file")->required();
    return [path] { return run_check(*path); };
}
