#pragma once
// The MPI side of multi-worker training: starting MPI with a deadline, the start-up agreement of
// the workers' configurations, broadcasts and gathers with deadlines, and what happens when a
// worker is missing. Every wait polls with a deadline instead of blocking in MPI: when it passes,
// or when another worker announces a failure, the workers that are still alive hold a roll call
// (a message from each to each on a communicator of its own) and every one of them stops with an
// error naming the ranks that did not answer. Nothing waits forever.
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::distribute::detail {

class MpiWorld {
 public:
  // Starts MPI once per process, or adopts MPI that the application started (and then leaves
  // finalising it to the application). MPI_Init returns only when every worker has called it: if
  // that takes longer than `join_timeout_seconds`, this process prints which ranks never joined
  // and exits with status 1 (it cannot unwind out of MPI_Init). Each join() is matched by a
  // leave(): the last one finalises MPI, unless it happens while an exception unwinds or after a
  // failure; then MPI stays as it is and the process exits without finalising, which makes the
  // launcher stop the other workers at once instead of leaving them waiting.
  static MpiWorld& join(double join_timeout_seconds);
  void leave();

  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;
  ~MpiWorld();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // This worker's position among the workers on its node, and their number.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // "worker 1 of 2"
  std::string label() const;
  MPI_Comm data_communicator() const { return data_; }

  // Polls `done` until it returns true. Throws (after a roll call) when `timeout_seconds` pass
  // first or another worker announces a failure; `what` names what was awaited.
  void wait(const std::function<bool()>& done, double timeout_seconds, const std::string& what);
  // wait() until the nonblocking operation behind `request` completes.
  void wait_for(MPI_Request& request, double timeout_seconds, const std::string& what);

  // Checks that every worker's (what, value) pairs equal rank 0's before `stage` ("the start of
  // training"). Throws on every worker when one does not arrive within the timeout (naming it)
  // or when values differ (naming each difference with the ranks' values).
  void agree(const std::vector<std::pair<std::string, std::string>>& settings,
             double timeout_seconds, const std::string& stage);

  // Rank 0's `bytes` at `data`, on every worker.
  void broadcast(void* data, std::size_t bytes, double timeout_seconds, const std::string& what);

  // Every worker's bytes, concatenated in rank order; worker r sends bytes_per_rank[r] bytes.
  std::vector<unsigned char> all_gather(const void* data,
                                        const std::vector<std::size_t>& bytes_per_rank,
                                        double timeout_seconds, const std::string& what);

  // Stops this worker after a failure it saw while waiting for `what`: holds the roll call and
  // throws an Error naming the missing ranks. MPI is not finalised after a failure.
  [[noreturn]] void fail(const std::string& what, double waited_seconds, int reporting_rank = -1);

  // True after a failure: collectives still in flight must be aborted, not waited for.
  bool broken() const { return broken_; }

 private:
  explicit MpiWorld(double join_timeout_seconds);
  // Ends this worker's part after a failure: MPI stays unfinalised, the message becomes what a
  // SIGTERM from the launcher prints, and an Error with it is thrown.
  [[noreturn]] void stop(const std::string& message);
  // Polls `done` until true (returns true) or until the timeout (returns false); a roll call from
  // another worker fails this one at once.
  bool poll(const std::function<bool()>& done, double timeout_seconds, const std::string& what);

  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  bool owns_mpi_ = false;
  bool broken_ = false;
  bool finalized_ = false;
  int users_ = 0;  // join() calls not yet matched by leave()
  // The roll call's messages: MPI may read and write them after fail() has thrown.
  int roll_call_token_ = 0;
  std::vector<int> roll_call_inbox_;
  MPI_Comm data_ = MPI_COMM_NULL;     // collectives on tensors
  MPI_Comm control_ = MPI_COMM_NULL;  // agreement and roll calls, never blocked by the data
};

}  // namespace tandem::distribute::detail
