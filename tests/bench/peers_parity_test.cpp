// The peers of `tandem bench --peers` (bench/peers/run_peer.py) in the project virtualenv
// (scripts/python-env.sh bench: TensorFlow 2.15, PyTorch 2.1): for each framework and zoo
// workload, two training steps at a tiny batch print exactly one JSON line that keeps the
// contract the bench relies on, and the peer's model has exactly as many weights (all, and
// trainable) as Tandem's zoo model of the same input shape and classes; bad arguments, an
// unsupported combination and a missing framework exit 2, 4 and 3 (checked with Debian's
// python3 alone). The runs are skipped, with the reason, where the frameworks cannot be
// installed because the package index cannot be reached.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "cli/cli_runner.h"
#include "support/python_env.h"
#include "support/shell.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::CliResult;
using testing::run_program;

constexpr int kSteps = 2;
constexpr int kBatch = 2;

// Runs bench/peers/run_peer.py with `python`, capturing stdout and stderr apart.
CliResult run_peer(const std::string& python, const std::vector<std::string>& args) {
  std::vector<std::string> script_and_args{std::string(TANDEM_SOURCE_DIR) +
                                           "/bench/peers/run_peer.py"};
  script_and_args.insert(script_and_args.end(), args.begin(), args.end());
  return run_program(python, script_and_args);
}

// One workload: run_peer.py's arguments for it and the Tandem model it stands for.
struct Workload {
  std::string model;
  std::vector<std::string> extra_args;
  std::function<nn::Model()> tandem_model;

  friend void PrintTo(const Workload& workload, std::ostream* out) { *out << workload.model; }
};

// Small sizes keep the run short; the weights counted are those of the full-size models except
// for the transformer, whose width and depth are the arguments (the full BERT-base count is in
// the docstring of bench/peers/tf_zoo.py, checked the same way).
std::vector<Workload> workloads() {
  return {
      {"mlp",
       {},
       [] {
         return nn::zoo::build("mlp", {28, 28, 1}, 10);
       }},
      {"cnn",
       {},
       [] {
         return nn::zoo::build("cnn", {28, 28, 1}, 10);
       }},
      {"resnet50",
       {"--image-size", "32"},
       [] {
         return nn::zoo::build("resnet50", {32, 32, 3}, 1000);
       }},
      {"transformer",
       {"--sequence-length", "8", "--layers", "2", "--hidden-size", "64", "--heads", "4",
        "--intermediate-size", "128"},
       [] {
         nn::zoo::TransformerEncoderConfig config;
         config.layers = 2;
         config.hidden_size = 64;
         config.heads = 4;
         config.intermediate_size = 128;
         return nn::zoo::transformer_encoder(config, 8, 2);
       }},
  };
}

std::int64_t trainable_count(const nn::Model& model) {
  std::int64_t count = 0;
  for (const Tensor& weight : model.trainable_weights())
    count += weight.numel();
  return count;
}

class PeerWorkload : public ::testing::TestWithParam<std::tuple<std::string, Workload>> {};

TEST_P(PeerWorkload, PrintsOneJsonLineAndMatchesTandemsWeights) {
  TANDEM_REQUIRE_PYTHON_ENV(venv, "bench");
  const auto& [framework, workload] = GetParam();

  std::vector<std::string> args{"--framework",    framework,
                                "--model",        workload.model,
                                "--batch-size",   std::to_string(kBatch),
                                "--precision",    "fp32",
                                "--warmup-steps", "0",
                                "--steps",        std::to_string(kSteps),
                                "--threads",      "1"};
  args.insert(args.end(), workload.extra_args.begin(), workload.extra_args.end());
  const CliResult run = run_peer(venv.python, args);
  ASSERT_EQ(run.status, 0) << run.err;
  ASSERT_FALSE(run.out.empty()) << run.err;
  ASSERT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1)
      << "stdout must hold exactly one line, got:\n"
      << run.out;
  ASSERT_EQ(run.out.back(), '\n');
  const nlohmann::json result = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(result.is_object()) << "not a JSON object: " << run.out;

  EXPECT_EQ(result.at("framework"), framework);
  EXPECT_TRUE(result.at("version").is_string());
  EXPECT_FALSE(result.at("version").get<std::string>().empty());
  EXPECT_EQ(result.at("model"), workload.model);
  EXPECT_EQ(result.at("batch_size"), kBatch);
  EXPECT_EQ(result.at("precision"), "fp32");
  EXPECT_EQ(result.at("threads"), 1);
  const std::vector<double> steps = result.at("step_seconds").get<std::vector<double>>();
  ASSERT_EQ(steps.size(), static_cast<std::size_t>(kSteps));
  for (const double seconds : steps)
    EXPECT_GT(seconds, 0.0);
  std::vector<double> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  const double median = (sorted[0] + sorted[1]) / 2;  // two steps
  EXPECT_NEAR(result.at("samples_per_second").get<double>(), kBatch / median,
              1e-6 * kBatch / median);

  nn::clear_session();
  const nn::Model tandem_model = workload.tandem_model();
  EXPECT_EQ(result.at("parameters").get<std::int64_t>(), tandem_model.count_params())
      << framework << " " << workload.model << " has another number of weights than Tandem's";
  EXPECT_EQ(result.at("trainable_parameters").get<std::int64_t>(), trainable_count(tandem_model))
      << framework << " " << workload.model
      << " has another number of trainable weights than Tandem's";
}

