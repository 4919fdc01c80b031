#pragma once
// Tensor: an n-dimensional array with a shape, an element type and a device. Storage is
// reference counted and shared by views (reshape, in-place updates); every tensor is dense and
// row-major (the last dimension varies fastest), so image tensors are NHWC.
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tandem/device.h"
#include "tandem/dtype.h"
#include "tandem/error.h"

namespace tandem {

using Shape = std::vector<std::int64_t>;

std::int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(32, 28, 28, 1)"

class Allocator;

// A block of device memory, freed by its allocator when the last tensor using it goes.
class Storage {
 public:
  Storage(void* data, std::size_t nbytes, Device device, Allocator* allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  std::size_t nbytes_;
  Device device_;
  Allocator* allocator_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: holds nothing; defined() is false

  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu());
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                            Device device = Device::cpu());
  // A tensor with a shape, dtype and device but no value: what ops return while a step is being
  // traced (tandem/compile.h). `origin` says what produced it ("output 0 of matmul, node 12");
  // reading its value throws an Error naming it.
  static Tensor symbolic(const Shape& shape, DType dtype, Device device, std::string origin);
  // A tensor sharing `storage` from byte `offset`; used for views and by backends.
  static Tensor from_storage(std::shared_ptr<Storage> storage, std::size_t offset,
                             const Shape& shape, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  bool is_symbolic() const;
  const Shape& shape() const;
  std::int64_t dim(int axis) const;  // negative axes count from the end
  int rank() const { return static_cast<int>(shape().size()); }
  std::int64_t numel() const;
  DType dtype() const;
  Device device() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype()); }
  // Identity of this tensor's value; views share storage but not identity.
  std::uint64_t id() const;
  // How many handles share this tensor (copies of a Tensor share it; views do not): a compiled
  // graph treats a tensor nothing else holds, and that it never writes, as a constant.
  long use_count() const { return impl_.use_count(); }

  void* raw_data() const;
  template <typename T>
  T* data() const {
    check_access(dtype_v<T>);
    return static_cast<T*>(raw_data());
  }
  const std::shared_ptr<Storage>& storage() const;
  std::size_t storage_offset() const;

  // Copies to host memory and returns the elements converted to T.
  template <typename T>
  std::vector<T> to_vector() const;
  // The single element of a one-element tensor, as double.
  double item() const;
  // A copy on `device` (the same tensor when already there).
  Tensor to(Device device) const;
  // A deep copy with its own storage.
  Tensor clone() const;
  // Points this tensor at `value`'s storage (same shape and dtype, any device) and keeps its
  // identity, name and variable flag: how a built model's weights move to another device, and
  // how a data-parallel strategy binds them to one replica's copy (PyTorch's `param.data = v`).
  // Views taken before keep the old storage.
  void set_data(const Tensor& value);

  // Variables (trainable weights) are watched by every gradient tape automatically, the way
  // tf.GradientTape watches trainable tf.Variables.
  bool is_variable() const;
  void set_variable(bool variable);
  // A constant's value never changes (the weights of a model made for inference), so kernels may
  // keep forms derived from it, such as oneDNN's reordered filters, for as long as it lives.
  // Ops that write in place, set_data() and copies into it refuse a constant; writing through
  // raw_data() breaks the promise.
  bool is_constant() const;
  void set_constant(bool constant);
  // Optional name shown in errors and used by model summaries and checkpoints.
  const std::string& name() const;
  void set_name(const std::string& name);

  // Eager debugging: shape, dtype, device and (abridged) values.
  std::string to_string(int max_per_dim = 6) const;

 private:
  struct Impl;
  explicit Tensor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  void check_access(DType requested) const;
  std::shared_ptr<Impl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  if (static_cast<std::int64_t>(values.size()) != shape_numel(shape)) {
    throw InvalidArgument("Tensor::from_vector: " + std::to_string(values.size()) +
                          " values do not fill shape " + shape_str(shape) + " (" +
                          std::to_string(shape_numel(shape)) + " elements)");
  }
  Tensor host = empty(shape, dtype_v<T>, Device::cpu());
  T* out = host.data<T>();
  for (std::size_t i = 0; i < values.size(); ++i)
    out[i] = values[i];
  return host.to(device);
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(Device::cpu());
  std::vector<T> values(static_cast<std::size_t>(host.numel()));
  visit_dtype(host.dtype(), [&](auto tag) {
    using Source = decltype(tag);
    const Source* in = static_cast<const Source*>(host.raw_data());
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = convert_element<T>(in[i]);
  });
  return values;
}

}  // namespace tandem
