#pragma once
// The machinery under Pipeline. A Pipeline holds a Node: an immutable description of one stage
// and its inputs. start() opens the nodes into Streams, one pass's running stages, each wrapped
// in a counter that times its consumer's waits and counts what it hands out. A pass's shared
// state (statistics, autotuner, options) lives in PassState, which outlives every stream.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "data/autotune.h"
#include "data/stats.h"
#include "tandem/pipeline.h"

namespace tandem::data {

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One stage's running pass.
class Stream {
 public:
  virtual ~Stream() = default;
  // The next element; nothing at the end of the pass.
  virtual std::optional<Element> next() = 0;

  // Reading by position, offered by streams over elements held in memory (tensor slices, IDX
  // files) and by the stages that keep that (take, skip, a shuffle whose buffer holds the whole
  // pass): the number of elements the pass gives, each then readable by its position in the
  // pass's order without making the ones before it. Nothing where the stream can only go in
  // order (files read as they go, maps, elements that may be skipped), or once next() was
  // called. A consumer reads one way or the other, never both. A full shuffle then permutes
  // positions instead of holding every element, and a batch copies rows straight into its
  // tensors instead of making an element of each.
  virtual std::optional<std::int64_t> positions() { return std::nullopt; }
  // The element at `position` (below positions()), as next() would give it.
  virtual Element element_at(std::int64_t position);
  // The elements at `positions` stacked along a new first axis, as batch() stacks them, with
  // the first one's origin and random key.
  virtual Element gather(std::span<const std::int64_t> positions);
};

struct PassState {
  PassState(PipelineOptions pipeline_options, std::uint64_t pass_key)
      : options(pipeline_options),
        cpu_budget(resolve_cpu_budget(pipeline_options.cpu_budget)),
        pass(pass_key),
        autotuner(cpu_budget, pipeline_options.ram_budget) {}

  PipelineOptions options;
  int cpu_budget;
  std::uint64_t pass;
  std::int64_t start_ns = now_ns();
  StatsRegistry stats;
  Autotuner autotuner;  // after stats: its thread reads counters, so it must stop first
};

struct PassContext {
  PassState* state;
  // Distinguishes passes (epochs) and repetitions: seeds reshuffles and random transforms.
  std::uint64_t pass;
  // The consuming stage's counters (nullptr for the stage the user reads) and which of its
  // inputs this is; together they name this stage's counters, so a stage reopened (repeat) or
  // an inner pipeline opened per file (interleave) adds to the same row.
  StageCounters* parent = nullptr;
  int slot = 0;
};

class Node {
 public:
  explicit Node(std::vector<std::shared_ptr<const Node>> inputs = {})
      : inputs_(std::move(inputs)) {}
  virtual ~Node() = default;

  // "map(decode)", "tfrecord(3 files)", ...
  virtual std::string name() const = 0;
  // Whether the stage works on threads of its own (its busy time is counted by them, not
  // derived from its consumer's waits).
  virtual bool asynchronous() const { return false; }
  // Elements per pass, kInfiniteCardinality or kUnknownCardinality.
  virtual std::int64_t cardinality() const = 0;
  // Opens a pass; `self` is this stage's counters. Inputs are opened with open_stream.
  virtual std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const = 0;
  // The batch size a batch stage gives its elements; stages that keep elements whole pass
  // their input's through; 0 when elements are not batched.
  virtual std::int64_t batch_size() const { return inputs_.empty() ? 0 : inputs_[0]->batch_size(); }
  // Examples in a pass: elements before batching. Stages that change the count of batched
  // elements cannot tell (kUnknownCardinality); those that keep every element pass their
  // input's through.
  virtual std::int64_t examples() const {
    return batch_size() > 0 ? kUnknownCardinality : cardinality();
  }
  virtual std::vector<std::string> class_names() const {
    return inputs_.empty() ? std::vector<std::string>{} : inputs_[0]->class_names();
  }

  const std::vector<std::shared_ptr<const Node>>& inputs() const { return inputs_; }
  const Node& input() const { return *inputs_.at(0); }
  // The chain from the source: "tfrecord(2 files) -> map(parse) -> batch(32)".
  std::string describe() const;

 private:
  std::vector<std::shared_ptr<const Node>> inputs_;
};

// Opens `node` for a pass as input `slot` of the stage whose counters are `parent`, wrapped so
// that its elements and its consumer's waits are counted; `counters` (if given) receives the
// opened stage's counters.
std::unique_ptr<Stream> open_stream(const Node& node, const PassContext& context,
                                    StageCounters* parent, int slot,
                                    StageCounters** counters = nullptr);
// Opens `node`'s input number `slot` for the pass `context` describes.
inline std::unique_ptr<Stream> open_input(const Node& node, const PassContext& context,
                                          StageCounters& self, int slot = 0,
                                          StageCounters** counters = nullptr) {
  return open_stream(*node.inputs().at(static_cast<std::size_t>(slot)), context, &self, slot,
                     counters);
}

// A 64-bit mix of two values (SplitMix64's finaliser over their combination), for seeds and
// random keys.
std::uint64_t mix_keys(std::uint64_t first, std::uint64_t second);

// The message for an error `error` in stage `stage` on the element from `origin`.
std::string element_error(const std::string& stage, const Origin& origin, const std::string& error);

// Runs fn(element), turning an exception into an Error that names the stage and the element's
// origin (unless the message already starts with the origin's source). Under OnError::skip a
// failing element is counted in `self` and nothing is returned.
std::optional<Element> apply_guarded(const std::function<Element(Element)>& fn, Element element,
                                     const std::string& stage, OnError on_error,
                                     StageCounters& self);

}  // namespace tandem::data
