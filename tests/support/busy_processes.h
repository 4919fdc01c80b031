#pragma once
// Processes that each spin on a core until the object goes: the load another program puts on a
// shared machine, for tests of what Tandem does beside it (they assert counts, never times).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

namespace tandem::testing {

class BusyProcesses {
 public:
  explicit BusyProcesses(int count) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        // Only a loop in the child: nothing that a lock held by another thread at the fork
        // could block.
        for (volatile unsigned long spin = 0;; spin = spin + 1) {
        }
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~BusyProcesses() {
    for (const pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  BusyProcesses(const BusyProcesses&) = delete;
  BusyProcesses& operator=(const BusyProcesses&) = delete;

 private:
  std::vector<pid_t> pids_;
};

}  // namespace tandem::testing
