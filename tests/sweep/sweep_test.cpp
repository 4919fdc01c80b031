// sweep::run_sweep with training functions of the test's own: grid and seeded random
// configurations; parallel trials; failures recorded as such; successive halving finding the full
// grid's best at a fraction of its compute; a sweep stopped mid-way resuming what was running and
// nothing else; a folder of another sweep refused; the HTML report's curves.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "data/idx_files.h"
#include "support/errors.h"
#include "tandem/runtime.h"
#include "tandem/sweep.h"

namespace tandem::sweep {
namespace {

using testing::error_of;
using testing::ScratchDir;

std::vector<Axis> lr_and_batch() {
  return {{.name = "lr", .values = {1e-3, 3e-3, 1e-2}},
          {.name = "batch-size", .values = {std::int64_t{32}, std::int64_t{64}}}};
}

double as_double(const Value& value) {
  return std::holds_alternative<double>(value) ? std::get<double>(value)
                                               : static_cast<double>(std::get<std::int64_t>(value));
}

TEST(SweepConfigurations, AGridIsEveryCombinationFirstAxisSlowest) {
  const std::vector<Params> grid = configurations(lr_and_batch(), {});
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_EQ(value_text(grid[0].at("lr")), "0.001");
  EXPECT_EQ(value_text(grid[0].at("batch-size")), "32");
  EXPECT_EQ(value_text(grid[1].at("batch-size")), "64");
  EXPECT_EQ(value_text(grid[5].at("lr")), "0.01");
  EXPECT_EQ(value_text(Value{true}), "true");
  EXPECT_EQ(value_text(Value{0.1}), "0.1");
  EXPECT_EQ(value_text(Value{std::string("cosine")}), "cosine");
}

TEST(SweepConfigurations, RandomDrawsAreSeededAndInsideTheirRanges) {
  const std::vector<Axis> space{
      {.name = "lr", .range = Range{.low = 1e-4, .high = 1e-1, .log = true}},
      {.name = "units", .range = Range{.low = 16, .high = 256, .integer = true}},
      {.name = "schedule", .values = {std::string("constant"), std::string("cosine")}}};
  const SweepOptions options{.method = Method::random, .trials = 40, .seed = 7};
  const std::vector<Params> drawn = configurations(space, options);
  ASSERT_EQ(drawn.size(), 40u);
  std::set<std::string> schedules;
  for (const Params& params : drawn) {
    const double lr = std::get<double>(params.at("lr"));
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-1);
    const std::int64_t units = std::get<std::int64_t>(params.at("units"));
    EXPECT_GE(units, 16);
    EXPECT_LE(units, 256);
    schedules.insert(std::get<std::string>(params.at("schedule")));
  }
  EXPECT_EQ(schedules.size(), 2u);
  EXPECT_EQ(configurations(space, options), drawn);
  SweepOptions other = options;
  other.seed = 8;
  EXPECT_NE(configurations(space, other), drawn);

