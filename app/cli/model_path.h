// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <filesystem>
#include <string>

// The model the user named, or the default one (engine::find_default_model); throws engine::Error
// with the places searched when there is none.
std::filesystem::path resolve_model_path(const std::string& given);
