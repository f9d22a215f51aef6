// SPDX-License-Identifier: GPL-3.0-or-later
#include "test_paths.h"

#include <unistd.h>

#include "model/model_locator.h"

#include <cstdlib>
#include <filesystem>

namespace testsupport {

std::string data_dir()
{
    return TOKENSCOPE_TEST_DATA_DIR;
}

std::string default_model_path()
{
    auto found = engine::find_default_model();
    if (!found || !std::filesystem::exists(*found))
        return {};
    return found->string();
}

std::string chat_model_path()
{
    if (const char* env = std::getenv("TOKENSCOPE_CHAT_MODEL"); env && *env)
        return std::filesystem::exists(env) ? std::string(env) : std::string();
    auto found = engine::find_chat_model();
    return found ? found->string() : std::string();
}

bool model_may_be_missing()
{
    const char* v = std::getenv("TOKENSCOPE_ALLOW_NO_MODEL");
    return v && std::string(v) == "1";
}

std::string reference_tool(const char* env)
{
    const char* v = std::getenv(env);
    if (!v || !*v || access(v, X_OK) != 0)
        return {};
    return v;
}

std::string reference_dir(const char* env)
{
    const char* v = std::getenv(env);
    if (!v || !*v || !std::filesystem::is_directory(v))
        return {};
    return v;
}

bool reference_required()
{
    const char* v = std::getenv("TOKENSCOPE_REQUIRE_REFERENCE");
    return v && std::string(v) == "1";
}

} // namespace testsupport
