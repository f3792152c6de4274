# Finds libtorch: by default the PyTorch wheel of the project's Python environment (.venv, made by
# `make deps`: scripts/install-python-env.sh), or the wheel that CMAKE_PREFIX_PATH / Torch_DIR
# names (a GPU host's own PyTorch, docs/gpu.md). Sets GPULAB_PYTHON, the interpreter whose torch
# this is (the reference the tests and benchmarks compare with), and GPULAB_GLOO_INCLUDE_DIR.
set(GPULAB_VENV "${PROJECT_SOURCE_DIR}/.venv" CACHE PATH "the project's Python environment")
if(NOT Torch_DIR AND EXISTS "${GPULAB_VENV}/bin/python3")
  set(GPULAB_PYTHON "${GPULAB_VENV}/bin/python3" CACHE FILEPATH "the reference interpreter")
  execute_process(COMMAND "${GPULAB_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE prefix OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gpulab: ${GPULAB_PYTHON} cannot import torch: run `make deps`")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${prefix}")
endif()
if(NOT GPULAB_PYTHON)
  find_program(GPULAB_PYTHON NAMES python3 DOC "the reference interpreter")
endif()

# The wheel's Caffe2 config probes the GPU's compute capability with a CUDA program unless told the
# architectures; gpulab compiles no CUDA kernels of its own, so any list the toolkit knows will do.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()
# The toolkit is where Debian's CUDA install puts it, whether or not nvcc is on PATH.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(Torch REQUIRED)
message(STATUS "gpulab: libtorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

# The wheel's include folder also carries the headers of libraries it links statically (fmt 12,
# oneDNN, protobuf, ...). Searched before /usr/include, its fmt broke Debian's spdlog (built for
# fmt 9) and its oneDNN headers would have compiled against Debian's libdnnl. gpulab sees only
# libtorch's own header trees, through a folder of links in the build tree (libtorch's public
# headers include none of the others: checked with g++ -H on every libtorch header gpulab uses).
set(GPULAB_TORCH_INCLUDE "${CMAKE_BINARY_DIR}/torch-include")
file(MAKE_DIRECTORY "${GPULAB_TORCH_INCLUDE}")
foreach(tree ATen c10 torch caffe2 THC kineto)
  if(EXISTS "${TORCH_INSTALL_PREFIX}/include/${tree}" AND NOT EXISTS "${GPULAB_TORCH_INCLUDE}/${tree}")
    file(CREATE_LINK "${TORCH_INSTALL_PREFIX}/include/${tree}" "${GPULAB_TORCH_INCLUDE}/${tree}" SYMBOLIC)
  endif()
endforeach()
list(TRANSFORM TORCH_INCLUDE_DIRS REPLACE "^${TORCH_INSTALL_PREFIX}/include" "${GPULAB_TORCH_INCLUDE}")
foreach(target headeronly c10 c10_cuda torch_cpu torch_cuda torch)
  if(TARGET ${target})
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    if(dirs)
      list(TRANSFORM dirs REPLACE "^${TORCH_INSTALL_PREFIX}/include" "${GPULAB_TORCH_INCLUDE}")
      set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${dirs}")
    endif()
  endif()
endforeach()

# Gloo's headers: the wheel has Gloo compiled in but ships none; `make deps` puts Debian sid's
# (the Gloo Debian builds its PyTorch 2.x with) in the environment. A GPU host may have its own.
find_path(GPULAB_GLOO_INCLUDE_DIR gloo/algorithm.h HINTS "${GPULAB_VENV}/gloo/include" NO_CMAKE_SYSTEM_PATH)

# MKL is inside libtorch_cpu; the wheel's config still adds MKL_ROOT-relative link folders, which
# with no MKL_ROOT became /lib/intel64 and the like in gpulab's RUNPATH.
if(TARGET caffe2::mkl)
  set_property(TARGET caffe2::mkl PROPERTY INTERFACE_LINK_DIRECTORIES "")
endif()

# The wheel's Caffe2 config links the CUDA runtime and NVRTC of the toolkit it found (here
# /usr/local/cuda), while libtorch_cuda loads the wheel's own copies (nvidia/*/lib, through its
# RPATH): with both, whichever the loader met first would serve libtorch (13.0 for a 13.2 wheel).
# gpulab's own CUDA calls (ATen's inline event and stream helpers) go to the wheel's runtime, and
# NVRTC, which gpulab never calls, is left out.
if(TARGET torch::cudart)
  file(GLOB wheel_cudart "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib/libcudart.so.[0-9]*")
  if(wheel_cudart)
    list(GET wheel_cudart 0 wheel_cudart)
    set_property(TARGET torch::cudart PROPERTY INTERFACE_LINK_LIBRARIES "${wheel_cudart}")
    # The toolkit's headers stay (cuda_runtime_api.h for ATen's CUDA headers).
    set_property(TARGET torch::cudart PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}")
    list(FILTER TORCH_LIBRARIES EXCLUDE REGEX "libnvrtc|libcudart")
    message(STATUS "gpulab: CUDA runtime from the wheel: ${wheel_cudart}")
  endif()
endif()
