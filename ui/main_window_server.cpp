// SPDX-License-Identifier: GPL-3.0-or-later
// The main window on a served model: File → Connect to server…, --server, and what the window says
// when a server answers or fails.
#include "main_window.h"

#include "bridge/engine_controller.h"
#include "widgets/connect_server_dialog.h"

#include <QMessageBox>
#include <QStatusBar>

namespace tokenscope::ui {

void MainWindow::connectServerSignals()
{
    connect(m_engine, &EngineController::serverConnected, this, [this](std::shared_ptr<const remote::ServerInfo> s) {
        statusBar()->showMessage(tr("Connected to %1 at %2: %3 (context %4)")
                                     .arg(s->kind_name, s->base.toString(), s->model)
                                     .arg(s->context_length),
                                 8000);
    });
    connect(m_engine, &EngineController::serverFailed, this, [this](const QString& message) {
        statusBar()->showMessage(tr("Could not connect to the server"), 8000);
        if (m_dialogs) {
            QMessageBox box(QMessageBox::Warning, tr("Cannot connect"), message, QMessageBox::Ok, this);
            box.setTextFormat(Qt::PlainText);
            box.exec();
        }
    });
}

void MainWindow::openConnectDialog()
{
    ConnectServerDialog dialog(this);
    if (dialog.exec() == QDialog::Accepted)
        connectServer(dialog.endpoint());
}

void MainWindow::connectServer(const remote::Endpoint& endpoint)
{
    statusBar()->showMessage(tr("Connecting to %1…").arg(endpoint.base.toString()));
    m_engine->connectServer(endpoint);
}

} // namespace tokenscope::ui
