# SPDX-License-Identifier: GPL-3.0-or-later
# Warnings for our own targets only (third-party headers come in as SYSTEM includes).
function(tokenscope_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Wno-missing-field-initializers
                                           $<$<BOOL:${TOKENSCOPE_WERROR}>:-Werror>)
endfunction()
