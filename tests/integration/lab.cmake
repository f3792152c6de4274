# Lab images and gpulab ddp end to end (tests/integration/lab/lab_test.sh): error cases, the cpu
# lab image with an ssh login through gpulab serve, and 2-rank training in a container.
if(GPULAB_WITH_BUILDER AND GPULAB_WITH_SERVICE AND GPULAB_WITH_TRAIN)
  foreach(case errors image ddp ddp_service)
    add_test(NAME integration.lab.${case}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/lab/lab_test.sh ${case}
                     ${CMAKE_BINARY_DIR}/gpulab)
    set_tests_properties(integration.lab.${case} PROPERTIES LABELS "integration;lab"
                         SKIP_RETURN_CODE 77 TIMEOUT 1500 RESOURCE_LOCK lab_images)
    if(TEST dockerd_start)
      set_tests_properties(integration.lab.${case} PROPERTIES FIXTURES_REQUIRED dockerd)
    endif()
  endforeach()
  # The ddp case reuses the image the image case built; order them.
  set_tests_properties(integration.lab.ddp integration.lab.ddp_service PROPERTIES
                       DEPENDS integration.lab.image)
endif()
