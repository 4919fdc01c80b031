// Eager execution on XLA devices (Device::xla): each op runs as an executable of its own, written
// by the op's lowering rule, compiled once per op, attributes, types and device and then taken
// from a cache, as JAX runs a primitive outside jit. Tensors on an XLA device live in PJRT
// buffers of one client; the fast path is still a compiled step lowered whole (distribute::Xla).
//
// Storage hands out plain addresses and views add byte offsets to them, while a PJRT buffer is a
// typed array with no address the host may use. So the memory below gives each allocation a
// range of addresses nothing dereferences (as a GPU's addresses are to the host) and keeps, per
// allocation, the buffer holding its value (typed as it was last written) and/or a host copy of
// its bytes. A kernel's input is the buffer when its type matches, a reshape of it when only the
// shape differs (a reshape view), and otherwise an upload of the bytes.
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "core/allocator.h"
#include "ops/backend.h"
#include "ops/stablehlo.h"
#include "tandem/xla.h"

namespace tandem::xla {
namespace {

// The value of one allocation.
struct Slot {
  std::size_t nbytes = 0;
  int device = 0;
  std::optional<Buffer> buffer;  // the value as an array on the device, when there is one
  std::vector<std::byte> host;   // the value's bytes, when host_valid
  bool host_valid = false;
};

// A CPU tensor over `bytes` (not owning them), for the client's transfers.
Tensor host_view(std::byte* bytes, const Shape& shape, DType dtype) {
  const std::size_t nbytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  return Tensor::from_storage(std::make_shared<Storage>(bytes, nbytes, Device::cpu(), nullptr), 0,
                              shape, dtype);
}

std::string plugin_setting;  // set_device_plugin's, guarded by state_mutex
std::mutex state_mutex;

struct Counters {
  std::atomic<std::size_t> compiled{0};
  std::atomic<std::size_t> ops_run{0};
  std::atomic<std::size_t> uploads{0};
  std::atomic<std::size_t> downloads{0};
} stats;

// Drops a slot's host copy once its buffer holds the value, so a value is held once.
void drop_host_copy(Slot& slot) {
  slot.host_valid = false;
  slot.host.clear();
  slot.host.shrink_to_fit();
}

class XlaDevices;

// The allocator of one XLA device: its allocations' ledger, the rest in XlaDevices.
class DeviceAllocator final : public Allocator {
 public:
  DeviceAllocator(XlaDevices& devices, int index)
      : devices_(devices), index_(index), ledger_(Device::xla(index)) {}
  void* allocate(std::size_t nbytes) override;
  void deallocate(void* data, std::size_t nbytes) override;
  MemoryLedger& ledger() { return ledger_; }

 private:
  XlaDevices& devices_;
  int index_;
  MemoryLedger ledger_;
};

class XlaDevices final : public DeviceMemory {
 public:
  explicit XlaDevices(const std::string& plugin) : client_(plugin) {
    for (std::size_t i = 0; i < client_.devices().size(); ++i) {
      allocators_.push_back(std::make_unique<DeviceAllocator>(*this, static_cast<int>(i)));
    }
  }

  const Client& client() const { return client_; }
  std::string where(int index) const {
    return Device::xla(index).str() + " (XLA:" + client_.platform() + " " +
           client_.devices()[static_cast<std::size_t>(index)].description + ")";
  }

  // ---- DeviceMemory ----
  void* allocate(std::size_t nbytes) override { return allocator_for(0).allocate(nbytes); }
  void deallocate(void* data, std::size_t nbytes) override {
    ledger(remove_slot(data)).release(nbytes);
  }
  Allocator& allocator_for(int index) override { return device_allocator(index); }
  MemoryLedger& ledger(int index) override { return device_allocator(index).ledger(); }

  void copy_from_host(void* device_dst, const void* host_src, std::size_t nbytes) override {
    std::lock_guard lock(mutex_);
    auto [slot, offset] = slot_at(device_dst);
    if (offset != 0 || nbytes != slot->nbytes) ensure_host(*slot);
    slot->host.resize(slot->nbytes);
    std::memcpy(slot->host.data() + offset, host_src, nbytes);
    slot->host_valid = true;
    slot->buffer.reset();
  }
  void copy_to_host(void* host_dst, const void* device_src, std::size_t nbytes) override {
    std::lock_guard lock(mutex_);
    auto [slot, offset] = slot_at(device_src);
    ensure_host(*slot);
    std::memcpy(host_dst, slot->host.data() + offset, nbytes);
  }
  void copy_within(void* dst, const void* src, std::size_t nbytes) override {
    std::lock_guard lock(mutex_);
    auto [source, source_offset] = slot_at(src);
    auto [target, target_offset] = slot_at(dst);
    // A whole allocation copied on one device shares the (immutable) buffer.
    if (source_offset == 0 && target_offset == 0 && nbytes == source->nbytes &&
        nbytes == target->nbytes && source->buffer && source->device == target->device) {
      target->buffer = source->buffer;
      drop_host_copy(*target);
      return;
    }
    ensure_host(*source);
    ensure_host(*target);
    std::memmove(target->host.data() + target_offset, source->host.data() + source_offset, nbytes);
    target->buffer.reset();
  }

