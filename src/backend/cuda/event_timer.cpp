// The profiler's kernel timer on CUDA: a pair of events recorded on the GPU's stream around an
// op's launches, so the time is what the GPU spent on them, not the host's launch time.
#include "backend/cuda/cuda_backend.h"

namespace tandem::cuda {
namespace {

class EventTimer final : public KernelTimer {
 public:
  explicit EventTimer(DeviceContext& context) : stream_(context.stream) {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start() override { check(cudaEventRecord(start_, stream_), "cudaEventRecord"); }
  void stop() override { check(cudaEventRecord(stop_, stream_), "cudaEventRecord"); }
  double seconds() override {
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float milliseconds = 0.0f;
    check(cudaEventElapsedTime(&milliseconds, start_, stop_), "cudaEventElapsedTime");
    return 1e-3 * milliseconds;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace

std::unique_ptr<KernelTimer> make_event_timer(Device device) {
  return std::make_unique<EventTimer>(enter(device));
}

}  // namespace tandem::cuda
