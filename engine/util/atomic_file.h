// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <filesystem>
#include <string_view>

namespace engine {

// Writes `bytes` to `path` whole or not at all, for every export, trace and saved file:
//  - into a new temporary file in the same folder, created exclusively (O_EXCL | O_NOFOLLOW with a
//    random name: nothing planted at "path.tmp" or anywhere else is opened or followed);
//  - every write checked (a full disk is an error, never a short file), then fsync'd and closed;
//  - renamed over `path` — which replaces a symbolic link planted at `path` rather than writing
//    through it — and the folder fsync'd so the rename survives a crash.
// An existing regular file keeps its permission bits; a new one gets 0666 less the umask. On any
// failure the temporary file is removed, the old file is left untouched, and an IoError names the
// path and the system's reason ("No space left on device", "Permission denied", …).
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

} // namespace engine
