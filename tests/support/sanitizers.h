// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Whether this test binary runs under AddressSanitizer (the sanitizer tree): memory is not measured
// there (its shadow memory and quarantine are not the program's), and long replays are sampled.
// GCC says so with __SANITIZE_ADDRESS__, clang with __has_feature.

namespace testsupport {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

} // namespace testsupport
