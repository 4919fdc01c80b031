// `tandem sweep` end to end on a slice of Fashion-MNIST: a grid of 3 learning rates x 2 batch sizes
// run 2 at a time, read back by TensorBoard's own HParams plugin (the real package); a sweep
// killed with SIGKILL and started again finishing with the table of an uninterrupted one;
// successive halving finding the full grid's best for half its compute; the HTML report rendered
// by headless Chromium; and bad sweep files, each with its message.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cli/cli_runner.h"
#include "support/python_env.h"
#include "tandem/data.h"
#include "tandem/pipeline.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

// The first `train` and `test` images of Fashion-MNIST (the Debian package's) as IDX files.
void write_fashion_slice(const fs::path& directory, std::uint32_t train, std::uint32_t test) {
  fs::create_directories(directory);
  for (const auto& [split, count] : {std::pair{"train", train}, std::pair{"t10k", test}}) {
    const data::IdxFiles files = data::fashion_mnist_files(data::kFashionMnistDefaultDir, split);
    Bytes pixels;
    Bytes labels;
    for (const data::Element& element :
         data::Pipeline::idx(files.images, files.labels).take(count).collect()) {
      const std::vector<int> image = element.at("image").to_vector<int>();
      pixels.insert(pixels.end(), image.begin(), image.end());
      labels.push_back(static_cast<unsigned char>(element.at("label").item()));
    }
    write_file((directory / (std::string(split) + "-images-idx3-ubyte")).string(),
               concat(idx_header(0x08, {count, 28, 28}), pixels));
    write_file((directory / (std::string(split) + "-labels-idx1-ubyte")).string(),
               concat(idx_header(0x08, {count}), labels));
  }
}

