// The faults a hostile user tries, class by class, on the real binary: inputs that are not
// regular files (each command refuses them at once, never hangs), destinations and options
// checked before the first step, diagnoses that name the real cause, and a full log disk (a
// small tmpfs made by the test) that leaves the run's results and saved model intact.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "cli/cli_runner.h"
#include "io/file_io.h"
#include "tandem/runtime.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

// A hang shows as status 124 from timeout(1) instead of a test that never ends.
constexpr const char* kTimeoutSeconds = "30";
constexpr int kTimedOut = 124;

CliResult run_bounded(const std::vector<std::string>& args) {
  std::vector<std::string> bounded{kTimeoutSeconds, TANDEM_CLI_PATH};
  bounded.insert(bounded.end(), args.begin(), args.end());
  return run_program("timeout", bounded);
}

// One line on standard error naming every part, and a non-zero status that is not a hang.
void expect_refused(const CliResult& result, const std::vector<std::string>& parts) {
  EXPECT_NE(result.status, 0) << result.out;
  EXPECT_NE(result.status, kTimedOut) << "the command hung";
  EXPECT_TRUE(result.err.starts_with("tandem: error: ")) << result.err;
  for (const std::string& part : parts)
    expect_contains(result.err, part);
}

// A model saved by `tandem train`, for predict and export.
void train_tiny_model(const ScratchDir& dir, const std::string& model) {
  write_tiny_fashion_mnist(dir.path(), 32, 16, 28, 28);
  const CliResult trained =
      run_bounded({"train", "--model", "mlp", "--epochs", "1", "--batch-size", "16", "--threads",
                   "1", "--quiet", "--data-dir", dir.path().string(), "--save-model", model});
  ASSERT_EQ(trained.status, 0) << trained.err;
}

std::vector<std::string> tiny_run(const ScratchDir& data) {
  return {"train", "--model",   "mlp", "--epochs", "1",          "--batch-size",
          "16",    "--threads", "1",   "--quiet",  "--data-dir", data.path().string()};
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(NonRegularInputs, EveryCommandRefusesThemAtOnce) {
  ScratchDir dir;
  const std::string model = dir.file("model");
  train_tiny_model(dir, model);
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string folder = dir.file("folder");
  fs::create_directories(folder);
  struct Input {
    std::string path;
    std::string kind;
  };
  std::vector<Input> inputs{{fifo, "a FIFO (named pipe)"}, {folder, "a directory"}};
  if (fs::exists("/dev/zero")) inputs.push_back({"/dev/zero", "a character device"});
  for (const Input& input : inputs) {
    SCOPED_TRACE(input.path);
    if (input.path != folder) {  // inspect reads folders of data on purpose
      expect_refused(run_bounded({"data", "inspect", input.path}), {input.path, input.kind});
    }
    expect_refused(run_bounded({"predict", "--model", model, input.path}),
                   {input.path, input.kind});
    expect_refused(run_bounded({"bench", "--prices", input.path}), {input.path, input.kind});
    expect_refused(run_bounded({"bench", "compare", input.path, input.path}),
                   {input.path, input.kind});
    if (input.path != folder) {  // convert reads folders of images on purpose
      expect_refused(run_bounded({"data", "convert", input.path, dir.file("out.tfrecord"),
                                  "--labels", dir.file("train-labels-idx1-ubyte.gz")}),
                     {input.path, input.kind});
    }
  }
  // A data file of the right name that is a FIFO or a folder: named, not "has neither ...".
  ScratchDir data;
  write_tiny_fashion_mnist(data.path(), 32, 16, 28, 28);
  const std::string images = data.file("train-images-idx3-ubyte.gz");
  fs::remove(images);
  ASSERT_EQ(::mkfifo(images.c_str(), 0600), 0);
  expect_refused(run_bounded(tiny_run(data)), {images, "a FIFO (named pipe)"});
  fs::remove(images);
  fs::create_directories(images);
  expect_refused(run_bounded(tiny_run(data)), {images, "a directory"});
}

// A device node where an output goes (a character device made in the test's own folder, with
// /dev/null's numbers): every command refuses it before any work, names what it is, and leaves it
// a device. (Written to a temporary file and renamed, it would have been replaced by a regular
// file: as root, that destroyed the machine's /dev/full.)
TEST(DeviceNodes, NoCommandReplacesOne) {
  ScratchDir dir;
  const std::string model = dir.file("model");
  train_tiny_model(dir, model);
  const std::string device = dir.file("null");
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "SKIPPED: mknod of a character device is not permitted here ("
                 << std::strerror(errno) << "); the check it tests is in tests/core/files_test.cpp";
  }
  const auto still_a_device = [&] {
    struct stat info {};
    return ::stat(device.c_str(), &info) == 0 && S_ISCHR(info.st_mode);
  };
  const std::vector<std::vector<std::string>> commands{
      {"data", "convert", dir.path().string(), device},
      {"export", "--model", model, "--format", "onnx", "--output", device},
      {"export", "--model", model, "--format", "keras", "--output", device},
      {"export", "--model", model, "--format", "savedmodel", "--output", device},
      with(tiny_run(dir), {"--report", device}),
      with(tiny_run(dir), {"--save-model", device}),
      with(tiny_run(dir), {"--checkpoint-dir", device}),
      with(tiny_run(dir), {"--logdir", device}),
      with(tiny_run(dir), {"--profile", "--trace", device}),
      {"bench", "--model", "mlp", "--steps", "1", "--json", device},
  };
  for (const std::vector<std::string>& command : commands) {
    SCOPED_TRACE(command.front() + " ... " + command.back());
    const CliResult result = run_bounded(command);
    expect_refused(result, {device, "a character device"});
    EXPECT_EQ(result.out.find("test accuracy"), std::string::npos) << "it trained first";
    ASSERT_TRUE(still_a_device()) << "the device node was replaced";
  }
}

