// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QSignalSpy>
#include <QTest>

namespace testsupport {

// True once `spy` has seen `count` signals, counting those already delivered (QSignalSpy::wait
// waits for a new one and so misses a signal that arrived while the test waited for another).
inline bool seen(QSignalSpy& spy, int count = 1, int ms = 120000)
{
    return QTest::qWaitFor([&] { return spy.count() >= count; }, ms);
}

} // namespace testsupport