INSTANTIATE_TEST_SUITE_P(Peers, PeerWorkload,
                         ::testing::Combine(::testing::Values("tf", "torch"),
                                            ::testing::ValuesIn(workloads())),
                         [](const ::testing::TestParamInfo<PeerWorkload::ParamType>& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param).model;
                         });

class PeerBfloat16 : public ::testing::TestWithParam<std::string> {};

TEST_P(PeerBfloat16, TrainsUnderMixedPrecisionWithTheSameWeights) {
  TANDEM_REQUIRE_PYTHON_ENV(venv, "bench");
  const CliResult run = run_peer(
      venv.python, {"--framework", GetParam(), "--model", "cnn", "--batch-size", "2", "--precision",
                    "bf16", "--warmup-steps", "0", "--steps", "2", "--threads", "1"});
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json result = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(result.is_object()) << "not a JSON object: " << run.out;
  EXPECT_EQ(result.at("precision"), "bf16");
  EXPECT_GT(result.at("samples_per_second").get<double>(), 0.0);
  nn::clear_session();
  EXPECT_EQ(result.at("parameters").get<std::int64_t>(),
            nn::zoo::build("cnn", {28, 28, 1}, 10).count_params());
}

INSTANTIATE_TEST_SUITE_P(Peers, PeerBfloat16, ::testing::Values("tf", "torch"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param + "_cnn";
                         });

// Decided before either framework is imported, so Debian's interpreter (scripts/install-deps.sh),
// which has neither framework nor NumPy, shows them without the virtualenv.
TEST(PeerContract, BadArgumentsUnsupportedCombinationsAndMissingFrameworksExitApart) {
  const std::string python = "/usr/bin/python3";
  const std::vector<std::string> base{"--framework", "torch", "--model", "cnn", "--steps", "1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };

  const CliResult bad_batch = run_peer(python, with({"--batch-size", "0"}));
  EXPECT_EQ(bad_batch.status, 2);
  EXPECT_NE(bad_batch.err.find("--batch-size must be at least 1"), std::string::npos)
      << bad_batch.err;
  EXPECT_TRUE(bad_batch.out.empty());
  EXPECT_EQ(run_peer(python, with({"--batch-size", "2", "--precision", "fp16"})).status, 2);
  EXPECT_EQ(run_peer(python, with({"--batch-size", "2", "--heads", "4"})).status, 2)
      << "--heads is the transformer's";

  const CliResult too_small = run_peer(python, with({"--batch-size", "2", "--image-size", "8"}));
  EXPECT_EQ(too_small.status, 4);
  EXPECT_NE(too_small.err.find("at least 10x10"), std::string::npos) << too_small.err;
  EXPECT_TRUE(too_small.out.empty());

  const CliResult missing = run_peer(python, with({"--batch-size", "2"}));
  if (missing.status == 0) GTEST_SKIP() << python << " has PyTorch itself";
  EXPECT_EQ(missing.status, 3) << missing.err;
  EXPECT_NE(missing.err.find("torch is not installed"), std::string::npos) << missing.err;
  EXPECT_TRUE(missing.out.empty());
}

}  // namespace
}  // namespace tandem