// A reader that goes away (`tandem train ... | head -1`) no longer kills the run with SIGPIPE
// before it saves, nor does a closed standard output lose the results silently: the run
// finishes, saves its model and writes its report, and its status and one line say that the
// output was lost. Real pipes, whose reader has gone before the first line is written.
TEST(ClosedOutput, APipeClosedEarlyLosesThePrintingNotTheModel) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 256, 16, 28, 28);
  for (const std::string& output : {"pipe", "closed"}) {
    SCOPED_TRACE(output);
    const std::string model = dir.file(output + "-model");
    const std::string report = dir.file(output + "-report.json");
    std::string command = "exec " + shell_quote(TANDEM_CLI_PATH);
    for (const std::string& arg :
         with(tiny_run(dir), {"--epochs", "2", "--save-model", model, "--report", report}))
      command += " " + shell_quote(arg == "--quiet" ? "--verbose" : arg);  // plenty to print
    command += " 2>" + shell_quote(dir.file(output + ".err"));
    // The reader (`true`) is gone a second before tandem starts; or there is no output at all.
    const std::string script = output == "pipe"
                                   ? "(sleep 1; " + command + ") | true; echo ${PIPESTATUS[0]}"
                                   : "(" + command + " >&-); echo $?";
    const ShellResult run = run_capturing("bash -c " + shell_quote(script));
    EXPECT_EQ(run.output, "1\n");
    const std::string errors = slurp(dir.file(output + ".err"));
    expect_contains(errors, "the output could not all be written to standard output");
    EXPECT_TRUE(fs::exists(model + "/model.safetensors")) << errors;
    EXPECT_TRUE(JsonChecker(slurp(report)).valid()) << errors;
  }
}

// What the file system refuses (a symbolic link loop, a name too long, a sweep folder that is a
// file) is the user's to fix: one line naming the path and the reason, never "a bug in Tandem".
TEST(FileSystemRefusals, AreOneLineErrorsNamingThePath) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 32, 16, 28, 28);
  const std::string loop = dir.file("loop");
  fs::create_symlink(loop, loop);
  const CliResult looped = run_bounded(with(tiny_run(dir), {"--logdir", loop + "/logs"}));
  expect_refused(looped, {loop, "Too many levels of symbolic links"});
  const std::string long_name = dir.file(std::string(300, 'x'));
  const CliResult too_long = run_bounded(with(tiny_run(dir), {"--logdir", long_name}));
  expect_refused(too_long, {"File name too long"});
  const std::string file = dir.file("taken");
  std::ofstream(file) << "x";
  std::ofstream(dir.file("sweep.toml"))
      << "[sweep]\nfolder = \"" << file << "\"\n[space]\nlr = [0.001]\n";
  expect_refused(run_bounded({"sweep", dir.file("sweep.toml")}),
                 {"the sweep folder " + file + ": is a file, not a folder"});
  for (const CliResult* result : {&looped, &too_long})
    EXPECT_EQ(result->err.find("a bug"), std::string::npos) << result->err;
}

