# SPDX-License-Identifier: GPL-3.0-or-later
# Desktop integration files and the Debian package (CPack DEB). Included from the top-level
# CMakeLists.txt for GUI builds only (not TOKENSCOPE_ENGINE_ONLY).
#   cmake --install build/release --prefix /usr/local     desktop entry, metainfo, icons, binaries
#   (cd build/release && cpack -G DEB)                     build/release/package/tokenscope_<version>_<arch>.deb
# packaging/test_package.sh builds, validates, unpacks and runs the package.
include(GNUInstallDirs)

set(TOKENSCOPE_PACKAGING_DIR ${CMAKE_CURRENT_LIST_DIR})
set(TOKENSCOPE_ICONS_DIR ${PROJECT_SOURCE_DIR}/resources/icons)

# ---- desktop integration -------------------------------------------------------------------------
install(FILES ${TOKENSCOPE_PACKAGING_DIR}/${TOKENSCOPE_APP_ID}.desktop
        DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
install(FILES ${TOKENSCOPE_PACKAGING_DIR}/${TOKENSCOPE_APP_ID}.metainfo.xml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)
# GGUF files as application/x-gguf (glob *.gguf, magic "GGUF"), matching the desktop entry's MimeType.
install(FILES ${TOKENSCOPE_PACKAGING_DIR}/${TOKENSCOPE_APP_ID}.mime.xml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/mime/packages RENAME ${TOKENSCOPE_APP_ID}.xml)
install(FILES ${TOKENSCOPE_ICONS_DIR}/${TOKENSCOPE_APP_ID}.svg
        DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
# PNGs are committed, rendered from the SVG by packaging/render_icons.sh (no build-time SVG renderer).
foreach(size 16 32 48 64 128 256 512)
  install(FILES ${TOKENSCOPE_ICONS_DIR}/hicolor/${size}x${size}/apps/${TOKENSCOPE_APP_ID}.png
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/${size}x${size}/apps)
endforeach()
install(FILES ${TOKENSCOPE_PACKAGING_DIR}/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/tokenscope)

# ---- CPack: Debian package -----------------------------------------------------------------------
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "tokenscope")
set(CPACK_PACKAGE_VENDOR "Tokenscope developers")
set(CPACK_PACKAGE_CONTACT "Tokenscope developers <dev@tokenscope.org>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_HOMEPAGE_URL ${PROJECT_HOMEPAGE_URL})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
    "Tokenscope runs a language model (GGUF) on your own machine and shows every step:\n"
    "text to tokens, the transformer layers, logits, sampling, and the KV cache growing.\n"
    "Includes the desktop app (tokenscope) and a command-line tool (tokenscope-cli).")
string(JOIN "" CPACK_PACKAGE_DESCRIPTION ${CPACK_PACKAGE_DESCRIPTION})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/package)
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_PACKAGE_NAME "tokenscope")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)                # tokenscope_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "Tokenscope developers <dev@tokenscope.org>")
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE ${PROJECT_HOMEPAGE_URL})
# Library dependencies come from dpkg-shlibdeps (dpkg-dev); Qt loads these at run time as plugins,
# which dpkg-shlibdeps cannot see: SQLite driver (history), SVG (icons), platform plugins (xcb, wayland).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libqt6sql6-sqlite, libqt6svg6, qt6-qpa-plugins")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "mesa-vulkan-drivers | vulkan-icd")
# License GPL-3.0-or-later: Debian has no control field for it; it is in /usr/share/doc/tokenscope/copyright.

include(CPack)
