// spdlog's compiled part, built once for the whole tree: with SPDLOG_COMPILED_LIB the other files
// see only declarations of what its -inl.h headers define, instead of generating the logger, the
// registry and the pattern formatter again in every unit (about 7 CPU-s each at -O2 -g). Made
// from spdlog's headers, so a host that has only those (GPULAB_DEPS_ROOT) builds it too.
#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/periodic_worker-inl.h>
#include <spdlog/details/registry-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/ansicolor_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>
#include <spdlog/sinks/stdout_color_sinks-inl.h>
#include <spdlog/spdlog-inl.h>

// The class templates the headers use but do not define in this mode, as far as gpulab uses them:
// the colour console sinks (the registry's default logger writes through the stdout one) and the
// factory gpulab's logger comes from (core/log.cpp). No binary of the header-only build held a
// base_sink instance, so none is made here.
template class spdlog::sinks::ansicolor_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stdout_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stderr_sink<spdlog::details::console_mutex>;
template std::shared_ptr<spdlog::logger> spdlog::stderr_color_mt<spdlog::synchronous_factory>(
    const std::string& logger_name, color_mode mode);
