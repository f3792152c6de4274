# GPULAB_SANITIZE: every target built with ASan + UBSan (a separate tree: `make sanitize`). With
# clang, code also carries libFuzzer's coverage hooks so the request fuzz target links here too.
if(GPULAB_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
endif()
