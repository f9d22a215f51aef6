// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/model_library_dialog.h"
#include "widgets/count_text.h"

#include "bridge/background.h"
#include "model/model_discovery.h"

#include <QApplication>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPointer>
#include <QPushButton>
#include <QThreadPool>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <memory>

namespace tokenscope::ui {

ModelLibraryDialog::ModelLibraryDialog(const QStringList& recent, const QString& loaded, QWidget* parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Model library"));
    resize(900, 460);
    auto* layout = new QVBoxLayout(this);
    m_status = new QLabel(tr("Looking for GGUF models…"));
    layout->addWidget(m_status);
    m_tree = new QTreeWidget;
    m_tree->setHeaderLabels(
        {tr("Model"), tr("Source"), tr("Kind"), tr("Architecture"), tr("Type"), tr("Size"), tr("Path")});
    m_tree->headerItem()->setToolTip(
        2, tr("Instruct models answer in the chat; base models continue the text they are given. A model is "
              "instruct when its name says so (instruct, it, chat, sft, rlhf, dpo), base when its name says "
              "base, else instruct when it has a chat template"));
    m_tree->setRootIsDecorated(false);
    m_tree->setAlternatingRowColors(true);
    // names take the room they need (the list scrolls sideways when they are long); the path, last, gets
    // the rest, and the whole of a name or path is in its tooltip
    for (int c = 0; c < 6; ++c)
        m_tree->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
    m_tree->header()->setStretchLastSection(true);
    m_tree->setTextElideMode(Qt::ElideMiddle); // a cut path keeps its folder's start and the file name
    layout->addWidget(m_tree, 1);
    m_detail = new QLabel(tr("Select a model to see why it is marked base or instruct."));
    m_detail->setWordWrap(true);
    m_detail->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_detail);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Open | QDialogButtonBox::Cancel);
    buttons->button(QDialogButtonBox::Open)->setEnabled(false);
    layout->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto accept_current = [this] {
        if (auto* item = m_tree->currentItem(); item && !item->data(0, Qt::UserRole).toString().isEmpty()) {
            m_selected = item->data(0, Qt::UserRole).toString();
            accept();
        }
    };
    connect(buttons, &QDialogButtonBox::accepted, this, accept_current);
    connect(m_tree, &QTreeWidget::itemDoubleClicked, this, accept_current);
    connect(m_tree, &QTreeWidget::currentItemChanged, this, [this, buttons](QTreeWidgetItem* item) {
        buttons->button(QDialogButtonBox::Open)->setEnabled(item && !item->data(0, Qt::UserRole).toString().isEmpty());
        m_detail->setText(item ? item->data(2, Qt::UserRole).toString() : QString());
    });

    // Scan off the UI thread; the result comes back as an immutable list.
    engine::DiscoveryRoots roots = engine::default_discovery_roots();
    for (const QString& r : recent)
        roots.recent_files.emplace_back(r.toStdString());
    run_in_background(
        this, [roots] { return engine::discover_models(roots); },
        [loaded](ModelLibraryDialog& self, std::vector<engine::DiscoveredModel> found) {
            for (const auto& m : found) {
                auto* item = new QTreeWidgetItem(self.m_tree);
                const QString path = QString::fromStdString(m.path.string());
                const bool is_loaded = !loaded.isEmpty() && QFileInfo(path) == QFileInfo(loaded);
                item->setText(0, QString::fromStdString(m.display_name) + (is_loaded ? tr(" (loaded)") : QString()));
                item->setToolTip(0, is_loaded ? tr("%1 — the model the window has loaded").arg(path) : path);
                item->setText(1, QString::fromStdString(m.source));
                item->setText(2, m.error ? QString() : m.instruct ? tr("instruct") : tr("base"));
                item->setText(3, QString::fromStdString(m.architecture));
                item->setText(4, QString::fromStdString(m.file_type));
                item->setText(5,
                              QLocale().formattedDataSize(qint64(m.file_size), 1, QLocale::DataSizeTraditionalFormat));
                item->setText(6, path);
                item->setToolTip(6, path);
                if (is_loaded) {
                    QFont bold = item->font(0);
                    bold.setBold(true);
                    for (int c = 0; c < 7; ++c)
                        item->setFont(c, bold);
                }
                if (m.error) {
                    item->setToolTip(0, QString::fromStdString(*m.error));
                    item->setText(3, tr("cannot be read"));
                    item->setForeground(3, Qt::red);
                    item->setData(2, Qt::UserRole, QString::fromStdString(*m.error));
                } else {
                    item->setData(0, Qt::UserRole, QString::fromStdString(m.path.string()));
                    // Which rule decided the kind: "general.finetune says "Instruct-AWQ"".
                    const QString reason = QString::fromStdString(m.kind_reason);
                    item->setToolTip(2, tr("%1: %2").arg(item->text(2), reason));
                    item->setData(
                        2, Qt::UserRole,
                        tr("%1 is marked %2: %3.").arg(QString::fromStdString(m.display_name), item->text(2), reason));
                }
            }
            self.m_status->setText(found.empty()
                                       ? tr("No GGUF models found. Run scripts/setup.sh to install the default model, "
                                            "or open a file with File → Open model….")
                                       : countText(qint64(found.size()), tr("model found."), tr("models found.")));
            emit self.scanFinished();
        });
}

int ModelLibraryDialog::modelCount() const
{
    return m_tree->topLevelItemCount();
}

bool ModelLibraryDialog::selectModel(const QString& path)
{
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i)
        if (auto* item = m_tree->topLevelItem(i); item->text(6) == path) {
            m_tree->setCurrentItem(item);
            return true;
        }
    return false;
}

} // namespace tokenscope::ui
