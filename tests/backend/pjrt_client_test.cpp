// The PJRT client on the real XLA:CPU plugin that scripts/fetch-pjrt.sh fetches: the plugin's
// version and attributes, its devices, StableHLO compiled and run on one device and on two
// replicas, arrays of each dtype there and back, and the errors of a missing file, a library
// that is not a plugin, a bad option and a program XLA rejects.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "support/errors.h"
#include "tandem/ops.h"
#include "tandem/xla.h"

namespace tandem::xla {
namespace {

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in:\n" << text;
}

// The fetched plugin, or a skip that says how to get it.
#define REQUIRE_CPU_PLUGIN()                                                                \
  if (!build_info().built) GTEST_SKIP() << "SKIPPED: " << build_info().reason;              \
  if (fetched_cpu_plugin().empty()) {                                                       \
    GTEST_SKIP() << "SKIPPED: the XLA:CPU plugin is not there; scripts/fetch-pjrt.sh "      \
                    "fetches it (the package index could not be reached when it last ran)"; \
  }

// One client for the tests: XLA:CPU with two devices (for the replica test).
const Client& cpu_client() {
  static const Client client(fetched_cpu_plugin(), {{"cpu_device_count", std::int64_t{2}}});
  return client;
}

constexpr const char* kAdd = R"(module @add {
  func.func public @main(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.add %a, %b : tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
}
)";

TEST(CompileOptions, SerializeAsXlaCompileOptionsProto) {
  if (!build_info().built) GTEST_SKIP() << "SKIPPED: " << build_info().reason;
  // executable_build_options { num_replicas: 1 num_partitions: 1 }: the bytes XLA:CPU accepted.
  EXPECT_EQ(serialize_compile_options({}), std::string("\x1a\x04\x20\x01\x28\x01", 6));
  // Two replicas on devices 0 and 1: device_assignment { replica_count: 2 computation_count: 1
  // computation_devices { replica_device_ids: [0, 1] } }.
  EXPECT_EQ(
      serialize_compile_options({.num_replicas = 2, .replica_device_ids = {0, 1}}),
      std::string("\x1a\x10\x20\x02\x28\x01\x4a\x0a\x08\x02\x10\x01\x1a\x04\x0a\x02\x00\x01", 18));
  EXPECT_THROW(serialize_compile_options({.num_replicas = 0}), InvalidArgument);
  EXPECT_THROW(serialize_compile_options({.num_replicas = 2, .replica_device_ids = {0}}),
               InvalidArgument);
}

TEST(PjrtClient, LoadsTheCpuPluginAndListsItsDevices) {
  REQUIRE_CPU_PLUGIN();
  const Client& client = cpu_client();
  EXPECT_EQ(client.plugin().path, fetched_cpu_plugin());
  EXPECT_EQ(client.plugin().api_major, 0);
  EXPECT_GE(client.plugin().api_minor, build_info().header_api_minor);
  bool has_stablehlo_version = false;
  for (const auto& [name, value] : client.plugin().attributes)
    has_stablehlo_version |= name == "stablehlo_current_version" && !value.empty();
  EXPECT_TRUE(has_stablehlo_version);
  EXPECT_EQ(client.platform(), "cpu");
  ASSERT_EQ(client.devices().size(), 2u);
  EXPECT_EQ(client.devices()[0].kind, "cpu");
  EXPECT_EQ(client.devices()[1].id, 1);
}

TEST(PjrtClient, CompilesAndRunsStableHlo) {
  REQUIRE_CPU_PLUGIN();
  const Client& client = cpu_client();
  const Executable add = client.compile(kAdd);
  EXPECT_EQ(add.num_outputs(), 1u);
  const Buffer a = client.to_device(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}));
  const Buffer b = client.to_device(Tensor::from_vector<float>({10, 20, 30, 40}, {2, 2}));
  const std::vector<Buffer> out = add.execute({&a, &b});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(out[0].dtype(), DType::f32);
  EXPECT_EQ(out[0].to_host().to_vector<float>(), (std::vector<float>{11, 22, 33, 44}));
}

