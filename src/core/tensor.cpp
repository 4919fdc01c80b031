#include "tandem/tensor.h"

#include <cstring>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "core/allocator.h"

namespace tandem {

struct Tensor::Impl {
  Shape shape;
  DType dtype = DType::f32;
  std::shared_ptr<Storage> storage;
  std::size_t offset = 0;
  std::uint64_t id = 0;
  bool is_variable = false;
  bool is_constant = false;
  std::string name;
  // Non-empty for a symbolic tensor (a value of a step being traced): what produced it.
  std::string symbolic_origin;
};

namespace {
std::uint64_t next_tensor_id() {
  static std::atomic<std::uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t count = 1;
  for (std::int64_t extent : shape)
    count *= extent;
  return count;
}

std::string shape_str(const Shape& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

Storage::Storage(void* data, std::size_t nbytes, Device device, Allocator* allocator)
    : data_(data), nbytes_(nbytes), device_(device), allocator_(allocator) {}

Storage::~Storage() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, nbytes_);
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, std::size_t offset,
                            const Shape& shape, DType dtype) {
  auto impl = std::make_shared<Impl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->storage = std::move(storage);
  impl->offset = offset;
  impl->id = next_tensor_id();
  return Tensor(std::move(impl));
}

Tensor Tensor::symbolic(const Shape& shape, DType dtype, Device device, std::string origin) {
  TANDEM_ASSERT(!origin.empty(), "a symbolic tensor needs to say what produced it");
  // A storage of no bytes and no allocator: it holds only the device.
  Tensor tensor =
      from_storage(std::make_shared<Storage>(nullptr, 0, device, nullptr), 0, shape, dtype);
  tensor.impl_->symbolic_origin = std::move(origin);
  return tensor;
}

bool Tensor::is_symbolic() const {
  return impl_ != nullptr && !impl_->symbolic_origin.empty();
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (std::int64_t extent : shape) {
    if (extent < 0) {
      throw InvalidArgument("Tensor::empty: negative extent in shape " + shape_str(shape));
    }
  }
  const std::size_t nbytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  Allocator& allocator = device_memory(device.type).allocator_for(device.index);
  auto storage = std::make_shared<Storage>(allocator.allocate(nbytes), nbytes, device, &allocator);
  return from_storage(std::move(storage), 0, shape, dtype);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor host = empty(shape, dtype, Device::cpu());
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T element = convert_element<T>(value);
    T* out = static_cast<T*>(host.raw_data());
    const std::int64_t count = host.numel();
    for (std::int64_t i = 0; i < count; ++i)
      out[i] = element;
  });
  return host.to(device);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor host = empty(shape, dtype, Device::cpu());
  std::memset(host.raw_data(), 0, host.nbytes());
  return host.to(device);
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::scalar(double value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}

const Shape& Tensor::shape() const {
  TANDEM_ASSERT(impl_, "shape() of an undefined tensor");
  return impl_->shape;
}

std::int64_t Tensor::dim(int axis) const {
  const int r = rank();
  const int resolved = axis < 0 ? axis + r : axis;
  if (resolved < 0 || resolved >= r) {
    throw InvalidArgument("axis " + std::to_string(axis) +
                          " is out of range for a tensor of shape " + shape_str(shape()));
  }
  return impl_->shape[static_cast<std::size_t>(resolved)];
}

std::int64_t Tensor::numel() const {
  return shape_numel(shape());
}

DType Tensor::dtype() const {
  TANDEM_ASSERT(impl_, "dtype() of an undefined tensor");
  return impl_->dtype;
}

Device Tensor::device() const {
  TANDEM_ASSERT(impl_, "device() of an undefined tensor");
  return impl_->storage->device();
}

std::uint64_t Tensor::id() const {
  return impl_ ? impl_->id : 0;
}

void* Tensor::raw_data() const {
  TANDEM_ASSERT(impl_, "data of an undefined tensor");
  if (!impl_->symbolic_origin.empty()) {
    throw Error(std::string("the value of ") + dtype_name(impl_->dtype) + " " +
                shape_str(impl_->shape) + ", " + impl_->symbolic_origin +
                ", was read on the host inside a traced step (item(), to_vector(), data(), to()); "
                "inside a compiled step a value exists only when the graph runs. Read it after "
                "the step returns, or run this step eagerly (tandem train --jit off, "
                "CompileOptions::jit_compile = false)");
  }
  return static_cast<char*>(impl_->storage->data()) + impl_->offset;
}

const std::shared_ptr<Storage>& Tensor::storage() const {
  TANDEM_ASSERT(impl_, "storage() of an undefined tensor");
  return impl_->storage;
}

std::size_t Tensor::storage_offset() const {
  return impl_ ? impl_->offset : 0;
}

void Tensor::check_access(DType requested) const {
  TANDEM_ASSERT(impl_, "data of an undefined tensor");
  if (requested != impl_->dtype) {
    throw InvalidArgument(std::string("tensor of dtype ") + dtype_name(impl_->dtype) + " read as " +
                          dtype_name(requested) + "; cast it first");
  }
  if (impl_->storage->device().type != DeviceType::cpu) {
    throw InvalidArgument("tensor on " + impl_->storage->device().str() +
                          " read from the host; copy it with .to(Device::cpu()) first");
  }
}

