// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The one way a panel runs work off the UI thread that is not the engine's (reading a file's
// header for the memory planner, scanning for models, loading a comparison tokenizer, listing GPUs):
// `work` runs on Qt's global thread pool and must not touch widgets; its result comes back to
// `done(owner, result)` on the UI thread, and is dropped when `owner` is gone by then.
#include <QApplication>
#include <QPointer>
#include <QThreadPool>
#include <memory>
#include <utility>

namespace tokenscope::ui {

template <typename Owner, typename Work, typename Done> void run_in_background(Owner* owner, Work work, Done done)
{
    QPointer<Owner> self(owner);
    QThreadPool::globalInstance()->start([self, work, done] {
        auto result = std::make_shared<decltype(work())>(work());
        QMetaObject::invokeMethod(
            qApp,
            [self, done, result] {
                if (self)
                    done(*self, std::move(*result));
            },
            Qt::QueuedConnection);
    });
}

} // namespace tokenscope::ui