  // ---- what the backend uses, under its lock ----
  std::mutex& mutex() { return mutex_; }

  // `tensor`'s value as an array of its shape and dtype on its device.
  Buffer argument(const Tensor& tensor) {
    auto [slot, offset] = slot_at(tensor.raw_data());
    if (slot->buffer && offset == 0 && slot->buffer->dtype() == tensor.dtype() &&
        shape_numel(slot->buffer->shape()) == tensor.numel()) {
      if (slot->buffer->shape() == tensor.shape()) return *slot->buffer;
      return reshaped(*slot->buffer, tensor.shape(), slot->device);
    }
    ensure_host(*slot);
    Buffer uploaded = client_.to_device(
        host_view(slot->host.data() + offset, tensor.shape(), tensor.dtype()), slot->device);
    ++stats.uploads;
    if (offset == 0 && tensor.nbytes() == slot->nbytes) {
      slot->buffer = uploaded;
      drop_host_copy(*slot);
    }
    return uploaded;
  }

  // Makes `result` the value of `tensor` (an op's output).
  void set_value(const Tensor& tensor, Buffer result) {
    auto [slot, offset] = slot_at(tensor.raw_data());
    if (offset == 0 && tensor.nbytes() == slot->nbytes) {
      slot->buffer = std::move(result);
      drop_host_copy(*slot);
      return;
    }
    // An output that covers part of its allocation: written into the bytes.
    ensure_host(*slot);
    result.copy_to_host(host_view(slot->host.data() + offset, tensor.shape(), tensor.dtype()));
    ++stats.downloads;
    slot->buffer.reset();
  }

  // The executable of `module` for device `index`, compiled on first use.
  const Executable& executable(const std::string& key, int index,
                               const std::function<std::string()>& module) {
    const std::string full_key = key + "@" + std::to_string(index);
    auto found = executables_.find(full_key);
    if (found == executables_.end()) {
      CompileOptions options;
      options.replica_device_ids = {client_.devices()[static_cast<std::size_t>(index)].id};
      found = executables_.emplace(full_key, client_.compile(module(), options)).first;
      ++stats.compiled;
    }
    return found->second;
  }

  DeviceAllocator& device_allocator(int index) {
    if (index < 0 || static_cast<std::size_t>(index) >= allocators_.size()) {
      throw InvalidArgument(
          Device::xla(index).str() + " does not exist: XLA:" + client_.platform() + " has " +
          std::to_string(allocators_.size()) +
          " device(s) here, xla:0 to xla:" + std::to_string(allocators_.size() - 1));
    }
    return *allocators_[static_cast<std::size_t>(index)];
  }

