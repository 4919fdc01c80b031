// Device discovery with devices and libraries faked present or absent: a fake sysfs PCI tree,
// a fake PJRT plugin, CUDA and NCCL libraries that do not exist or fail to load.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "data/idx_files.h"
#include "support/file_lock_holder.h"
#include "tandem/distribute.h"
#include "tandem/xla.h"

namespace tandem::testing {
namespace {

using distribute::DiscoveryOptions;

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

// The host CPU, as a library user gets it (`tandem devices` prints the same).
TEST(CpuDiscovery, DescribesThisMachine) {
  const distribute::CpuInfo cpu = distribute::probe_cpu();
  EXPECT_GT(cpu.threads, 0);
  EXPECT_GT(cpu.threads_available, 0);
  EXPECT_LE(cpu.threads_available, cpu.threads);
  EXPECT_GT(cpu.memory_total_bytes, 0);
  EXPECT_LE(cpu.memory_available_bytes, cpu.memory_total_bytes);
#if defined(__x86_64__)
  EXPECT_FALSE(cpu.vendor.empty());
  EXPECT_FALSE(cpu.features.empty());
#endif
}

// A PCI function as sysfs shows it: a folder with vendor, device and class files.
void add_pci_function(const ScratchDir& sysfs, const std::string& address,
                      const std::string& vendor, const std::string& device,
                      const std::string& klass) {
  const std::filesystem::path folder = sysfs.path() / address;
  std::filesystem::create_directories(folder);
  std::ofstream(folder / "vendor") << vendor << "\n";
  std::ofstream(folder / "device") << device << "\n";
  std::ofstream(folder / "class") << klass << "\n";
}

// Nothing on the loader's path: every library faked absent.
DiscoveryOptions nothing_installed(const std::string& pci_dir) {
  DiscoveryOptions options;
  options.cuda_runtime_libraries = {"/nonexistent/libcudart.so.13"};
  options.cuda_driver_library = "/nonexistent/libcuda.so.1";
  options.nccl_libraries = {"/nonexistent/libnccl.so.2"};
  options.cudnn_libraries = {"/nonexistent/libcudnn.so.9"};
  options.pjrt_plugins = {"/nonexistent/libtpu.so"};
  options.pci_devices_dir = pci_dir;
  options.libtpu_lockfile = "/nonexistent/libtpu_lockfile";
  return options;
}

TEST(Discovery, AbsentLibrariesAndDevicesComeWithReasons) {
  ScratchDir sysfs;
  add_pci_function(sysfs, "0000:00:01.0", "0x8086", "0x1237", "0x060000");  // a host bridge
  const distribute::DeviceInventory inventory =
      distribute::discover_devices(nothing_installed(sysfs.path().string()));

  EXPECT_TRUE(inventory.cuda.gpus.empty());
  EXPECT_FALSE(inventory.cuda.usable());
  EXPECT_EQ(inventory.cuda.pci_gpus, 0);
  EXPECT_FALSE(inventory.cuda.runtime.loaded);
  expect_contains(inventory.cuda.runtime.reason, "/nonexistent/libcudart.so.13");
  expect_contains(inventory.cuda.reason, "no NVIDIA driver");
  expect_contains(inventory.cuda.reason, "/nonexistent/libcuda.so.1");
  expect_contains(inventory.cuda.reason, "no NVIDIA GPU on the PCI bus");
  EXPECT_FALSE(inventory.nccl.loaded);
  expect_contains(inventory.nccl.reason, "/nonexistent/libnccl.so.2");
  EXPECT_FALSE(inventory.cudnn.loaded);

  EXPECT_FALSE(inventory.tpu.usable());
  EXPECT_TRUE(inventory.tpu.chips.empty());
  EXPECT_FALSE(inventory.tpu.plugin.loaded);
  EXPECT_EQ(inventory.tpu.searched, std::vector<std::string>{"/nonexistent/libtpu.so"});
  EXPECT_EQ(inventory.tpu.backend_built, xla::build_info().built);
  if (!xla::build_info().built) expect_contains(inventory.tpu.reason, "no XLA backend");
  expect_contains(inventory.tpu.reason, "no TPU on the PCI bus");
  expect_contains(inventory.tpu.reason, "pip install libtpu");
  expect_contains(inventory.tpu.reason, "/nonexistent/libtpu.so");
}

TEST(Discovery, ACudaDriverThatFailsToLoadIsNamed) {
  ScratchDir scratch;
  // Not a shared library at all, as a broken driver install can leave behind.
  const std::string broken = scratch.file("libcuda.so.1");
  std::ofstream(broken) << "this is not an ELF file\n";
  add_pci_function(scratch, "0000:17:00.0", "0x10de", "0x2335", "0x030200");  // an H200
  DiscoveryOptions options = nothing_installed(scratch.path().string());
  options.cuda_driver_library = broken;
  const distribute::DeviceInventory inventory = distribute::discover_devices(options);
  EXPECT_TRUE(inventory.cuda.gpus.empty());
  EXPECT_EQ(inventory.cuda.pci_gpus, 1);
  expect_contains(inventory.cuda.reason, "1 NVIDIA GPU(s) on the PCI bus");
  expect_contains(inventory.cuda.reason, broken);
  expect_contains(inventory.cuda.reason, "install the NVIDIA driver");
}

TEST(Discovery, ALibraryThatIsNotTheOneAskedForIsRefused) {
  ScratchDir sysfs;
  DiscoveryOptions options = nothing_installed(sysfs.path().string());
  // zlib loads, but it is neither the CUDA runtime, the driver, NCCL nor a PJRT plugin.
  options.cuda_runtime_libraries = {"libz.so.1"};
  options.cuda_driver_library = "libz.so.1";
  options.nccl_libraries = {"libz.so.1"};
  options.pjrt_plugins = {"libz.so.1"};
  const distribute::DeviceInventory inventory = distribute::discover_devices(options);
  expect_contains(inventory.cuda.runtime.reason, "not a CUDA runtime");
  expect_contains(inventory.cuda.reason, "not the NVIDIA driver");
  EXPECT_FALSE(inventory.nccl.loaded);
  expect_contains(inventory.nccl.reason, "not NCCL");
  EXPECT_FALSE(inventory.tpu.plugin.loaded);
  expect_contains(inventory.tpu.plugin.reason, "not a PJRT plugin");
}

TEST(Discovery, FindsTpuChipsAndAPjrtPlugin) {
  ScratchDir sysfs;
  add_pci_function(sysfs, "0000:00:05.0", "0x1ae0", "0x0063", "0x120000");
  add_pci_function(sysfs, "0000:00:04.0", "0x1ae0", "0x0063", "0x120000");
  DiscoveryOptions options = nothing_installed(sysfs.path().string());
  options.pjrt_plugins = {"/nonexistent/first/libtpu.so", TANDEM_FAKE_PJRT_PLUGIN};
  const distribute::DeviceInventory inventory = distribute::discover_devices(options);
  ASSERT_EQ(inventory.tpu.chips.size(), 2u);
  EXPECT_EQ(inventory.tpu.chips[0].pci_address, "0000:00:04.0");
  EXPECT_EQ(inventory.tpu.chips[0].device_id, "0x0063");
  EXPECT_TRUE(inventory.tpu.plugin.loaded);
  EXPECT_EQ(inventory.tpu.plugin.version, "0.54");
  EXPECT_NE(inventory.tpu.plugin.path.find("fake_pjrt_plugin"), std::string::npos)
      << inventory.tpu.plugin.path;
  // Usable where the build has the XLA backend: the strategy then tries the plugin.
  EXPECT_EQ(inventory.tpu.usable(), xla::build_info().built);
  if (xla::build_info().built) {
    EXPECT_EQ(inventory.tpu.reason, "");
  } else {
    expect_contains(inventory.tpu.reason, "no XLA backend");
    expect_contains(inventory.tpu.reason, "2 TPU chips on the PCI bus");
    expect_contains(inventory.tpu.reason, "PJRT C API 0.54");
  }
}

TEST(Discovery, ATpuHeldByAnotherProcessIsNamedWithTheFix) {
  ScratchDir sysfs;
  add_pci_function(sysfs, "0000:00:04.0", "0x1ae0", "0x0063", "0x120000");
  DiscoveryOptions options = nothing_installed(sysfs.path().string());
  options.pjrt_plugins = {TANDEM_FAKE_PJRT_PLUGIN};
  options.libtpu_lockfile = sysfs.file("libtpu_lockfile");
  {
    const FileLockHolder holder(options.libtpu_lockfile);
    const distribute::TpuInfo tpu = distribute::discover_tpu(options);
    EXPECT_FALSE(tpu.usable());
    expect_contains(tpu.held_by, "PID " + std::to_string(holder.pid()) + " (");
    expect_contains(tpu.reason,
                    "the TPU is in use by another process: PID " + std::to_string(holder.pid()));
    expect_contains(tpu.reason, "holds libtpu's lock " + options.libtpu_lockfile);
    expect_contains(tpu.reason, "let that one finish or stop it");
  }
  // Released (the file stays, as libtpu leaves it): usable again where the build has XLA.
  const distribute::TpuInfo tpu = distribute::discover_tpu(options);
  EXPECT_EQ(tpu.held_by, "");
  EXPECT_EQ(tpu.usable(), xla::build_info().built);
}

TEST(Discovery, PluginsAreFoundWhereJaxLooks) {
  ScratchDir root;
  const std::filesystem::path packages = root.path() / "venv/lib/python3.11/site-packages";
  std::filesystem::create_directories(packages / "jax_plugins/xla_cuda13");
  std::filesystem::create_directories(packages / "libtpu");
  std::filesystem::create_directories(root.path() / "venv/bin");
  for (const auto& file : {packages / "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
                           packages / "libtpu/libtpu.so", root.path() / "venv/bin/python3"}) {
    std::ofstream(file) << "";
  }
  const char* path = std::getenv("PATH");
  const std::string saved_path = path != nullptr ? path : "";
  ::setenv("PATH", ((root.path() / "venv/bin").string() + ":" + saved_path).c_str(), 1);
  ::setenv("PJRT_NAMES_AND_LIBRARY_PATHS", "cuda:/opt/first/cuda.so,tpu:/opt/tpu.so", 1);
  const std::vector<std::string> gpu = distribute::pjrt_plugin_candidates("gpu");
  const std::vector<std::string> tpu = distribute::pjrt_plugin_candidates("tpu");
  ::setenv("PATH", saved_path.c_str(), 1);
  ::unsetenv("PJRT_NAMES_AND_LIBRARY_PATHS");
  ASSERT_GE(gpu.size(), 2u);
  EXPECT_EQ(gpu[0], "/opt/first/cuda.so");
  EXPECT_EQ(gpu[1], (packages / "jax_plugins/xla_cuda13/xla_cuda_plugin.so").string());
  ASSERT_GE(tpu.size(), 3u);
  EXPECT_EQ(tpu[0], "/opt/tpu.so");
  EXPECT_EQ(tpu[1], "libtpu.so");
  EXPECT_EQ(tpu[2], (packages / "libtpu/libtpu.so").string());
  EXPECT_THROW(distribute::pjrt_plugin_candidates("npu"), InvalidArgument);
}

TEST(Discovery, TheEnvironmentChoosesThePluginAndLibraries) {
  ::setenv("TANDEM_PJRT_PLUGIN", "/opt/custom/libtpu.so", 1);
  ::setenv("TANDEM_CUDA_DRIVER", "/opt/driver/libcuda.so.1", 1);
  ::setenv("TANDEM_NCCL_LIBRARY", "/opt/nccl/libnccl.so.2", 1);
  const DiscoveryOptions options = DiscoveryOptions::from_environment();
  ::unsetenv("TANDEM_PJRT_PLUGIN");
  ::unsetenv("TANDEM_CUDA_DRIVER");
  ::unsetenv("TANDEM_NCCL_LIBRARY");
  // An explicit plugin is the only one tried.
  EXPECT_EQ(options.pjrt_plugins, std::vector<std::string>{"/opt/custom/libtpu.so"});
  EXPECT_EQ(options.cuda_driver_library, "/opt/driver/libcuda.so.1");
  EXPECT_EQ(options.nccl_libraries, std::vector<std::string>{"/opt/nccl/libnccl.so.2"});

  ::setenv("ALLOW_MULTIPLE_LIBTPU_LOAD", "True", 1);
  const DiscoveryOptions several_loads = DiscoveryOptions::from_environment();
  ::unsetenv("ALLOW_MULTIPLE_LIBTPU_LOAD");
  // libtpu then takes no lock, so none is looked at.
  EXPECT_EQ(several_loads.libtpu_lockfile, "");

  const DiscoveryOptions defaults = DiscoveryOptions::from_environment();
  EXPECT_EQ(defaults.cuda_driver_library, "libcuda.so.1");
  EXPECT_EQ(defaults.libtpu_lockfile, "/tmp/libtpu_lockfile");
  ASSERT_FALSE(defaults.pjrt_plugins.empty());
  EXPECT_NE(std::find(defaults.pjrt_plugins.begin(), defaults.pjrt_plugins.end(), "libtpu.so"),
            defaults.pjrt_plugins.end());
}

TEST(Discovery, LaunchedProcessesComeFromTheLauncher) {
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("PMI_SIZE");
  ::unsetenv("MV2_COMM_WORLD_SIZE");
  EXPECT_EQ(distribute::launched_processes(), 1);
  ::setenv("PMI_SIZE", "4", 1);
  EXPECT_EQ(distribute::launched_processes(), 4);
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_EQ(distribute::launched_processes(), 2);
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("PMI_SIZE");
}

TEST(Discovery, MpiLibraryIsOpenMpi) {
  EXPECT_TRUE(distribute::mpi_library_version().starts_with("Open MPI"))
      << distribute::mpi_library_version();
}

}  // namespace
}  // namespace tandem::testing
