// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/connect_server_dialog.h"

#include "storage/server_keys.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

namespace tokenscope::ui {

ConnectServerDialog::ConnectServerDialog(QWidget* parent) : QDialog(parent), m_client(new remote::Client(this))
{
    setWindowTitle(tr("Connect to a server"));
    auto* layout = new QVBoxLayout(this);
    auto* intro = new QLabel(tr("A model served by llama.cpp's llama-server, vLLM, SGLang, Ollama or LM Studio (any "
                                "OpenAI-compatible server). The panels show what the server exposes; attention, KV "
                                "contents and the lab need a model on this machine."));
    intro->setWordWrap(true);
    layout->addWidget(intro);
    auto* form = new QFormLayout;
    m_url = new QComboBox;
    m_url->setEditable(true);
    m_url->addItems(recentServers());
    if (m_url->count() == 0)
        m_url->setEditText("http://127.0.0.1:8080");
    m_url->setMinimumWidth(360);
    form->addRow(tr("Server URL"), m_url);
    m_key = new QLineEdit;
    m_key->setEchoMode(QLineEdit::Password);
    m_key->setPlaceholderText(tr("none"));
    form->addRow(tr("API key"), m_key);
    m_key_note = new QLabel;
    m_key_note->setWordWrap(true);
    form->addRow(QString(), m_key_note);
    m_model = new QComboBox;
    m_model->setEditable(true);
    m_model->setPlaceholderText(tr("the server's first"));
    form->addRow(tr("Model"), m_model);
    m_timeout = new QSpinBox;
    m_timeout->setRange(5, 3600);
    m_timeout->setValue(60);
    m_timeout->setSuffix(tr(" s without a byte"));
    form->addRow(tr("Time-out"), m_timeout);
    layout->addLayout(form);
    m_status = new QLabel;
    m_status->setWordWrap(true);
    m_status->setTextFormat(Qt::PlainText); // server messages are quoted, never rendered
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_status);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Cancel);
    m_connect = buttons->addButton(tr("Connect"), QDialogButtonBox::AcceptRole);
    m_connect->setDefault(true);
    disconnect(buttons, &QDialogButtonBox::accepted, nullptr, nullptr);
    connect(m_connect, &QPushButton::clicked, this, &ConnectServerDialog::check);
    connect(buttons, &QDialogButtonBox::rejected, this, [this] {
        m_client->cancel(m_probe);
        reject();
    });
    layout->addWidget(buttons);
    connect(m_client, &remote::Client::probed, this, [this](quint64 id, std::shared_ptr<const remote::ServerInfo> s) {
        if (id == m_probe)
            onProbed(std::move(s));
    });
    connect(m_client, &remote::Client::failed, this, [this](quint64 id, const QString& m) {
        if (id == m_probe)
            onFailed(m);
    });
    // The key of a server chosen or typed comes from the keyring (or this session); asking on opening
    // also finds out whether a keyring answers, which the note under the key says.
    ServerKeys& keys = ServerKeys::instance();
    connect(&keys, &ServerKeys::fetched, this, [this](const QString& url, const QString& key) {
        // A key the user typed stays; one this dialog filled in follows the URL.
        if (url == serverUrl() && (m_key->text().isEmpty() || m_key_filled)) {
            m_key->setText(key);
            m_key_filled = !key.isEmpty();
        }
        showKeyNote();
    });
    connect(m_key, &QLineEdit::textEdited, this, [this] { m_key_filled = false; });
    connect(m_url, &QComboBox::activated, this, [this] { fetchKey(); });
    connect(m_url->lineEdit(), &QLineEdit::editingFinished, this, [this] { fetchKey(); });
    showKeyNote();
    fetchKey();
}

QString ConnectServerDialog::serverUrl() const
{
    return endpoint().base.toString();
}

void ConnectServerDialog::fetchKey()
{
    ServerKeys::instance().fetch(serverUrl());
}

void ConnectServerDialog::showKeyNote()
{
    const ServerKeys& keys = ServerKeys::instance();
    m_key_note->setText((m_key_filled ? tr("The key kept for this server. ") : QString()) + keys.keyringNote());
    // Without a keyring the note is a warning, not a hint: drawn in the normal colour.
    m_key_note->setEnabled(!keys.keyringAvailable());
    // The note may now take more lines than when the dialog was laid out.
    layout()->activate();
    resize(width(), std::max(height(), sizeHint().height()));
}

QString ConnectServerDialog::keyNote() const
{
    return m_key_note->text();
}

remote::Endpoint ConnectServerDialog::endpoint() const
{
    remote::Endpoint e;
    e.base = QUrl::fromUserInput(m_url->currentText().trimmed());
    e.api_key = m_key->text();
    e.model = m_model->currentText().trimmed();
    e.timeout_ms = m_timeout->value() * 1000;
    return e;
}

void ConnectServerDialog::setUrl(const QString& url)
{
    m_url->setEditText(url);
    fetchKey(); // as when a URL is typed and the field left
}
void ConnectServerDialog::setApiKey(const QString& key)
{
    m_key->setText(key);
    m_key_filled = false; // as typed
}
QString ConnectServerDialog::apiKey() const
{
    return m_key->text();
}
QString ConnectServerDialog::status() const
{
    return m_status->text();
}

void ConnectServerDialog::check()
{
    const remote::Endpoint e = endpoint();
    if (!e.base.isValid() || (e.base.scheme() != "http" && e.base.scheme() != "https") || e.base.host().isEmpty()) {
        onFailed(tr("\"%1\" is not an http:// or https:// address").arg(m_url->currentText()));
        return;
    }
    m_client->setEndpoint(e);
    m_status->setStyleSheet({});
    m_status->setText(tr("Asking %1 what it serves…").arg(e.base.toString()));
    m_connect->setEnabled(false);
    m_probe = m_client->probe();
}

void ConnectServerDialog::onProbed(std::shared_ptr<const remote::ServerInfo> s)
{
    m_connect->setEnabled(true);
    const QString chosen = m_model->currentText().trimmed();
    m_model->clear();
    m_model->addItems(s->models);
    m_model->setEditText(chosen.isEmpty() ? s->model : chosen);
    if (chosen.isEmpty() && s->models.size() > 1) {
        // Several models: the user picks one (the first is selected) and presses Connect again.
        m_status->setText(tr("%1 serves %2 models: choose one, then Connect.").arg(s->kind_name).arg(s->models.size()));
        return;
    }
    const remote::Endpoint e = endpoint();
    rememberServer(e.base.toString());
    if (!e.api_key.isEmpty())
        ServerKeys::instance().store(e.base.toString(), e.api_key);
    accept();
}

void ConnectServerDialog::onFailed(const QString& message)
{
    m_connect->setEnabled(true);
    m_status->setStyleSheet("color: #c0392b");
    m_status->setText(message);
}

QStringList ConnectServerDialog::recentServers()
{
    return QSettings().value("servers/recent").toStringList();
}

void ConnectServerDialog::rememberServer(const QString& url)
{
    QStringList recent = recentServers();
    recent.removeAll(url);
    recent.prepend(url);
    while (recent.size() > 8)
        recent.removeLast();
    QSettings().setValue("servers/recent", recent);
}

} // namespace tokenscope::ui
