// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Shared by the Vulkan suites: a missing device fails the suite (CI has lavapipe) unless
// TOKENSCOPE_ALLOW_NO_VULKAN=1, and every test checks that the validation layer reported nothing.
#include "backend/vulkan/vulkan_backend.h"

#include <QTest>
#include <cstdlib>
#include <string>

namespace testsupport {

inline bool vulkan_may_be_missing()
{
    const char* v = std::getenv("TOKENSCOPE_ALLOW_NO_VULKAN");
    return v && std::string(v) == "1";
}

inline bool usable_vulkan_device()
{
    for (const auto& d : engine::list_vulkan_devices())
        if (d.usable)
            return true;
    return false;
}

} // namespace testsupport

// QSKIP or QFAIL when no usable Vulkan device exists.
#ifdef TOKENSCOPE_HAVE_VULKAN
#define REQUIRE_VULKAN()                                                                                               \
    if (!testsupport::usable_vulkan_device()) {                                                                        \
        if (testsupport::vulkan_may_be_missing())                                                                      \
            QSKIP("no usable Vulkan device (TOKENSCOPE_ALLOW_NO_VULKAN=1)");                                           \
        QFAIL("no usable Vulkan device: install a driver (CI uses Mesa's lavapipe, mesa-vulkan-drivers) or set "       \
              "TOKENSCOPE_ALLOW_NO_VULKAN=1");                                                                         \
    }
#else
#define REQUIRE_VULKAN() QSKIP("built without Vulkan (TOKENSCOPE_VULKAN=OFF or no SDK)");
#endif

// Zero validation-layer errors and warnings so far (checked after every test function).
#define REQUIRE_NO_VALIDATION_MESSAGES()                                                                               \
    do {                                                                                                               \
        const auto report = engine::vulkan_validation_report();                                                        \
        QVERIFY2(report.errors == 0 && report.warnings == 0,                                                           \
                 qPrintable(QString("validation layer: %1 errors, %2 warnings (see the log)")                          \
                                .arg(report.errors)                                                                    \
                                .arg(report.warnings)));                                                               \
    } while (0)
