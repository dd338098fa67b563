#include "src/core/process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace feedline::core {
namespace {

TEST(CurrentPidTest, IsTheCallersIdInTheParentAndInAForkedChild) {
  const pid_t parent = CurrentPid();  // the first call installs the fork handler
  EXPECT_EQ(parent, ::getpid());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes carry the verdict: gtest must not run on in the child.
    const pid_t seen = CurrentPid();
    ::_exit(seen == ::getpid() && seen != parent ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child read its parent's id";
  EXPECT_EQ(CurrentPid(), parent);
}

}  // namespace
}  // namespace feedline::core
