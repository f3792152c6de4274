# Signals at the wrong moment (tests/integration/stress/signal_stress.sh): a short run of 3 jobs
# with a fixed seed here, under AddressSanitizer's preloaded run-time (its allocator catches heap
# corruption glibc may miss); `make stress` runs 100 with a fresh seed. A stress hunts rare faults
# (100 s on 2 cores): `make test-long` runs it (label long, CI too); `make test` keeps the
# deterministic interrupt, kill and restart checks (integration.cli.interrupt, integration.ddp.*).
if(GPULAB_WITH_TRAIN)
  add_test(NAME integration.stress.signals_short
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/stress/signal_stress.sh 3
                   $<TARGET_FILE:gpulab> 7)
  set_tests_properties(integration.stress.signals_short PROPERTIES
                       LABELS "integration;stress;long" TIMEOUT 900 RUN_SERIAL TRUE
                       ENVIRONMENT "ASAN=runtime" SKIP_RETURN_CODE 77)
endif()
