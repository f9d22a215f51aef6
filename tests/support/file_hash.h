// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QCryptographicHash>
#include <QFile>
#include <string>

namespace testsupport {

// The SHA-256 of a file as lowercase hex (empty when it cannot be read): a model is the file a
// fixture was made from when this equals the fixture's tokenscope.model.sha256.
inline QByteArray sha256_of_file(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    QCryptographicHash h(QCryptographicHash::Sha256);
    h.addData(&f);
    return h.result().toHex();
}

} // namespace testsupport
