// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

namespace tokenscope::ui {

// Parses the command line (--version, --verbose, --model, --screenshot …), builds the main window
// and runs the event loop. Returns the process exit code.
int run_app(int argc, char** argv);

} // namespace tokenscope::ui
