// SPDX-License-Identifier: GPL-3.0-or-later
#include "storage/atomic_save.h"

#include <QObject>
#include <QSaveFile>

namespace tokenscope::ui {

bool save_atomically(const QString& path, const QByteArray& bytes, QString* error)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size() || !file.commit()) {
        if (error)
            *error = QObject::tr("Could not write %1: %2").arg(path, file.errorString());
        return false;
    }
    return true;
}

} // namespace tokenscope::ui
