# Sharded data parallel through the real CLI (tests/integration/shard/): a model whose DDP
# training does not fit a per-rank cgroup memory cap trains under it with --shard full on 4
# ranks (skipped, with the reason, where no cgroup memory controller is writable).
if(GPULAB_WITH_TRAIN)
  add_test(NAME integration.shard.memory_cap
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/shard/memory_cap_test.sh
                   $<TARGET_FILE:gpulab>)
  set_tests_properties(integration.shard.memory_cap PROPERTIES LABELS "integration;shard"
                       SKIP_RETURN_CODE 77 TIMEOUT 600 RUN_SERIAL TRUE)
endif()
