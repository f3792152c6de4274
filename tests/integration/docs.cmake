# The command blocks of README.md and docs/*.md marked runnable run as written, offline
# (tests/integration/docs/runnable_test.sh).
if(GPULAB_WITH_TRAIN)
  add_test(NAME integration.docs.runnable
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/docs/runnable_test.sh
                   ${PROJECT_SOURCE_DIR} $<TARGET_FILE:gpulab>)
  set_tests_properties(integration.docs.runnable PROPERTIES LABELS "integration;docs" TIMEOUT 1200)
endif()
