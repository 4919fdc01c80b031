// The op harness's traced mode: every case of every op as a one-op compiled step, bit for bit
// against the eager call.
#include <gtest/gtest.h>

#include "ops/harness/op_harness.h"

namespace tandem {
namespace {

using harness::Mode;

TEST(TracedHarness, CoversEveryOp) {
  EXPECT_EQ(harness::ops_in_mode(Mode::traced).size(), static_cast<std::size_t>(kNumOps));
}

class TracedMode : public ::testing::TestWithParam<OpKind> {};

TEST_P(TracedMode, CompiledEqualsEager) {
  harness::Report report;
  for (const harness::OpCase* c : harness::cases_of(GetParam()))
    harness::run_case(Mode::traced, *c, {}, report);
  EXPECT_GT(report.cases, 0);
  for (const std::string& failure : report.failures)
    ADD_FAILURE() << failure;
}

INSTANTIATE_TEST_SUITE_P(Ops, TracedMode, ::testing::ValuesIn(harness::ops_in_mode(Mode::traced)),
                         [](const ::testing::TestParamInfo<OpKind>& info) {
                           return std::string(op_name(info.param));
                         });

}  // namespace
}  // namespace tandem
