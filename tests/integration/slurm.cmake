# gpulab on a real Slurm cluster (tests/integration/slurm/slurm_test.sh): a controller and two
# slurmd nodes in network namespaces, started once for all cases (fixture), then 2x2-rank
# equivalence with one process, scancel, requeue + resume, the sbatch script gpulab writes, and
# a node killed mid-run (last: it leaves node2 down). Skipped (77) where the machine cannot.
if(GPULAB_WITH_TRAIN)
  set(slurm_cases start equivalence cancel requeue script nodefail stop)
  set(prev "")
  foreach(case ${slurm_cases})
    add_test(NAME integration.slurm.${case}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/slurm/slurm_test.sh ${case}
                     ${CMAKE_BINARY_DIR}/gpulab)
    # One cluster at a time, and none beside other namespace tests.
    set_tests_properties(integration.slurm.${case} PROPERTIES LABELS "integration;slurm"
                         SKIP_RETURN_CODE 77 TIMEOUT 300 RESOURCE_LOCK "slurm;netns")
    if(case STREQUAL "start")
      set_tests_properties(integration.slurm.${case} PROPERTIES FIXTURES_SETUP slurm_cluster)
    elseif(case STREQUAL "stop")
      set_tests_properties(integration.slurm.${case} PROPERTIES FIXTURES_CLEANUP slurm_cluster)
    else()
      set_tests_properties(integration.slurm.${case} PROPERTIES FIXTURES_REQUIRED slurm_cluster)
    endif()
    if(prev)
      set_tests_properties(integration.slurm.${case} PROPERTIES DEPENDS ${prev})
    endif()
    set(prev integration.slurm.${case})
  endforeach()
endif()
