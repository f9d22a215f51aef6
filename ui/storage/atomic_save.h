// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QByteArray>
#include <QString>

namespace tokenscope::ui {

// Writes a whole file or nothing (engine::write_file_atomically: a temporary file in the same folder,
// every write checked, fsync, rename; a planted symlink is replaced, never written through). On
// failure the old file is untouched and `error` (when given) says which file and why.
bool save_atomically(const QString& path, const QByteArray& bytes, QString* error = nullptr);

} // namespace tokenscope::ui
