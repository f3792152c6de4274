# gpulab-torch (gpulab's libtorch half) binds the C++ standard library to libstdc++ even beside a
# libtorch that exports its own std::filesystem (tests/integration/link/link_test.sh;
# cmake/LinkOrder.cmake says why).
if(GPULAB_WITH_TRAIN AND NOT GPULAB_SANITIZE)
  set(GPULAB_LINK_CUDA 0)
  if(TARGET torch_cuda)
    set(GPULAB_LINK_CUDA 1)
  endif()
  add_library(gpulab_trap_stdfs SHARED integration/link/trap_stdfs.cpp)
  foreach(kind fixed plain)
    add_executable(link_probe_${kind} integration/link/probe.cpp)
    target_link_libraries(link_probe_${kind} PRIVATE gpulab_trap_stdfs)
    gpulab_warnings(link_probe_${kind})
  endforeach()
  gpulab_link_stdcxx_first(link_probe_fixed)
  add_test(NAME integration.link.stdcxx_first
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/link/link_test.sh
                   $<TARGET_FILE:gpulab-torch> $<TARGET_FILE:link_probe_fixed>
                   $<TARGET_FILE:link_probe_plain> ${GPULAB_LINK_CUDA})
  set_tests_properties(integration.link.stdcxx_first PROPERTIES LABELS "integration;link"
                       TIMEOUT 60)
endif()

# The shipped binaries have no test hooks (train/test_hooks.h); the test binary gpulab-hooks has.
if(TARGET gpulab-hooks)
  add_test(NAME integration.link.no_test_hooks
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/link/no_test_hooks.sh
                   ${CMAKE_CURRENT_SOURCE_DIR}/support/env_test_hooks.cpp
                   $<TARGET_FILE:gpulab-hooks> $<TARGET_FILE:gpulab> $<TARGET_FILE:gpulab-torch>)
  set_tests_properties(integration.link.no_test_hooks PROPERTIES LABELS "integration;link"
                       TIMEOUT 120)
endif()
