// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <stdexcept>
#include <string>

namespace engine {

// Every failure the engine reports on bad input is one of these typed errors; nothing in the
// engine exits or aborts. Messages are complete sentences meant to be shown to the user.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The file is not a well-formed GGUF (truncated, corrupt, hostile).
class FormatError : public Error {
public:
    using Error::Error;
};

// The file is well-formed but uses something this engine does not implement
// (a quantization type, an architecture, a tokenizer model).
class UnsupportedError : public Error {
public:
    using Error::Error;
};

// Opening or mapping the file failed at the operating-system level.
class IoError : public Error {
public:
    using Error::Error;
};

} // namespace engine
