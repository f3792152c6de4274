# The tests that need a GPU, under one label (needs-gpu): each skips with "no GPU" on a machine
# without one, and `make gpu-check` runs them on a GPU host (tests/integration/needs_gpu/).
if(GPULAB_WITH_TRAIN)
  foreach(case detect parity reference nccl_allreduce allocator exit_path tp_mesh)
    add_test(NAME integration.needs_gpu.${case}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/needs_gpu/needs_gpu_test.sh ${case}
                     $<TARGET_FILE:gpulab>)
    set_tests_properties(integration.needs_gpu.${case} PROPERTIES LABELS "integration;needs-gpu"
                         TIMEOUT 300 SKIP_RETURN_CODE 77)
  endforeach()
endif()
