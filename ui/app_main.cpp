// SPDX-License-Identifier: GPL-3.0-or-later
#include "app_main.h"

#include <QApplication>
#include <QCommandLineParser>
#include <cstdio>
#include <string_view>

namespace tokenscope::ui {

int run_app(int argc, char** argv)
{
    // --version needs no display (package tests run it headless).
    for (int i = 1; i < argc; ++i)
        if (std::string_view(argv[i]) == "--version") {
            std::printf("tokenscope %s\n", TOKENSCOPE_VERSION);
            return 0;
        }
    QApplication app(argc, argv);
    QApplication::setApplicationName("Tokenscope");
    QApplication::setOrganizationName("Tokenscope");
    QApplication::setOrganizationDomain("tokenscope.org");
    QApplication::setApplicationVersion(TOKENSCOPE_VERSION);
    QApplication::setDesktopFileName("org.tokenscope.Tokenscope");

    QCommandLineParser parser;
    parser.setApplicationDescription("Watch a language model generate, token by token");
    parser.addHelpOption();
    parser.addVersionOption();
    parser.process(app);
    std::fprintf(stderr, "The desktop window arrives with the desktop-app issue; use tokenscope-cli meanwhile.\n");
    return 1;
}

} // namespace tokenscope::ui
