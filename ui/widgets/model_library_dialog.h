// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QDialog>

class QLabel;
class QTreeWidget;

namespace tokenscope::ui {

// The model library: GGUF files found in Tokenscope's models directory, the Hugging Face cache,
// LM Studio's and Ollama's folders, and recently opened files — scanned on a worker thread (headers
// only), with a file that cannot be read listed with the loader's message.
class ModelLibraryDialog : public QDialog {
    Q_OBJECT
public:
    // `loaded`: the path of the model the window has loaded, marked in the list (empty: none).
    explicit ModelLibraryDialog(const QStringList& recent, const QString& loaded = {}, QWidget* parent = nullptr);
    QString selectedPath() const { return m_selected; }
    int modelCount() const;
    // Makes the model at `path` the current row (its kind's reason shows under the list); false when
    // it is not listed.
    bool selectModel(const QString& path);

signals:
    void scanFinished();

private:
    QTreeWidget* m_tree = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_detail = nullptr; // the current model's kind and the rule that decided it
    QString m_selected;
};

} // namespace tokenscope::ui
