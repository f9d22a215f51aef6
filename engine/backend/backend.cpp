// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/backend.h"

#include <algorithm>

namespace engine {

// Part of the Backend contract, shared by every backend and the attention recorder.
bool CaptureRequest::wants(uint32_t layer, uint32_t head) const
{
    if (all_heads)
        return true;
    return std::find(heads.begin(), heads.end(), std::make_pair(layer, head)) != heads.end();
}

} // namespace engine
