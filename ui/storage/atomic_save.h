// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QByteArray>
#include <QString>

namespace tokenscope::ui {

// Writes a whole file or nothing (an interrupted export never leaves half a file). On failure,
// `error` (when given) says which file and why.
bool save_atomically(const QString& path, const QByteArray& bytes, QString* error = nullptr);

} // namespace tokenscope::ui