  // An address range of `nbytes` for a new slot on device `index`.
  void* add_slot(std::size_t nbytes, int index) {
    std::lock_guard lock(mutex_);
    const std::uintptr_t base = next_address_;
    // Whole cache lines, and a gap, so that a view's end address is never the next slot's.
    next_address_ += (nbytes + 2 * kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    Slot slot;
    slot.nbytes = nbytes;
    slot.device = index;
    slots_.emplace(base, std::move(slot));
    return reinterpret_cast<void*>(base);
  }
  // Frees a slot; returns its device.
  int remove_slot(void* data) {
    std::lock_guard lock(mutex_);
    const auto found = slots_.find(reinterpret_cast<std::uintptr_t>(data));
    TANDEM_ASSERT(found != slots_.end(), "freeing an address that is not an XLA allocation");
    const int device = found->second.device;
    slots_.erase(found);
    return device;
  }

 private:
  // The slot an address is in, and the address's offset into it.
  std::pair<Slot*, std::size_t> slot_at(const void* address) {
    const auto value = reinterpret_cast<std::uintptr_t>(address);
    auto after = slots_.upper_bound(value);
    TANDEM_ASSERT(after != slots_.begin(), "an address that is not on an XLA device");
    --after;
    const std::size_t offset = value - after->first;
    TANDEM_ASSERT(offset <= after->second.nbytes, "an address past its XLA allocation");
    return {&after->second, offset};
  }

  // The slot's bytes on the host: downloaded from its buffer, or zeros for one never written.
  void ensure_host(Slot& slot) {
    if (slot.host_valid) return;
    slot.host.assign(slot.nbytes, std::byte{0});
    if (slot.buffer) {
      slot.buffer->copy_to_host(
          host_view(slot.host.data(), slot.buffer->shape(), slot.buffer->dtype()));
      ++stats.downloads;
    }
    slot.host_valid = true;
  }

  // `buffer` as an array of `shape` (as many elements), by a cached reshape program.
  Buffer reshaped(const Buffer& buffer, const Shape& shape, int index) {
    const std::string key = "reshape " + StablehloEmitter::type(buffer.shape(), buffer.dtype()) +
                            " -> " + StablehloEmitter::type(shape, buffer.dtype());
    const Executable& program = executable(key, index, [&] {
      StablehloEmitter emitter;
      const StablehloArgument argument{stablehlo_argument(0, buffer.shape(), buffer.dtype())};
      const StablehloValue result = emitter.reshape(argument.value, shape);
      return stablehlo_module("reshape", 1, {&argument, 1}, emitter, {&result, 1});
    });
    return program.execute({&buffer}).front();
  }

  Client client_;
  std::vector<std::unique_ptr<DeviceAllocator>> allocators_;
  std::mutex mutex_;
  std::map<std::uintptr_t, Slot> slots_;
  // Far above any address the host allocator returns, and never reused.
  std::uintptr_t next_address_ = std::uintptr_t{1} << 46;
  std::map<std::string, Executable> executables_;
};

void* DeviceAllocator::allocate(std::size_t nbytes) {
  ledger_.reserve(nbytes);
  return devices_.add_slot(nbytes, index_);
}

void DeviceAllocator::deallocate(void* data, std::size_t nbytes) {
  devices_.remove_slot(data);
  ledger_.release(nbytes);
}

// "conv2d {strides=[1, 1], ...} (tensor<8x28x28x1xf32>, ...) -> (tensor<...>)": what decides
// an op's program.
std::string op_signature(const KernelContext& context) {
  std::string key = std::string(op_name(context.kind)) + " {" + context.attrs.str() + "} (";
  for (const Tensor& input : context.inputs)
    key += StablehloEmitter::type(input.shape(), input.dtype()) + ",";
  key += ") -> (";
  for (const Tensor& output : context.outputs)
    key += StablehloEmitter::type(output.shape(), output.dtype()) + ",";
  return key + ")";
}

// The op alone as a module: its inputs are @main's arguments, its outputs the results.
std::string op_module(const KernelContext& context) {
  const OpDef& def = op_def(context.kind);
  std::vector<StablehloArgument> arguments;
  std::vector<StablehloValue> inputs;
  for (std::size_t i = 0; i < context.inputs.size(); ++i) {
    inputs.push_back(stablehlo_argument(i, context.inputs[i].shape(), context.inputs[i].dtype()));
    arguments.push_back({inputs.back()});
  }
  std::vector<TensorMeta> outputs;
  for (const Tensor& output : context.outputs)
    outputs.push_back({output.shape(), output.dtype()});
  StablehloEmitter emitter;
  const std::vector<StablehloValue> results = def.lower(emitter, inputs, outputs, context.attrs);
  return stablehlo_module(def.name, 1, arguments, emitter, results);
}

class XlaBackend final : public Backend {
 public:
  explicit XlaBackend(XlaDevices& devices) : devices_(devices) {}
  DeviceType device_type() const override { return DeviceType::xla; }
  const char* name() const override { return "xla"; }
  const KernelFacts* kernel_facts(OpKind kind) const override;
  void synchronize() override {}  // an execution returns when its outputs are ready

