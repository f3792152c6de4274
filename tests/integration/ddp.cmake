# Multi-process DDP through the real CLI (tests/integration/ddp/ddp_test.sh): 1 vs 2 vs 3 ranks,
# ZeRO-1/2/3, sharded checkpoints and sharded mixed precision on a language model, 4 ranks over two network namespaces
# (DDP and --shard full), SIGKILL and SIGSTOP of a rank, --max_restarts resume, a
# rank that hangs while running (default hang detection), and bad options rejected before any
# rank starts; a sharded checkpoint into a full disk (a small tmpfs).
if(GPULAB_WITH_TRAIN)
  foreach(case equivalence shard shard_mixed multinode kill hang restart stall options disk_full)
    # The stall case needs the fault hooks, which only the test build's gpulab-hooks has; the
    # equivalence case runs its nudged-gradient control with them.
    set(bin gpulab)
    set(hooks "")
    if(case STREQUAL "stall")
      set(bin gpulab-hooks)
    elseif(case STREQUAL "equivalence")
      set(hooks $<TARGET_FILE:gpulab-hooks>)
    endif()
    add_test(NAME integration.ddp.${case}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/ddp/ddp_test.sh ${case}
                     $<TARGET_FILE:${bin}> ${hooks})
    # The cases that compare numbers only share the machine (two of ctest's slots, as every
    # direct test: tests/CMakeLists.txt); those that time a rank's death, a hang or a restart, or
    # make namespaces, run alone (ctest keeps those for the end, where the machine was a third idle).
    set(alone RUN_SERIAL TRUE)
    if(case MATCHES "^(equivalence|shard|shard_mixed|options)$")
      set(alone "")
    endif()
    set_tests_properties(integration.ddp.${case} PROPERTIES LABELS "integration;ddp"
                         SKIP_RETURN_CODE 77 TIMEOUT 900 ${alone})
  endforeach()
endif()
