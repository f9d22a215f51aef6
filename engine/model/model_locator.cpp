// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/model_locator.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>

namespace engine {

namespace fs = std::filesystem;

fs::path models_directory()
{
    if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg)
        return fs::path(xdg) / "tokenscope" / "models";
    const char* home = std::getenv("HOME");
    return fs::path(home && *home ? home : ".") / ".local" / "share" / "tokenscope" / "models";
}

std::optional<fs::path> find_default_model(std::vector<std::string>* searched)
{
    auto note = [&](const std::string& s) {
        if (searched)
            searched->push_back(s);
    };
    if (const char* env = std::getenv("TOKENSCOPE_MODEL"); env && *env) {
        note(std::string("$TOKENSCOPE_MODEL (") + env + ")");
        return fs::path(env); // explicit choice: the caller reports it if it does not open
    }
    const fs::path dir = models_directory();
    note(dir.string());
    std::error_code ec;
    if (fs::exists(dir / kDefaultModelFileName, ec))
        return dir / kDefaultModelFileName;
    std::vector<fs::path> found;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().extension() == ".gguf" && fs::is_regular_file(it->path(), ec))
            found.push_back(it->path());
    if (found.empty())
        return std::nullopt;
    std::sort(found.begin(), found.end());
    return found.front();
}

std::optional<fs::path> find_chat_model()
{
    std::error_code ec;
    const fs::path path = models_directory() / kChatModelFileName;
    if (fs::is_regular_file(path, ec))
        return path;
    return std::nullopt;
}

std::optional<fs::path> find_startup_model(const std::optional<fs::path>& last_choice)
{
    if (const char* env = std::getenv("TOKENSCOPE_MODEL"); env && *env)
        return fs::path(env);
    std::error_code ec;
    if (last_choice && !last_choice->empty() && fs::is_regular_file(*last_choice, ec))
        return last_choice;
    if (auto chat = find_chat_model())
        return chat;
    return find_default_model();
}

} // namespace engine