std::string base_section(const std::string& data, int epochs) {
  return "[base]\nmodel = \"mlp\"\nepochs = " + std::to_string(epochs) +
         "\nvalidation-split = 0.2\ndeterministic = true\ndata-dir = \"" + data + "\"\n";
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// The table without its timing and cost columns (from "seconds" on), which differ between runs.
std::string table_without_times(const std::string& path) {
  std::ifstream file(path);
  std::string kept;
  std::size_t cut = std::string::npos;
  for (std::string line; std::getline(file, line);) {
    if (line.starts_with("trial ")) cut = line.find("seconds");
    if (line.starts_with("trial")) line = line.substr(0, cut);
    kept += line + "\n";
  }
  return kept;
}

// A trial whose loss becomes NaN is a failed trial, whatever its metric would say (a diverged
// run used to train to the end and could rank by a meaningless figure): the run stops with its
// error, which the table shows, and the best is the trial that trained.
TEST(SweepCli, ATrialWhoseLossBecomesNanFails) {
  ScratchDir dir;
  write_fashion_slice(dir.path() / "data", 200, 50);
  write_text(dir.file("nan.toml"), "[sweep]\nfolder = \"" + dir.file("nan") + "\"\n\n" +
                                       base_section(dir.file("data"), 1) +
                                       "lr-schedule = \"constant\"\n"
                                       "\n[space]\nlr = [1e-3, 1e30]\n");
  const CliResult result = run_cli({"sweep", dir.file("nan.toml")});
  ASSERT_EQ(result.status, 0) << result.out << result.err;
  expect_contains(result.out, "trial-02 lr=1e+30: failed: training diverged: the loss became");
  expect_contains(result.out, "best: trial-01");
}

TEST(SweepCli, RunsAGridTwoAtATimeThatTensorBoardReads) {
  ScratchDir dir;
  write_fashion_slice(dir.path() / "data", 1000, 200);
  write_text(dir.file("lr.toml"),
             "[sweep]\nfolder = \"" + dir.file("lr") + "\"\nparallel = 2\nthreads = 2\n\n" +
                 base_section(dir.file("data"), 2) +
                 "\n[space]\nlr = [1e-4, 1e-3, 1e-2]\nbatch-size = [32, 64]\n");
  const CliResult result = run_cli({"sweep", dir.file("lr.toml")});
  ASSERT_EQ(result.status, 0) << result.out << result.err;
  expect_contains(result.out, "sweep: 6 configurations, 2 at a time, into " + dir.file("lr"));
  expect_contains(result.out, "trial       lr      batch-size  status  val_accuracy");
  expect_contains(result.out, "best: trial-");
  for (int trial = 1; trial <= 6; ++trial) {
    const std::string folder = dir.file("lr/trial-0" + std::to_string(trial));
    const nlohmann::json report = nlohmann::json::parse(slurp(folder + "/report.json"));
    EXPECT_EQ(report.at("threads"), 1) << "two trials at once share the two threads";
  }
  for (const char* file : {"trials.txt", "best.toml", "report.html", "sweep.json"})
    EXPECT_TRUE(fs::exists(dir.file("lr/") + file)) << file;
  // The best configuration is a run file `tandem train` takes.
  const CliResult best = run_cli({"train", "--config", dir.file("lr/best.toml"), "--quiet"});
  EXPECT_EQ(best.status, 0) << best.err;

  TANDEM_REQUIRE_PYTHON_ENV(env, "tensorboard");
  const ShellResult read = run_capturing(
      shell_quote(env.python) + " " +
      shell_quote(std::string(TANDEM_SOURCE_DIR) + "/tests/observe/tensorboard_interop.py") + " " +
      shell_quote(dir.file("lr")) + " 2>/dev/null");
  ASSERT_EQ(read.status, 0) << read.output;
  const nlohmann::json groups = nlohmann::json::parse(read.output).at("session_groups");
  ASSERT_EQ(groups.size(), 6u) << groups.dump(1);
  std::set<std::pair<double, double>> seen;
  for (const auto& [name, group] : groups.items()) {
    seen.insert({group.at("hparams").at("learning_rate").get<double>(),
                 group.at("hparams").at("batch_size").get<double>()});
    EXPECT_TRUE(group.at("metrics").contains("validation/epoch_accuracy")) << name;
    EXPECT_TRUE(group.at("metrics").contains("/test_accuracy")) << name;
  }
  EXPECT_EQ(seen, (std::set<std::pair<double, double>>{
                      {1e-4, 32}, {1e-4, 64}, {1e-3, 32}, {1e-3, 64}, {1e-2, 32}, {1e-2, 64}}));
}

TEST(SweepCli, AKilledSweepStartedAgainFinishesWithTheSameTable) {
  ScratchDir dir;
  write_fashion_slice(dir.path() / "data", 3000, 200);
  const std::string body = "parallel = 2\nthreads = 2\n\n" + base_section(dir.file("data"), 4) +
                           "\n[space]\nlr = [3e-4, 1e-3, 3e-3]\nbatch-size = [32, 64]\n";
  write_text(dir.file("whole.toml"), "[sweep]\nfolder = \"" + dir.file("whole") + "\"\n" + body);
  write_text(dir.file("killed.toml"), "[sweep]\nfolder = \"" + dir.file("killed") + "\"\n" + body);
  ASSERT_EQ(run_cli({"sweep", dir.file("whole.toml")}).status, 0);

  // Killed once two trials have finished and others run.
  const pid_t sweep = start_program(TANDEM_CLI_PATH, {"sweep", dir.file("killed.toml")},
                                    dir.file("first.out"), dir.file("first.err"));
  ASSERT_GT(sweep, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  bool killed = false;
  while (!killed && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!fs::exists(dir.file("killed/sweep.json"))) continue;
    nlohmann::json state;
    try {
      state = nlohmann::json::parse(slurp(dir.file("killed/sweep.json")));
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    if (state.at("finished").size() >= 2 && !state.at("running").empty()) {
      ASSERT_EQ(kill(sweep, SIGKILL), 0);
      killed = true;
    }
  }
  int status = 0;
  waitpid(sweep, &status, 0);
  ASSERT_TRUE(killed) << slurp(dir.file("first.out")) << slurp(dir.file("first.err"));
  const nlohmann::json state = nlohmann::json::parse(slurp(dir.file("killed/sweep.json")));
  ASSERT_LT(state.at("finished").size(), 6u) << "the sweep finished before it was killed";
  std::map<std::string, fs::file_time_type> finished_reports;
  for (const auto& item : state.at("finished")) {
    char id[16];
    std::snprintf(id, sizeof id, "trial-%02d", item.at("index").get<int>() + 1);
    finished_reports[id] = fs::last_write_time(dir.file("killed/") + id + "/report.json");
  }

  const CliResult again = run_cli({"sweep", dir.file("killed.toml")});
  ASSERT_EQ(again.status, 0) << again.out << again.err;
  for (const auto& [id, written] : finished_reports) {
    EXPECT_EQ(fs::last_write_time(dir.file("killed/") + id + "/report.json"), written)
        << id << " finished before the kill and ran again";
    EXPECT_EQ(again.out.find(id + " lr="), std::string::npos) << again.out;
  }
  EXPECT_EQ(table_without_times(dir.file("killed/trials.txt")),
            table_without_times(dir.file("whole/trials.txt")))
      << again.out;
}

// Eight learning rates of which one (1e-2) trains an MLP far better than the rest on any slice of
// the data: successive halving on 1/8, 1/4, 1/2 and all of it finds the grid's best for half its
// compute.
TEST(SweepCli, SuccessiveHalvingFindsTheGridsBestForHalfItsCompute) {
  ScratchDir dir;
  write_fashion_slice(dir.path() / "data", 2000, 200);
  const std::string space = "\n[space]\nlr = [1e-8, 3e-8, 1e-7, 3e-7, 1e-6, 3e-6, 1e-2, 1e-5]\n";
  write_text(dir.file("grid.toml"), "[sweep]\nfolder = \"" + dir.file("grid") +
                                        "\"\nparallel = 2\n\n" + base_section(dir.file("data"), 2) +
                                        space);
  write_text(dir.file("halving.toml"),
             "[sweep]\nfolder = \"" + dir.file("halving") + "\"\nparallel = 2\n\n" +
                 base_section(dir.file("data"), 2) + space +
                 "\n[halving]\nrungs = [0.125, 0.25, 0.5, 1.0]\nreduction = 2\n");
  const CliResult grid = run_cli({"sweep", dir.file("grid.toml")});
  ASSERT_EQ(grid.status, 0) << grid.out << grid.err;
  const CliResult halving = run_cli({"sweep", dir.file("halving.toml")});
  ASSERT_EQ(halving.status, 0) << halving.out << halving.err;
  expect_contains(grid.out, "best: trial-07,");
  expect_contains(halving.out, "best: trial-07/rung-3,");
  expect_contains(halving.out, "compute: 4.00 full trials of 8 configurations (50%)");
  const auto seconds = [&](const std::string& folder) {
    double total = 0;
    const nlohmann::json state = nlohmann::json::parse(slurp(folder + "/sweep.json"));
    for (const auto& item : state.at("finished"))
      total += item.at("outcome").at("seconds").get<double>();
    return total;
  };
  std::cout << "successive halving: 4 of the grid's 8 full trials of compute (50%), "
            << seconds(dir.file("halving")) << " s of training against the grid's "
            << seconds(dir.file("grid")) << " s\n";
  // The first rung trained on an eighth of the training examples.
  const nlohmann::json rung0 =
      nlohmann::json::parse(slurp(dir.file("halving/trial-01/rung-0/report.json")));
  EXPECT_EQ(rung0.at("config").at("data-fraction"), "0.125");
}

TEST(SweepCli, TheReportRendersInHeadlessChromium) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs Debian's "
                    "chromium); the HTML report was not rendered";
  }
  ScratchDir dir;
  write_fashion_slice(dir.path() / "data", 500, 100);
  write_text(dir.file("s.toml"), "[sweep]\nfolder = \"" + dir.file("s") + "\"\n\n" +
                                     base_section(dir.file("data"), 3) +
                                     "\n[space]\nlr = [1e-3, 1e-2]\n");
  ASSERT_EQ(run_cli({"sweep", dir.file("s.toml")}).status, 0);
  const std::string dom = dir.file("dom.html");
  const std::string command =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run "
      "--user-data-dir=" +
      dir.file("profile") +
      " --proxy-server=127.0.0.1:9 --proxy-bypass-list='<-loopback>' --dump-dom file://" +
      dir.file("s/report.html") + " >" + dom + " 2>" + dir.file("chromium.log");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::string text = slurp(dom);
  ASSERT_NE(text.find("<h1>tandem sweep</h1>"), std::string::npos) << text.substr(0, 2000);
  // Both trials' curves, three epochs each, as the sweep recorded them.
  const nlohmann::json state = nlohmann::json::parse(slurp(dir.file("s/sweep.json")));
  for (const auto& item : state.at("finished")) {
    const auto& values = item.at("outcome").at("history").at("val_accuracy");
    ASSERT_EQ(values.size(), 3u);
    char id[16];
    std::snprintf(id, sizeof id, "trial-%02d", item.at("index").get<int>() + 1);
    expect_contains(text, std::string("data-trial=\"") + id + "\"");
  }
  EXPECT_NE(text.find("<polyline"), std::string::npos);
  EXPECT_NE(text.find("id=\"best\""), std::string::npos);
}

