// CPU kernels for layout and type ops. Copies are type-agnostic (by element size) through
// strided_copy; cast converts element by element.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/strided_copy.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {
namespace {

// The output aliases the input (OpDef output_aliases), so there is nothing to move.
void reshape_kernel(const KernelContext&) {}

void transpose_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const std::vector<std::int64_t> permutation = op_attrs<OpKind::transpose>(c.attrs).perm;
  const std::vector<std::int64_t> input_strides = dense_strides(x.shape());
  std::vector<std::int64_t> source_strides;  // input stride of each output axis
  for (std::int64_t axis : permutation)
    source_strides.push_back(input_strides[static_cast<std::size_t>(axis)]);
  const Tensor& y = c.outputs[0];
  strided_copy(y.raw_data(), dense_strides(y.shape()), x.raw_data(), source_strides, y.shape(),
               dtype_size(x.dtype()));
}

void concat_kernel(const KernelContext& c) {
  const Tensor& y = c.outputs[0];
  const auto axis = static_cast<std::size_t>(op_attrs<OpKind::concat>(c.attrs).axis);
  const std::vector<std::int64_t> output_strides = dense_strides(y.shape());
  const std::size_t element_size = dtype_size(y.dtype());
  std::int64_t offset = 0;
  for (const Tensor& x : c.inputs) {
    char* destination = static_cast<char*>(y.raw_data()) +
                        offset * output_strides[axis] * static_cast<std::int64_t>(element_size);
    strided_copy(destination, output_strides, x.raw_data(), dense_strides(x.shape()), x.shape(),
                 element_size);
    offset += x.shape()[axis];
  }
}

void slice_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  const std::vector<std::int64_t> begin = op_attrs<OpKind::slice>(c.attrs).begin;
  const std::vector<std::int64_t> input_strides = dense_strides(x.shape());
  std::int64_t start = 0;
  for (std::size_t i = 0; i < begin.size(); ++i)
    start += begin[i] * input_strides[i];
  const std::size_t element_size = dtype_size(x.dtype());
  strided_copy(
      y.raw_data(), dense_strides(y.shape()),
      static_cast<const char*>(x.raw_data()) + start * static_cast<std::int64_t>(element_size),
      input_strides, y.shape(), element_size);
}

void pad_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  const double value = op_attrs<OpKind::pad>(c.attrs).value;
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T fill = convert_element<T>(value);
    T* out = static_cast<T*>(y.raw_data());
    parallel_for(y.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i)
        out[i] = fill;
    });
  });
  const std::vector<std::int64_t> paddings = op_attrs<OpKind::pad>(c.attrs).paddings;
  const std::vector<std::int64_t> output_strides = dense_strides(y.shape());
  std::int64_t start = 0;
  for (std::size_t i = 0; i < output_strides.size(); ++i)
    start += paddings[2 * i] * output_strides[i];
  const std::size_t element_size = dtype_size(x.dtype());
  strided_copy(static_cast<char*>(y.raw_data()) + start * static_cast<std::int64_t>(element_size),
               output_strides, x.raw_data(), dense_strides(x.shape()), x.shape(), element_size);
}

void cast_kernel(const KernelContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  visit_dtype(x.dtype(), [&](auto source_tag) {
    using From = decltype(source_tag);
    visit_dtype(y.dtype(), [&](auto target_tag) {
      using To = decltype(target_tag);
      const From* in = static_cast<const From*>(x.raw_data());
      To* out = static_cast<To*>(y.raw_data());
      parallel_for(x.numel(), 2, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i)
          out[i] = convert_element<To>(in[i]);
      });
    });
  });
}

}  // namespace

void register_layout_kernels(KernelTable& table) {
  auto set = [&](OpKind kind, KernelFn run) { table.set(kind, run, all_dtypes_mask()); };
  set(OpKind::reshape, reshape_kernel);
  set(OpKind::transpose, transpose_kernel);
  set(OpKind::concat, concat_kernel);
  set(OpKind::slice, slice_kernel);
  set(OpKind::pad, pad_kernel);
  set(OpKind::cast, cast_kernel);
}

}  // namespace tandem::cpu
