# Signals at the wrong moment (tests/integration/stress/signal_stress.sh): a short run of 3 jobs
# with a fixed seed here, under AddressSanitizer's preloaded run-time (its allocator catches heap
# corruption glibc may miss); `make stress` runs 100 with a fresh seed.
if(GPULAB_WITH_TRAIN)
  add_test(NAME integration.stress.signals_short
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/stress/signal_stress.sh 3
                   $<TARGET_FILE:gpulab> 7)
  set_tests_properties(integration.stress.signals_short PROPERTIES LABELS "integration;stress"
                       TIMEOUT 900 RUN_SERIAL TRUE ENVIRONMENT "ASAN=runtime"
                       SKIP_RETURN_CODE 77)
endif()
