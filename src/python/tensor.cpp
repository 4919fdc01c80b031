// tandem.Tensor's native half: a tandem::Tensor held by Python, and its memory shared with numpy,
// PyTorch and anything else that speaks the buffer protocol or DLPack, both ways, without copies.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>

#include "python/bindings.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/tensor.h"

namespace tandem::python {
namespace {

namespace dl = nb::dlpack;

dl::dtype dlpack_dtype(DType dtype) {
  const auto bits = static_cast<std::uint8_t>(dtype_size(dtype) * 8);
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::f16:
      return {static_cast<std::uint8_t>(dl::dtype_code::Float), bits, 1};
    case DType::bf16:
      return {static_cast<std::uint8_t>(dl::dtype_code::Bfloat), bits, 1};
    case DType::i32:
    case DType::i64:
    case DType::i8:
      return {static_cast<std::uint8_t>(dl::dtype_code::Int), bits, 1};
    case DType::u8:
      return {static_cast<std::uint8_t>(dl::dtype_code::UInt), bits, 1};
    case DType::boolean:
      return {static_cast<std::uint8_t>(dl::dtype_code::Bool), 8, 1};
  }
  throw Error("internal error: no DLPack dtype for " + std::string(dtype_name(dtype)));
}

DType dtype_from_dlpack(const dl::dtype& dtype) {
  const auto code = static_cast<dl::dtype_code>(dtype.code);
  if (dtype.lanes == 1) {
    for (const DType candidate : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32,
                                  DType::i64, DType::u8, DType::boolean, DType::i8}) {
      const dl::dtype known = dlpack_dtype(candidate);
      if (known.code == dtype.code && known.bits == dtype.bits) return candidate;
    }
  }
  throw InvalidArgument("from_dlpack: the array's element type (DLPack code " +
                        std::to_string(static_cast<int>(code)) + ", " + std::to_string(dtype.bits) +
                        " bits, " + std::to_string(dtype.lanes) +
                        " lanes) is none Tandem has; cast it to float32, float64, bfloat16, "
                        "float16, int8, int32, int64, uint8 or bool first");
}

int dlpack_device_type(const Device& device) {
  switch (device.type) {
    case DeviceType::cpu:
      return nb::device::cpu::value;
    case DeviceType::cuda:
      return nb::device::cuda::value;
    case DeviceType::xla:
      break;
  }
  throw InvalidArgument("the tensor lives on " + device.str() +
                        ", whose memory Python cannot see; bring it to the host first "
                        "(tensor.cpu() or tensor.numpy())");
}

const Tensor& defined(const Tensor& tensor) {
  if (!tensor.defined()) throw InvalidArgument("the tensor holds nothing (an undefined Tensor)");
  if (tensor.is_symbolic()) {
    throw InvalidArgument("a symbolic tensor (" + shape_str(tensor.shape()) +
                          ", being traced) has no value to share");
  }
  return tensor;
}

// The tensor's memory as an array of `Framework` (numpy, or the array-API object behind
// __dlpack__), owned by a Python capsule that holds a reference to the tensor's storage: the
// array keeps the memory alive however long the tensor lives.
template <typename Framework>
nb::ndarray<Framework> share(const Tensor& tensor, bool bits_as_uint16) {
  defined(tensor);
  auto* holder = new Tensor(tensor);
  nb::capsule owner(holder, [](void* pointer) noexcept { delete static_cast<Tensor*>(pointer); });
  std::vector<std::size_t> shape(tensor.shape().begin(), tensor.shape().end());
  dl::dtype dtype = dlpack_dtype(tensor.dtype());
  // numpy has no bfloat16: its view is uint16 bits, which Python reinterprets as ml_dtypes'.
  if (bits_as_uint16 && tensor.dtype() == DType::bf16) {
    dtype = {static_cast<std::uint8_t>(dl::dtype_code::UInt), 16, 1};
  }
  return nb::ndarray<Framework>(tensor.raw_data(), shape.size(), shape.data(), owner, nullptr,
                                dtype, dlpack_device_type(tensor.device()), tensor.device().index);
}

