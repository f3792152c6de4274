// A fatal signal (a crash, an abort from a corrupted heap) prints the stack to stderr before the
// process ends with that signal, so a failure seen once, in CI or by a user, says where it was.
#pragma once

namespace gpulab {

// Installs the report for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT on an alternate stack (a
// stack overflow still reports). Frames in gpulab itself read "gpulab(+0xOFFSET)": pass them to
// `addr2line -f -C -e <the binary>` (scripts/symbolize.sh does it for a whole log). A SIGBUS
// inside a MappedFile (the file shrank under it: core/mapped_file.h) is no crash: an `error:`
// line naming the file and a `hint:`, then exit 2.
void install_crash_report();

}  // namespace gpulab
