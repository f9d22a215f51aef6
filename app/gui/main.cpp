// SPDX-License-Identifier: GPL-3.0-or-later
// tokenscope: the desktop app. A thin entry point over the ui library.
#include "app_main.h"

int main(int argc, char** argv)
{
    return tokenscope::ui::run_app(argc, argv);
}
