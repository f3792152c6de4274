# Real Docker engines for the tests that need one: started once before them and stopped after
# (tests/integration/dockerd/). Test binaries opt in with `FIXTURES_REQUIRED dockerd`.
set(GPULAB_DOCKERD_DIR ${CMAKE_CURRENT_LIST_DIR}/dockerd)
add_test(NAME dockerd_start COMMAND ${GPULAB_DOCKERD_DIR}/ctest-fixture.sh start)
set_tests_properties(dockerd_start PROPERTIES FIXTURES_SETUP dockerd SKIP_RETURN_CODE 77 TIMEOUT 300
                                              LABELS docker)
add_test(NAME dockerd_stop COMMAND ${GPULAB_DOCKERD_DIR}/ctest-fixture.sh stop)
set_tests_properties(dockerd_stop PROPERTIES FIXTURES_CLEANUP dockerd TIMEOUT 120 LABELS docker)
