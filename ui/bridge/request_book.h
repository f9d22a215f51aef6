// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QtGlobal>
#include <functional>
#include <map>

namespace tokenscope::ui {

// The one place request ids come from, and the open requests that can still be cancelled. A
// request's id is never reused while the book lives, whoever answers it (the engine here or a
// server: a server's own request numbers stay inside the code that talks to it). Lives on the UI
// thread.
class RequestBook {
public:
    struct Ticket {
        quint64 id = 0;
        CancelToken cancel; // read by the engine thread between tokens, batches or stages
    };

    // An id for a request that cannot be cancelled (it is quick, or only its answer can be ignored).
    quint64 next() { return m_next++; }
    // A cancellable request: its id and its token, held until close().
    Ticket open();
    // What else cancelling `id` must do (a server request: end its stream).
    void onCancel(quint64 id, std::function<void()> hook);
    // The request has answered: its token is released. Unknown ids are ignored.
    void close(quint64 id);
    // That request only; every open one. A hook may answer at once and close its request.
    void cancel(quint64 id);
    void cancelAll();
    std::size_t outstanding() const { return m_open.size(); }

private:
    struct Entry {
        CancelToken token;
        std::function<void()> on_cancel;
    };
    std::map<quint64, Entry> m_open;
    quint64 m_next = 1;
};

} // namespace tokenscope::ui