TEST(SweepCli, BadSweepFilesNameTheFileLineAndKey) {
  ScratchDir dir;
  const auto error_for = [&](const std::string& text, const std::vector<std::string>& parts) {
    write_text(dir.file("bad.toml"), text);
    expect_error({"sweep", dir.file("bad.toml")}, 2, parts);
  };
  const std::string path = dir.file("bad.toml");
  error_for("[sweep]\nparalel = 2\n[space]\nlr = [1e-3]\n",
            {path + ":2: unknown key 'sweep.paralel' (did you mean 'parallel'?)"});
  error_for("[sweeps]\n[space]\nlr = [1e-3]\n",
            {path + ":1: 'sweeps' is not a section of a sweep file (did you mean 'sweep'?)"});
  error_for("[base]\nlogdir = \"x\"\n[space]\nlr = [1e-3]\n",
            {path + ":2: 'logdir' in [base] is set by the sweep for every trial"});
  error_for("[base]\nbatch-sise = 3\n[space]\nlr = [1e-3]\n",
            {path + ":2: unknown key 'base.batch-sise' (did you mean 'batch-size'?)"});
  error_for("[space]\nbatch-size = [32, 0]\n", {path + ":2: 'space.batch-size': ", "positive"});
  error_for("[base]\nlr = 0.1\n[space]\nlr = [1e-3]\n", {path + ":4: 'lr' is given twice"});
  error_for("[space]\nlr = { low = 1e-4, high = 1e-2, scale = \"log\" }\n",
            {path + ":2: 'space.lr' is a range, which only a random search draws from"});
  error_for("[sweep]\nmethod = \"random\"\n[space]\nlr = [1e-3, 1e-2]\n",
            {"a random search needs its number of trials", "trials = N"});
  error_for("[space]\nlr = [1e-3]\n[halving]\nrungs = [0.5, 0.25, 1]\n",
            {path + ":4: 'halving.rungs' must be fractions of the full budget rising to 1"});
  error_for("[sweep]\nparallel = 0\n[space]\nlr = [1e-3]\n",
            {path + ":2: 'parallel' must be a whole number of at least 1"});
  error_for("[sweep]\nparallel = 2\n", {"the sweep varies nothing"});
  error_for("[space\nlr = 1\n", {path + ":1: bad TOML"});
  error_for("[space]\nlr = \"fast\"\n", {path + ":2: 'space.lr' is neither a list nor a range"});
  expect_error({"sweep", dir.file("missing.toml")}, 2, {"missing.toml"});
  // A folder holding another sweep's progress.
  write_fashion_slice(dir.path() / "data", 200, 50);
  write_text(dir.file("one.toml"), "[sweep]\nfolder = \"" + dir.file("shared") + "\"\n\n" +
                                       base_section(dir.file("data"), 1) +
                                       "\n[space]\nlr = [1e-3]\n");
  ASSERT_EQ(run_cli({"sweep", dir.file("one.toml")}).status, 0);
  write_text(dir.file("two.toml"), "[sweep]\nfolder = \"" + dir.file("shared") + "\"\n\n" +
                                       base_section(dir.file("data"), 1) +
                                       "\n[space]\nlr = [1e-2]\n");
  expect_error({"sweep", dir.file("two.toml")}, 1, {"holds the progress of a different sweep"});
  // A trial that fails is recorded as failed, with its reason, and the sweep goes on.
  write_text(dir.file("fails.toml"), "[sweep]\nfolder = \"" + dir.file("fails") + "\"\n\n" +
                                         base_section(dir.file("data"), 1) +
                                         "\n[space]\nmemory-limit = [\"1G\", \"64K\"]\n");
  const CliResult fails = run_cli({"sweep", dir.file("fails.toml")});
  EXPECT_EQ(fails.status, 0) << fails.out << fails.err;
  expect_contains(fails.out, "trial-02 memory-limit=64K: failed: out of memory");
}

}  // namespace
}  // namespace tandem::testing