// One writer a folder: a run's log folder and a sweep's folder are locked while their process
// lives, as checkpoint folders are, so a second run or sweep there is refused, naming the
// holder's pid, instead of mixing its files with the first's (and ranking the wrong best).
TEST(OneWriterAFolder, ASecondRunOrSweepInAFolderInUseIsRefused) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 32, 16, 28, 28);
  const std::string logs = dir.file("logs");
  fs::create_directories(logs);
  {
    // This process is the first run there.
    const io::detail::DirectoryLock first(logs, ".logdir.lock");
    const CliResult second = run_bounded(with(tiny_run(dir), {"--logdir", logs}));
    expect_refused(second, {"the folder " + logs + " is in use by another Tandem process (pid " +
                            std::to_string(::getpid()) + ")"});
    EXPECT_FALSE(fs::exists(logs + "/run.toml")) << "the second run wrote into the folder";
  }
  ASSERT_EQ(run_bounded(with(tiny_run(dir), {"--logdir", logs})).status, 0);

  const std::string sweeps = dir.file("sweeps");
  fs::create_directories(sweeps);
  std::ofstream(dir.file("sweep.toml"))
      << "[sweep]\nfolder = \"" << sweeps << "\"\n[base]\nmodel = \"mlp\"\nepochs = 1\n"
      << "data-dir = \"" << dir.path().string() << "\"\n[space]\nlr = [0.001]\n";
  {
    const io::detail::DirectoryLock first(sweeps);
    const CliResult second = run_bounded({"sweep", dir.file("sweep.toml")});
    expect_refused(second, {"the folder " + sweeps + " is in use by another Tandem process"});
    EXPECT_FALSE(fs::exists(sweeps + "/sweep.json")) << "the second sweep wrote its progress";
  }
}

TEST(ChecksBeforeTheFirstStep, BadDestinationsAndOptionsStopTheRunBeforeItTrains) {
  ScratchDir data;
  write_tiny_fashion_mnist(data.path(), 32, 16, 28, 28);
  const std::string fifo = data.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string file = data.file("train-labels-idx1-ubyte.gz");
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases{
      {{"--report", "/nonexistent-folder/report.json"},
       {"--report '/nonexistent-folder/report.json'", "does not exist"}},
      {{"--report", fifo}, {"--report " + fifo, "a FIFO (named pipe)"}},
      {{"--report", data.path().string()}, {"--report", "a directory"}},
      {{"--save-model", file}, {"--save-model " + file, "is a file, not a folder"}},
      {{"--profile", "--trace", "/nonexistent-folder/trace.json"}, {"--trace", "does not exist"}},
      {{"--checkpoint-dir", data.file("ckpt"), "--keep-best", "val_loss"},
       {"--keep-best val_loss needs validation data", "--validation-split"}},
      {{"--validation-split", "0.9999999"},
       {"--validation-split 0.9999999 holds out all 32 training examples"}},
  };
  for (const auto& [options, parts] : cases) {
    SCOPED_TRACE(options.front());
    const CliResult result = run_bounded(with(tiny_run(data), options));
    expect_refused(result, parts);
    EXPECT_EQ(result.out.find("test accuracy"), std::string::npos) << "it trained first";
  }
}

TEST(ChecksBeforeTheFirstStep, TestImagesOfAnotherShapeAreFoundBeforeTraining) {
  ScratchDir data;
  write_tiny_fashion_mnist(data.path(), 32, 16, 28, 28);
  ScratchDir other;
  write_tiny_fashion_mnist(other.path(), 32, 16, 20, 20);
  fs::copy_file(other.file("t10k-images-idx3-ubyte.gz"), data.file("t10k-images-idx3-ubyte.gz"),
                fs::copy_options::overwrite_existing);
  const CliResult result = run_bounded(tiny_run(data));
  expect_refused(
      result, {"the test images", "(20, 20, 1)", "(28, 28, 1)", "come from different data sets"});
}

