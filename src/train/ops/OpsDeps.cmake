# Optional libraries of train/ops, included from src/train/CMakeLists.txt after gpulab_train exists.
# gpulab's oneDNN paths (a convolution weight gradient and 1x1 products on sgemm, an fp32 linear
# layer, the attention kernel's float32 products) were removed with libtorch 1.13: written for its
# reference-BLAS products, they could not run beside the wheel (Debian's libdnnl failed its own
# sgemm, status 3, in the wheel's process), and the wheel's MKL and oneDNN serve those ops.

# The fused attention kernel splits its (sequence, head) tasks with at::parallel_for, whose
# OpenMP body only runs in parallel in a file compiled with -fopenmp (libtorch's backend);
# inside a task, libtorch's products and the BLAS then run single-threaded. GCC only: libtorch
# links GCC's libgomp, and a clang build would bring a second OpenMP runtime (the sanitizer tree
# runs the kernel on one thread).
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # parallel_chunks.cpp: gpulab's other CPU kernels' chunks on the same threads (no libtorch
  # header there, so no PCH lost).
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/ops/causal_attention.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/parallel_chunks.cpp
                              PROPERTIES COMPILE_OPTIONS "${OpenMP_CXX_FLAGS}"
                                         SKIP_PRECOMPILE_HEADERS ON SKIP_UNITY_BUILD_INCLUSION ON)
  # The runtime only: the imported target would put -fopenmp on every file (and void the PCH).
  # The wheel ships its own libgomp.so.1, which libtorch_cpu loads: link that one, so the process
  # has one OpenMP runtime whichever copy the loader meets first.
  find_library(GPULAB_TORCH_GOMP NAMES libgomp.so.1 PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
  if(GPULAB_TORCH_GOMP)
    target_link_libraries(gpulab_train PRIVATE ${GPULAB_TORCH_GOMP})
  else()
    target_link_libraries(gpulab_train PRIVATE ${OpenMP_CXX_LIBRARIES})
  endif()
  message(STATUS "gpulab ops: attention tasks in parallel (OpenMP ${OpenMP_CXX_VERSION})")
endif()
