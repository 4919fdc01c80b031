#pragma once
// A small thread-safe LRU cache of oneDNN primitives and the descriptors and reorders that go
// with them, keyed by everything that shapes a primitive (op, dtype, shapes, strides, ...).
// Creating a primitive descriptor costs tens of microseconds and a JIT primitive more; a
// training step would otherwise pay that on every call of every layer.
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tandem/tensor.h"

namespace tandem::cpu {

using PrimitiveKey = std::vector<std::int64_t>;

struct PrimitiveKeyHash {
  std::size_t operator()(const PrimitiveKey& key) const noexcept {
    std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the values
    for (std::int64_t value : key) {
      hash ^= static_cast<std::uint64_t>(value);
      hash *= 0x100000001b3ull;
    }
    return static_cast<std::size_t>(hash);
  }
};

template <typename Entry>
class PrimitiveCache {
 public:
  explicit PrimitiveCache(std::size_t capacity) : capacity_(capacity) {}

  // The entry for `key`, built by make() on first use. Callers share entries read-only (oneDNN
  // primitives may run concurrently); an evicted entry lives on while a caller still holds it.
  template <typename Make>
  std::shared_ptr<const Entry> get(PrimitiveKey key, Make&& make) {
    key.push_back(omp_get_max_threads());
    std::lock_guard lock(mutex_);
    if (const auto found = index_.find(key); found != index_.end()) {
      recent_.splice(recent_.begin(), recent_, found->second);
      return found->second->second;
    }
    auto entry = std::make_shared<const Entry>(make());
    recent_.emplace_front(key, entry);
    index_.emplace(std::move(key), recent_.begin());
    if (recent_.size() > capacity_) {
      index_.erase(recent_.back().first);
      recent_.pop_back();
    }
    return entry;
  }

 private:
  using Item = std::pair<PrimitiveKey, std::shared_ptr<const Entry>>;
  std::size_t capacity_;
  std::mutex mutex_;
  std::list<Item> recent_;  // most recently used first
  std::unordered_map<PrimitiveKey, typename std::list<Item>::iterator, PrimitiveKeyHash> index_;
};

// Data a kernel derives from a constant tensor (an inference model's filter repacked for its
// loops), kept while that tensor's storage lives: an entry whose storage has gone is dropped at
// the next miss, so what a model's constants made leaves with the model however many models a
// process loads.
template <typename Entry>
class ConstantDerivedCache {
 public:
  // The entry for `key` (which names `source`), built by make() on first use.
  template <typename Make>
  std::shared_ptr<const Entry> get(const PrimitiveKey& key, const Tensor& source, Make&& make) {
    std::lock_guard lock(mutex_);
    if (const auto found = entries_.find(key);
        found != entries_.end() && !found->second.source.expired()) {
      return found->second.entry;
    }
    std::erase_if(entries_, [](const auto& item) { return item.second.source.expired(); });
    auto entry = std::make_shared<const Entry>(make());
    entries_[key] = Kept{source.storage(), entry};
    return entry;
  }

 private:
  struct Kept {
    std::weak_ptr<Storage> source;
    std::shared_ptr<const Entry> entry;
  };
  std::mutex mutex_;
  std::unordered_map<PrimitiveKey, Kept, PrimitiveKeyHash> entries_;
};

}  // namespace tandem::cpu
