// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/experts_types.h"

#include <QWidget>
#include <memory>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTextBrowser;

namespace tokenscope::ui {

class EngineController;
class DistributionOverlay;
class EffectGrid;
class ExpertLoad;
class ExpertMap;
class ExpertRoute;

// A mixture-of-experts model's routers, token by token: a tokens × layers map coloured by each token's
// top expert (hover: its k experts and weights), the selected token's route through every layer, the
// selected layer's load over the experts against the even share, the tokens the selected expert takes
// there (its "vocabulary"), and "what if": force an expert for the token, or remove or zero one, and
// see the next token's distribution move. It routes a typed text or the sequence the chat or the
// stepper holds. A dense model has no router: the panel says so.
class ExpertsPanel : public QWidget {
    Q_OBJECT
public:
    explicit ExpertsPanel(EngineController* engine, QWidget* parent = nullptr);

    void setText(const QString& text);
    void route();         // the typed text
    void routeSequence(); // the chat's or the stepper's sequence
    void select(int token, int layer_index, int expert);
    // A saved run's routing (File → Open run…): the map, routes, load and vocabulary as they were; what
    // if and the scan need the model, so they wait for a new routing.
    void showSaved(std::shared_ptr<const ExpertsSnapshot> snapshot);
    void runWhatIf(ExpertWhatIf::Kind kind, int layer, int expert);
    // Every expert of every layer removed (zeroed) in turn, with progress and Stop.
    void scan(bool zero);
    void stopScan();
    const std::shared_ptr<const ExpertScanSnapshot>& scanResult() const { return m_scan; }
    EffectGrid* scanGrid() const { return m_scan_grid; }
    QString scanStatusText() const;
    const std::shared_ptr<const ExpertsSnapshot>& snapshot() const { return m_snapshot; }
    const std::shared_ptr<const ExpertWhatIfSnapshot>& whatIf() const { return m_what_if; }
    QString statusText() const;
    QString vocabularyText() const;
    ExpertMap* map() const { return m_map; }
    ExpertLoad* load() const { return m_load; }
    DistributionOverlay* overlay() const { return m_overlay; }

signals:
    void routed();
    void whatIfFinished();
    void scanFinished();

private:
    void buildUi();
    void onRouted(std::shared_ptr<const ExpertsSnapshot> s);
    void onWhatIf(std::shared_ptr<const ExpertWhatIfSnapshot> s);
    void renderSelection();
    void onScan(std::shared_ptr<const ExpertScanSnapshot> s, bool final);

    EngineController* m_engine;
    std::shared_ptr<const ExpertsSnapshot> m_snapshot;
    std::shared_ptr<const ExpertWhatIfSnapshot> m_what_if;
    std::shared_ptr<const ExpertScanSnapshot> m_scan;
    quint64 m_request = 0, m_what_if_request = 0, m_scan_request = 0;
    int m_token = -1, m_layer = 0, m_expert = 0;
    QLineEdit* m_text = nullptr;
    QPushButton* m_route = nullptr;
    QPushButton* m_sequence = nullptr;
    QLabel* m_status = nullptr;
    QWidget* m_views = nullptr;
    ExpertMap* m_map = nullptr;
    ExpertRoute* m_route_view = nullptr;
    ExpertLoad* m_load = nullptr;
    QTextBrowser* m_vocabulary = nullptr;
    QComboBox* m_kind = nullptr;
    QComboBox* m_scope = nullptr;
    QSpinBox* m_expert_box = nullptr;
    QPushButton* m_what_if_run = nullptr;
    QLabel* m_what_if_status = nullptr;
    DistributionOverlay* m_overlay = nullptr;
    QPushButton* m_scan_run = nullptr;
    QPushButton* m_scan_stop = nullptr;
    QComboBox* m_scan_mode = nullptr;
    QLabel* m_scan_status = nullptr;
    EffectGrid* m_scan_grid = nullptr;
};

} // namespace tokenscope::ui
