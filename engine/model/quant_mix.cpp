// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/quant_mix.h"

#include "model/model.h"

#include <algorithm>
#include <map>
#include <vector>

namespace engine {

std::string quant_mix(const Model& model)
{
    std::map<std::string, uint64_t> bytes;
    for (const auto& t : model.file().tensors())
        bytes[std::string(t.type.name)] += t.n_bytes;
    std::vector<std::pair<uint64_t, std::string>> sorted;
    for (const auto& [name, b] : bytes)
        sorted.emplace_back(b, name);
    std::sort(sorted.rbegin(), sorted.rend());
    std::string out;
    for (const auto& [b, name] : sorted)
        out += (out.empty() ? "" : ", ") + name;
    return out;
}

} // namespace engine
