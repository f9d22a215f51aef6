// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace testsupport {

// A memory field of /proc/self/status in bytes ("VmRSS", "VmHWM": the resident set now and at its
// peak); 0 when it cannot be read.
inline uint64_t process_status_bytes(const std::string& field)
{
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind(field + ":", 0) == 0)
            return std::stoull(line.substr(field.size() + 1)) * 1024;
    return 0;
}

} // namespace testsupport