TEST(Diagnoses, NameTheRealCause) {
  ScratchDir data;
  write_tiny_fashion_mnist(data.path(), 32, 16, 28, 28);
  // A labels file holding an images file's header.
  const std::string labels = data.file("t10k-labels-idx1-ubyte.gz");
  fs::copy_file(data.file("t10k-images-idx3-ubyte.gz"), labels,
                fs::copy_options::overwrite_existing);
  expect_refused(run_bounded(tiny_run(data)),
                 {labels, "as an images file's does", "pass the *-labels-idx1-ubyte file"});

  const std::string empty = data.file("empty.bin");
  write_file(empty, {});
  expect_refused(run_bounded({"data", "inspect", empty}), {empty, "is empty (0 bytes)"});

  // A gzipped and a plain copy that differ: refused, not one picked silently; equal ones train.
  ScratchDir both;
  write_tiny_fashion_mnist(both.path(), 32, 16, 28, 28);
  write_tiny_fashion_mnist(both.path(), 32, 16, 28, 28, "");
  ASSERT_EQ(run_bounded(tiny_run(both)).status, 0);
  Bytes plain = read_file(both.file("train-labels-idx1-ubyte"));
  plain.back() ^= 1;
  write_file(both.file("train-labels-idx1-ubyte"), plain);
  expect_refused(run_bounded(tiny_run(both)),
                 {"train-labels-idx1-ubyte.gz and ", "both exist and hold different data"});

  // bert_base takes token ids: train, which trains on images, does not offer it.
  const CliResult bert = run_bounded(with(tiny_run(data), {"--model", "bert_base"}));
  EXPECT_EQ(bert.status, 2) << bert.err;
  expect_contains(bert.err, "unknown model 'bert_base'");
}

TEST(SilentSurprises, MoreThreadsThanTheMachineHasAreWarnedAbout) {
  const int available = usable_cpu_cores();
  ScratchDir data;
  write_tiny_fashion_mnist(data.path(), 32, 16, 28, 28);
  std::vector<std::string> args = tiny_run(data);
  const auto threads = std::find(args.begin(), args.end(), "--threads");
  *(threads + 1) = std::to_string(available + 1);
  const CliResult result = run_bounded(args);
  ASSERT_EQ(result.status, 0) << result.err;
  expect_contains(result.err, "--threads " + std::to_string(available + 1) + " is more than the " +
                                  std::to_string(available) + " cores this process may use");
}

// Runs `script` in a mount namespace of its own as root (or as root of a user namespace), where
// it may mount a tmpfs; empty when this system allows neither.
std::optional<ShellResult> run_with_mounts(const std::string& script) {
  for (const char* unshare : {"unshare -m", "unshare -Urm"}) {
    if (run_shell(std::string(unshare) + " true >/dev/null 2>&1") != 0) continue;
    return run_capturing(std::string(unshare) + " sh -c " + shell_quote(script) + " 2>&1");
  }
  return std::nullopt;
}

TEST(FullDisk, ALogFolderThatFillsLeavesTheResultsAndTheSavedModelIntact) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 256, 32, 28, 28);
  const std::string disk = dir.file("small-disk");
  fs::create_directories(disk);
  const std::string model = dir.file("model");
  const std::string report = dir.file("report.json");
  // A 64 KiB disk of which a filler takes all but 12 KiB: the run's per-step scalars need more,
  // so the disk fills while it trains.
  const std::string script =
      "mount -t tmpfs -o size=64k tmpfs " + shell_quote(disk) + " && head -c 53248 /dev/zero >" +
      shell_quote(disk + "/filler") + " && " + shell_quote(TANDEM_CLI_PATH) +
      " train --model mlp --epochs 3 --batch-size 16 --threads 1 --quiet --data-dir " +
      shell_quote(dir.path().string()) + " --logdir " + shell_quote(disk + "/logs") +
      " --monitor-interval 0.05 --save-model " + shell_quote(model) + " --report " +
      shell_quote(report);
  const std::optional<ShellResult> run = run_with_mounts(script);
  if (!run) {
    GTEST_SKIP() << "SKIPPED: this system lets the test make no mount namespace (unshare -m "
                    "and unshare -Urm both failed), so there is no small disk to fill";
  }
  EXPECT_EQ(run->status, 0) << run->output;
  expect_contains(run->output, "test accuracy: ");
  expect_contains(run->output, "ENOSPC");
  expect_contains(run->output, "logging stopped for the logs in " + disk + "/logs");
  expect_contains(run->output, "(incomplete: logging stopped during the run");
  expect_contains(run->output, "model: saved to " + model);
  EXPECT_EQ(occurrences(run->output, "logging stopped for"), 1u) << run->output;
  EXPECT_TRUE(JsonChecker(slurp(report)).valid());
  // The saved model is whole: predict reads it.
  const CliResult predicted =
      run_bounded({"predict", "--model", model, dir.file("t10k-images-idx3-ubyte.gz")});
  EXPECT_EQ(predicted.status, 0) << predicted.err;
}

