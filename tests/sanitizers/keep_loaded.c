// SPDX-License-Identifier: GPL-3.0-or-later
// Preloaded into the sanitizer tree's suites: dlclose keeps every library mapped. The Vulkan loader
// unloads the driver (lavapipe) and layers when an instance is destroyed, and LeakSanitizer, which
// reports at exit, can then no longer name the library an allocation came from ("<unknown
// module>"), so its suppressions for third-party libraries cannot match. Nothing else changes.
#include <dlfcn.h>

int dlclose(void* handle)
{
    (void)handle;
    return 0;
}
