# make gpu-check on a machine without a GPU: refuses before building, with what is missing; its
# report reads real gpulab and reference outputs (tests/integration/gpu_check/gpu_check_test.sh).
if(GPULAB_WITH_TRAIN)
  add_test(NAME integration.gpu_check.no_gpu
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/gpu_check/gpu_check_test.sh
                   $<TARGET_FILE:gpulab> ${GPULAB_PYTHON})
  set_tests_properties(integration.gpu_check.no_gpu PROPERTIES LABELS "integration;gpu"
                       TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
