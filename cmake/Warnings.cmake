# Warning flags for gpulab's own targets (third-party headers are included as SYSTEM).
function(gpulab_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
  if(GPULAB_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Precompiled headers: PCH names the headers a target precompiles; PCH_FROM reuses another
# target's (libtorch's PCH is ~750 MB per copy, so one copy serves train, bench and their tests).
function(gpulab_pch target pch from)
  if(from)
    target_precompile_headers(${target} REUSE_FROM ${from})
  elseif(pch)
    target_precompile_headers(${target} PRIVATE ${pch})
  endif()
endfunction()

# Declares a module library from the .cpp files of its folder (recursively).
function(gpulab_module name)
  cmake_parse_arguments(M "" "PCH_FROM" "DEPS;PCH" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(NOT srcs)
    # A module with headers only (or not yet written) still gives its dependants the include path.
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${name} INTERFACE ${M_DEPS})
    return()
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${M_DEPS})
  gpulab_warnings(${name})
  gpulab_pch(${name} "${M_PCH}" "${M_PCH_FROM}")
  # The libtorch modules (PCH_FROM) take their unity batches from gpulab_unity instead.
  if(NOT M_PCH_FROM)
    gpulab_unity_by_folder(${name})
  endif()
endfunction()
