# Unity builds: on 2 cores most of a clean build is spent parsing headers (libtorch's 750 MB
# header image, Boost.Beast, nlohmann/json) and generating the same template instances (fmt,
# spdlog, json) once per file; compiling several files as one unit pays that once per unit. Off for
# quick incremental rebuilds of one file (-DGPULAB_UNITY=OFF, or CMAKE_FLAGS in the Makefile).
option(GPULAB_UNITY "compile several files per unit (faster clean builds)" ON)
set(GPULAB_UNITY_BATCH 8 CACHE STRING "files per unit when GPULAB_UNITY is on")

# The libtorch targets: GPULAB_UNITY_BATCH files per unit in source order.
function(gpulab_unity target)
  if(GPULAB_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                                               UNITY_BUILD_BATCH_SIZE ${GPULAB_UNITY_BATCH})
  endif()
endfunction()

# The others: units of at most GPULAB_UNITY_BATCH files of one folder, so that a file added to a
# folder moves only that folder's units (and their cached objects), not the whole target's.
# Generated sources and those marked SKIP_UNITY_BUILD_INCLUSION compile alone.
function(gpulab_unity_by_folder target)
  if(NOT GPULAB_UNITY)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  get_target_property(srcs ${target} SOURCES)
  set(folder "")
  set(count 0)
  foreach(src IN LISTS srcs)
    get_source_file_property(skip ${src} SKIP_UNITY_BUILD_INCLUSION)
    get_source_file_property(generated ${src} GENERATED)
    if(NOT src MATCHES "\\.cpp$" OR skip OR generated)
      continue()
    endif()
    get_filename_component(dir ${src} ABSOLUTE)
    get_filename_component(dir ${dir} DIRECTORY)
    if(NOT dir STREQUAL folder)
      set(folder ${dir})
      set(count 0)
    endif()
    math(EXPR unit "${count} / ${GPULAB_UNITY_BATCH}")
    math(EXPR count "${count} + 1")
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${dir})
    string(MAKE_C_IDENTIFIER "${rel}_${unit}" group)
    set_source_files_properties(${src} PROPERTIES UNITY_GROUP ${group})
  endforeach()
endfunction()

# A libtorch target's files kept out of its batches (SKIP_UNITY_BUILD_INCLUSION: written after
# the batches were laid out, so that adding them moved no batch) move to an object library
# `late` with the target's settings, compiled in units by folder, its objects linked into the
# target. Files with flags of their own (COMPILE_OPTIONS or COMPILE_DEFINITIONS) stay and compile
# alone. The settings are copied when it is called: call it after the target's last setting.
function(gpulab_unity_late target late)
  if(NOT GPULAB_UNITY)
    return()
  endif()
  get_target_property(srcs ${target} SOURCES)
  set(keep)
  set(moved)
  foreach(src IN LISTS srcs)
    get_source_file_property(skip ${src} SKIP_UNITY_BUILD_INCLUSION)
    get_source_file_property(opts ${src} COMPILE_OPTIONS)
    get_source_file_property(defs ${src} COMPILE_DEFINITIONS)
    if(skip AND NOT opts AND NOT defs)
      list(APPEND moved ${src})
    else()
      list(APPEND keep ${src})
    endif()
  endforeach()
  if(NOT moved)
    return()
  endif()
  set_property(TARGET ${target} PROPERTY SOURCES ${keep})
  set_source_files_properties(${moved} PROPERTIES SKIP_UNITY_BUILD_INCLUSION OFF)
  add_library(${late} OBJECT ${moved})
  foreach(p INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS LINK_LIBRARIES
            PRECOMPILE_HEADERS_REUSE_FROM)
    get_target_property(v ${target} ${p})
    if(v)
      set_property(TARGET ${late} PROPERTY ${p} "${v}")
    endif()
  endforeach()
  gpulab_unity_by_folder(${late})
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:${late}>)
endfunction()
