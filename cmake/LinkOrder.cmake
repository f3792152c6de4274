# Binds an executable's C++ standard library calls to libstdc++ whatever its other libraries
# export. The PyTorch wheel's libtorch.so exports its own copies of std::filesystem functions;
# the dynamic linker searches DT_NEEDED entries in link order, and the compiler driver adds
# libstdc++ last, so gpulab's std::filesystem::remove_all bound to libtorch's copy, which crashed
# at exit through a null pointer (2026-11-27, PyTorch 2.11 wheel). Naming libstdc++ first (and
# kept even where the linker defaults to --as-needed, as Ubuntu's does) makes it win.
set(GPULAB_STDCXX_FIRST "SHELL:-Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state")

function(gpulab_link_stdcxx_first target)
  target_link_options(${target} BEFORE PRIVATE "${GPULAB_STDCXX_FIRST}")
endfunction()
