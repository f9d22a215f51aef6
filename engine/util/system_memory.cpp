// SPDX-License-Identifier: GPL-3.0-or-later
#include "util/system_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace engine {

SystemMemory system_memory()
{
    SystemMemory m;
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string key, unit;
        uint64_t value = 0;
        if (!(fields >> key >> value))
            continue;
        fields >> unit;
        const uint64_t scale = unit == "kB" ? 1024 : 1; // /proc/meminfo's "kB" are KiB
        if (key == "MemTotal:")
            m.total = value * scale;
        else if (key == "MemAvailable:")
            m.available = value * scale;
    }
    return m;
}

} // namespace engine