  EXPECT_NE(error_of([&] { configurations(space, {}); }).find("only a random search draws from"),
            std::string::npos);
  EXPECT_NE(
      error_of([] {
        configurations({{.name = "lr", .values = {1.0}}, {.name = "lr", .values = {2.0}}}, {});
      }).find("'lr' is varied twice"),
      std::string::npos);
  EXPECT_NE(error_of([] { configurations({{.name = "lr"}}, {}); }).find("has no values"),
            std::string::npos);
}

// A "training" whose validation accuracy depends on the configuration only.
Outcome fake_training(const Trial& trial) {
  const double lr = as_double(trial.params.at("lr"));
  const double batch = as_double(trial.params.at("batch-size"));
  const double accuracy = 0.9 - std::abs(std::log10(lr) + 2.5) * 0.1 - batch / 6400.0;
  return {.metrics = {{"val_accuracy", accuracy}, {"val_loss", 1.0 - accuracy}},
          .history = {{"val_accuracy", {accuracy - 0.1, accuracy}}},
          .seconds = 0.5,
          .cost = 0.001};
}

TEST(RunSweep, SharesTheUsableCoresBetweenTheTrialsRunningAtOnce) {
  // Without a count, the cores this process may use (affinity and cgroup quota), split between
  // the trials at once: each runs on a count of its own, never spinning against the others.
  for (const int parallel : {1, 2, 3}) {
    ScratchDir dir;
    std::atomic<int> threads = 0;
    run_sweep(lr_and_batch(), {.folder = dir.file("sweep"), .parallel = parallel},
              [&](const Trial& trial) {
                threads = trial.threads;
                return fake_training(trial);
              });
    EXPECT_EQ(threads.load(), std::max(1, usable_cpu_cores() / parallel)) << parallel;
  }
}

TEST(RunSweep, RunsEveryTrialTwoAtATimeAndRanksThem) {
  ScratchDir dir;
  std::atomic<int> running = 0;
  std::atomic<int> most_at_once = 0;
  std::mutex mutex;
  std::set<int> slots;
  const Summary summary =
      run_sweep(lr_and_batch(), {.folder = dir.file("sweep"), .parallel = 2, .threads = 4},
                [&](const Trial& trial) {
                  const int now = ++running;
                  most_at_once = std::max(most_at_once.load(), now);
                  {
                    std::lock_guard lock(mutex);
                    slots.insert(trial.slot);
                  }
                  EXPECT_EQ(trial.threads, 2);
                  EXPECT_TRUE(std::filesystem::is_directory(trial.folder)) << trial.folder;
                  std::this_thread::sleep_for(std::chrono::milliseconds(30));
                  --running;
                  return fake_training(trial);
                });
  ASSERT_EQ(summary.results.size(), 6u);
  EXPECT_EQ(most_at_once.load(), 2);
  EXPECT_EQ(slots, (std::set<int>{0, 1}));
  ASSERT_TRUE(summary.best.has_value());
  const Result& best = summary.results[*summary.best];
  EXPECT_EQ(value_text(best.trial.params.at("lr")), "0.003");
  EXPECT_EQ(value_text(best.trial.params.at("batch-size")), "32");
  EXPECT_DOUBLE_EQ(summary.compute, 6.0);
  const std::string table = summary.table();
  EXPECT_NE(table.find("lr     batch-size  status  val_accuracy  val_loss  seconds  cost (USD)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find(best.trial.id + " *"), std::string::npos) << table;
  EXPECT_NE(table.find("best: " + best.trial.id), std::string::npos) << table;
  EXPECT_TRUE(std::filesystem::exists(dir.file("sweep/sweep.json")));
}

TEST(RunSweep, AFailedTrialIsRecordedWithItsReasonAndTheSweepGoesOn) {
  ScratchDir dir;
  const Summary summary =
      run_sweep(lr_and_batch(), {.folder = dir.file("sweep")}, [](const Trial& trial) -> Outcome {
        if (trial.index == 1)
          throw OutOfMemory("out of memory on cpu: asked for 2 GiB", "cpu", 2u << 30, 0, 0);
        if (trial.index == 2) return {.metrics = {{"val_accuracy", std::nan("")}}};
        if (trial.index == 3) return {.metrics = {{"accuracy", 0.5}}};
        if (trial.index == 4) return {.ok = false, .failure = "crashed (signal 11)"};
        return fake_training(trial);
      });
  ASSERT_EQ(summary.results.size(), 6u);
  const std::string table = summary.table();
  for (const char* reason :
       {"failed: out of memory on cpu: asked for 2 GiB", "failed: diverged: val_accuracy is nan",
        "failed: no val_accuracy among its results (accuracy)", "failed: crashed (signal 11)"}) {
    EXPECT_NE(table.find(reason), std::string::npos) << reason << " in\n" << table;
  }
  ASSERT_TRUE(summary.best.has_value());
  EXPECT_TRUE(summary.results[*summary.best].outcome.ok);
}

// Eight configurations whose ranking is the same on every budget (the quality of configuration i
// peaks at i = 5, and a larger budget raises every one): successive halving keeps the best and
// spends a fraction of the grid's compute.
TEST(RunSweep, SuccessiveHalvingFindsTheFullGridsBestForLessCompute) {
  std::vector<Axis> space{{.name = "lr", .values = {}}};
  for (int i = 0; i < 8; ++i)
    space[0].values.push_back(0.001 * (i + 1));
  const auto training = [](const Trial& trial) {
    const double i = std::round(std::get<double>(trial.params.at("lr")) / 0.001) - 1;
    const double quality = 0.9 - 0.02 * std::abs(i - 5.0);
    return Outcome{.metrics = {{"val_accuracy", quality * (0.5 + 0.5 * trial.budget)}}};
  };
  ScratchDir dir;
  const Summary full = run_sweep(space, {.folder = dir.file("full"), .parallel = 2}, training);
  const Summary halving =
      run_sweep(space,
                {.folder = dir.file("halving"),
                 .parallel = 2,
                 .halving = Halving{.rungs = {0.125, 0.25, 0.5, 1.0}, .reduction = 2}},
                training);
  ASSERT_TRUE(full.best && halving.best);
  const Result& best = halving.results[*halving.best];
  EXPECT_EQ(best.trial.params, full.results[*full.best].trial.params);
  EXPECT_EQ(best.trial.rung, 3);
  EXPECT_EQ(best.trial.id, "trial-06/rung-3");
  // 8 x 1/8 + 4 x 1/4 + 2 x 1/2 + 1 x 1 of the grid's 8 x 1.
  EXPECT_DOUBLE_EQ(halving.compute, 4.0);
  std::cout << "successive halving: " << halving.compute << " full trials of compute, the full "
            << "grid " << full.compute << " (" << 100.0 * halving.compute / full.compute << "%)\n";
  EXPECT_NE(halving.table().find("budget"), std::string::npos);
}

// What a sweep killed mid-way leaves: some trials finished, some running. Started again it runs
// the running ones (told to resume) and the rest, not the finished ones.
TEST(RunSweep, AStoppedSweepResumesWhatWasRunningAndKeepsWhatFinished) {
  ScratchDir dir;
  const std::string folder = dir.file("sweep");
  run_sweep(lr_and_batch(), {.folder = folder, .definition = "v1"}, fake_training);
  const std::string state_path = folder + "/sweep.json";
  nlohmann::json state = nlohmann::json::parse(std::ifstream(state_path));
  // As if killed while trials 3 and 4 ran and before 5 and 6 started.
  nlohmann::json finished = nlohmann::json::array();
  for (const auto& item : state["finished"]) {
    if (item["index"].get<int>() < 2) finished.push_back(item);
  }
  state["finished"] = finished;
  state["running"] = {{{"index", 2}, {"rung", 0}}, {{"index", 3}, {"rung", 0}}};
  state["started"] = 4;
  std::ofstream(state_path) << state.dump();

  std::mutex mutex;
  std::vector<std::pair<std::int64_t, bool>> runs;
  const Summary resumed =
      run_sweep(lr_and_batch(), {.folder = folder, .definition = "v1"}, [&](const Trial& trial) {
        std::lock_guard lock(mutex);
        runs.emplace_back(trial.index, trial.resume);
        return fake_training(trial);
      });
  EXPECT_EQ(runs, (std::vector<std::pair<std::int64_t, bool>>{
                      {2, true}, {3, true}, {4, false}, {5, false}}));
  EXPECT_EQ(resumed.results.size(), 6u);

  EXPECT_NE(error_of([&] {
              run_sweep(lr_and_batch(), {.folder = folder, .definition = "v2"}, fake_training);
            }).find("holds the progress of a different sweep"),
            std::string::npos);
}

TEST(SweepReport, DrawsEveryTrialsCurveAndTheTable) {
  ScratchDir dir;
  const Summary summary = run_sweep(lr_and_batch(), {.folder = dir.file("sweep")}, fake_training);
  const std::string html = html_report(summary);
  std::size_t lines = 0;
  for (std::size_t at = html.find("<polyline"); at != std::string::npos;
       at = html.find("<polyline", at + 1))
    ++lines;
  EXPECT_EQ(lines, 6u);
  EXPECT_NE(html.find("class=\"trial best\" data-trial=\"" +
                      summary.results[*summary.best].trial.id + "\""),
            std::string::npos);
  EXPECT_NE(html.find("<pre class=\"table\">"), std::string::npos);
}

}  // namespace
}  // namespace tandem::sweep
