# SPDX-License-Identifier: GPL-3.0-or-later
# GPU backends are optional: a missing toolchain switches the backend off instead of failing the build.
if(TOKENSCOPE_VULKAN)
  find_package(Vulkan QUIET)
  find_program(TOKENSCOPE_GLSLC glslc)
  if(NOT Vulkan_FOUND OR NOT TOKENSCOPE_GLSLC)
    message(STATUS "Vulkan SDK or glslc not found: Vulkan backend off")
    set(TOKENSCOPE_VULKAN OFF CACHE BOOL "Vulkan compute backend" FORCE)
  endif()
endif()

if(TOKENSCOPE_CUDA)
  # Named before CUDA is enabled: CMake 3.25's `native`/`all` lists fail with CUDA 13 (and `native`
  # needs a GPU). Hopper code plus PTX that any Turing-or-newer driver compiles; release builds may add
  # more with -DCMAKE_CUDA_ARCHITECTURES=….
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "90;75-virtual" CACHE STRING "CUDA targets")
  endif()
  # The toolkit is not a Debian package: it lives in /usr/local/cuda on the development and CI machines.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
  else()
    message(STATUS "nvcc not found: CUDA backend off")
    set(TOKENSCOPE_CUDA OFF CACHE BOOL "CUDA backend" FORCE)
  endif()
endif()
