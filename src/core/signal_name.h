// Signal names for messages and crash reports, from one table (glibc's sigabbrev_np needs 2.32,
// newer than some GPU hosts' distributions).
#pragma once

#include <string>

namespace gpulab {

// "SEGV" for SIGSEGV; nullptr for a signal the table does not name. Async-signal-safe (a static
// string), so the crash handler may call it.
const char* signal_abbrev(int sig);

// "SIGSEGV", or "signal 42" for one without a name.
std::string signal_name(int sig);

}  // namespace gpulab
