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
# The dashboard in a real headless Chromium (python3-selenium + chromium-driver) against gpulab
# serve on the test dockerd, at 1280x800 and 375x812. Skipped (77) without chromium or dockerd.
if(GPULAB_WITH_SERVICE)
  add_test(NAME integration.dashboard_browser
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/dashboard/browser_test.py
                   ${CMAKE_BINARY_DIR}/gpulab --screenshots ${CMAKE_BINARY_DIR}/dashboard-screenshots)
  set_tests_properties(integration.dashboard_browser PROPERTIES
                       LABELS "integration;service;browser" SKIP_RETURN_CODE 77 TIMEOUT 600)
  if(TEST dockerd_start)
    set_tests_properties(integration.dashboard_browser PROPERTIES FIXTURES_REQUIRED dockerd)
  endif()
endif()
