# Full-size (default input size) eval parity of every model against torchvision: minutes of CPU,
# so it runs only when asked: GPULAB_SLOW_TESTS=1 ctest -L slow. CI checks every model at a
# small size through test_train's EvalParity tests.
if(TARGET test_train)
  add_test(NAME model_parity_full_size
           COMMAND sh -c "if [ -z \"$GPULAB_SLOW_TESTS\" ]; then echo 'skipped: set GPULAB_SLOW_TESTS=1 to run'; exit 77; fi; exec \"$0\" --gtest_filter='*/EvalParity.*'"
                   $<TARGET_FILE:test_train>)
  set_tests_properties(model_parity_full_size PROPERTIES LABELS slow SKIP_RETURN_CODE 77
                                                         TIMEOUT 7200)
endif()
