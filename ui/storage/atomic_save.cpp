// SPDX-License-Identifier: GPL-3.0-or-later
#include "storage/atomic_save.h"

#include "util/atomic_file.h"
#include "util/error.h"

#include <QObject>

namespace tokenscope::ui {

bool save_atomically(const QString& path, const QByteArray& bytes, QString* error)
{
    try {
        engine::write_file_atomically(path.toStdString(),
                                      std::string_view(bytes.constData(), std::size_t(bytes.size())));
        return true;
    } catch (const engine::Error& e) {
        if (error)
            *error = QString::fromUtf8(e.what());
        return false;
    }
}

} // namespace tokenscope::ui
