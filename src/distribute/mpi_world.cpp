#include "distribute/mpi_world.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "tandem/distribute.h"
#include "tandem/error.h"

namespace tandem::distribute::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Message tags on the control communicator.
constexpr int kAgreeTag = 7101;
constexpr int kVerdictTag = 7102;
constexpr int kRollCallTag = 7103;

// Polls spin this many times, then yield the core; past 10 ms they sleep between polls, so a
// waiting worker leaves the cores to the workers still computing (a machine may run several).
constexpr int kSpinPolls = 2000;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string format_seconds(double seconds) {
  std::ostringstream text;
  text.precision(seconds < 10 ? 2 : 3);
  text << seconds << " s";
  return text.str();
}

int environment_integer(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : -1;
}

// "rank 1", "ranks 1 and 3", "ranks 1, 2 and 5"
std::string ranks_text(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

// What the launcher's SIGTERM leaves on stderr: mpirun stops every worker when one fails. After a
// failure this worker has diagnosed, it is that diagnosis: the launcher may stop this worker
// (because another one exited first) before it gets to print its error.
char termination_message[1024];
std::size_t termination_message_length = 0;

void set_termination_message(const std::string& message) {
  termination_message_length = 0;  // the handler prints nothing half-written
  const std::size_t length = std::min(message.size(), sizeof termination_message);
  std::memcpy(termination_message, message.data(), length);
  termination_message_length = length;
}

void on_termination(int) {
  const ssize_t ignored = write(STDERR_FILENO, termination_message, termination_message_length);
  (void)ignored;
  _exit(128 + SIGTERM);
}

void install_termination_message(const std::string& label) {
  set_termination_message("tandem: error: " + label +
                          " stopped by the launcher (SIGTERM): another worker failed or the job "
                          "was cancelled; the launcher's message names the worker\n");
  struct sigaction action {};
  action.sa_handler = on_termination;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

// MPI_Init with a deadline. It returns only once every worker has called it, and there is no
// way out of it but exiting: a watchdog prints which workers are missing and ends the process.
void start_mpi(double timeout_seconds) {
  const int size = launched_processes();
  int rank = environment_integer("OMPI_COMM_WORLD_RANK");
  if (rank < 0) rank = environment_integer("PMI_RANK");
  std::vector<int> others;
  for (int r = 0; r < size; ++r) {
    if (r != rank) others.push_back(r);
  }
  const std::string missing =
      others.size() == 1 ? ranks_text(others) : "one or more of " + ranks_text(others);
  const std::string message =
      "tandem: error: worker " + std::to_string(std::max(rank, 0)) + " of " + std::to_string(size) +
      ": the workers did not all start within " + format_seconds(timeout_seconds) +
      " (MPI_Init waits for every one of them): " + missing +
      " never joined; check that every worker was launched and can reach this one, or raise "
      "the join timeout\n";

  std::mutex mutex;
  std::condition_variable started_signal;
  bool started = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (started_signal.wait_for(lock, std::chrono::duration<double>(timeout_seconds),
                                [&] { return started; })) {
      return;
    }
    const ssize_t ignored = write(STDERR_FILENO, message.data(), message.size());
    (void)ignored;
    _exit(1);
  });
  int provided = 0;
  const int result = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  {
    std::lock_guard lock(mutex);
    started = true;
  }
  started_signal.notify_all();
  watchdog.join();
  if (result != MPI_SUCCESS) {
    throw DeviceUnavailable("MPI did not start (MPI_Init_thread returned " +
                            std::to_string(result) +
                            "); start the workers with mpirun or `tandem launch -n N`");
  }
}

std::string serialize(const std::vector<std::pair<std::string, std::string>>& settings) {
  std::string text;
  for (const auto& [what, value] : settings)
    text += what + '\t' + value + '\n';
  return text;
}

std::vector<std::pair<std::string, std::string>> deserialize(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> settings;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t tab = line.find('\t');
    if (tab != std::string::npos) settings.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return settings;
}

// Each setting that differs from rank 0's, with every rank's value.
std::string differences(const std::vector<std::pair<std::string, std::string>>& root,
                        const std::map<int, std::string>& others) {
  std::string text;
  for (const auto& [what, value] : root) {
    std::string line;
    for (const auto& [rank, serialized] : others) {
      const auto settings = deserialize(serialized);
      const auto it = std::find_if(settings.begin(), settings.end(),
                                   [&](const auto& entry) { return entry.first == what; });
      const std::string theirs = it == settings.end() ? "(not set)" : it->second;
      if (theirs != value) line += ", " + theirs + " on rank " + std::to_string(rank);
    }
    if (!line.empty())
      text += (text.empty() ? "" : "; ") + what + ": " + value + " on rank 0" + line;
  }
  return text;
}

}  // namespace

}  // namespace tandem::distribute::detail

namespace tandem::distribute {

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<std::size_t>(length));
  const std::size_t end = version.find_first_of(",\n");
  return version.substr(0, end);
}

}  // namespace tandem::distribute

