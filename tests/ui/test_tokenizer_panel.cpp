// SPDX-License-Identifier: GPL-3.0-or-later
// The tokenizer panel with the real default model: typing produces the tokens the engine's
// tokenizer gives (counted and spanned), and a token's details show its id, bytes and offsets.
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "model/model.h"
#include "panels/tokenizer_panel.h"
#include "test_paths.h"

#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QTest>

using namespace tokenscope::ui;

class TestTokenizerPanel : public QObject {
    Q_OBJECT
private slots:
    void tokensFollowTheText();
};

void TestTokenizerPanel::tokensFollowTheText()
{
    REQUIRE_DEFAULT_MODEL(path);
    EngineController engine;
    TokenSelection selection;
    TokenizerPanel panel(&engine, &selection);
    panel.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 256);
    QVERIFY(loaded.wait(120000));
    const QString text = "Hello world, naïve 東京 🤖";
    QSignalSpy updated(&panel, &TokenizerPanel::updated);
    auto* input = panel.findChild<QPlainTextEdit*>("tokenizerInput");
    QVERIFY(input);
    input->setPlainText(text); // as if typed: debounced, tokenized on the engine thread
    QTRY_VERIFY_WITH_TIMEOUT(panel.current() && panel.current()->text == text, 10000);

    const auto model = engine::Model::load(path);
    const QByteArray utf8 = text.toUtf8();
    const auto expected = model->tokenizer().encode(std::string_view(utf8.constData(), std::size_t(utf8.size())));
    const auto& got = panel.current()->tokens;
    QCOMPARE(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        QCOMPARE(got[i].id, expected[i].id);
        QCOMPARE(got[i].begin, int(expected[i].byte_begin));
        QCOMPARE(got[i].end, int(expected[i].byte_end));
    }
    QVERIFY2(panel.countsText().startsWith(QString("%1 tokens · %2 characters · %3 bytes").arg(got.size()).arg(text.size()).arg(utf8.size())),
             qPrintable(panel.countsText()));
    panel.showDetails(1); // "Hello"
    QVERIFY2(panel.detailText().contains(QString("id %1").arg(expected[1].id)) && panel.detailText().contains("48 65 6c 6c 6f") &&
                 panel.detailText().contains("offsets [0, 5)"),
             qPrintable(panel.detailText()));
    panel.showDetails(0); // <bos>, added by the tokenizer
    QVERIFY(panel.detailText().contains("control"));
}

QTEST_MAIN(TestTokenizerPanel)
#include "test_tokenizer_panel.moc"