TEST(FullDisk, AModelThatCannotBeSavedAtTheEndIsSavedElsewhere) {
  ScratchDir dir;
  write_tiny_fashion_mnist(dir.path(), 64, 16, 28, 28);
  const std::string disk = dir.file("small-disk");
  fs::create_directories(disk);
  const std::string rescue_folder = dir.file("tmp");
  fs::create_directories(rescue_folder);
  const std::string report = dir.file("report.json");
  // The check before training passes (a file can be made there), the weights do not fit.
  const std::string script =
      "mount -t tmpfs -o size=16k tmpfs " + shell_quote(disk) +
      " && TMPDIR=" + shell_quote(rescue_folder) + " " + shell_quote(TANDEM_CLI_PATH) +
      " train --model mlp --epochs 1 --batch-size 16 --threads 1 --quiet --data-dir " +
      shell_quote(dir.path().string()) + " --save-model " + shell_quote(disk + "/model") +
      " --report " + shell_quote(report);
  const std::optional<ShellResult> run = run_with_mounts(script);
  if (!run) GTEST_SKIP() << "SKIPPED: no mount namespace for a small disk (see above)";
  EXPECT_EQ(run->status, 1) << run->output;
  expect_contains(run->output, "test accuracy: ");
  expect_contains(run->output, "--save-model " + disk + "/model");
  expect_contains(run->output, "ENOSPC");
  expect_contains(run->output, "the trained model was saved to " + rescue_folder);
  std::vector<fs::path> rescued;
  for (const fs::directory_entry& entry : fs::directory_iterator(rescue_folder))
    rescued.push_back(entry.path());
  ASSERT_EQ(rescued.size(), 1u);
  EXPECT_TRUE(fs::exists(rescued[0] / "model.safetensors"));
  EXPECT_TRUE(JsonChecker(slurp(report)).valid()) << "the report was lost with the model";
}

TEST(FullDisk, OutputsThatCannotBeWrittenKeepTheirEarlierVersions) {
  ScratchDir dir;
  const std::string model = dir.file("model");
  train_tiny_model(dir, model);
  const std::string disk = dir.file("full-disk");
  fs::create_directories(disk);
  // Earlier outputs on the disk, then a filler that takes every page left: each command passes
  // its checks (a file can still be made) and meets ENOSPC when it writes.
  const std::string tandem = shell_quote(TANDEM_CLI_PATH);
  const std::string at = shell_quote(disk) + "/";
  const std::string script =
      "mount -t tmpfs -o size=64k tmpfs " + shell_quote(disk) + " && for f in report.json " +
      "model.onnx bench.json; do echo earlier >" + at + "$f; done; head -c 1m /dev/zero >" + at +
      "filler 2>/dev/null; " + tandem + " train --model mlp --epochs 1 --batch-size 16 " +
      "--threads 1 --quiet --data-dir " + shell_quote(dir.path().string()) + " --report " + at +
      "report.json; echo train=$?; " + tandem + " export --model " + shell_quote(model) +
      " --format onnx --output " + at + "model.onnx; echo export=$?; " + tandem +
      " bench --model mlp --batch-size 8 --steps 1 --windows 1 --warmup-steps 1 --threads 1 " +
      "--estimate none --json " + at + "bench.json >/dev/null; echo bench=$?; ls -A " + at +
      "; cat " + at + "report.json " + at + "model.onnx " + at + "bench.json";
  const std::optional<ShellResult> run = run_with_mounts(script);
  if (!run) GTEST_SKIP() << "SKIPPED: no mount namespace for a small disk (see above)";
  for (const char* command : {"train=1", "export=1", "bench=1"})
    expect_contains(run->output, command);
  expect_contains(run->output, "test accuracy: ");  // the results came before the report
  EXPECT_EQ(occurrences(run->output, "ENOSPC"), 3u) << "each command names the full disk:\n"
                                                    << run->output;
  // What is left: the earlier files, each as it was, and nothing half-written beside them.
  expect_contains(run->output,
                  "bench.json\nfiller\nmodel.onnx\nreport.json\nearlier\nearlier\n"
                  "earlier\n");
}

}  // namespace
}  // namespace tandem::testing
