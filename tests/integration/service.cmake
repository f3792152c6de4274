# gpulab serve against a real dockerd: the demo guide's curl walkthrough as a script.
if(GPULAB_WITH_SERVICE)
  add_test(NAME integration.service_walkthrough
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/service_walkthrough.sh
                   ${CMAKE_BINARY_DIR}/gpulab)
  # Uses the guide's fixed host ports (3002-6002, SSH 3311/3322): one at a time.
  set_tests_properties(integration.service_walkthrough PROPERTIES
                       LABELS "integration;service" SKIP_RETURN_CODE 77 TIMEOUT 600
                       RESOURCE_LOCK "service_fixed_ports")
  if(TEST dockerd_start)
    set_tests_properties(integration.service_walkthrough PROPERTIES FIXTURES_REQUIRED dockerd)
  endif()
endif()
