// Tensors on an XLA device (Device::xla, XLA:CPU's plugin), ops run on it one by one: values
// move as they should, views and partial copies keep their bytes, each op's executable is
// compiled once and then taken from the cache, in-place updates land in the variable, and a
// device that is not there is named. The op harness's backends mode compares every op on it.
#include <gtest/gtest.h>

#include "core/allocator.h"
#include "support/address_space_cap.h"
#include "support/xla_cpu.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"
#include "tandem/xla.h"

namespace tandem {
namespace {

TEST(XlaEager, ValuesGoThereAndBack) {
  SKIP_WITHOUT_XLA_CPU();
  const Tensor host = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  const Tensor there = host.to(Device::xla());
  EXPECT_EQ(there.device(), Device::xla(0));
  EXPECT_EQ(there.to_vector<float>(), host.to_vector<float>());
  EXPECT_EQ(Tensor::zeros({4}, DType::i32, Device::xla()).to_vector<std::int32_t>(),
            std::vector<std::int32_t>(4, 0));
  EXPECT_DOUBLE_EQ(Tensor::scalar(2.5, DType::f32, Device::xla()).item(), 2.5);
  EXPECT_NE(xla::device_description(0).find("xla:0 (XLA:cpu"), std::string::npos)
      << xla::device_description(0);
}

TEST(XlaEager, OpsRunOnTheDeviceAndTheirExecutablesAreCached) {
  SKIP_WITHOUT_XLA_CPU();
  const Tensor a = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3}).to(Device::xla());
  const Tensor b = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}).to(Device::xla());
  const Tensor product = matmul(relu(a), b);  // (2, 2)
  EXPECT_EQ(product.device(), Device::xla(0));
  EXPECT_EQ(product.to_vector<float>(), (std::vector<float>{16, 20, 15, 20}));

  const xla::EagerStats before = xla::eager_stats();
  const Tensor again = matmul(relu(a * 2.0), b);
  const xla::EagerStats after = xla::eager_stats();
  EXPECT_EQ(again.to_vector<float>(), (std::vector<float>{32, 40, 30, 40}));
  // relu and matmul come from the cache; only mul (new to this process's cache here) compiles.
  EXPECT_LE(after.compiled - before.compiled, 1u);
  EXPECT_EQ(after.ops_run - before.ops_run, 3u);
  const xla::EagerStats third = xla::eager_stats();
  (void)matmul(relu(a * 2.0), b);
  EXPECT_EQ(xla::eager_stats().compiled, third.compiled);
}

TEST(XlaEager, ViewsAndPartialCopiesKeepTheirBytes) {
  SKIP_WITHOUT_XLA_CPU();
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).to(Device::xla());
  // A reshape shares the buffer: read as another shape on the device.
  const Tensor flat = reshape(x, {6});
  EXPECT_EQ(flat.storage(), x.storage());
  EXPECT_EQ(neg(flat).to_vector<float>(), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  // The second row, a view at an offset into the allocation.
  const Tensor row = Tensor::from_storage(x.storage(), 3 * sizeof(float), {3}, DType::f32);
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(square(row).to_vector<float>(), (std::vector<float>{16, 25, 36}));
  // Writing the row's bytes from the host changes that row alone.
  const Tensor replacement = Tensor::from_vector<float>({7, 8, 9}, {3});
  device_memory(DeviceType::xla)
      .copy_from_host(row.raw_data(), replacement.raw_data(), replacement.nbytes());
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3, 7, 8, 9}));
  EXPECT_EQ(x.clone().to_vector<float>(), (std::vector<float>{1, 2, 3, 7, 8, 9}));
}

TEST(XlaEager, AnOptimizerUpdateWritesTheVariableInPlace) {
  SKIP_WITHOUT_XLA_CPU();
  const auto update = [](Device device) {
    Tensor weights = Tensor::from_vector<float>({1, 2, 3}, {3}).to(device);
    Tensor velocity = Tensor::from_vector<float>({0.25f, 0, -1}, {3}).to(device);
    const Tensor gradient = Tensor::from_vector<float>({0.5f, -1, 2}, {3}).to(device);
    for (int step = 1; step <= 2; ++step) {
      sgd_update(weights, gradient, velocity, update_schedule(0.1, step, device),
                 {.momentum = 0.9, .nesterov = true});
    }
    return std::pair{weights.to_vector<float>(), velocity.to_vector<float>()};
  };
  const auto [cpu_weights, cpu_velocity] = update(Device::cpu());
  const auto [xla_weights, xla_velocity] = update(Device::xla());
  // XLA fuses the update's multiply-adds, so the last bit may differ from the CPU kernel's.
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(xla_weights[i], cpu_weights[i], 1e-6) << i;
    EXPECT_NEAR(xla_velocity[i], cpu_velocity[i], 1e-6) << i;
  }
  EXPECT_NE(xla_weights, (std::vector<float>{1, 2, 3}));
}

TEST(XlaEager, ADeviceThatIsNotThereIsNamed) {
  SKIP_WITHOUT_XLA_CPU();
  try {
    (void)Tensor::zeros({2}, DType::f32, Device::xla(99));
    FAIL() << "xla:99 was allocated on";
  } catch (const InvalidArgument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("xla:99 does not exist: XLA:cpu has"), std::string::npos) << message;
  }
  const Tensor on_xla = Tensor::ones({2}, DType::f32, Device::xla());
  EXPECT_THROW((void)(on_xla + Tensor::ones({2})), InvalidArgument);  // another device's input
  EXPECT_EQ(Device::parse("xla:1"), Device::xla(1));
  EXPECT_EQ(Device::xla(1).str(), "xla:1");
}

TEST(XlaEager, AnOpThatRunsTheDeviceOutOfMemoryIsOutOfMemoryNamingIt) {
  SKIP_WITHOUT_XLA_CPU();
  SKIP_WITHOUT_ADDRESS_SPACE_CAP();
  const Tensor one = Tensor::ones({1}, DType::f32, Device::xla());
  try {
    const testing::AddressSpaceCap cap;
    (void)broadcast_to(one, {100000, 100000, 100});  // 4 TB on XLA:CPU's device
    FAIL() << "4 TB were allocated";
  } catch (const OutOfMemory& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("out of memory on xla:0: broadcast_to's outputs need 3.64 TiB"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("RESOURCE_EXHAUSTED"), std::string::npos) << message;
    EXPECT_EQ(error.device(), "xla:0");
    EXPECT_EQ(error.requested_bytes(), std::size_t{4'000'000'000'000});
  }
  // The device goes on working, and what failed is no longer held.
  EXPECT_EQ((one * 3.0).to_vector<float>(), std::vector<float>{3});
  EXPECT_LT(memory_info(Device::xla()).held, std::size_t{1} << 20);
}

TEST(XlaEager, ThePluginCannotChangeOnceTheDevicesAreUp) {
  SKIP_WITHOUT_XLA_CPU();
  (void)Tensor::ones({1}, DType::f32, Device::xla());
  xla::set_device_plugin(xla::fetched_cpu_plugin());  // the same one: fine
  EXPECT_THROW(xla::set_device_plugin("/elsewhere/libtpu.so"), InvalidArgument);
}

}  // namespace
}  // namespace tandem
