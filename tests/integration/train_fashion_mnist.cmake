# Real data, real accuracy: gpulab train reaches >= 90% on Fashion-MNIST in 3 epochs (CPU, 534 s
# on 2 cores in issue 45): long by nature, so in `make test-long` (label long), which CI runs too.
if(GPULAB_WITH_TRAIN)
  add_test(NAME integration.train_fashion_mnist
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_fashion_mnist.sh
                   ${CMAKE_BINARY_DIR}/gpulab)
  # Uses every core: run it alone.
  set_tests_properties(integration.train_fashion_mnist PROPERTIES LABELS "integration;long"
                       SKIP_RETURN_CODE 77 TIMEOUT 1800 RUN_SERIAL TRUE)
endif()