double Tensor::item() const {
  if (numel() != 1) {
    throw InvalidArgument("item() needs a tensor with one element, got shape " +
                          shape_str(shape()));
  }
  return to_vector<double>()[0];
}

Tensor Tensor::to(Device device) const {
  TANDEM_ASSERT(impl_, "to() of an undefined tensor");
  const Device source = this->device();
  if (source == device) return *this;
  Tensor result = empty(shape(), dtype(), device);
  if (source.type == DeviceType::cpu) {
    device_memory(device.type).copy_from_host(result.raw_data(), raw_data(), nbytes());
  } else if (device.type == DeviceType::cpu) {
    device_memory(source.type).copy_to_host(result.raw_data(), raw_data(), nbytes());
  } else {
    Tensor staged = to(Device::cpu());
    return staged.to(device);
  }
  return result;
}

Tensor Tensor::clone() const {
  Tensor result = empty(shape(), dtype(), device());
  device_memory(device().type).copy_within(result.raw_data(), raw_data(), nbytes());
  return result;
}

void Tensor::set_data(const Tensor& value) {
  TANDEM_ASSERT(impl_, "set_data() on an undefined tensor");
  if (!value.defined() || value.shape() != shape() || value.dtype() != dtype()) {
    const std::string what = name().empty() ? "a tensor" : name();
    const std::string given =
        value.defined() ? std::string(dtype_name(value.dtype())) + " " + shape_str(value.shape())
                        : "an undefined tensor";
    throw InvalidArgument("Tensor::set_data: " + what + " is " + dtype_name(dtype()) + " " +
                          shape_str(shape()) + ", got " + given +
                          "; give a value of the same shape and dtype");
  }
  if (impl_->is_constant) {
    throw InvalidArgument("Tensor::set_data: " + (name().empty() ? "a tensor" : name()) +
                          " is a constant (an inference model's weight); make the model again "
                          "from the changed weights");
  }
  impl_->storage = value.impl_->storage;
  impl_->offset = value.impl_->offset;
}

bool Tensor::is_constant() const {
  return impl_ && impl_->is_constant;
}

void Tensor::set_constant(bool constant) {
  TANDEM_ASSERT(impl_, "set_constant() on an undefined tensor");
  impl_->is_constant = constant;
}

bool Tensor::is_variable() const {
  return impl_ && impl_->is_variable;
}
void Tensor::set_variable(bool variable) {
  TANDEM_ASSERT(impl_, "set_variable() on an undefined tensor");
  impl_->is_variable = variable;
}

const std::string& Tensor::name() const {
  static const std::string empty_name;
  return impl_ ? impl_->name : empty_name;
}
void Tensor::set_name(const std::string& name) {
  TANDEM_ASSERT(impl_, "set_name() on an undefined tensor");
  impl_->name = name;
}

namespace {

void format_element(std::ostream& out, const Tensor& host, std::int64_t index) {
  visit_dtype(host.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T value = static_cast<const T*>(host.raw_data())[index];
    if constexpr (std::is_same_v<T, bool>) {
      out << (value ? "true" : "false");
    } else if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t>) {
      out << static_cast<int>(value);  // a number, not a character
    } else if constexpr (std::is_integral_v<T>) {
      out << value;
    } else {
      out << std::setprecision(6) << static_cast<double>(static_cast<compute_type_t<T>>(value));
    }
  });
}

void format_block(std::ostream& out, const Tensor& host, int axis, std::int64_t base,
                  int max_per_dim, int indent) {
  const Shape& shape = host.shape();
  const std::int64_t extent = shape[static_cast<std::size_t>(axis)];
  std::int64_t stride = 1;
  for (std::size_t a = static_cast<std::size_t>(axis) + 1; a < shape.size(); ++a)
    stride *= shape[a];
  const bool abridge = extent > max_per_dim;
  const std::int64_t head = abridge ? max_per_dim / 2 : extent;
  out << '[';
  for (std::int64_t i = 0; i < extent; ++i) {
    if (abridge && i == head) {
      out << (axis + 1 == host.rank() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = extent - (max_per_dim - head);
    }
    if (axis + 1 == host.rank()) {
      format_element(out, host, base + i);
    } else {
      format_block(out, host, axis + 1, base + i * stride, max_per_dim, indent + 1);
    }
    if (i + 1 < extent)
      out << (axis + 1 == host.rank() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  out << ']';
}

}  // namespace

std::string Tensor::to_string(int max_per_dim) const {
  if (!impl_) return "Tensor(undefined)";
  std::ostringstream out;
  out << "Tensor(shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype())
      << ", device=" << device().str();
  if (!name().empty()) out << ", name=" << name();
  out << ")\n";
  const Tensor host = to(Device::cpu());
  if (rank() == 0) {
    format_element(out, host, 0);
  } else if (numel() == 0) {
    out << "[]";
  } else {
    format_block(out, host, 0, 0, max_per_dim < 2 ? 2 : max_per_dim, 0);
  }
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) {
  return out << tensor.to_string();
}

}  // namespace tandem
