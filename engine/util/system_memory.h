// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>

namespace engine {

struct SystemMemory {
    uint64_t total = 0;     // MemTotal
    uint64_t available = 0; // MemAvailable
};
// From /proc/meminfo; zeros when it cannot be read.
SystemMemory system_memory();

} // namespace engine
