// SPDX-License-Identifier: GPL-3.0-or-later
#include "model_path.h"

#include "model/model_locator.h"
#include "util/error.h"

std::filesystem::path resolve_model_path(const std::string& given)
{
    if (!given.empty())
        return given;
    std::vector<std::string> searched;
    if (auto found = engine::find_default_model(&searched))
        return *found;
    std::string where;
    for (const auto& s : searched)
        where += (where.empty() ? "" : ", ") + s;
    throw engine::Error("no model given and none found (searched " + where +
                        "); run scripts/setup.sh to install the default model, or pass a .gguf path");
}
