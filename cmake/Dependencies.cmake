# Finds gpulab's dependencies; header-only ones may come from GPULAB_DEPS_ROOT (dpkg -x tree).
if(GPULAB_DEPS_ROOT)
  list(PREPEND CMAKE_PREFIX_PATH "${GPULAB_DEPS_ROOT}/usr" "${GPULAB_DEPS_ROOT}/usr/lib/x86_64-linux-gnu/cmake")
  include_directories(SYSTEM "${GPULAB_DEPS_ROOT}/usr/include")
endif()

find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 CONFIG QUIET)
find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
find_path(FMT_INCLUDE_DIR fmt/format.h REQUIRED)
find_path(SPDLOG_INCLUDE_DIR spdlog/spdlog.h REQUIRED)

# fmt and spdlog from their headers alone, so a GPU host needs no compiled library of theirs. Their
# compiled parts are built once (src/third_party) instead of in every unit as header-only mode
# does (the two cost a service unit 12 of its 37 CPU-s; docs/benchmarks.md, session 37). The
# sanitizer trees stay header-only: CI compiles them file by file from its cache, and a new
# definition on every file would recompile them whole (their scripts: `make sanitize`).
add_library(gpulab_fmt_spdlog INTERFACE)
target_include_directories(gpulab_fmt_spdlog SYSTEM INTERFACE ${FMT_INCLUDE_DIR} ${SPDLOG_INCLUDE_DIR})
if(GPULAB_SANITIZE)
  target_compile_definitions(gpulab_fmt_spdlog INTERFACE FMT_HEADER_ONLY SPDLOG_HEADER_ONLY
                                                         SPDLOG_FMT_EXTERNAL)
else()
  add_library(gpulab_fmt_spdlog_impl STATIC ${PROJECT_SOURCE_DIR}/src/third_party/fmt_compiled.cpp
                                            ${PROJECT_SOURCE_DIR}/src/third_party/spdlog_compiled.cpp)
  target_include_directories(gpulab_fmt_spdlog_impl SYSTEM PUBLIC ${FMT_INCLUDE_DIR}
                                                                  ${SPDLOG_INCLUDE_DIR})
  target_compile_definitions(gpulab_fmt_spdlog_impl PUBLIC SPDLOG_COMPILED_LIB SPDLOG_FMT_EXTERNAL)
  target_link_libraries(gpulab_fmt_spdlog_impl PUBLIC Threads::Threads)
  target_link_libraries(gpulab_fmt_spdlog INTERFACE gpulab_fmt_spdlog_impl)
endif()

add_library(gpulab_headeronly INTERFACE)
target_include_directories(gpulab_headeronly SYSTEM INTERFACE ${CLI11_INCLUDE_DIR})
target_link_libraries(gpulab_headeronly INTERFACE gpulab_fmt_spdlog nlohmann_json::nlohmann_json
                                                  Threads::Threads ${CMAKE_DL_LIBS})

if(GPULAB_WITH_TRAIN)
  include(${PROJECT_SOURCE_DIR}/cmake/Torch.cmake)
  # Torch's imported targets carry its include dirs; make them SYSTEM so its warnings stay out.
  add_library(gpulab_torch INTERFACE)
  target_include_directories(gpulab_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  target_link_libraries(gpulab_torch INTERFACE ${TORCH_LIBRARIES})
  # Every executable that links libtorch binds the standard library to libstdc++ (LinkOrder.cmake).
  target_link_options(gpulab_torch INTERFACE "${GPULAB_STDCXX_FIRST}")
  # The sanitizer trees give -g1 (GPULAB_DEBUG_INFO, CMakeLists.txt) to libtorch files only, as
  # their cached objects were built (a unit of 8 such files: 40 CPU-s instead of 63).
  if(GPULAB_SANITIZE AND GPULAB_DEBUG_INFO STREQUAL "lines")
    target_compile_options(gpulab_torch INTERFACE $<$<CONFIG:RelWithDebInfo>:-g1>)
  endif()
  # A CUDA (or ROCm/HIP, which exposes itself as CUDA) libtorch: compile the device paths.
  if(TARGET torch_cuda OR TARGET torch_hip OR TORCH_CUDA_LIBRARIES)
    target_compile_definitions(gpulab_torch INTERFACE GPULAB_WITH_CUDA=1)
    # The wheel's libtorch has the NCCL process group but not nccl.h, which is in the NCCL wheel
    # beside it (site-packages/nvidia/nccl/include); without it the NCCL path is compiled out.
    find_path(GPULAB_NCCL_INCLUDE_DIR nccl.h
              HINTS ENV NCCL_INCLUDE_DIR "${Torch_DIR}/../../../../nvidia/nccl/include"
                    "${CUDAToolkit_INCLUDE_DIRS}")
    if(GPULAB_NCCL_INCLUDE_DIR)
      target_include_directories(gpulab_torch SYSTEM INTERFACE ${GPULAB_NCCL_INCLUDE_DIR})
      message(STATUS "gpulab: nccl.h in ${GPULAB_NCCL_INCLUDE_DIR}")
    else()
      message(STATUS "gpulab: no nccl.h found (set NCCL_INCLUDE_DIR): the NCCL backend is off")
    endif()
  endif()
  # Gloo (CPU ranks) only where its headers are (cmake/Torch.cmake): without them a build has
  # NCCL (or RCCL) and no Gloo (train/dist/compat.h).
  if(GPULAB_GLOO_INCLUDE_DIR)
    target_include_directories(gpulab_torch SYSTEM INTERFACE ${GPULAB_GLOO_INCLUDE_DIR})
    target_compile_definitions(gpulab_torch INTERFACE GPULAB_HAVE_GLOO=1)
    message(STATUS "gpulab: gloo/ headers in ${GPULAB_GLOO_INCLUDE_DIR}")
  else()
    message(STATUS "gpulab: no gloo/ headers beside this libtorch: the Gloo backend is off")
  endif()
endif()

if(GPULAB_WITH_SERVICE OR GPULAB_WITH_BUILDER)
  find_package(CURL REQUIRED)
  find_package(SQLite3 REQUIRED)
  find_package(Boost 1.74 REQUIRED)
  find_package(OpenSSL REQUIRED)
endif()