// A tensor over the memory of `array` (anything with __dlpack__ or the buffer protocol), which
// it keeps alive: the storage's deleter drops the reference, under the GIL, whichever thread
// lets the last tensor go.
Tensor tensor_over(const nb::ndarray<nb::ro>& array) {
  Shape shape(array.ndim());
  std::int64_t expected_stride = 1;
  for (std::size_t axis = array.ndim(); axis-- > 0;) {
    shape[axis] = static_cast<std::int64_t>(array.shape(axis));
    if (array.shape(axis) != 1 && array.stride(axis) != expected_stride) {
      throw InvalidArgument(
          "from_dlpack: the array is not C-contiguous (strides in elements differ from a "
          "row-major layout of shape " +
          shape_str(shape) +
          "); Tandem's tensors are dense, so it cannot share this memory: pass "
          "numpy.ascontiguousarray(array) or tensor.contiguous() instead");
    }
    expected_stride *= static_cast<std::int64_t>(array.shape(axis));
  }
  const DType dtype = dtype_from_dlpack(array.dtype());
  Device device = Device::cpu();
  if (array.device_type() == nb::device::cuda::value) {
    device = Device::cuda(array.device_id());
  } else if (array.device_type() != nb::device::cpu::value) {
    throw InvalidArgument("from_dlpack: the array lives on DLPack device type " +
                          std::to_string(array.device_type()) +
                          "; Tandem shares CPU (1) and CUDA (2) memory");
  }
  auto* keep_alive = new nb::ndarray<nb::ro>(array);
  auto* data = const_cast<void*>(static_cast<const void*>(array.data()));
  const std::size_t nbytes = array.nbytes();
  std::shared_ptr<Storage> storage(new Storage(data, nbytes, device, /*allocator=*/nullptr),
                                   [keep_alive](Storage* released) {
                                     delete released;
                                     if (Py_IsInitialized()) {
                                       nb::gil_scoped_acquire gil;
                                       delete keep_alive;
                                     }
                                   });
  return Tensor::from_storage(std::move(storage), 0, shape, dtype);
}

// A copy of a C-contiguous host array as a new tensor with memory of its own.
Tensor tensor_copy(const nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>& array,
                   const std::string& dtype_name) {
  Shape shape(array.ndim());
  for (std::size_t axis = 0; axis < array.ndim(); ++axis)
    shape[axis] = static_cast<std::int64_t>(array.shape(axis));
  // `dtype_name` reinterprets the elements: uint16 bits that stand for bfloat16 (numpy's own
  // dtypes have none).
  const DType dtype =
      dtype_name.empty() ? dtype_from_dlpack(array.dtype()) : dtype_from_tf_name(dtype_name);
  if (array.itemsize() != dtype_size(dtype)) {
    throw InvalidArgument("constant: " + dtype_name + " elements cannot be read from " +
                          std::to_string(array.itemsize()) + "-byte ones");
  }
  Tensor tensor = Tensor::empty(shape, dtype);
  if (array.nbytes() != 0) std::memcpy(tensor.raw_data(), array.data(), array.nbytes());
  return tensor;
}

}  // namespace

const char* tf_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::u8:
      return "uint8";
    case DType::boolean:
      return "bool";
    case DType::i8:
      return "int8";
  }
  return "?";
}

DType dtype_from_tf_name(const std::string& name) {
  return parse_dtype(name);
}

void bind_tensor(nb::module_& module) {
  nb::class_<Tensor>(module, "Tensor")
      .def(nb::init<>())  // undefined: an absent gradient
      .def_prop_ro("shape_list",
                   [](const Tensor& tensor) {
                     const Shape& shape = defined(tensor).shape();
                     return std::vector<std::int64_t>(shape.begin(), shape.end());
                   })
      .def_prop_ro("dtype_name", [](const Tensor& tensor) { return tf_dtype_name(tensor.dtype()); })
      .def_prop_ro("device_name", [](const Tensor& tensor) { return tensor.device().str(); })
      .def_prop_ro("tensor_name", [](const Tensor& tensor) { return tensor.name(); })
      .def_prop_ro("is_variable", &Tensor::is_variable)
      .def("data_address",
           [](const Tensor& tensor) {
             return reinterpret_cast<std::uintptr_t>(defined(tensor).raw_data());
           })
      .def("numpy_view", [](const Tensor& tensor) { return share<nb::numpy>(tensor, true); })
      .def("dlpack_view", [](const Tensor& tensor) { return share<nb::array_api>(tensor, false); })
      .def("item", [](const Tensor& tensor) { return defined(tensor).item(); })
      .def("to", [](const Tensor& tensor,
                    const std::string& device) { return tensor.to(Device::parse(device)); })
      .def("clone", &Tensor::clone)
      .def("assign", [](Tensor& tensor, const Tensor& value) { assign(tensor, value); })
      .def("set_variable", &Tensor::set_variable)
      .def("set_name", &Tensor::set_name);
  module.def("tensor_over", &tensor_over, nb::arg("array").noconvert(),
             "A tensor sharing the memory of `array` (DLPack or buffer protocol), no copy.");
  module.def("tensor_copy", &tensor_copy, nb::arg("array"), nb::arg("dtype") = "",
             "A tensor with its own copy of a C-contiguous host array.");
  module.def(
      "full",
      [](const std::vector<std::int64_t>& shape, double value, const std::string& dtype) {
        return Tensor::full(shape, value, dtype_from_tf_name(dtype));
      },
      nb::arg("shape"), nb::arg("value"), nb::arg("dtype"));
}

}  // namespace tandem::python
