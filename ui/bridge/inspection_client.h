// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_controller.h"
#include "bridge/engine_types.h"

#include <QList>
#include <QObject>
#include <memory>

namespace tokenscope::ui {

// What the model computes, shown as it runs: attention per head (captured on request or recorded
// from the chat's and the stepper's real passes while a view shows it), the KV cache's contents,
// and the live KV gauges and timelines every generation publishes. A server exposes none of the
// internals: there the requests are answered with the reason (inspection_client.cpp).
class InspectionClient : public QObject {
    Q_OBJECT
public:
    class Source {
    public:
        virtual ~Source() = default;
        virtual quint64 captureAttention(const QString& text, bool current_sequence, const QList<int>& layers) = 0;
        virtual quint64 readKv(int layer, int kv_head) = 0;
    };

    explicit InspectionClient(EngineController& engine);
    ~InspectionClient() override;

    // Attention of the given layers (all their heads; every layer when empty) over a text, or over the
    // model's current sequence (chat or stepper): attentionReady (cancellable).
    quint64 captureAttention(const QString& text, bool current_sequence, const QList<int>& layers)
    {
        return source().captureAttention(text, current_sequence, layers);
    }
    // The KV cache's keys and values of one layer and KV head: kvContents.
    quint64 readKv(int layer, int kv_head) { return source().readKv(layer, kv_head); }
    // A view that shows attention says when it is on screen; the chat and the stepper record
    // attention only while one is (turning it off drops the recording).
    void setAttentionWatched(bool watched);

signals:
    void attentionReady(std::shared_ptr<const tokenscope::ui::AttentionSnapshot> snapshot);
    void kvContents(std::shared_ptr<const tokenscope::ui::KvContents> contents);
    // Published by every forward pass of the chat and the stepper (and a load or a reset).
    void kvChanged(std::shared_ptr<const tokenscope::ui::KvSnapshot> snapshot);
    void timelineChanged(std::shared_ptr<const tokenscope::ui::TimelineSnapshot> timeline);
    // After each reply from a server: its cache as far as it says (the KV panel's server gauge).
    void serverCacheChanged(std::shared_ptr<const tokenscope::ui::ServerCacheSnapshot> cache);

private:
    Source& source() const { return m_engine.remote() ? *m_remote : *m_local; }

    EngineController& m_engine;
    std::unique_ptr<Source> m_local;
    std::unique_ptr<Source> m_remote;
};

inline InspectionClient& EngineController::inspection()
{
    return client<InspectionClient>();
}

} // namespace tokenscope::ui
