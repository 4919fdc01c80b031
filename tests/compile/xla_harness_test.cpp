// The op harness's xla mode: every case of every op with a StableHLO lowering rule, lowered as a
// one-op compiled step and run by XLA:CPU, against the eager CPU call; and the ops that have no
// rule yet, which must be exactly the ones listed here (a new op without a rule fails, and so
// does a lowered op left on the list).
#include <gtest/gtest.h>

#include <algorithm>

#include "ops/harness/op_harness.h"
#include "tandem/xla.h"

namespace tandem {
namespace {

using harness::Mode;

// The ops still to lower (issue 14): the list shrinks as rules land beside their definitions.
const std::vector<OpKind>& ops_without_lowering_yet() {
  using K = OpKind;
  static const std::vector<OpKind> ops{
      // clang-format off
      K::dropout, K::sgd_update, K::adam_update
      // clang-format on
  };
  return ops;
}

TEST(XlaHarness, TheOpsWithoutALoweringAreTheListedOnes) {
  std::vector<OpKind> unlowered;
  for (int kind = 0; kind < kNumOps; ++kind) {
    if (op_def(static_cast<OpKind>(kind)).lower == nullptr) {
      unlowered.push_back(static_cast<OpKind>(kind));
    }
  }
  std::vector<OpKind> listed = ops_without_lowering_yet();
  std::sort(listed.begin(), listed.end());
  for (const OpKind kind : unlowered) {
    EXPECT_TRUE(std::binary_search(listed.begin(), listed.end(), kind))
        << op_name(kind) << " has no StableHLO lowering rule: write one beside its definition";
  }
  for (const OpKind kind : listed) {
    EXPECT_EQ(op_def(kind).lower, nullptr)
        << op_name(kind) << " is lowered now: take it off ops_without_lowering_yet()";
  }
  EXPECT_EQ(harness::ops_in_mode(Mode::xla).size() + listed.size(),
            static_cast<std::size_t>(kNumOps));
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
