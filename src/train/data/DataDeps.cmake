# Optional libraries of train/data: each one found adds a feature, none is required, so the train
# module still builds from libtorch and header-only libraries alone (a GPU host without apt).
#   zlib        gzipped IDX files, tar.gz unpacking       GPULAB_HAVE_ZLIB
#   turbojpeg   JPEG in ImageFolder                       GPULAB_HAVE_TURBOJPEG
#   libpng      PNG in ImageFolder                        GPULAB_HAVE_PNG
#   libcurl     gpulab data get                           GPULAB_HAVE_CURL
#   sentencepiece  SentencePiece tokenizers (else bytes)  GPULAB_HAVE_SENTENCEPIECE
#   pcre2       tokenizer.json pre-tokenizer expressions  GPULAB_HAVE_PCRE2
#   icu-uc      NFC for tokenizer.json (Qwen2)            GPULAB_HAVE_ICU
function(gpulab_data_deps target)
  find_package(ZLIB QUIET)
  if(ZLIB_FOUND)
    target_link_libraries(${target} PRIVATE ZLIB::ZLIB)
    target_compile_definitions(${target} PRIVATE GPULAB_HAVE_ZLIB=1)
  endif()
  find_package(PNG QUIET)
  if(PNG_FOUND)
    target_link_libraries(${target} PRIVATE PNG::PNG)
    target_compile_definitions(${target} PRIVATE GPULAB_HAVE_PNG=1)
  endif()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(TURBOJPEG QUIET IMPORTED_TARGET libturbojpeg)
    if(TURBOJPEG_FOUND)
      target_link_libraries(${target} PRIVATE PkgConfig::TURBOJPEG)
      target_compile_definitions(${target} PRIVATE GPULAB_HAVE_TURBOJPEG=1)
    endif()
    pkg_check_modules(SENTENCEPIECE QUIET IMPORTED_TARGET sentencepiece)
    if(SENTENCEPIECE_FOUND)
      # Not linked into the target: its bundled protobuf clashes with libtorch's, so it sits in
      # a module of its own that tokenizer_sentencepiece.cpp loads privately (src/spm/).
      add_library(gpulab_spm MODULE ${PROJECT_SOURCE_DIR}/src/spm/spm_shim.cpp)
      target_link_libraries(gpulab_spm PRIVATE PkgConfig::SENTENCEPIECE)
      gpulab_warnings(gpulab_spm)
      set_target_properties(gpulab_spm PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
      add_dependencies(${target} gpulab_spm)
      target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
      # Only the one file that loads it sees the macros (and it needs no libtorch PCH), so
      # having SentencePiece or not leaves every other object of the target as it was.
      set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/data/tokenizer_sentencepiece.cpp
        PROPERTIES COMPILE_DEFINITIONS
          "GPULAB_HAVE_SENTENCEPIECE=1;GPULAB_SPM_MODULE=\"${CMAKE_BINARY_DIR}/libgpulab_spm.so\""
        SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endif()
  gpulab_hf_tokenizer_deps(${target})
  find_package(CURL QUIET)
  if(CURL_FOUND)
    target_link_libraries(${target} PRIVATE CURL::libcurl)
    target_compile_definitions(${target} PRIVATE GPULAB_HAVE_CURL=1)
  endif()
  message(STATUS "gpulab data: zlib=${ZLIB_FOUND} png=${PNG_FOUND} turbojpeg=${TURBOJPEG_FOUND} curl=${CURL_FOUND} sentencepiece=${SENTENCEPIECE_FOUND} pcre2=${PCRE2_FOUND} icu=${ICU_FOUND}")
endfunction()

# The tokenizer.json files (data/hf_*.cpp, data/tokenizer_hf.cpp) and the chat formats need no
# libtorch: they are compiled on their own, outside the unity batches and the PCH, and only they
# see the PCRE2 and ICU macros, so having those libraries or not leaves every other object as it was.
function(gpulab_hf_tokenizer_deps target)
  file(GLOB hf_srcs ${CMAKE_CURRENT_SOURCE_DIR}/data/hf_*.cpp)
  list(APPEND hf_srcs ${CMAKE_CURRENT_SOURCE_DIR}/data/tokenizer_hf.cpp
       ${CMAKE_CURRENT_SOURCE_DIR}/data/chat_format.cpp)
  set(hf_defs "")
  if(PkgConfig_FOUND)
    pkg_check_modules(PCRE2 QUIET IMPORTED_TARGET libpcre2-8)
    if(PCRE2_FOUND)
      target_link_libraries(${target} PRIVATE PkgConfig::PCRE2)
      list(APPEND hf_defs GPULAB_HAVE_PCRE2=1)
    endif()
    pkg_check_modules(ICU QUIET IMPORTED_TARGET icu-uc)
    if(ICU_FOUND)
      target_link_libraries(${target} PRIVATE PkgConfig::ICU)
      list(APPEND hf_defs GPULAB_HAVE_ICU=1)
    endif()
  endif()
  set_source_files_properties(${hf_srcs} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON
                              SKIP_PRECOMPILE_HEADERS ON COMPILE_DEFINITIONS "${hf_defs}")
  set(PCRE2_FOUND ${PCRE2_FOUND} PARENT_SCOPE)
  set(ICU_FOUND ${ICU_FOUND} PARENT_SCOPE)
endfunction()