TEST(PjrtClient, EveryDtypeGoesThereAndBack) {
  REQUIRE_CPU_PLUGIN();
  const Client& client = cpu_client();
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64,
                            DType::u8, DType::boolean}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor host = cast(Tensor::from_vector<float>({0, 1, 0, 1, 1, 0}, {3, 2}), dtype);
    const Buffer buffer = client.to_device(host, 1);
    EXPECT_EQ(buffer.device(), 1);
    const Tensor back = buffer.to_host();
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.shape(), host.shape());
    EXPECT_EQ(cast(back, DType::f32).to_vector<float>(), cast(host, DType::f32).to_vector<float>());
  }
}

TEST(PjrtClient, RunsTwoReplicasThatSumAcrossDevices) {
  REQUIRE_CPU_PLUGIN();
  const Client& client = cpu_client();
  // Each replica adds its value to the other's: the all-reduce data parallelism needs.
  const std::string sum =
      R"(module @sum attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
    %0 = "stablehlo.all_reduce"(%x) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
)";
  const Executable reduce = client.compile(sum, {.num_replicas = 2, .replica_device_ids = {0, 1}});
  const Buffer first = client.to_device(Tensor::from_vector<float>({1, 2, 3}, {3}), 0);
  const Buffer second = client.to_device(Tensor::from_vector<float>({10, 20, 30}, {3}), 1);
  const std::vector<std::vector<Buffer>> out = reduce.execute_replicas({{&first}, {&second}});
  ASSERT_EQ(out.size(), 2u);
  for (std::size_t replica = 0; replica < 2; ++replica) {
    EXPECT_EQ(out[replica][0].device(), static_cast<int>(replica));
    EXPECT_EQ(out[replica][0].to_host().to_vector<float>(), (std::vector<float>{11, 22, 33}));
  }
  EXPECT_THROW(reduce.execute({&first}), InvalidArgument);
}

// XLA:CPU has no topologies to compile for (libtpu does: tests/cli/tpu_cli_test.cpp); asking is
// a PjrtError naming the plugin, the call and the topology.
TEST(PjrtClient, AheadOfTimeCompilingNamesWhatThePluginRefuses) {
  REQUIRE_CPU_PLUGIN();
  const std::string message =
      testing::error_of<PjrtError>([] { compile_for_topology(fetched_cpu_plugin(), "cpu", kAdd); });
  expect_contains(message, fetched_cpu_plugin() + ": PJRT_TopologyDescription_Create(cpu): ");
  expect_contains(message, "[UNIMPLEMENTED]");
}

TEST(PjrtClient, ARejectedProgramNamesThePluginAndTheLine) {
  REQUIRE_CPU_PLUGIN();
  const std::string bad =
      "module @bad {\n  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
      "    %0 = stablehlo.frobnicate %a : tensor<2xf32>\n"
      "    return %0 : tensor<2xf32>\n  }\n}\n";
  const std::string message = testing::error_of<PjrtError>([&] { cpu_client().compile(bad); });
  expect_contains(message, fetched_cpu_plugin() + ": PJRT_Client_Compile: ");
  expect_contains(message, "(StableHLO line 3: `%0 = stablehlo.frobnicate %a : tensor<2xf32>`)");
}

TEST(PjrtClient, PluginsThatCannotBeUsedAreNamed) {
  if (!build_info().built) GTEST_SKIP() << "SKIPPED: " << build_info().reason;
  expect_contains(testing::error_of<PjrtError>([] { Client client("/nonexistent/libtpu.so"); }),
                  "cannot load the PJRT plugin /nonexistent/libtpu.so");
  // A shared library every system has, which is no plugin.
  const char* not_a_plugin = "libz.so.1";
  expect_contains(testing::error_of<PjrtError>([&] { Client client(not_a_plugin); }),
                  "libz.so.1 is not a PJRT plugin: it exports no GetPjrtApi");
  if (fetched_cpu_plugin().empty()) return;
  expect_contains(testing::error_of<PjrtError>([] {
                    Client client(fetched_cpu_plugin(), {{"no_such_option", std::int64_t{1}}});
                  }),
                  "PJRT_Client_Create: Unexpected option name passed to PJRT_Client_Create: "
                  "no_such_option [INVALID_ARGUMENT]");
}

}  // namespace
}  // namespace tandem::xla
