// The op harness's backends mode (tests/ops/harness/op_harness.h), one test per op: every
// backend that can run here against the CPU f32 reference on the same rounded inputs, outputs
// and gradients, with the tolerances per precision of harness::tolerance_for. Without a GPU this
// is the CPU in bf16 and f16; with one, the GPU in f32 (TF32 off, and on for matmul and
// convolution), bf16 and f16 too; and XLA's device (XLA:CPU where its plugin was fetched), each op
// compiled alone and run eagerly. Dtypes a backend has no kernel for are printed as skips.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "core/allocator.h"
#include "ops/harness/op_harness.h"
#include "tandem/cuda.h"
#include "tandem/xla.h"

namespace tandem {
namespace {

using harness::Mode;

TEST(OpHarnessBackends, ComparesTheCpuAndEveryUsableDevice) {
  const std::vector<Device> devices = harness::harness_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices.front(), Device::cpu());
  // XLA's devices, op by op, wherever their plugin (XLA:CPU's, fetched by make) starts.
  const bool xla_up = bring_up_device(DeviceType::xla).empty();
  EXPECT_EQ(devices.size(), 1u + (cuda::is_available() ? 1u : 0u) + (xla_up ? 1u : 0u));
  EXPECT_EQ(xla_up, xla::build_info().built && !xla::fetched_cpu_plugin().empty());
  if (xla_up) EXPECT_EQ(devices.back(), Device::xla(0));
}

// A backend that computes something else in bf16 fails the comparison, and a case whose op
// has no kernel for a dtype is a skip that names it.
TEST(OpHarnessBackends, ReportsMismatchesAndMissingKernels) {
  harness::OpCase c = *harness::cases_of(OpKind::neg).front();
  c.run = [](const harness::Inputs& x) {
    return harness::Outputs{x[0].dtype() == DType::bf16 ? neg(x[0]) + 0.5 : neg(x[0])};
  };
  c.dtypes = {DType::bf16, DType::boolean};
  harness::Options options;
  options.device = DeviceType::cpu;
  harness::Report report;
  harness::run_case(Mode::backends, c, options, report);
  ASSERT_EQ(report.comparisons.size(), 1u);
  EXPECT_FALSE(report.comparisons.front().passed);
  EXPECT_NEAR(report.comparisons.front().output_error, 0.5 / 2, 0.5 / 2);
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_NE(report.failures.front().find("neg/3d on cpu in bf16"), std::string::npos)
      << report.failures.front();
  ASSERT_EQ(report.skips.size(), 1u);
  EXPECT_NE(report.skips.front().find("no neg kernel for bool inputs"), std::string::npos)
      << report.skips.front();
}

class BackendsMode : public ::testing::TestWithParam<OpKind> {};

// An op whose cases run in f32 only (the integer products) has nothing to be compared with where
// no other backend has a kernel for it (no XLA plugin; a GPU, whose backend has no integer
// products): it is skipped there, by name and with the backends' reasons.
TEST_P(BackendsMode, MatchTheCpuReference) {
  harness::Report report;
  bool f32_only = true;
  for (const harness::OpCase* c : harness::cases_of(GetParam())) {
    harness::run_case(Mode::backends, *c, {}, report);
    f32_only = f32_only && c->dtypes == std::vector<DType>{DType::f32};
  }
  EXPECT_GT(report.cases, 0);
  if (report.comparisons.empty() && f32_only && report.failures.empty()) {
    std::string reasons;
    for (const std::string& skip : report.skips)
      reasons += "; " + skip;
    GTEST_SKIP() << op_name(GetParam())
                 << " runs in f32 only and no backend besides the CPU here has a kernel for it"
                 << reasons;
  }
  EXPECT_FALSE(report.comparisons.empty());
  for (const std::string& skip : report.skips)
    std::cout << "[  SKIP    ] " << skip << "\n";
  if (!report.skips.empty()) RecordProperty("skipped", static_cast<int>(report.skips.size()));
  for (const std::string& failure : report.failures)
    ADD_FAILURE() << failure;
}

INSTANTIATE_TEST_SUITE_P(Ops, BackendsMode,
                         ::testing::ValuesIn(harness::ops_in_mode(Mode::backends)),
                         [](const ::testing::TestParamInfo<OpKind>& info) {
                           return std::string(op_name(info.param));
                         });

}  // namespace
}  // namespace tandem
