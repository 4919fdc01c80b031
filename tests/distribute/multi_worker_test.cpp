// Multi-worker training for real: each test starts Debian's OpenMPI `mpirun` itself with the
// worker program (tests/distribute/mpi_worker_main.cpp) and checks what the workers wrote and
// said. The faults (a worker that never joins, stalls, dies, or runs other settings) must end
// every worker with an error naming the culprit, never a hang: every run is also bounded by
// `timeout`, so a hang fails the test instead of blocking CTest.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/cli_runner.h"
#include "data/idx_files.h"
#include "tandem/data.h"

namespace tandem::testing {
namespace {

struct JobResult {
  int status = -1;
  std::string output;  // stdout and stderr of every worker and of mpirun
  double seconds = 0;
};

// Under AddressSanitizer (make test-sanitize), the processes of a job unwind slowly on every
// allocation, so that LeakSanitizer reaches the frames of Open MPI's libraries that its
// suppressions name (tests/sanitizers/lsan.supp): Open MPI unloads its components before the
// leak check, and its libraries have no frame pointers. Only these processes: slow unwinding
// deadlocks in one that runs XLA:CPU, whose compiled programs register their frames with libgcc's
// unwinder, which then allocates while it holds its lock.
std::string job_environment() {
  const char* options = std::getenv("ASAN_OPTIONS");
  if (options == nullptr) return "";
  return "env ASAN_OPTIONS=" + shell_quote(std::string(options) + ":fast_unwind_on_malloc=0") + " ";
}

// Runs a shell command under `timeout` (a hang shows up as status 124).
JobResult run_job(const std::string& command, int limit_seconds) {
  ScratchDir scratch;
  const std::string output = scratch.file("output");
  const auto start = std::chrono::steady_clock::now();
  const int raw =
      std::system(("timeout -k 5 " + std::to_string(limit_seconds) + " " + job_environment() +
                   command + " >" + shell_quote(output) + " 2>&1 </dev/null")
                      .c_str());
  JobResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  result.output = slurp(output);
  return result;
}

// mpirun as a test on a small machine needs it: more workers than cores, and root in containers.
std::string mpirun() {
  return std::string("mpirun --oversubscribe") + (geteuid() == 0 ? " --allow-run-as-root" : "");
}

// The tests start Debian's OpenMPI; without it there is nothing to test against.
bool have_mpirun() {
  return std::system("command -v mpirun >/dev/null 2>&1") == 0;
}

#define REQUIRE_MPIRUN()                                                                   \
  if (!have_mpirun()) {                                                                    \
    GTEST_SKIP() << "mpirun is not on PATH; scripts/install-deps.sh installs openmpi-bin"; \
  }

std::string worker(const std::string& arguments) {
  return shell_quote(TANDEM_MPI_WORKER_PATH) + " " + arguments;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in:\n" << text;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

std::vector<float> floats_of(const std::string& path) {
  const std::string bytes = slurp(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// A worker's communication statistics ("name value" lines).
std::map<std::string, std::int64_t> stats_of(const std::string& path) {
  std::map<std::string, std::int64_t> stats;
  std::ifstream in(path);
  std::string name;
  std::int64_t value = 0;
  while (in >> name >> value)
    stats[name] = value;
  return stats;
}

// The largest absolute difference between two float dumps of the same length.
double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

bool have_fashion_mnist() {
  return std::filesystem::exists(std::string(data::kFashionMnistDefaultDir) +
                                 "/train-images-idx3-ubyte.gz") ||
         std::filesystem::exists(std::string(data::kFashionMnistDefaultDir) +
                                 "/train-images-idx3-ubyte");
}

TEST(MultiWorker, TwoRanksTrainTheCnnBitIdenticalAndMatchOneProcess) {
  REQUIRE_MPIRUN();
  if (!have_fashion_mnist()) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (" << data::kFashionMnistDefaultDir
                 << "); scripts/install-deps.sh installs it";
  }
  ScratchDir out;
  // 544 examples in global batches of 64: 8 full steps and a last one of 32 (16 per rank); small
  // buckets, so several all-reduces overlap the backward pass.
  const std::string arguments = "--out " + out.path().string() + " --data-dir " +
                                data::kFashionMnistDefaultDir +
                                " --model cnn --examples 544 --batch-size 64 --bucket-bytes 65536";
  const JobResult distributed = run_job(mpirun() + " -np 2 " + worker(arguments), 120);
  ASSERT_EQ(distributed.status, 0) << distributed.output;
  const JobResult single = run_job(worker(arguments + " --single 1"), 120);
  ASSERT_EQ(single.status, 0) << single.output;

  // After every step both ranks hold the same weights, to the bit, and log the same loss.
  const std::vector<std::string> rank0 = lines_of(out.file("rank0.steps"));
  const std::vector<std::string> rank1 = lines_of(out.file("rank1.steps"));
  ASSERT_EQ(rank0.size(), 9u);
  EXPECT_EQ(rank0, rank1);
  EXPECT_TRUE(slurp(out.file("rank0.weights")) == slurp(out.file("rank1.weights")))
      << "the ranks ended with different weights";

  // 64 KiB buckets cut the CNN's gradients into several, and the first ones (the last layers')
  // start their all-reduce while the backward pass is still computing the others.
  const auto stats = stats_of(out.file("rank0.stats"));
  EXPECT_EQ(stats.at("steps"), 9);
  EXPECT_GE(stats.at("gradient_buckets"), 2 * stats.at("steps"));
  EXPECT_GT(stats.at("overlapped_buckets"), 0) << "no all-reduce overlapped the backward pass";
  EXPECT_LT(stats.at("overlapped_buckets"), stats.at("gradient_buckets"))
      << "the last bucket cannot start before the backward pass has finished its gradients";

  // And they match one process training on the same global batches, up to float rounding.
  const std::vector<std::string> reference = lines_of(out.file("single.steps"));
  ASSERT_EQ(reference.size(), rank0.size());
  for (std::size_t step = 0; step < reference.size(); ++step) {
    std::istringstream ours(rank0[step]);
    std::istringstream theirs(reference[step]);
    std::string index, digest;
    double loss = 0, reference_loss = 0;
    ours >> index >> digest >> loss;
    theirs >> index >> digest >> reference_loss;
    EXPECT_NEAR(loss, reference_loss, 1e-4 * std::max(1.0, reference_loss)) << "step " << step;
  }
  // The all-reduce sums in another order than one process does, so gradients differ in their
  // last bits. Adam divides each step by the gradient's running magnitude: where a gradient is
  // near zero, that rounding noise is magnified up to the size of a whole step (the learning
  // rate, 1e-3). So nearly every weight agrees to 1e-6, and none by more than one step.
  const std::vector<float> weights = floats_of(out.file("rank0.weights"));
  const std::vector<float> expected = floats_of(out.file("single.weights"));
  ASSERT_EQ(weights.size(), expected.size());
  double worst = 0;
  std::size_t close = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double difference = std::abs(static_cast<double>(weights[i]) - expected[i]);
    worst = std::max(worst, difference);
    close += difference <= 1e-6;
  }
  EXPECT_GE(static_cast<double>(close), 0.99 * static_cast<double>(weights.size()));
  EXPECT_LT(worst, 1e-3) << "largest difference from the single-process run";
}

TEST(MultiWorker, TwoRanksAverageBatchNormStatisticsBitIdenticalAndMatchOneProcess) {
  REQUIRE_MPIRUN();
  ScratchDir out;
  // resnet_small normalises with BatchNormalization: each rank with its own share's statistics,
  // so the moving mean and variance stay identical only because the workers average them. Plain
  // SGD keeps the match to one process tight (Adam magnifies rounding noise, see above). The
  // reference is one process training two logical replicas (Mirrored), the same arithmetic: one
  // process on the whole batch normalises with other statistics and differs by about 5e-3.
  // 96 synthetic examples in global batches of 32: 3 steps of 16 examples per rank.
  const std::string arguments = "--out " + out.path().string() +
                                " --model resnet_small --examples 96 --batch-size 32 "
                                "--optimizer sgd";
  const JobResult distributed = run_job(mpirun() + " -np 2 " + worker(arguments), 120);
  ASSERT_EQ(distributed.status, 0) << distributed.output;
  const JobResult single = run_job(worker(arguments + " --single 1 --single-replicas 2"), 120);
  ASSERT_EQ(single.status, 0) << single.output;

  const std::vector<std::string> rank0 = lines_of(out.file("rank0.steps"));
  ASSERT_EQ(rank0.size(), 3u);
  EXPECT_EQ(rank0, lines_of(out.file("rank1.steps")));
  EXPECT_TRUE(slurp(out.file("rank0.weights")) == slurp(out.file("rank1.weights")))
      << "the ranks ended with different weights";
  const std::vector<float> statistics = floats_of(out.file("rank0.statistics"));
  EXPECT_TRUE(statistics == floats_of(out.file("rank1.statistics")))
      << "the ranks ended with different moving statistics";

  // Training moved the statistics away from their initial values (mean 0, variance 1).
  ASSERT_FALSE(statistics.empty());
  EXPECT_TRUE(std::any_of(statistics.begin(), statistics.end(),
                          [](float value) { return value != 0.0f && value != 1.0f; }));
  // With two replicas every sum is a + b, in MPI as in one process, so the match is exact: the
  // same weights after every step, the same moving statistics at the end.
  EXPECT_EQ(rank0, lines_of(out.file("single.steps")));
  EXPECT_EQ(largest_difference(statistics, floats_of(out.file("single.statistics"))), 0.0)
      << "moving statistics differ from one process training two replicas";
  EXPECT_EQ(largest_difference(floats_of(out.file("rank0.weights")),
                               floats_of(out.file("single.weights"))),
            0.0)
      << "weights differ from one process training two replicas";

  // resnet_small's gradients fit one 1 MiB bucket: it starts only once the backward pass is over.
  const auto stats = stats_of(out.file("rank0.stats"));
  EXPECT_EQ(stats.at("gradient_buckets"), 3);
  EXPECT_EQ(stats.at("overlapped_buckets"), 0);
}

TEST(MultiWorker, AWorkerThatNeverJoinsIsNamed) {
  REQUIRE_MPIRUN();
  ScratchDir out;
  // Rank 1 is not a Tandem worker at all: it never starts MPI.
  const JobResult result =
      run_job(mpirun() + " -np 1 " + worker("--out " + out.path().string() + " --join-timeout 3") +
                  " : -np 1 sleep 60",
              60);
  EXPECT_NE(result.status, 0);
  EXPECT_NE(result.status, 124) << "hung:\n" << result.output;
  expect_contains(result.output, "worker 0 of 2: the workers did not all start within 3");
  expect_contains(result.output, "rank 1 never joined");
  EXPECT_LT(result.seconds, 30);
}

TEST(MultiWorker, AWorkerThatNeverReachesTrainingIsNamed) {
  REQUIRE_MPIRUN();
  ScratchDir out;
  const JobResult result =
      run_job(mpirun() + " -np 2 " +
                  worker("--out " + out.path().string() +
                         " --model mlp --collective-timeout 3 --fault stall-before-fit "
                         "--fault-rank 1"),
              60);
  EXPECT_NE(result.status, 0);
  EXPECT_NE(result.status, 124) << "hung:\n" << result.output;
  expect_contains(result.output,
                  "worker 0 of 2: rank 1 did not reach the start of training within 3");
  // The stalled worker is stopped too, and says so.
  expect_contains(result.output, "worker 1 of 2 stopped by the launcher");
}

TEST(MultiWorker, AWorkerThatStopsRespondingIsNamedByARollCall) {
  REQUIRE_MPIRUN();
  ScratchDir out;
  const JobResult result =
      run_job(mpirun() + " -np 2 " +
                  worker("--out " + out.path().string() +
                         " --model mlp --collective-timeout 3 --fault stall-at-step "
                         "--fault-step 2 --fault-rank 1"),
              60);
  EXPECT_NE(result.status, 0);
  EXPECT_NE(result.status, 124) << "hung:\n" << result.output;
  expect_contains(result.output,
                  "worker 0 of 2: rank 1 stopped responding: the gradient "
                  "all-reduce (bucket 1 of");
  expect_contains(result.output, ") of step 3 did not complete within 3");
  expect_contains(result.output, "did not answer the other workers' roll call");
  // Two steps went through on both ranks before.
  EXPECT_EQ(lines_of(out.file("rank0.steps")).size(), 2u);
}

TEST(MultiWorker, AWorkerThatDiesStopsEveryWorker) {
  REQUIRE_MPIRUN();
  ScratchDir out;
  const JobResult result =
      run_job(mpirun() + " -np 2 " +
                  worker("--out " + out.path().string() +
                         " --model mlp --collective-timeout 30 --fault die-at-step "
                         "--fault-step 2 --fault-rank 1"),
              60);
  EXPECT_NE(result.status, 0);
  EXPECT_NE(result.status, 124) << "hung:\n" << result.output;
  // mpirun names the dead worker and stops the other, which says why it stops (that the
  // launcher stopped it, or, had it noticed first, that rank 1 stopped responding).
  expect_contains(result.output, "rank 1");
  expect_contains(result.output, "signal 9");
  expect_contains(result.output, "tandem: error: worker 0 of 2");
  EXPECT_LT(result.seconds, 25) << "the survivor waited for its collective timeout";
}

TEST(MultiWorker, MismatchedSettingsStopEveryWorkerAtStartUp) {
  REQUIRE_MPIRUN();
  ScratchDir out;
  const std::string common =
      "--out " + out.path().string() + " --model mlp --collective-timeout 20";
  const JobResult result = run_job(mpirun() + " -np 1 " + worker(common + " --batch-size 64") +
                                       " : -np 1 " + worker(common + " --batch-size 32"),
                                   60);
  EXPECT_NE(result.status, 0);
  for (const char* label : {"worker 0 of 2", "worker 1 of 2"}) {
    expect_contains(result.output, std::string(label) +
                                       ": the workers' settings differ, so they "
                                       "cannot train together: global batch size: "
                                       "64 on rank 0, 32 on rank 1");
  }
  expect_contains(result.output, "batches per epoch: 8 on rank 0, 16 on rank 1");
  EXPECT_FALSE(std::filesystem::exists(out.file("rank0.steps")) &&
               !lines_of(out.file("rank0.steps")).empty())
      << "a step ran despite the mismatch";
}

TEST(MultiWorker, TandemLaunchTrainsFromTheCommandLine) {
  REQUIRE_MPIRUN();
  ScratchDir data;
  write_tiny_fashion_mnist(data.path(), 96, 32, 28, 28);
  const std::string report = data.file("report.json");
  const JobResult result =
      run_job(shell_quote(TANDEM_CLI_PATH) +
                  " launch -n 2 -- tandem train --strategy "
                  "multi-worker --model mlp --epochs 1 --batch-size 16 --threads 1 "
                  "--data-dir " +
                  data.path().string() + " --report " + report,
              120);
  ASSERT_EQ(result.status, 0) << result.output;
  expect_contains(result.output,
                  "strategy: MultiWorker(2 workers, cpu per worker), global batch "
                  "32 = 16 per replica x 2 replicas");
  // Only the chief reports.
  EXPECT_EQ(result.output.find("test accuracy: "), result.output.rfind("test accuracy: "));
  JsonChecker json(slurp(report));
  ASSERT_TRUE(json.valid()) << slurp(report);
  EXPECT_EQ(json.top_level().at("replicas"), "2");
  EXPECT_EQ(json.top_level().at("global_batch_size"), "32");
  EXPECT_EQ(json.top_level().at("batch_size"), "16");
}

// `tandem train` under mpirun, every worker with the common options and its own extra ones.
std::string train_workers(const std::string& common, const std::vector<std::string>& own) {
  std::string command = mpirun();
  for (std::size_t rank = 0; rank < own.size(); ++rank) {
    command += (rank == 0 ? " -np 1 " : " : -np 1 ") + shell_quote(TANDEM_CLI_PATH) +
               " train --strategy multi-worker " + common + " " + own[rank];
  }
  return command;
}

TEST(MultiWorker, TrainWorkersStartedWithDifferentOptionsStopNamingEachOne) {
  REQUIRE_MPIRUN();
  ScratchDir data;
  write_tiny_fashion_mnist(data.path(), 64, 16, 28, 28);
  const std::string common =
      "--model mlp --epochs 1 --batch-size 16 --threads 1 --quiet "
      "--join-timeout 30 --collective-timeout 30 --data-dir " +
      data.path().string();
  struct Mismatch {
    std::vector<std::string> own;
    std::vector<std::string> named;
  };
  const std::vector<Mismatch> mismatches{
      {{"--lr-schedule constant", "--lr-schedule cosine"},
       {"--lr-schedule: constant on rank 0, cosine on rank 1"}},
      {{"--precision fp32", "--precision bf16"}, {"--precision: fp32 on rank 0, bf16 on rank 1"}},
      {{"--deterministic --seed 1", "--seed 2 --lr 0.01"},
       {"--deterministic: true on rank 0, false on rank 1", "--seed: 1 on rank 0, 2 on rank 1",
        "--lr: 0.001 on rank 0, 0.01 on rank 1"}},
      // Worker-specific options may differ: only the chief writes its report and logs.
      {{"--report " + data.file("report.json"), "--logdir " + data.file("logs")}, {}},
  };
  for (const Mismatch& mismatch : mismatches) {
    SCOPED_TRACE(mismatch.own.front() + " / " + mismatch.own.back());
    const JobResult result = run_job(train_workers(common, mismatch.own), 120);
    if (mismatch.named.empty()) {
      EXPECT_EQ(result.status, 0) << result.output;
      continue;
    }
    EXPECT_NE(result.status, 0) << result.output;
    expect_contains(result.output, "the workers' settings differ, so they cannot train together");
    for (const std::string& part : mismatch.named)
      expect_contains(result.output, part);
    EXPECT_EQ(result.output.find("test accuracy"), std::string::npos) << "the workers trained";
  }
}

TEST(MultiWorker, ResumingATwoWorkerRunInOneProcessNamesTheReplicaCount) {
  REQUIRE_MPIRUN();
  ScratchDir data;
  write_tiny_fashion_mnist(data.path(), 64, 16, 28, 28);
  const std::string checkpoints = data.file("checkpoints");
  const std::string common =
      "--model mlp --epochs 1 --batch-size 16 --threads 1 --quiet "
      "--data-dir " +
      data.path().string() + " --checkpoint-dir " + checkpoints;
  const JobResult trained = run_job(train_workers(common, {"", ""}), 120);
  ASSERT_EQ(trained.status, 0) << trained.output;
  const CliResult resumed = run_cli({"train", "--resume", checkpoints});
  EXPECT_NE(resumed.status, 0);
  expect_contains(resumed.err, "the run trained on 2 replicas, this one has 1");
  expect_contains(resumed.err, "tandem launch -n 2");
}

}  // namespace
}  // namespace tandem::testing
