// SPDX-License-Identifier: GPL-3.0-or-later
// Byte-level reads from a storage buffer declared as `uint w_words[]` by the including shader, so
// that no 8- or 16-bit storage extension is needed. Byte offsets of 16-bit fields are even.
#ifndef TOKENSCOPE_BYTES_GLSL
#define TOKENSCOPE_BYTES_GLSL

uint ld8(uint b) { return (w_words[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }
int ld8s(uint b) { return bitfieldExtract(int(w_words[b >> 2]), int((b & 3u) * 8u), 8); }
uint ld16(uint b) { return (w_words[b >> 2] >> ((b & 2u) * 8u)) & 0xFFFFu; }
// Four bytes from any offset (the buffer is padded to whole words).
uint ld32(uint b)
{
    const uint s = (b & 3u) * 8u;
    const uint lo = w_words[b >> 2];
    if (s == 0u)
        return lo;
    return (lo >> s) | (w_words[(b >> 2) + 1u] << (32u - s));
}
float ld_half(uint b) { return unpackHalf2x16(ld16(b)).x; }

#endif
