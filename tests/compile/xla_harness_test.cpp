// The op harness's xla mode: every case of every op, lowered as a one-op compiled step by the
// op's StableHLO rule and run by XLA:CPU, against the eager CPU call; an op without a rule fails.
#include <gtest/gtest.h>

#include "ops/harness/op_harness.h"
#include "tandem/xla.h"

namespace tandem {
namespace {

using harness::Mode;

TEST(XlaHarness, EveryOpHasALoweringRule) {
  for (int kind = 0; kind < kNumOps; ++kind) {
    EXPECT_NE(op_def(static_cast<OpKind>(kind)).lower, nullptr)
        << op_name(static_cast<OpKind>(kind))
        << " has no StableHLO lowering rule: write one beside its definition";
  }
  EXPECT_EQ(harness::ops_in_mode(Mode::xla).size(), static_cast<std::size_t>(kNumOps));
}

class XlaMode : public ::testing::TestWithParam<OpKind> {};

TEST_P(XlaMode, XlaCpuMatchesEager) {
  harness::Report report;
  for (const harness::OpCase* c : harness::cases_of(GetParam()))
    harness::run_case(Mode::xla, *c, {}, report);
  if (!report.skips.empty() && report.failures.empty()) GTEST_SKIP() << report.skips.front();
  EXPECT_GT(report.cases, 0);
  for (const std::string& failure : report.failures)
    ADD_FAILURE() << failure;
}

INSTANTIATE_TEST_SUITE_P(Ops, XlaMode, ::testing::ValuesIn(harness::ops_in_mode(Mode::xla)),
                         [](const ::testing::TestParamInfo<OpKind>& info) {
                           return std::string(op_name(info.param));
                         });

}  // namespace
}  // namespace tandem
