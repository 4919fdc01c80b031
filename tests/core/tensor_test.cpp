#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/allocator.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

TEST(Tensor, ShapeDtypeDeviceAndAlignment) {
  const Tensor t = Tensor::zeros({2, 3, 5}, DType::f32);
  EXPECT_EQ(t.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.dim(-1), 5);
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_EQ(t.nbytes(), 120u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % kCpuAlignment, 0u);
  for (float value : t.to_vector<float>()) EXPECT_EQ(value, 0.0f);
  EXPECT_THROW(t.dim(3), InvalidArgument);
}

TEST(Tensor, EveryDtypeRoundTripsThroughFull) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64,
                      DType::u8, DType::boolean, DType::i8}) {
    const Tensor t = Tensor::full({4}, 3.0, dtype);
    EXPECT_EQ(t.dtype(), dtype);
    EXPECT_EQ(t.nbytes(), 4 * dtype_size(dtype));
    for (double value : t.to_vector<double>()) {
      EXPECT_EQ(value, dtype == DType::boolean ? 1.0 : 3.0) << dtype_name(dtype);
    }
  }
}

TEST(Tensor, StorageIsSharedAndReferenceCounted) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  std::weak_ptr<Storage> weak = a.storage();
  {
    Tensor view = Tensor::from_storage(a.storage(), 0, {4}, DType::f32);
    view.data<float>()[3] = 40;
    EXPECT_EQ(a.to_vector<float>()[3], 40);
    EXPECT_NE(view.id(), a.id());
    a = Tensor();
    EXPECT_FALSE(weak.expired());  // the view keeps the storage alive
  }
  EXPECT_TRUE(weak.expired());
}

TEST(Tensor, CloneIsDeep) {
  const Tensor a = Tensor::from_vector<int>({1, 2}, {2});
  const Tensor b = a.clone();
  b.data<int>()[0] = 7;
  EXPECT_EQ(a.to_vector<int>()[0], 1);
  EXPECT_EQ(b.to_vector<int>()[0], 7);
}

TEST(Tensor, ErrorsAreClear) {
  EXPECT_THROW(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), InvalidArgument);
  EXPECT_THROW(Tensor::empty({2, -1}), InvalidArgument);
  const Tensor t = Tensor::zeros({2}, DType::f32);
  try {
    (void)t.data<double>();
    FAIL() << "reading f32 as f64 must throw";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("f32"), std::string::npos);
  }
  EXPECT_THROW(Tensor::zeros({2, 2}).item(), InvalidArgument);
  EXPECT_THROW(Tensor::zeros({1}).to(Device::cuda(0)), Error);
}

TEST(Tensor, PrintsShapeDtypeAndValues) {
  const Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const std::string text = t.to_string();
  EXPECT_NE(text.find("shape=(2, 3)"), std::string::npos);
  EXPECT_NE(text.find("dtype=f32"), std::string::npos);
  EXPECT_NE(text.find("[[1, 2, 3],\n [4, 5, 6]]"), std::string::npos) << text;
  const Tensor big = Tensor::zeros({100});
  EXPECT_NE(big.to_string().find("..."), std::string::npos);
  EXPECT_NE(Tensor::scalar(2.5).to_string().find("2.5"), std::string::npos);
  EXPECT_EQ(Tensor().to_string(), "Tensor(undefined)");
  // 8-bit integers print as numbers, not characters.
  const std::string int8 = Tensor::from_vector<std::int8_t>({-128, 65, 127}, {3}).to_string();
  EXPECT_NE(int8.find("[-128, 65, 127]"), std::string::npos) << int8;
}

TEST(DType, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(bfloat16(-2.5f)), -2.5f);
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to the even one (1).
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, Float16ConvertsNormalsSubnormalsAndOverflow) {
  EXPECT_EQ(float16(1.0f).bits, 0x3C00);
  EXPECT_EQ(float16(-2.0f).bits, 0xC000);
  EXPECT_EQ(float16(65504.0f).bits, 0x7BFF);           // largest finite half
  EXPECT_EQ(float16(1e6f).bits, 0x7C00);               // overflow -> inf
  EXPECT_EQ(float16(5.9604645e-8f).bits, 0x0001);      // smallest subnormal
  EXPECT_EQ(static_cast<float>(float16(0.333251953125f)), 0.333251953125f);
  for (std::uint16_t bits : {0x0001, 0x03FF, 0x0400, 0x3555, 0x7BFF, 0x8001, 0xBC00}) {
    float16 half;
    half.bits = bits;
    EXPECT_EQ(float16(static_cast<float>(half)).bits, bits) << bits;
  }
}

TEST(DType, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("f32"), DType::f32);
  EXPECT_EQ(parse_dtype("int8"), DType::i8);
  EXPECT_EQ(dtype_name(DType::i8), std::string("i8"));
  EXPECT_EQ(dtype_size(DType::i8), 1u);
  EXPECT_THROW(parse_dtype("float128"), InvalidArgument);
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_THROW(Device::parse("tpu"), InvalidArgument);
}

}  // namespace
}  // namespace tandem
