// FEEDLINE_CHECK: invariants of our own code. A failed check is a bug in
// feedline, never a consequence of user input or data (those return Status),
// so it prints the condition and location and aborts.
#ifndef FEEDLINE_SRC_CORE_CHECK_H_
#define FEEDLINE_SRC_CORE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FEEDLINE_CHECK(cond)                                                                    \
  do {                                                                                          \
    if (__builtin_expect(!(cond), 0)) {                                                         \
      std::fprintf(stderr, "feedline: check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

#endif  // FEEDLINE_SRC_CORE_CHECK_H_
