// The crash test: a deterministic `tandem train` run with frequent checkpoints is killed with
// SIGKILL again and again, at random moments and right as a checkpoint write begins (an inotify
// watch on the checkpoint folder fires the kill), and resumed each time with --resume, on a
// changing number of threads. After every kill each checkpoint left in the folder must verify
// (no checkpoint is ever corrupt), and the run, once it finishes, must hold weights bit-identical
// to an uninterrupted run's. Small model and data so it takes a minute or two.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "cli/cli_runner.h"
#include "io/io_support.h"

extern char** environ;

namespace tandem {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kKills = 12;  // half at random moments, half as a checkpoint write starts
constexpr int kMaxRuns = 60;

// The run every attempt makes: settings fixed by the first, taken from the checkpoint after.
std::vector<std::string> first_run_args(const std::string& data, const std::string& checkpoints,
                                        const std::string& model) {
  return {"train",
          "--model",
          "cnn",
          "--data-dir",
          data,
          "--epochs",
          "3",
          "--batch-size",
          "32",
          "--deterministic",
          "--threads",
          "2",
          "--checkpoint-dir",
          checkpoints,
          "--checkpoint-every",
          "2",
          "--save-model",
          model,
          "--quiet"};
}

class Process {
 public:
  explicit Process(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> argv_storage{TANDEM_CLI_PATH};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : argv_storage)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    const int error = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) throw std::runtime_error("posix_spawn failed: " + std::string(strerror(error)));
  }

  // The exit status once it has ended, or nothing while it runs.
  std::optional<int> poll() {
    if (status_) return status_;
    int raw = 0;
    if (waitpid(pid_, &raw, WNOHANG) == pid_) {
      status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    }
    return status_;
  }

  int wait() {
    if (status_) return *status_;
    int raw = 0;
    waitpid(pid_, &raw, 0);
    status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    return *status_;
  }

  void kill() {
    if (!poll()) ::kill(pid_, SIGKILL);
    wait();
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Drops the events of earlier runs.
void drain(int inotify) {
  char buffer[4096];
  while (::read(inotify, buffer, sizeof buffer) > 0) {
  }
}

// Waits until a staging folder (.tmp-ckpt-...) appears in `directory` or `deadline` passes.
bool wait_for_checkpoint_write(int inotify, Clock::time_point deadline, Process& process) {
  char buffer[4096];
  while (Clock::now() < deadline && !process.poll()) {
    pollfd watch{inotify, POLLIN, 0};
    if (::poll(&watch, 1, 5) <= 0) continue;
    const ssize_t got = ::read(inotify, buffer, sizeof buffer);
    for (ssize_t at = 0; at < got;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      if (event->len > 0 && std::string(event->name).starts_with(".tmp-ckpt-")) return true;
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  return false;
}

TEST(CrashResume, SigkilledRunsResumeToTheWeightsOfAnUninterruptedRun) {
  testing::ScratchDir scratch;
  const std::string data = scratch.file("data");
  fs::create_directories(data);
  testing::write_tiny_fashion_mnist(data, 768, 64, 28, 28);  // 24 steps per epoch
  const std::string log = scratch.file("log");

  // The uninterrupted run, timed to spread the kills over a run's length.
  const auto reference_start = Clock::now();
  Process reference(
      first_run_args(data, scratch.file("reference_checkpoints"), scratch.file("reference_model")),
      log);
  ASSERT_EQ(reference.wait(), 0) << testing::slurp(log);
  const double run_seconds = std::chrono::duration<double>(Clock::now() - reference_start).count();

  const std::string checkpoints = scratch.file("checkpoints");
  const std::string model = scratch.file("model");
  fs::create_directories(checkpoints);
  const int inotify = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ASSERT_GE(inotify, 0);
  ASSERT_GE(inotify_add_watch(inotify, checkpoints.c_str(), IN_CREATE | IN_MOVED_TO), 0);

  std::mt19937_64 random(20240611);
  int kills = 0;
  int kills_mid_write = 0;
  int runs = 0;
  int finished_runs = 0;
  const char* thread_counts[] = {"1", "2", "3"};
  // Until every kill is done and a run has then finished: a run that finishes before the kills
  // are done is checked too, and the next one starts over in an empty folder.
  while (finished_runs == 0 || kills < kKills) {
    ASSERT_LT(runs, kMaxRuns) << "too many runs";
    // A fresh start until a checkpoint exists, then --resume with another thread count.
    const bool resume = io::latest_checkpoint(checkpoints).has_value();
    std::vector<std::string> args = resume ? std::vector<std::string>{"train",
                                                                      "--resume",
                                                                      checkpoints,
                                                                      "--threads",
                                                                      thread_counts[runs % 3],
                                                                      "--save-model",
                                                                      model,
                                                                      "--quiet"}
                                           : first_run_args(data, checkpoints, model);
    drain(inotify);
    Process run(args, log);
    ++runs;
    if (kills < kKills) {
      const bool during_write = kills % 2 == 1;
      bool struck = false;
      if (during_write) {
        struck = wait_for_checkpoint_write(inotify, Clock::now() + std::chrono::seconds(60), run);
        // Somewhere in the writing of its three files and their fsyncs.
        std::uniform_int_distribution<int> delay_us(0, 3000);
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us(random)));
        struck = struck && !run.poll().has_value();
      } else {
        std::uniform_real_distribution<double> moment(0.05, 0.5 * run_seconds);
        const auto when = Clock::now() + std::chrono::duration<double>(moment(random));
        while (Clock::now() < when && !run.poll())
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        struck = !run.poll().has_value();
      }
      if (struck) {
        run.kill();
        ++kills;
        bool staged = false;
        for (const auto& entry : fs::directory_iterator(checkpoints))
          staged |= entry.path().filename().string().starts_with(".tmp-ckpt-");
        kills_mid_write += staged ? 1 : 0;
        // Whatever the moment, every checkpoint in the folder is complete and intact.
        for (const io::CheckpointInfo& info : io::list_checkpoints(checkpoints)) {
          EXPECT_NO_THROW(io::verify_checkpoint(info.path))
              << "after kill " << kills << ": " << info.path;
        }
        for (const auto& entry : fs::directory_iterator(checkpoints)) {
          const std::string name = entry.path().filename().string();
          if (name.starts_with("ckpt-")) {
            EXPECT_NO_THROW(io::verify_checkpoint(entry.path().string())) << name;
          }
        }
        continue;
      }
    }
    const int status = run.wait();
    ASSERT_EQ(status, 0) << "run " << runs << " failed:\n" << testing::slurp(log);
    ++finished_runs;
    testing::expect_same_saved_weights(scratch.file("reference_model"), model);
    if (kills < kKills) {
      fs::remove_all(model);
      for (const auto& entry : fs::directory_iterator(checkpoints))
        fs::remove_all(entry.path());
    }
  }
  ::close(inotify);
  std::cout << "crash test: " << kills << " SIGKILLs (" << kills_mid_write
            << " while a checkpoint was being written) over " << runs << " runs, " << finished_runs
            << " of which finished with the uninterrupted run's weights\n";
  EXPECT_GE(kills, 10);
  EXPECT_GE(kills_mid_write, 1) << "no kill landed inside a checkpoint write";
}

}  // namespace
}  // namespace tandem
