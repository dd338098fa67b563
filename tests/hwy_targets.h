// The Highway targets compiled into the build that this CPU runs, for the
// tests that force each in turn (hwy::SetSupportedTargetsForTest) and
// compare a SIMD kernel's bytes across them and with its scalar
// reference. TargetsTest hands the dispatcher back to the CPU's best
// target after each test.
#ifndef FEEDLINE_TESTS_HWY_TARGETS_H_
#define FEEDLINE_TESTS_HWY_TARGETS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "hwy/targets.h"

namespace feedline::testing_hwy {

// Resets the dispatcher first: once a test has forced a target, "supported"
// means that target alone, and a second call would list only it (a test that
// forced SCALAR and then listed the targets again compared SCALAR with
// itself).
inline std::vector<int64_t> Targets() {
  hwy::SetSupportedTargetsForTest(0);
  std::vector<int64_t> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) out.push_back(t);
  return out;
}

class TargetsTest : public ::testing::Test {
 protected:
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }  // back to the CPU's best
};

}  // namespace feedline::testing_hwy

#endif  // FEEDLINE_TESTS_HWY_TARGETS_H_
