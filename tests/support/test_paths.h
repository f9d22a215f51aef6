// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>
#include <string>

namespace testsupport {

// tests/data in the source tree.
std::string data_dir();
// The default model (Gemma 3 270M Q4_K_M) as the setup script installs it. Tests that need it
// fail when it is missing — a model test that silently skips proves nothing — unless
// TOKENSCOPE_ALLOW_NO_MODEL=1 is set, in which case they skip.
std::string default_model_path();
// The chat model (Qwen2.5-Coder 0.5B Instruct Q4_K_M) as the setup script installs it, under the
// same rule (TOKENSCOPE_ALLOW_NO_MODEL=1 lets its tests skip). TOKENSCOPE_CHAT_MODEL overrides it.
std::string chat_model_path();
bool model_may_be_missing();
// A llama.cpp tool that scripts/setup.sh test builds once per run (tests/reference/build_llama_cpp.sh)
// and names in the environment variable `env` (e.g. TOKENSCOPE_LLAMA_PERPLEXITY); empty when unset
// or not executable. Suites skip without it, unless TOKENSCOPE_REQUIRE_REFERENCE=1 (CI), where they fail.
std::string reference_tool(const char* env);
// A reference folder named in the environment variable `env` (e.g. TOKENSCOPE_LLAMA_CPP_SRC, the
// llama.cpp source tree that scripts/setup.sh test unpacks); empty when unset or not a directory.
std::string reference_dir(const char* env);
bool reference_required();

} // namespace testsupport

// QSKIP or QFAIL when the default model is absent (see default_model_path).
#define REQUIRE_DEFAULT_MODEL(path_var)                                                                                \
    const std::string path_var = testsupport::default_model_path();                                                    \
    if (path_var.empty()) {                                                                                            \
        if (testsupport::model_may_be_missing())                                                                       \
            QSKIP("default model not installed (TOKENSCOPE_ALLOW_NO_MODEL=1)");                                        \
        QFAIL("default model not installed: run scripts/setup.sh (or set TOKENSCOPE_MODEL)");                          \
    }

// The same for the chat model.
#define REQUIRE_CHAT_MODEL(path_var)                                                                                   \
    const std::string path_var = testsupport::chat_model_path();                                                       \
    if (path_var.empty()) {                                                                                            \
        if (testsupport::model_may_be_missing())                                                                       \
            QSKIP("chat model not installed (TOKENSCOPE_ALLOW_NO_MODEL=1)");                                           \
        QFAIL("chat model not installed: run scripts/setup.sh (or set TOKENSCOPE_CHAT_MODEL)");                        \
    }

// One of the two, as a data row asks (chat: the chat model, else the default model).
#define REQUIRE_SHIPPED_MODEL(path_var, chat)                                                                          \
    const std::string path_var = (chat) ? testsupport::chat_model_path() : testsupport::default_model_path();          \
    if (path_var.empty()) {                                                                                            \
        if (testsupport::model_may_be_missing())                                                                       \
            QSKIP("model not installed (TOKENSCOPE_ALLOW_NO_MODEL=1)");                                                \
        QFAIL("model not installed: run scripts/setup.sh (or set TOKENSCOPE_MODEL / TOKENSCOPE_CHAT_MODEL)");          \
    }

// QSKIP or QFAIL (TOKENSCOPE_REQUIRE_REFERENCE=1) when the llama.cpp tool named by `env` is absent.
#define REQUIRE_REFERENCE_TOOL(path_var, env)                                                                          \
    const std::string path_var = testsupport::reference_tool(env);                                                     \
    if (path_var.empty()) {                                                                                            \
        if (!testsupport::reference_required())                                                                        \
            QSKIP(env " is not set: run scripts/setup.sh test, which builds llama.cpp's tools for the comparison");    \
        QFAIL(env " is not set or not executable, and TOKENSCOPE_REQUIRE_REFERENCE=1");                                \
    }

// The same for a reference folder (see reference_dir).
#define REQUIRE_REFERENCE_DIR(path_var, env)                                                                           \
    const std::string path_var = testsupport::reference_dir(env);                                                      \
    if (path_var.empty()) {                                                                                            \
        if (!testsupport::reference_required())                                                                        \
            QSKIP(env " is not set: run scripts/setup.sh test, which unpacks llama.cpp's sources for the comparison"); \
        QFAIL(env " is not set or not a directory, and TOKENSCOPE_REQUIRE_REFERENCE=1");                               \
    }
