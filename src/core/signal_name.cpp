// The signal name table of signal_name.h.
#include "core/signal_name.h"

#include <csignal>

namespace gpulab {

const char* signal_abbrev(int sig) {
  switch (sig) {
    case SIGHUP:
      return "HUP";
    case SIGINT:
      return "INT";
    case SIGQUIT:
      return "QUIT";
    case SIGILL:
      return "ILL";
    case SIGTRAP:
      return "TRAP";
    case SIGABRT:
      return "ABRT";
    case SIGBUS:
      return "BUS";
    case SIGFPE:
      return "FPE";
    case SIGKILL:
      return "KILL";
    case SIGUSR1:
      return "USR1";
    case SIGSEGV:
      return "SEGV";
    case SIGUSR2:
      return "USR2";
    case SIGPIPE:
      return "PIPE";
    case SIGALRM:
      return "ALRM";
    case SIGTERM:
      return "TERM";
    case SIGSTOP:
      return "STOP";
    case SIGTSTP:
      return "TSTP";
    case SIGTTIN:
      return "TTIN";
    case SIGTTOU:
      return "TTOU";
    case SIGXCPU:
      return "XCPU";
    case SIGXFSZ:
      return "XFSZ";
    default:
      return nullptr;
  }
}

std::string signal_name(int sig) {
  const char* abbrev = signal_abbrev(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace gpulab
