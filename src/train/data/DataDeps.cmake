# Optional libraries of train/data: each one found adds a feature, none is required, so the train
# module still builds from libtorch and header-only libraries alone (a GPU host without apt).
#   zlib        gzipped IDX files, tar.gz unpacking       GPULAB_HAVE_ZLIB
#   turbojpeg   JPEG in ImageFolder                       GPULAB_HAVE_TURBOJPEG
#   libpng      PNG in ImageFolder                        GPULAB_HAVE_PNG
#   libcurl     gpulab data get                           GPULAB_HAVE_CURL
#   sentencepiece  SentencePiece tokenizers (else bytes)  GPULAB_HAVE_SENTENCEPIECE
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
      target_link_libraries(${target} PRIVATE PkgConfig::SENTENCEPIECE)
      target_compile_definitions(${target} PRIVATE GPULAB_HAVE_SENTENCEPIECE=1)
    endif()
  endif()
  find_package(CURL QUIET)
  if(CURL_FOUND)
    target_link_libraries(${target} PRIVATE CURL::libcurl)
    target_compile_definitions(${target} PRIVATE GPULAB_HAVE_CURL=1)
  endif()
  message(STATUS "gpulab data: zlib=${ZLIB_FOUND} png=${PNG_FOUND} turbojpeg=${TURBOJPEG_FOUND} curl=${CURL_FOUND} sentencepiece=${SENTENCEPIECE_FOUND}")
endfunction()
