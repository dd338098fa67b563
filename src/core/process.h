// The calling process's id, without a system call per call: the engine
// asks on every Next and every returned buffer whether it runs in the
// process that made the loader (a forked child must not touch it).
#ifndef FEEDLINE_SRC_CORE_PROCESS_H_
#define FEEDLINE_SRC_CORE_PROCESS_H_

#include <sys/types.h>

namespace feedline::core {

// getpid(), cached; a fork's child handler (pthread_atfork, installed on
// the first call) re-reads it, so a child sees its own id.
pid_t CurrentPid();

}  // namespace feedline::core

#endif  // FEEDLINE_SRC_CORE_PROCESS_H_