  void run(const KernelContext& context) override {
    const OpDef& def = op_def(context.kind);
    // A view (reshape) shares its input's allocation: nothing to run.
    const auto is_view = [&](std::size_t output) {
      return !def.writes_aliased_inputs && output < def.output_aliases.size() &&
             def.output_aliases[output] >= 0;
    };
    bool computes = false;
    for (std::size_t i = 0; i < context.outputs.size(); ++i)
      computes = computes || !is_view(i);
    if (!computes) return;

    const int index = context.outputs.empty() ? 0 : context.outputs[0].device().index;
    std::lock_guard lock(devices_.mutex());
    try {
      const Executable& program =
          devices_.executable(op_signature(context), index, [&] { return op_module(context); });
      std::vector<Buffer> arguments;
      for (const Tensor& input : context.inputs)
        arguments.push_back(devices_.argument(input));
      std::vector<const Buffer*> pointers;
      for (const Buffer& argument : arguments)
        pointers.push_back(&argument);
      std::vector<Buffer> results = program.execute(pointers);
      ++stats.ops_run;
      for (std::size_t i = 0; i < context.outputs.size(); ++i) {
        if (!is_view(i)) devices_.set_value(context.outputs[i], std::move(results[i]));
      }
    } catch (const PjrtError& error) {
      std::string shapes;
      for (const Tensor& input : context.inputs)
        shapes += (shapes.empty() ? "" : ", ") + shape_str(input.shape());
      const std::string message = std::string(def.name) + " on " + devices_.where(index) +
                                  " with inputs " + shapes + ": " + error.what();
      if (dynamic_cast<const PjrtOutOfMemory*>(&error) != nullptr) {
        std::size_t requested = 0;
        for (std::size_t i = 0; i < context.outputs.size(); ++i)
          requested += is_view(i) ? 0 : context.outputs[i].nbytes();
        // The outputs were counted as held when dispatch allocated them.
        const MemoryInfo memory = devices_.ledger(index).info();
        const std::size_t held = memory.held - std::min(memory.held, requested);
        throw OutOfMemory("out of memory on " + Device::xla(index).str() + ": " + def.name +
                              "'s outputs need " + format_memory_size(requested) +
                              " while Tandem holds " + format_memory_size(held) +
                              " there; use smaller batches or tensors (" + message + ")",
                          Device::xla(index).str(), requested, held, memory.capacity);
      }
      throw Error(message);
    }
  }

 private:
  XlaDevices& devices_;
};

// Every op with a lowering rule, in every dtype StableHLO has; a rule that cannot lower a
// dtype says so, naming the op.
const KernelFacts* lowered_kernel_facts(OpKind kind) {
  static const KernelFacts any_dtype{(1u << kNumDTypes) - 1, nullptr};
  // XLA:GPU adds scattered rows with atomics, in whatever order they land.
  static const KernelFacts atomics{(1u << kNumDTypes) - 1, "adds rows with atomics on GPUs"};
  if (op_def(kind).lower == nullptr) return nullptr;
  return kind == OpKind::scatter_add ? &atomics : &any_dtype;
}

const KernelFacts* XlaBackend::kernel_facts(OpKind kind) const {
  return lowered_kernel_facts(kind);
}

// The plugin Device::xla's devices come from.
std::string device_plugin() {
  std::lock_guard lock(state_mutex);
  if (!plugin_setting.empty()) return plugin_setting;
  if (const char* given = std::getenv("TANDEM_XLA_DEVICE_PLUGIN")) return given;
  return fetched_cpu_plugin();
}

XlaDevices* devices_up = nullptr;  // set once by the bring-up

const BackendRegistration registration(
    DeviceType::xla,
    [](std::string& why_not) -> Backend* {
      const std::string plugin = device_plugin();
      if (plugin.empty()) {
        why_not =
            "no PJRT plugin for xla devices: run scripts/fetch-pjrt.sh (XLA:CPU's), or "
            "name one with TANDEM_XLA_DEVICE_PLUGIN or xla::set_device_plugin";
        return nullptr;
      }
      try {
        static XlaDevices devices(plugin);
        static XlaBackend backend(devices);
        register_device_memory(DeviceType::xla, &devices);
        std::lock_guard lock(state_mutex);
        devices_up = &devices;
        return &backend;
      } catch (const Error& error) {
        why_not = std::string("the xla devices' plugin cannot start: ") + error.what();
        return nullptr;
      }
    },
    lowered_kernel_facts);

}  // namespace

void set_device_plugin(const std::string& plugin_path) {
  std::lock_guard lock(state_mutex);
  if (devices_up != nullptr && plugin_path != devices_up->client().plugin().path) {
    throw InvalidArgument("xla::set_device_plugin(" + plugin_path +
                          "): the xla devices already run on " +
                          devices_up->client().plugin().path +
                          "; set the plugin before the first tensor is placed on an xla device");
  }
  plugin_setting = plugin_path;
}

std::string device_description(int index) {
  if (const std::string why_not = bring_up_device(DeviceType::xla); !why_not.empty()) {
    throw Error(Device::xla(index).str() + ": " + why_not);
  }
  std::lock_guard lock(state_mutex);
  devices_up->device_allocator(index);  // throws for a device that does not exist
  return devices_up->where(index);
}

EagerStats eager_stats() {
  return {stats.compiled.load(), stats.ops_run.load(), stats.uploads.load(),
          stats.downloads.load()};
}

}  // namespace tandem::xla

// The linker keeps this file, and with it the registration, because CMake asks for this symbol.
extern "C" void tandem_link_xla_backend() {}
