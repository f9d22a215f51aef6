// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/request_book.h"

#include <vector>

namespace tokenscope::ui {

RequestBook::Ticket RequestBook::open()
{
    Ticket t{next(), std::make_shared<std::atomic<bool>>(false)};
    m_open[t.id].token = t.cancel;
    return t;
}

void RequestBook::onCancel(quint64 id, std::function<void()> hook)
{
    if (const auto it = m_open.find(id); it != m_open.end())
        it->second.on_cancel = std::move(hook);
}

void RequestBook::close(quint64 id)
{
    m_open.erase(id);
}

void RequestBook::cancel(quint64 id)
{
    const auto it = m_open.find(id);
    if (it == m_open.end())
        return;
    it->second.token->store(true);
    if (auto hook = it->second.on_cancel) // a copy: the hook may close the request
        hook();
}

void RequestBook::cancelAll()
{
    std::vector<quint64> ids;
    for (const auto& [id, entry] : m_open)
        ids.push_back(id);
    for (quint64 id : ids)
        cancel(id);
}

} // namespace tokenscope::ui
