# The CMake flags of gpulab's GPU-host build (docs/gpu.md), sourced by gpu-check.sh (building on
# the host) and gpu-prebuilt.sh (building elsewhere for it): the trainer alone, warnings not fatal
# (counted instead), against the libtorch at $1 (torch.utils.cmake_prefix_path) with the
# header-only packages at $2 (.deps).
gpu_host_cmake_flags() {
  GPU_HOST_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGPULAB_WITH_SERVICE=OFF -DGPULAB_WITH_BUILDER=OFF
                  -DGPULAB_BUILD_TESTS=OFF -DGPULAB_WERROR=OFF -DCMAKE_PREFIX_PATH="$1"
                  -DGPULAB_DEPS_ROOT="$2")
}