namespace tandem::distribute::detail {

MpiWorld& MpiWorld::join(double join_timeout_seconds) {
  static std::mutex mutex;
  static std::unique_ptr<MpiWorld> world;
  std::lock_guard lock(mutex);
  if (!world) world.reset(new MpiWorld(join_timeout_seconds));
  if (world->finalized_) {
    throw Error(
        "MPI was finalised when the previous multi-worker training ended; a process can "
        "run one multi-worker session (start a new one for the next)");
  }
  ++world->users_;
  return *world;
}

MpiWorld::MpiWorld(double join_timeout_seconds) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    start_mpi(join_timeout_seconds);
    owns_mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm_dup(MPI_COMM_WORLD, &data_);
  MPI_Comm_dup(MPI_COMM_WORLD, &control_);
  // Errors come back as codes, so a failed peer becomes Tandem's error instead of an abort.
  MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
  roll_call_inbox_.assign(static_cast<std::size_t>(size_), -1);
  if (owns_mpi_) install_termination_message(label());
}

MpiWorld::~MpiWorld() = default;

void MpiWorld::leave() {
  --users_;
  if (std::uncaught_exceptions() > 0) broken_ = true;
  if (users_ > 0 || broken_ || finalized_) return;
  MPI_Comm_free(&data_);
  MPI_Comm_free(&control_);
  if (owns_mpi_) MPI_Finalize();
  finalized_ = true;
}

std::string MpiWorld::label() const {
  return "worker " + std::to_string(rank_) + " of " + std::to_string(size_);
}

