# Toolchain file: C11 -> wasm32-wasi with SIMD128.
# Uses $WASI_SDK_PATH (a real wasi-sdk) when set, else Debian's clang + lld + wasi-libc
# (packages clang, lld, wasi-libc, libclang-rt-14-dev-wasm32). The relaxed-SIMD builds use a second clang
# (>= 16; CMakeLists.txt AE_RELAXED_CC: $WASI_SDK_PATH's clang when it is one, else the newest clang-N).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_VERSION 1)
set(CMAKE_SYSTEM_PROCESSOR wasm32)
set(triple wasm32-wasi)

if(DEFINED ENV{WASI_SDK_PATH} AND EXISTS "$ENV{WASI_SDK_PATH}/bin/clang")
  set(CMAKE_C_COMPILER "$ENV{WASI_SDK_PATH}/bin/clang")
  set(CMAKE_AR "$ENV{WASI_SDK_PATH}/bin/llvm-ar" CACHE FILEPATH "")
  set(CMAKE_RANLIB "$ENV{WASI_SDK_PATH}/bin/llvm-ranlib" CACHE FILEPATH "")
  set(CMAKE_SYSROOT "$ENV{WASI_SDK_PATH}/share/wasi-sysroot")
else()
  find_program(AE_CLANG NAMES clang clang-14 REQUIRED)
  set(CMAKE_C_COMPILER "${AE_CLANG}")
  find_program(AE_AR NAMES llvm-ar llvm-ar-14 ar)
  set(CMAKE_AR "${AE_AR}" CACHE FILEPATH "")
endif()

set(CMAKE_C_COMPILER_TARGET ${triple})
set(CMAKE_C_COMPILER_WORKS ON)   # no executable can run here; skip the try-run
set(CMAKE_EXECUTABLE_SUFFIX ".wasm")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
