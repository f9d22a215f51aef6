// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

namespace engine {
namespace gguf {
class GgufFile;
}
struct Vocab;

// Tokens llama.cpp recognises by their text or the model's name rather than by GGUF keys, applied
// to a vocabulary whose tokens, types and special ids are loaded: fill-in-the-middle and
// end-of-generation tokens (forced to CONTROL), the end-of-generation set with its per-family
// corrections, and the whitespace-strip attributes of special tokens.
void recognise_special_tokens(Vocab& v, const gguf::GgufFile& file);

} // namespace engine
