# Optional libraries of train/ops, included from src/train/CMakeLists.txt after gpulab_train exists.
# oneDNN (GPULAB_HAVE_DNNL: conv.cpp's weight-gradient and 1x1 paths, conv_gemm.cpp, sgemm.cpp)
# is off: those paths were written for Debian's libtorch 1.13, whose fp32 products went through
# the reference BLAS. The wheel brings MKL and its own oneDNN (linked in, symbols hidden), and
# Debian's libdnnl beside it failed its own sgemm (status 3, invalid arguments) in the wheel's
# process; conv.cpp then compiles to libtorch's own path, as on every GPU host.
option(GPULAB_WITH_DNNL "gpulab's oneDNN CPU paths (Debian's libdnnl-dev; see OpsDeps.cmake)" OFF)
if(GPULAB_WITH_DNNL)
  find_path(GPULAB_DNNL_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.hpp)
  find_library(GPULAB_DNNL_LIBRARY NAMES dnnl)
endif()
if(GPULAB_WITH_DNNL AND GPULAB_DNNL_INCLUDE_DIR AND GPULAB_DNNL_LIBRARY)
  # A target-level definition, as DataDeps.cmake's: the shared libtorch PCH stays valid.
  target_include_directories(gpulab_train SYSTEM PRIVATE ${GPULAB_DNNL_INCLUDE_DIR})
  target_link_libraries(gpulab_train PRIVATE ${GPULAB_DNNL_LIBRARY})
  target_compile_definitions(gpulab_train PRIVATE GPULAB_HAVE_DNNL=1)
  message(STATUS "gpulab ops: dnnl=TRUE (${GPULAB_DNNL_LIBRARY})")
else()
  message(STATUS "gpulab ops: dnnl=FALSE (conv uses the plain libtorch path)")
endif()

# The fused attention kernel splits its (sequence, head) tasks with at::parallel_for, whose
# OpenMP body only runs in parallel in a file compiled with -fopenmp (libtorch's backend);
# inside a task, libtorch's products and the BLAS then run single-threaded. GCC only: libtorch
# links GCC's libgomp, and a clang build would bring a second OpenMP runtime (the sanitizer tree
# runs the kernel on one thread).
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/ops/causal_attention.cpp
                              PROPERTIES COMPILE_OPTIONS "${OpenMP_CXX_FLAGS}"
                                         SKIP_PRECOMPILE_HEADERS ON)
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
