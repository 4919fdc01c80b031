// `tandem train --precision`, --memory-limit, --find-max-batch and --keep-denormals.
#include <gtest/gtest.h>

#include "cli/cli_runner.h"
#include "core/parse.h"
#include "tandem/error.h"
#include "tandem/run.h"
#include "tandem/runtime.h"

namespace tandem::testing {
namespace {

// The warnings as the CLI words them.
std::optional<std::string> precision_warning(const std::string& precision,
                                             const std::vector<Device>& devices) {
  return run::precision_warning(precision, devices,
                                [](const std::string& key) { return "--" + key; });
}

TEST(PrecisionOptions, MemorySizesParse) {
  EXPECT_EQ(parse_memory_size("--memory-limit", "512M"), 512u << 20);
  EXPECT_EQ(parse_memory_size("--memory-limit", "2G"), 2ull << 30);
  EXPECT_EQ(parse_memory_size("--memory-limit", "1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_memory_size("--memory-limit", "64kb"), 64u << 10);
  EXPECT_EQ(parse_memory_size("--memory-limit", "1000"), 1000u);
  for (const char* bad : {"", "G", "12X", "-5M", "0", "lots"}) {
    EXPECT_THROW(parse_memory_size("--memory-limit", bad), ConfigError) << bad;
  }
}

TEST(PrecisionOptions, BadValuesAreUsageErrors) {
  const CliResult precision = run_cli({"train", "--precision", "fp8"});
  EXPECT_EQ(precision.status, 2);
  EXPECT_NE(precision.err.find("choose fp32, bf16 or fp16"), std::string::npos) << precision.err;
  const CliResult limit = run_cli({"train", "--memory-limit", "lots"});
  EXPECT_EQ(limit.status, 2);
  EXPECT_NE(limit.err.find("--memory-limit"), std::string::npos) << limit.err;
}

TEST(PrecisionOptions, TrainsInBf16) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 256, 64, 28, 28);
  const std::string report = dir.file("report.json");
  const CliResult result = run_cli({"train", "--precision", "bf16", "--epochs", "1", "--threads",
                                    "1", "--data-dir", dir.path().string(), "--report", report});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("precision: bf16 (mixed_bfloat16 dtype policy)"), std::string::npos)
      << result.out;
  EXPECT_NE(slurp(report).find("\"precision\": \"bf16\""), std::string::npos) << slurp(report);
  // Warned only where oneDNN has no bf16 kernels (a CPU without AVX-512).
  const std::optional<std::string> warning = precision_warning("bf16", {Device::cpu()});
  EXPECT_EQ(result.err.find("warning"), warning ? 0 : std::string::npos) << result.err;
}

// The switch reaches the runtime (tests/backend/cpu/denormals_test.cpp checks what it does there)
// and the run's report.
TEST(PrecisionOptions, KeepDenormalsIsSaidAndReported) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 64, 16, 28, 28);
  const std::string report = dir.file("report.json");
  const CliResult result = run_cli({"train", "--keep-denormals", "--epochs", "1", "--threads", "1",
                                    "--data-dir", dir.path().string(), "--report", report});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("float32 dtype policy), denormals kept on the CPU"), std::string::npos)
      << result.out;
  EXPECT_NE(slurp(report).find("\"keep-denormals\": true"), std::string::npos) << slurp(report);
  const CliResult flushing =
      run_cli({"train", "--epochs", "1", "--threads", "1", "--data-dir", dir.path().string()});
  ASSERT_EQ(flushing.status, 0) << flushing.err;
  EXPECT_EQ(flushing.out.find("denormals kept"), std::string::npos) << flushing.out;
}

// Without AVX-512 oneDNN has no bf16 kernels: bf16 runs on the loops, and one line says so and
// suggests fp32; with it, nothing is said.
TEST(PrecisionOptions, Bf16WarnsOnlyWhereTheCpuHasNoBf16Kernels) {
  const std::optional<std::string> warning = precision_warning("bf16", {Device::cpu()});
  EXPECT_FALSE(precision_warning("bf16", {Device::cuda(0)}));
  if (cpu_kernels().bf16) {
    EXPECT_FALSE(warning);
    return;
  }
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("AVX-512"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("use --precision fp32"), std::string::npos) << *warning;
  EXPECT_EQ(warning->find('\n'), std::string::npos);
}

// fp16 on the CPU runs the reference loops: one line on stderr says so and suggests bf16 (fp32
// on a CPU without bf16 kernels).
TEST(PrecisionOptions, Fp16OnTheCpuWarnsThatItIsSlowAndSuggestsBf16) {
  EXPECT_FALSE(precision_warning("fp16", {Device::cuda(0)}));
  EXPECT_FALSE(precision_warning("fp32", {Device::cpu()}));
  const std::optional<std::string> warning = precision_warning("fp16", {Device::cpu()});
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("slower than bf16"), std::string::npos) << *warning;
  // bf16 where the CPU has oneDNN's bf16 kernels (AVX-512), fp32 where not.
  EXPECT_NE(warning->find(cpu_kernels().bf16 ? "use --precision bf16" : "use --precision fp32"),
            std::string::npos)
      << *warning;
  EXPECT_EQ(warning->find('\n'), std::string::npos);

  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 32, 16, 28, 28);
  const CliResult result =
      run_cli({"train", "--model", "mlp", "--precision", "fp16", "--epochs", "1", "--quiet",
               "--threads", "1", "--data-dir", dir.path().string()});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.err, "warning: " + *warning + "\n");
}

// Under a memory cap the search finds a batch size above the default and below the data set,
// trains with it, and says so; the report records it.
TEST(PrecisionOptions, FindMaxBatchSearchesUnderAMemoryLimit) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 4096, 64, 28, 28);
  const std::string report = dir.file("report.json");
  const CliResult result =
      run_cli({"train", "--find-max-batch", "--memory-limit", "160M", "--epochs", "1", "--threads",
               "1", "--data-dir", dir.path().string(), "--report", report});
  ASSERT_EQ(result.status, 0) << result.err << result.out;
  const std::string marker = "largest batch size that fits: ";
  const std::size_t at = result.out.find(marker);
  ASSERT_NE(at, std::string::npos) << result.out;
  const std::int64_t found = std::stoll(result.out.substr(at + marker.size()));
  EXPECT_GT(found, 32) << result.out;
  EXPECT_LT(found, 4096) << result.out;
  EXPECT_NE(result.out.find("batch size " + std::to_string(found + 1) + ": out of memory"),
            std::string::npos)
      << result.out;
  JsonChecker json(slurp(report));
  ASSERT_TRUE(json.valid());
  EXPECT_EQ(json.top_level().at("batch_size"), std::to_string(found));
}

// Without the search, a batch that does not fit is a one-line error with the fixes.
TEST(PrecisionOptions, OutOfMemoryIsAOneLineErrorWithTheFixes) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 2048, 64, 28, 28);
  const CliResult result = run_cli({"train", "--batch-size", "2048", "--memory-limit", "160M",
                                    "--epochs", "1", "--quiet", "--data-dir", dir.path().string()});
  EXPECT_EQ(result.status, 1) << result.out;
  for (const char* part : {"tandem: error: out of memory on cpu", "training a batch of 2048",
                           "--find-max-batch", "--precision bf16"}) {
    EXPECT_NE(result.err.find(part), std::string::npos) << part << " in: " << result.err;
  }
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
}

}  // namespace
}  // namespace tandem::testing
