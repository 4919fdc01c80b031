#pragma once
// The two shapes of collective communication the strategies use: across worker processes
// (MultiWorker: MPI for CPU tensors, NCCL for GPU tensors) and across the replicas of one process
// (Mirrored: NCCL for GPUs, host memory for logical CPU replicas).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/tensor.h"

namespace tandem::distribute::detail {

class MpiWorld;

// This process's end of collectives across worker processes.
class Collective {
 public:
  virtual ~Collective() = default;
  // Starts summing `flat` (numel,) over all workers, in place. The returned function says whether
  // the sum has arrived; it throws when the backend reports an error.
  virtual std::function<bool()> start_all_reduce(const Tensor& flat) = 0;
  // Lets started collectives advance (MPI moves non-blocking collectives on only inside MPI
  // calls); called as the backward pass hands over each gradient.
  virtual void progress() = 0;
  // "MPI", "NCCL 2.28.3"
  virtual std::string name() const = 0;
};

// Sums of CPU tensors through MPI_Iallreduce on the world's data communicator.
std::unique_ptr<Collective> make_mpi_collective(MpiWorld& world);

// Sums of GPU tensors through NCCL, one communicator over all workers whose unique id rank 0
// broadcasts over MPI. Throws DeviceUnavailable when NCCL or the CUDA backend is missing.
std::unique_ptr<Collective> make_nccl_collective(MpiWorld& world, Device device,
                                                 double timeout_seconds);

// The replicas of one process: flats[k] lives on replica k's device.
class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  // Every flats[k] becomes the sum of all of them.
  virtual void all_reduce(const std::vector<Tensor>& flats) = 0;
  // flats[0] is copied into the others.
  virtual void broadcast(const std::vector<Tensor>& flats) = 0;
  virtual std::string name() const = 0;
};

// Logical CPU replicas: sums and copies in host memory.
std::unique_ptr<ReplicaGroup> make_host_group();
// GPUs of this process: one NCCL communicator per device (ncclCommInitAll). Throws
// DeviceUnavailable when NCCL or the CUDA backend is missing.
std::unique_ptr<ReplicaGroup> make_nccl_group(const std::vector<Device>& devices);

}  // namespace tandem::distribute::detail
