// The op harness's case list and its grad mode (tests/ops/harness/op_harness.h): every op of the
// table has a case, every op with a gradient rule a case that the grad mode checks against
// finite differences in float64, one test per op. The backends mode runs in
// tests/backend/op_harness_backends_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "ops/harness/op_harness.h"

namespace tandem {
namespace {

using harness::Mode;
using harness::OpCase;

std::string names_of(const std::vector<OpKind>& ops) {
  std::string names;
  for (OpKind op : ops)
    names += (names.empty() ? "" : ", ") + std::string(op_name(op));
  return names;
}

std::vector<OpCase> without_cases_of(OpKind op) {
  std::vector<OpCase> cases = harness::op_cases();
  std::erase_if(cases, [op](const OpCase& c) { return c.op == op; });
  return cases;
}

TEST(OpTable, EveryOpIsDefined) {
  for (int i = 0; i < kNumOps; ++i) {
    EXPECT_TRUE(op_is_defined(static_cast<OpKind>(i))) << "op #" << i << " has no OpDef";
  }
}

TEST(OpHarness, EveryOpHasACase) {
  const std::vector<OpKind> missing = harness::ops_without_cases(harness::op_cases());
  EXPECT_TRUE(missing.empty()) << "ops without a case in tests/ops/harness/op_cases.cpp: "
                               << names_of(missing);
}

TEST(OpHarness, EveryDifferentiableOpHasAGradCase) {
  const std::vector<OpKind> missing =
      harness::differentiable_ops_without_grad_cases(harness::op_cases());
  EXPECT_TRUE(missing.empty()) << "ops with a gradient rule but no grad case: "
                               << names_of(missing);
}

// The two coverage checks above do fail: on the list without an op's cases they name that op.
TEST(OpHarness, TheCoverageChecksNameAnOpWithoutCases) {
  EXPECT_EQ(harness::ops_without_cases(without_cases_of(OpKind::matmul)),
            std::vector<OpKind>{OpKind::matmul});
  EXPECT_EQ(harness::ops_without_cases(without_cases_of(OpKind::adam_update)),
            std::vector<OpKind>{OpKind::adam_update});
  EXPECT_EQ(harness::differentiable_ops_without_grad_cases(without_cases_of(OpKind::softmax)),
            std::vector<OpKind>{OpKind::softmax});
  // An op whose cases all opt out of the grad mode counts as missing too.
  std::vector<OpCase> cases = harness::op_cases();
  for (OpCase& c : cases) {
    if (c.op == OpKind::conv2d) c.grad = false;
  }
  EXPECT_EQ(harness::differentiable_ops_without_grad_cases(cases),
            std::vector<OpKind>{OpKind::conv2d});
}

TEST(OpHarness, CaseLabelsAreUnique) {
  std::set<std::string> labels;
  for (const OpCase& c : harness::op_cases()) {
    EXPECT_TRUE(labels.insert(c.label()).second) << c.label() << " twice";
    EXPECT_TRUE((c.inputs && c.run) != static_cast<bool>(c.instance))
        << c.label() << ": give inputs and run, or instance";
  }
}

TEST(OpHarness, ModesAreNamedOnce) {
  for (const harness::ModeDef& def : harness::modes()) {
    EXPECT_EQ(harness::parse_mode(def.name), def.mode);
    EXPECT_EQ(&harness::mode_def(def.mode), &def);
  }
  EXPECT_THROW(harness::parse_mode("fast"), InvalidArgument);
}

// The grad mode fails where the tape and finite differences disagree: the f32 round trip (the
// cast case, which steps 1e-3 for this reason) at a step below f32's resolution.
TEST(OpHarness, GradModeReportsAMismatch) {
  OpCase c = *harness::cases_of(OpKind::cast).front();
  ASSERT_EQ(c.name, "round_trip_f32");
  c.grad_step = 1e-7;
  c.grad_tolerance = 1e-9;
  harness::Report report;
  harness::run_case(Mode::grad, c, {}, report);
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_NE(report.failures.front().find("cast/round_trip_f32 grad"), std::string::npos)
      << report.failures.front();
  EXPECT_NE(report.failures.front().find("TANDEM_TEST_SEED="), std::string::npos);
}

// What perf mode divides by: the op table's cost of every op one call runs.
TEST(OpHarness, CostOfACallSumsTheOpTableOverItsOps) {
  const Tensor a = Tensor::ones({3, 5});
  const Tensor b = Tensor::ones({5});
  int ops = 0;
  const OpCost cost = harness::cost_of_call(
      [](const harness::Inputs& x) { return harness::Outputs{add(add(x[0], x[1]), x[1])}; }, {a, b},
      &ops);
  const std::vector<TensorMeta> inputs{{a.shape(), a.dtype()}, {b.shape(), b.dtype()}};
  const std::vector<TensorMeta> outputs{{a.shape(), a.dtype()}};
  const OpCost one = op_cost(OpKind::add, inputs, outputs, {});
  EXPECT_EQ(ops, 2);
  EXPECT_GT(one.flops, 0);
  EXPECT_DOUBLE_EQ(cost.flops, 2 * one.flops);
  EXPECT_DOUBLE_EQ(cost.bytes, 2 * one.bytes);
}

// The perf mode runs a case end to end (small inputs, one sample) and fills its row.
TEST(OpHarness, PerfModeTimesACase) {
  harness::Options options;
  options.op = "matmul";
  options.case_name = "bias";
  options.dtypes = {DType::f32};
  options.device = DeviceType::cpu;
  options.size = harness::Size::small;
  options.repeats = 1;
  const harness::Report report = harness::run_mode(Mode::perf, options);
  EXPECT_TRUE(report.failures.empty()) << report.failures.front();
  ASSERT_EQ(report.timings.size(), 1u);
  const harness::Timing& row = report.timings.front();
  EXPECT_EQ(row.op, "matmul");
  EXPECT_GT(row.median_s, 0);
  EXPECT_LE(row.min_s, row.median_s);
  EXPECT_LE(row.median_s, row.max_s);
  EXPECT_GT(row.cost.flops, 0);
  EXPECT_GT(row.cost.bytes, 0);
  EXPECT_GE(row.ops, 1);
}

class GradMode : public ::testing::TestWithParam<OpKind> {};

TEST_P(GradMode, MatchesFiniteDifferences) {
  harness::Report report;
  for (const OpCase* c : harness::cases_of(GetParam()))
    harness::run_case(Mode::grad, *c, {}, report);
  EXPECT_GT(report.cases, 0);
  for (const std::string& failure : report.failures)
    ADD_FAILURE() << failure;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradMode, ::testing::ValuesIn(harness::ops_in_mode(Mode::grad)),
                         [](const ::testing::TestParamInfo<OpKind>& info) {
                           return std::string(op_name(info.param));
                         });

}  // namespace
}  // namespace tandem
