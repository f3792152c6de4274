# CLI conventions through the real binary (tests/integration/cli/cli_test.sh): every --json is one
# JSON document on stdout; usage errors have the error:/hint: shape; every kebab-case flag has a
# snake_case spelling; a flag the training commands share is declared one way; Ctrl-C leaves a checkpoint to resume from; a crash prints its
# stack; a long CPU run says so; a data
# error with two ranks is said once; --device cuda on a CPU-only libtorch is one clear error;
# gpulab runs its own commands without libtorch and the others in gpulab-torch.
if(GPULAB_WITH_TRAIN)
foreach(case json usage spelling flag_tables interrupt crash_report long_run data_error no_cuda
             two_binaries)
  add_test(NAME integration.cli.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/cli/cli_test.sh ${case}
                   $<TARGET_FILE:gpulab>)
  set_tests_properties(integration.cli.${case} PROPERTIES LABELS "integration;cli" TIMEOUT 900
                       SKIP_RETURN_CODE 77)
endforeach()
endif()
