# Unity builds for the targets whose files include libtorch: on 2 cores most of a clean build
# is spent loading libtorch's 750 MB header image and instantiating its templates once per file;
# compiling GPULAB_UNITY_BATCH files as one unit pays that once per batch. Off for quick
# incremental rebuilds of one file (-DGPULAB_UNITY=OFF, or CMAKE_FLAGS in the Makefile).
option(GPULAB_UNITY "compile libtorch targets several files per unit (faster clean builds)" ON)
set(GPULAB_UNITY_BATCH 8 CACHE STRING "files per unit when GPULAB_UNITY is on")

function(gpulab_unity target)
  if(GPULAB_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                                               UNITY_BUILD_BATCH_SIZE ${GPULAB_UNITY_BATCH})
  endif()
endfunction()