bool MpiWorld::poll(const std::function<bool()>& done, double timeout_seconds,
                    const std::string& what) {
  const Clock::time_point start = Clock::now();
  for (int round = 0;; ++round) {
    if (done()) return true;
    int announced = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kRollCallTag, control_, &announced, &status);
    const double waited = seconds_since(start);
    if (announced) fail(what, waited, status.MPI_SOURCE);
    if (waited > timeout_seconds) return false;
    if (round < kSpinPolls) continue;
    if (waited < 0.01) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

void MpiWorld::wait(const std::function<bool()>& done, double timeout_seconds,
                    const std::string& what) {
  if (!poll(done, timeout_seconds, what)) fail(what, timeout_seconds);
}

void MpiWorld::wait_for(MPI_Request& request, double timeout_seconds, const std::string& what) {
  wait(
      [&] {
        int done = 0;
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        return done != 0;
      },
      timeout_seconds, what);
}

void MpiWorld::fail(const std::string& what, double waited_seconds, int reporting_rank) {
  broken_ = true;

  // The roll call: every live worker sends one message to every other and listens for theirs.
  // A worker waiting anywhere sees the first one arrive and joins at once.
  const double grace = std::clamp(waited_seconds / 4.0, 2.0, 20.0);
  roll_call_token_ = rank_;
  std::vector<MPI_Request> receives(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  std::vector<bool> answered(static_cast<std::size_t>(size_), false);
  answered[static_cast<std::size_t>(rank_)] = true;
  for (int other = 0; other < size_; ++other) {
    if (other == rank_) continue;
    MPI_Irecv(&roll_call_inbox_[static_cast<std::size_t>(other)], 1, MPI_INT, other, kRollCallTag,
              control_, &receives[static_cast<std::size_t>(other)]);
    MPI_Request send = MPI_REQUEST_NULL;
    MPI_Isend(&roll_call_token_, 1, MPI_INT, other, kRollCallTag, control_, &send);
    MPI_Request_free(&send);
  }
  const Clock::time_point start = Clock::now();
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    for (int other = 0; other < size_; ++other) {
      auto index = static_cast<std::size_t>(other);
      if (!answered[index]) {
        int arrived = 0;
        MPI_Test(&receives[index], &arrived, MPI_STATUS_IGNORE);
        answered[index] = arrived != 0;
      }
      if (!answered[index]) missing.push_back(other);
    }
    if (missing.empty() || seconds_since(start) > grace) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  std::string message;
  if (!missing.empty()) {
    message = ranks_text(missing) + (missing.size() == 1 ? " stopped" : " stopped") +
              " responding: " + what + " did not complete within " +
              format_seconds(waited_seconds) + ", and " + (missing.size() == 1 ? "it" : "they") +
              " did not answer the other workers' roll "
              "call within " +
              format_seconds(grace) +
              "; every worker stops (look at the output "
              "and machine of " +
              ranks_text(missing) + ")";
  } else if (reporting_rank >= 0) {
    message = "rank " + std::to_string(reporting_rank) +
              " reported a failure while this worker "
              "was waiting for " +
              what + "; every worker stops (rank " + std::to_string(reporting_rank) +
              "'s error says why)";
  } else {
    message = what + " did not complete within " + format_seconds(waited_seconds) +
              " although every worker answered the roll call: the workers are out of step "
              "(different programs or settings?); every worker stops";
  }
  stop(message);
}

void MpiWorld::stop(const std::string& message) {
  broken_ = true;
  const std::string error = label() + ": " + message;
  set_termination_message("tandem: error: " + error + "\n");
  throw Error(error);
}

void MpiWorld::agree(const std::vector<std::pair<std::string, std::string>>& settings,
                     double timeout_seconds, const std::string& stage) {
  if (size_ == 1) return;
  if (rank_ == 0) {
    std::map<int, std::string> received;
    const bool everyone = poll(
        [&] {
          int arrived = 0;
          MPI_Status status;
          MPI_Iprobe(MPI_ANY_SOURCE, kAgreeTag, control_, &arrived, &status);
          if (arrived) {
            int count = 0;
            MPI_Get_count(&status, MPI_CHAR, &count);
            std::string text(static_cast<std::size_t>(count), '\0');
            MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, kAgreeTag, control_,
                     MPI_STATUS_IGNORE);
            received[status.MPI_SOURCE] = std::move(text);
          }
          return static_cast<int>(received.size()) == size_ - 1;
        },
        timeout_seconds, stage);
    std::string verdict;
    if (!everyone) {
      std::vector<int> missing;
      for (int other = 1; other < size_; ++other) {
        if (!received.contains(other)) missing.push_back(other);
      }
      verdict = ranks_text(missing) + " did not reach " + stage + " within " +
                format_seconds(timeout_seconds) +
                " (stopped, stuck, or much slower to start); "
                "every worker stops (look at the output of " +
                ranks_text(missing) + ", or raise the timeout)";
    } else if (const std::string diff = differences(settings, received); !diff.empty()) {
      verdict = "the workers' settings differ, so they cannot train together: " + diff +
                "; start every worker with the same command, data and seed";
    }
    std::vector<MPI_Request> sends;
    for (const auto& entry : received) {
      MPI_Request send = MPI_REQUEST_NULL;
      MPI_Isend(verdict.data(), static_cast<int>(verdict.size()), MPI_CHAR, entry.first,
                kVerdictTag, control_, &send);
      sends.push_back(send);
    }
    const bool delivered = poll(
        [&] {
          int all = 0;
          MPI_Testall(static_cast<int>(sends.size()), sends.data(), &all, MPI_STATUSES_IGNORE);
          return all != 0;
        },
        timeout_seconds, stage);
    if (!verdict.empty()) stop(verdict);
    if (!delivered) fail("the answer to the check of " + stage, timeout_seconds);
    return;
  }

  const std::string mine = serialize(settings);
  MPI_Request send = MPI_REQUEST_NULL;
  MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, 0, kAgreeTag, control_, &send);
  std::string verdict;
  // Rank 0 answers after its own timeout at the latest; the extra time lets its answer arrive.
  wait(
      [&] {
        int arrived = 0;
        MPI_Status status;
        MPI_Iprobe(0, kVerdictTag, control_, &arrived, &status);
        if (!arrived) return false;
        int count = 0;
        MPI_Get_count(&status, MPI_CHAR, &count);
        verdict.assign(static_cast<std::size_t>(count), '\0');
        MPI_Recv(verdict.data(), count, MPI_CHAR, 0, kVerdictTag, control_, MPI_STATUS_IGNORE);
        return true;
      },
      timeout_seconds + std::clamp(timeout_seconds / 4.0, 2.0, 20.0), "rank 0's check of " + stage);
  MPI_Wait(&send, MPI_STATUS_IGNORE);
  if (!verdict.empty()) stop(verdict);
}

void MpiWorld::broadcast(void* data, std::size_t bytes, double timeout_seconds,
                         const std::string& what) {
  if (size_ == 1) return;
  auto* cursor = static_cast<unsigned char*>(data);
  for (std::size_t offset = 0; offset < bytes; offset += INT_MAX) {
    const int count = static_cast<int>(std::min<std::size_t>(bytes - offset, INT_MAX));
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ibcast(cursor + offset, count, MPI_BYTE, 0, data_, &request);
    wait_for(request, timeout_seconds, what);
  }
}

std::vector<unsigned char> MpiWorld::all_gather(const void* data,
                                                const std::vector<std::size_t>& bytes_per_rank,
                                                double timeout_seconds, const std::string& what) {
  std::vector<int> counts;
  std::vector<int> displacements;
  std::size_t total = 0;
  for (const std::size_t bytes : bytes_per_rank) {
    if (total + bytes > static_cast<std::size_t>(INT_MAX)) {
      throw Error(what + ": more than 2 GiB to gather; gather less per step");
    }
    displacements.push_back(static_cast<int>(total));
    counts.push_back(static_cast<int>(bytes));
    total += bytes;
  }
  std::vector<unsigned char> gathered(total);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallgatherv(data, counts[static_cast<std::size_t>(rank_)], MPI_BYTE, gathered.data(),
                  counts.data(), displacements.data(), MPI_BYTE, data_, &request);
  wait_for(request, timeout_seconds, what);
  return gathered;
}

}  // namespace tandem::distribute::detail
