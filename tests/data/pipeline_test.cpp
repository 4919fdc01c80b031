// The pipeline's stages: what each hands out, in which order, with which seeds, and that every
// thread they start is joined however a pass ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "data/idx_files.h"
#include "data/pipeline_node.h"
#include "support/errors.h"
#include "tandem/pipeline.h"

namespace tandem::data {
namespace {

using testing::error_of;
using testing::ScratchDir;

std::int64_t value_of(const Element& element, const std::string& key = "value") {
  return static_cast<std::int64_t>(element.at(key).item());
}

std::vector<std::int64_t> values(const Pipeline& pipeline, std::int64_t pass = 0) {
  std::vector<std::int64_t> result;
  for (const Element& element : pipeline.collect(pass))
    result.push_back(value_of(element));
  return result;
}

std::vector<std::int64_t> iota(std::int64_t count, std::int64_t start = 0) {
  std::vector<std::int64_t> result(static_cast<std::size_t>(count));
  std::iota(result.begin(), result.end(), start);
  return result;
}

// A map function that doubles "value", slowly for some elements so that parallel workers
// finish out of order.
MapFn doubling(std::chrono::microseconds slow_every_third = std::chrono::microseconds(0)) {
  return [slow_every_third](Element element) {
    const std::int64_t value = value_of(element);
    if (value % 3 == 0) std::this_thread::sleep_for(slow_every_third);
    element.set("value", Tensor::scalar(static_cast<double>(2 * value), DType::i64));
    return element;
  };
}

// ---- Sources ----

TEST(PipelineSources, TensorSlicesHandOutRowsWithTheirNames) {
  const Tensor images = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  const Tensor labels = Tensor::from_vector<std::int32_t>({7, 8, 9}, {3});
  const Pipeline pipeline = Pipeline::from_tensor_slices({{"image", images}, {"label", labels}});
  EXPECT_EQ(pipeline.cardinality(), 3);
  const std::vector<Element> elements = pipeline.collect();
  ASSERT_EQ(elements.size(), 3u);
  EXPECT_EQ(elements[1].at("image").to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(elements[1].at("image").shape(), (Shape{2}));
  EXPECT_EQ(elements[2].at("label").item(), 9.0);
  EXPECT_EQ(elements[0].signature(), "{image: f32 (2,), label: i32 ()}");
  EXPECT_NE(error_of([&] {
              Pipeline::from_tensor_slices({{"image", images}, {"label", Tensor::zeros({2})}});
            }).find("different numbers of elements"),
            std::string::npos);
}

TEST(PipelineSources, RangeGeneratorAndSynthetic) {
  EXPECT_EQ(values(Pipeline::range(5)), iota(5));
  int starts = 0;
  const Pipeline generated = Pipeline::from_generator([&starts] {
    ++starts;
    auto next = std::make_shared<std::int64_t>(0);
    return Pipeline::Generator([next]() -> std::optional<Element> {
      if (*next == 4) return std::nullopt;
      return Element{{"value", Tensor::scalar(static_cast<double>((*next)++), DType::i64)}};
    });
  });
  EXPECT_EQ(generated.cardinality(), kUnknownCardinality);
  EXPECT_EQ(values(generated), iota(4));
  EXPECT_EQ(values(generated), iota(4));
  EXPECT_EQ(starts, 2);  // once per pass
  const Pipeline synthetic = Pipeline::synthetic(
      {{"image", {4, 4, 3}, DType::u8, 0, 256}, {"label", {}, DType::i32, 0, 10}}, 50, 1);
  const std::vector<Element> elements = synthetic.collect();
  ASSERT_EQ(elements.size(), 50u);
  EXPECT_EQ(elements[7].at("image").shape(), (Shape{4, 4, 3}));
  const double label = elements[7].at("label").item();
  EXPECT_TRUE(label >= 0 && label < 10);
}

TEST(PipelineSources, ListFilesSortsAndRejectsPatternsThatMatchNothing) {
  ScratchDir dir;
  for (const char* name : {"b.rec", "a.rec", "c.txt"})
    testing::write_file(dir.file(name), {1});
  const std::vector<Element> files = Pipeline::list_files({dir.file("*.rec")}).collect();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].string("path"), dir.file("a.rec"));
  EXPECT_EQ(files[1].string("path"), dir.file("b.rec"));
  try {
    Pipeline::list_files({dir.file("*.none")});
    FAIL() << "no error";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("matches no file"), std::string::npos);
  }
}

// ---- map ----

TEST(PipelineMap, ParallelMapKeepsInputOrderByDefault) {
  for (const int threads : {1, 2, 4, kAutotune}) {
    const Pipeline mapped =
        Pipeline::range(40).map(doubling(std::chrono::microseconds(300)),
                                {.num_parallel_calls = threads, .name = "double"});
    std::vector<std::int64_t> expected = iota(40);
    for (std::int64_t& value : expected)
      value *= 2;
    EXPECT_EQ(values(mapped), expected) << "threads " << threads;
    EXPECT_EQ(mapped.cardinality(), 40);
  }
}

TEST(PipelineMap, NonDeterministicMapHandsOutEveryElementOnce) {
  const Pipeline mapped = Pipeline::range(60).map(
      doubling(std::chrono::microseconds(500)), {.num_parallel_calls = 3, .deterministic = false});
  std::vector<std::int64_t> got = values(mapped);
  std::sort(got.begin(), got.end());
  std::vector<std::int64_t> expected = iota(60);
  for (std::int64_t& value : expected)
    value *= 2;
  EXPECT_EQ(got, expected);
}

TEST(PipelineMap, AnErrorNamesTheStageAndTheElementAndArrivesInOrder) {
  for (const int threads : {1, 3}) {
    const Pipeline failing = Pipeline::range(10).map(
        [](Element element) {
          if (value_of(element) == 6) throw InvalidArgument("six is not welcome");
          return element;
        },
        {.num_parallel_calls = threads, .name = "picky"});
    ElementIterator iterator = failing.start();
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(value_of(*iterator.next()), i) << "threads " << threads;
    try {
      iterator.next();
      FAIL() << "no error";
    } catch (const InvalidArgument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("map(picky)"), std::string::npos) << message;
      EXPECT_NE(message.find("range, element 6"), std::string::npos) << message;
      EXPECT_NE(message.find("six is not welcome"), std::string::npos) << message;
    }
  }
}

TEST(PipelineMap, SkipDropsAndCountsFailingElements) {
  for (const int threads : {1, 2}) {
    const Pipeline skipping = Pipeline::range(10).map(
        [](Element element) {
          if (value_of(element) % 4 == 1) throw IoError("corrupt");
          return element;
        },
        {.num_parallel_calls = threads, .on_error = OnError::skip, .name = "check"});
    ElementIterator iterator = skipping.start();
    std::vector<std::int64_t> kept;
    while (std::optional<Element> element = iterator.next())
      kept.push_back(value_of(*element));
    EXPECT_EQ(kept, (std::vector<std::int64_t>{0, 2, 3, 4, 6, 7, 8}));
    const PipelineStats stats = iterator.stats();
    EXPECT_EQ(stats.skipped(), 3);
    EXPECT_NE(stats.skipped_summary().find("3 bad elements skipped; 3 in map(check)"),
              std::string::npos)
        << stats.skipped_summary();
    EXPECT_NE(stats.skipped_summary().find("corrupt"), std::string::npos);
  }
}

TEST(PipelineMap, FilterKeepsMatchingElements) {
  const Pipeline even =
      Pipeline::range(10).filter([](const Element& element) { return value_of(element) % 2 == 0; });
  EXPECT_EQ(values(even), (std::vector<std::int64_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(even.cardinality(), kUnknownCardinality);
}

// ---- shuffle ----

TEST(PipelineShuffle, EveryElementExactlyOncePerEpochForAnyBuffer) {
  for (const std::int64_t buffer : {1, 7, 100, 1000}) {
    const Pipeline shuffled = Pipeline::range(100).shuffle(buffer, 5);
    for (const std::int64_t epoch : {0, 1}) {
      std::vector<std::int64_t> got = values(shuffled, epoch);
      if (buffer == 1) EXPECT_EQ(got, iota(100));  // a one-element buffer cannot reorder
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, iota(100)) << "buffer " << buffer << " epoch " << epoch;
    }
  }
}

TEST(PipelineShuffle, SeedAndEpochDecideTheOrder) {
  const Pipeline shuffled = Pipeline::range(200).shuffle(200, 42);
  EXPECT_EQ(values(shuffled, 0), values(shuffled, 0));
  EXPECT_EQ(values(shuffled, 3), values(Pipeline::range(200).shuffle(200, 42), 3));
  EXPECT_NE(values(shuffled, 0), values(shuffled, 1));
  EXPECT_NE(values(shuffled, 0), iota(200));
  EXPECT_NE(values(shuffled, 0), values(Pipeline::range(200).shuffle(200, 43), 0));
  const Pipeline fixed = Pipeline::range(200).shuffle(200, 42, /*reshuffle_each_iteration=*/false);
  EXPECT_EQ(values(fixed, 0), values(fixed, 1));
}

TEST(PipelineShuffle, ASmallBufferOnlyMovesElementsSoFar) {
  // With a buffer of b, element i comes out no earlier than position i - b + 1.
  const std::vector<std::int64_t> got = values(Pipeline::range(100).shuffle(4, 9));
  for (std::size_t position = 0; position < got.size(); ++position)
    EXPECT_LE(got[position], static_cast<std::int64_t>(position) + 3);
}

// ---- reading by position ----

// Every batch of two passes: components (name, shape, type, bytes), origin and random key.
std::vector<std::string> batch_records(const Pipeline& pipeline) {
  std::vector<std::string> records;
  for (const std::int64_t pass : {0, 1}) {
    for (const Element& batch : pipeline.collect(pass)) {
      std::string record = batch.origin().str() + " key " + std::to_string(batch.random_key());
      for (const auto& [name, tensor] : batch) {
        const auto* bytes = static_cast<const char*>(tensor.raw_data());
        record += " " + name + " " + std::string(dtype_name(tensor.dtype())) +
                  shape_str(tensor.shape()) + " " + std::string(bytes, bytes + tensor.nbytes());
      }
      records.push_back(std::move(record));
    }
  }
  return records;
}

// A map that changes nothing, so the stages after it read element by element.
Pipeline in_order(const Pipeline& source) {
  return source.map([](Element element) { return element; }, {.name = "identity"});
}

// Each pipeline built on `source` by `stages`, against the same on a source read in order.
void expect_same_batches_by_position(const Pipeline& source) {
  const std::vector<std::pair<std::string, std::function<Pipeline(const Pipeline&)>>> chains{
      {"shuffle(all).batch(8)", [](const Pipeline& p) { return p.shuffle(1000, 3).batch(8); }},
      {"shuffle(count).batch(8, drop)",
       [](const Pipeline& p) { return p.shuffle(p.cardinality(), 4).batch(8, true); }},
      {"batch(9)", [](const Pipeline& p) { return p.batch(9); }},
      {"take(50).shuffle(50).batch(7)",
       [](const Pipeline& p) { return p.take(50).shuffle(50, 5).batch(7); }},
      {"skip(10).shuffle(all).batch(16)",
       [](const Pipeline& p) { return p.skip(10).shuffle(1000, 6).batch(16); }},
      {"shuffle(all, fixed).map.batch(8)",
       [](const Pipeline& p) {
         return in_order(p.shuffle(1000, 7, /*reshuffle_each_iteration=*/false)).batch(8);
       }},
      {"shuffle(10).batch(8)", [](const Pipeline& p) { return p.shuffle(10, 8).batch(8); }},
  };
  for (const auto& [name, chain] : chains) {
    EXPECT_EQ(batch_records(chain(source)), batch_records(chain(in_order(source)))) << name;
  }
}

// How many elements a pass of `pipeline` offers by position (nothing: it reads in order), and
// the same after one element was read in order.
std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>> offered_positions(
    const Pipeline& pipeline) {
  PassState state(PipelineOptions{}, 0);
  const PassContext context{&state, 0};
  const std::optional<std::int64_t> fresh =
      open_stream(*pipeline.node(), context, nullptr, 0)->positions();
  const std::unique_ptr<Stream> started = open_stream(*pipeline.node(), context, nullptr, 0);
  started->next();
  return {fresh, started->positions()};
}

TEST(PipelineByPosition, OfferedBySourcesInMemoryAndTheStagesThatKeepIt) {
  const Pipeline slices =
      Pipeline::from_tensor_slices({{"value", Tensor::from_vector<std::int64_t>(iota(20), {20})}});
  using Offered = std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>>;
  EXPECT_EQ(offered_positions(slices), Offered(20, std::nullopt));
  EXPECT_EQ(offered_positions(slices.shuffle(20, 1)), Offered(20, std::nullopt));
  EXPECT_EQ(offered_positions(slices.take(5)), Offered(5, std::nullopt));
  EXPECT_EQ(offered_positions(slices.skip(15)), Offered(5, std::nullopt));
  EXPECT_EQ(offered_positions(slices.skip(25)), Offered(0, std::nullopt));
  // A buffer smaller than the pass, a map, or a source read as it goes: in order only.
  EXPECT_EQ(offered_positions(slices.shuffle(19, 1)), Offered());
  EXPECT_EQ(offered_positions(in_order(slices)), Offered());
  EXPECT_EQ(offered_positions(Pipeline::range(20)), Offered());
}

TEST(PipelineByPosition, TensorSlicesBatchAsElementByElement) {
  const std::int64_t count = 103;
  std::vector<float> pixels(static_cast<std::size_t>(count * 6));
  std::iota(pixels.begin(), pixels.end(), 0.5f);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(count));
  std::iota(labels.begin(), labels.end(), 100);
  expect_same_batches_by_position(
      Pipeline::from_tensor_slices({{"image", Tensor::from_vector(pixels, {count, 3, 2})},
                                    {"label", Tensor::from_vector(labels, {count})}}));
}

TEST(PipelineByPosition, IdxFilesBatchAsElementByElement) {
  ScratchDir dir;
  testing::write_tiny_fashion_mnist(dir.path(), 97, 1);
  const IdxFiles files = fashion_mnist_files(dir.path().string(), "train");
  expect_same_batches_by_position(Pipeline::idx(files.images, files.labels, {.num_classes = 10}));
}

TEST(PipelineByPosition, AFullShuffleCountsWhatItHandsOutAndKeepsNoElement) {
  const Pipeline slices = Pipeline::from_tensor_slices(
      {{"value", Tensor::from_vector<std::int64_t>(iota(100), {100})}});
  ElementIterator iterator = slices.shuffle(100, 1).batch(30).start();
  std::int64_t batches = 0;
  while (iterator.next())
    ++batches;
  EXPECT_EQ(batches, 4);
  const PipelineStats stats = iterator.stats();
  ASSERT_EQ(stats.stages.size(), 3u);
  for (const std::int64_t stage : {0, 1}) {
    EXPECT_EQ(stats.stages[stage].elements, 100) << stats.stages[stage].name;
    EXPECT_EQ(stats.stages[stage].bytes, 100 * 8) << stats.stages[stage].name;
  }
  EXPECT_EQ(stats.stages[2].elements, 4);
  EXPECT_EQ(stats.stages[2].bytes, 100 * 8);
}

TEST(PipelineByPosition, LabelsOutOfRangeAreStillSkippedOrRaised) {
  ScratchDir dir;
  testing::write_file(dir.file("images"), testing::concat(testing::idx_header(0x08, {4, 1, 2}),
                                                          {0, 1, 10, 11, 20, 21, 30, 31}));
  testing::write_file(dir.file("labels"),
                      testing::concat(testing::idx_header(0x08, {4}), {1, 12, 3, 4}));
  const Pipeline skipping = Pipeline::idx(dir.file("images"), dir.file("labels"),
                                          {.num_classes = 10, .on_error = OnError::skip});
  ElementIterator iterator = skipping.shuffle(4, 2).batch(4).start();
  const std::optional<Element> batch = iterator.next();
  ASSERT_TRUE(batch.has_value());
  std::vector<std::int32_t> got = batch->at("label").to_vector<std::int32_t>();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::int32_t>{1, 3, 4}));
  EXPECT_EQ(iterator.stats().skipped(), 1);
  const Pipeline raising =
      Pipeline::idx(dir.file("images"), dir.file("labels"), {.num_classes = 10});
  try {
    raising.shuffle(4, 2).batch(2).collect();
    ADD_FAILURE() << "a label out of range was not raised";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("label 12 of element 1"), std::string::npos)
        << error.what();
  }
}

// ---- batch and padded_batch ----

TEST(PipelineBatch, StacksComponentsAndHandlesTheRemainder) {
  const Pipeline pairs = Pipeline::range(7).map([](Element element) {
    const double value = static_cast<double>(value_of(element));
    element.set("pair", Tensor::from_vector<float>(
                            {static_cast<float>(value), static_cast<float>(-value)}, {2}));
    return element;
  });
  const std::vector<Element> batches = pairs.batch(3).collect();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].at("pair").shape(), (Shape{3, 2}));
  EXPECT_EQ(batches[1].at("pair").to_vector<float>(), (std::vector<float>{3, -3, 4, -4, 5, -5}));
  EXPECT_EQ(batches[2].at("value").to_vector<std::int64_t>(), (std::vector<std::int64_t>{6}));
  EXPECT_EQ(pairs.batch(3).cardinality(), 3);
  EXPECT_EQ(pairs.batch(3, /*drop_remainder=*/true).collect().size(), 2u);
  EXPECT_EQ(pairs.batch(3, true).cardinality(), 2);
  EXPECT_EQ(pairs.batch(3).batch_size(), 3);
}

TEST(PipelineBatch, MismatchedShapesNameTheElementAndSuggestPaddedBatch) {
  const Pipeline ragged = Pipeline::range(3).map([](Element element) {
    element.set("tokens", Tensor::zeros({value_of(element) + 1}));
    return element;
  });
  const std::string message = error_of([&] { ragged.batch(3).collect(); });
  EXPECT_NE(message.find("batch(3): element 1 of the batch (range, element 1)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("padded_batch"), std::string::npos) << message;
}

TEST(PipelineBatch, PaddedBatchPadsToTheLongestOrToAGivenShape) {
  const Pipeline ragged = Pipeline::range(3).map([](Element element) {
    const std::int64_t length = value_of(element) + 1;
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(length),
                                     static_cast<std::int32_t>(length));
    element.set("tokens", Tensor::from_vector(tokens, {length}));
    return element;
  });
  const std::vector<Element> longest = ragged.padded_batch(3).collect();
  ASSERT_EQ(longest.size(), 1u);
  EXPECT_EQ(longest[0].at("tokens").shape(), (Shape{3, 3}));
  EXPECT_EQ(longest[0].at("tokens").to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{1, 0, 0, 2, 2, 0, 3, 3, 3}));
  const std::vector<Element> fixed =
      ragged
          .padded_batch(2, {.padded_shapes = {{"tokens", {5}}}, .padding_values = {{"tokens", -1}}})
          .collect();
  ASSERT_EQ(fixed.size(), 2u);
  EXPECT_EQ(fixed[0].at("tokens").to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{1, -1, -1, -1, -1, 2, 2, -1, -1, -1}));
  EXPECT_NE(error_of([&] {
              ragged.padded_batch(3, {.padded_shapes = {{"tokens", {2}}}}).collect();
            }).find("does not fit the padded shape (2,)"),
            std::string::npos);
}

// ---- take, skip, shard, repeat ----

TEST(PipelineSlicing, TakeSkipAndRepeat) {
  EXPECT_EQ(values(Pipeline::range(10).take(3)), iota(3));
  EXPECT_EQ(values(Pipeline::range(10).skip(7)), iota(3, 7));
  EXPECT_EQ(values(Pipeline::range(10).skip(20)), std::vector<std::int64_t>{});
  EXPECT_EQ(Pipeline::range(10).take(3).cardinality(), 3);
  EXPECT_EQ(Pipeline::range(10).skip(4).cardinality(), 6);
  std::vector<std::int64_t> twice = iota(3);
  twice.insert(twice.end(), twice.begin(), twice.end());
  EXPECT_EQ(values(Pipeline::range(3).repeat(2)), twice);
  EXPECT_EQ(Pipeline::range(3).repeat(2).cardinality(), 6);
  EXPECT_EQ(Pipeline::range(3).repeat().cardinality(), kInfiniteCardinality);
  EXPECT_EQ(values(Pipeline::range(3).repeat().take(7)).size(), 7u);
  // Repeating nothing forever ends instead of spinning.
  EXPECT_TRUE(values(Pipeline::range(0).repeat().take(5)).empty());
}

// A count taken once declares the cardinality of a source that does not know it; a pass that
// yields another number is an error naming the source.
TEST(PipelineSlicing, AssertCardinalityDeclaresACountAndChecksIt) {
  auto produced = std::make_shared<std::int64_t>(4);
  const Pipeline unknown = Pipeline::from_generator([produced] {
    return [produced, next = std::int64_t{0}]() mutable -> std::optional<Element> {
      if (next == *produced) return std::nullopt;
      return Element({{"value", Tensor::scalar(static_cast<double>(next++), DType::i64)}});
    };
  });
  ASSERT_EQ(unknown.cardinality(), kUnknownCardinality);
  const Pipeline counted = unknown.assert_cardinality(4);
  EXPECT_EQ(counted.cardinality(), 4);
  EXPECT_EQ(counted.batch(3).cardinality(), 2);
  EXPECT_EQ(values(counted), iota(4));
  *produced = 3;
  EXPECT_NE(
      error_of([&] { values(counted); }).find("counted as 4 elements, but a pass ended after 3"),
      std::string::npos);
  *produced = 5;
  EXPECT_NE(error_of([&] { values(counted); }).find("yields more"), std::string::npos);
  EXPECT_NE(error_of([] { Pipeline::range(3).assert_cardinality(4); }).find("has 3 elements"),
            std::string::npos);
}

TEST(PipelineSlicing, RepeatReshufflesEveryRepetition) {
  const std::vector<std::int64_t> got = values(Pipeline::range(50).shuffle(50, 3).repeat(2));
  const std::vector<std::int64_t> first(got.begin(), got.begin() + 50);
  const std::vector<std::int64_t> second(got.begin() + 50, got.end());
  EXPECT_NE(first, second);
  std::vector<std::int64_t> sorted = second;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(50));
}

TEST(PipelineSlicing, ShardsPartitionTheDataExactly) {
  for (const std::int64_t shards : {1, 3, 4, 11}) {
    std::multiset<std::int64_t> seen;
    std::int64_t total_cardinality = 0;
    for (std::int64_t index = 0; index < shards; ++index) {
      const Pipeline shard = Pipeline::range(10).shard(shards, index);
      const std::vector<std::int64_t> got = values(shard);
      EXPECT_EQ(static_cast<std::int64_t>(got.size()), shard.cardinality());
      for (const std::int64_t value : got) {
        EXPECT_EQ(value % shards, index);
        seen.insert(value);
      }
      total_cardinality += shard.cardinality();
    }
    EXPECT_EQ(std::vector<std::int64_t>(seen.begin(), seen.end()), iota(10)) << shards;
    EXPECT_EQ(total_cardinality, 10);
  }
  EXPECT_NE(error_of([] { Pipeline::range(4).shard(2, 2); }).find("0 <= index < num_shards"),
            std::string::npos);
}

// ---- prefetch ----

TEST(PipelinePrefetch, KeepsOrderAndBuffersAhead) {
  std::atomic<int> produced{0};
  const Pipeline counted = Pipeline::range(20).map([&produced](Element element) {
    ++produced;
    return element;
  });
  for (const int depth : {1, 4, kAutotune}) {
    produced = 0;
    EXPECT_EQ(values(counted.prefetch(depth)), iota(20));
  }
  produced = 0;
  ElementIterator iterator = counted.prefetch(4).start();
  ASSERT_TRUE(iterator.next());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (produced < 6 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // One taken, four waiting, one made and held until there is room.
  EXPECT_EQ(produced.load(), 6);
  EXPECT_EQ(iterator.stats().stages.back().buffer, 4);
}

TEST(PipelinePrefetch, StoppingEarlyJoinsEveryThread) {
  // An endless, multi-threaded pipeline abandoned after a few elements: destroying the
  // iterator (here, through take) must stop the map workers and the prefetch thread.
  const Pipeline endless =
      Pipeline::range(1)
          .repeat()
          .map(doubling(), {.num_parallel_calls = 3})
          .prefetch(8)
          .interleave([](const Element&) { return Pipeline::range(1000).prefetch(2); },
                      {.cycle_length = 2, .num_parallel_calls = 2})
          .prefetch(kAutotune);
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 20; ++round) {
    EXPECT_EQ(values(endless.take(5)).size(), 5u);
    ElementIterator abandoned = endless.start();
    abandoned.next();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// ---- cache ----

TEST(PipelineCache, MemoryCacheReplaysTheFirstPassWithoutRunningItsInput) {
  std::atomic<int> calls{0};
  const Pipeline cached = Pipeline::range(30)
                              .map([&calls](Element element) {
                                ++calls;
                                return element;
                              })
                              .shuffle(30, 1)
                              .cache();
  const std::vector<std::int64_t> first = values(cached, 0);
  EXPECT_EQ(calls.load(), 30);
  EXPECT_EQ(values(cached, 1), first);  // identical data, even though the shuffle would differ
  EXPECT_EQ(calls.load(), 30);
  // Shuffling after the cache reshuffles the cached elements.
  const Pipeline reshuffled = cached.shuffle(30, 2);
  EXPECT_NE(values(reshuffled, 2), values(reshuffled, 3));
  EXPECT_EQ(calls.load(), 30);
}

TEST(PipelineCache, APartialPassLeavesNoCache) {
  std::atomic<int> calls{0};
  const Pipeline cached = Pipeline::range(10)
                              .map([&calls](Element element) {
                                ++calls;
                                return element;
                              })
                              .cache();
  EXPECT_EQ(values(cached.take(3)).size(), 3u);
  EXPECT_EQ(values(cached), iota(10));
  EXPECT_EQ(values(cached), iota(10));
  EXPECT_EQ(calls.load(), 3 + 10);
}

TEST(PipelineCache, FileCacheIsReusedByALaterRunAndRefusedByAnotherPipeline) {
  ScratchDir dir;
  const std::string path = dir.file("cache.bin");
  std::atomic<int> calls{0};
  auto build = [&](std::int64_t count) {
    return Pipeline::range(count)
        .map(
            [&calls](Element element) {
              ++calls;
              element.set("square",
                          Tensor::scalar(static_cast<double>(value_of(element) * value_of(element)),
                                         DType::f32));
              return element;
            },
            {.name = "square"})
        .cache(path);
  };
  const std::vector<Element> first = build(12).collect();
  EXPECT_EQ(calls.load(), 12);
  ASSERT_TRUE(std::filesystem::exists(path));
  // A new pipeline object, as a later run would build: it reads the file instead.
  const std::vector<Element> second = build(12).collect(1);
  EXPECT_EQ(calls.load(), 12);
  ASSERT_EQ(second.size(), first.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(second[i].signature(), first[i].signature());
    EXPECT_EQ(value_of(second[i]), value_of(first[i]));
    EXPECT_EQ(second[i].at("square").item(), first[i].at("square").item());
    EXPECT_EQ(second[i].origin().str(), first[i].origin().str());
  }
  try {
    build(13).collect();
    FAIL() << "no error";
  } catch (const IoError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("written by a different pipeline"), std::string::npos) << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
  }
  // A pass cut short leaves no file behind.
  const std::string partial = dir.file("partial.bin");
  EXPECT_EQ(values(Pipeline::range(10).cache(partial).take(2)).size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(partial));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
}

// ---- interleave ----

Pipeline blocks_of_ten(const Element& element) {
  // Input element v opens a pipeline of v*10, v*10+1, ..., v*10+(v+1): lengths differ.
  const std::int64_t base = value_of(element) * 10;
  return Pipeline::range(value_of(element) + 2).map([base](Element inner) {
    inner.set("value", Tensor::scalar(static_cast<double>(base + value_of(inner)), DType::i64));
    return inner;
  });
}

TEST(PipelineInterleave, CyclesThroughInputsAsTfDataDoes) {
  // cycle 2, block 2 over inputs 0 (2 elements), 1 (3), 2 (4), in tf.data's order
  // (InterleaveDatasetOp): a block moves on after block_length elements; an input that ends
  // moves on to the next slot, and its own slot takes the next input when next visited.
  const Pipeline interleaved =
      Pipeline::range(3).interleave(blocks_of_ten, {.cycle_length = 2, .block_length = 2});
  EXPECT_EQ(values(interleaved), (std::vector<std::int64_t>{0, 1, 10, 11, 12, 20, 21, 22, 23}));
  EXPECT_EQ(interleaved.cardinality(), kUnknownCardinality);
}

TEST(PipelineInterleave, ParallelReadingGivesTheSameOrderOrEveryElementOnce) {
  const Pipeline sequential =
      Pipeline::range(6).interleave(blocks_of_ten, {.cycle_length = 3, .block_length = 2});
  const Pipeline parallel = Pipeline::range(6).interleave(
      blocks_of_ten, {.cycle_length = 3, .block_length = 2, .num_parallel_calls = 3});
  EXPECT_EQ(values(parallel), values(sequential));
  const Pipeline any_order = Pipeline::range(6).interleave(
      blocks_of_ten,
      {.cycle_length = 3, .block_length = 2, .num_parallel_calls = 3, .deterministic = false});
  std::vector<std::int64_t> got = values(any_order);
  std::vector<std::int64_t> expected = values(sequential);
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(got, expected);
}

// ---- statistics and autotune ----

TEST(PipelineStatistics, CountElementsBytesAndTime) {
  const Pipeline pipeline = Pipeline::range(100)
                                .map(
                                    [](Element element) {
                                      std::this_thread::sleep_for(std::chrono::microseconds(200));
                                      return element;
                                    },
                                    {.name = "slow"})
                                .batch(10)
                                .prefetch(2);
  ElementIterator iterator = pipeline.start();
  while (iterator.next()) {
  }
  const PipelineStats stats = iterator.stats();
  ASSERT_EQ(stats.stages.size(), 4u);
  EXPECT_EQ(stats.stages[0].name, "range(100)");
  EXPECT_EQ(stats.stages[1].name, "map(slow)");
  EXPECT_EQ(stats.stages[2].name, "batch(10)");
  EXPECT_EQ(stats.stages[3].name, "prefetch(2)");
  EXPECT_EQ(stats.stages[0].elements, 100);
  EXPECT_EQ(stats.stages[2].elements, 10);
  EXPECT_EQ(stats.stages[2].bytes, 100 * 8);
  // 100 sleeps of 200 us: the map's own time, not its input's.
  EXPECT_GE(stats.stages[1].busy_seconds, 0.02);
  EXPECT_LT(stats.stages[0].busy_seconds, stats.stages[1].busy_seconds);
  EXPECT_NE(stats.table().find("map(slow)"), std::string::npos);
  EXPECT_NE(stats.advice().find("give map(slow) more threads"), std::string::npos)
      << stats.advice();
  // Without a prefetch at the end, that is the first thing to add.
  ElementIterator bare = Pipeline::range(10).batch(2).start();
  while (bare.next()) {
  }
  EXPECT_NE(bare.stats().advice().find("add .prefetch(data::kAutotune)"), std::string::npos);
  // Slow work after the last prefetch runs on the consumer's thread.
  ElementIterator late = Pipeline::range(20)
                             .prefetch(2)
                             .map(
                                 [](Element element) {
                                   std::this_thread::sleep_for(std::chrono::microseconds(500));
                                   return element;
                                 },
                                 {.name = "late"})
                             .start();
  while (late.next()) {
  }
  EXPECT_NE(late.stats().advice().find("map(late) runs on the training thread, after the last "
                                       "prefetch"),
            std::string::npos)
      << late.stats().advice();
}

TEST(PipelineStatistics, AMapThatHasTheWholeBudgetIsToldToCacheOrDecodeLess) {
  ElementIterator iterator = Pipeline::range(40)
                                 .map(
                                     [](Element element) {
                                       std::this_thread::sleep_for(std::chrono::microseconds(500));
                                       return element;
                                     },
                                     {.num_parallel_calls = 2, .name = "decode"})
                                 .batch(4)
                                 .prefetch(2)
                                 .with_options({.cpu_budget = 2})
                                 .start();
  while (iterator.next()) {
  }
  const std::string advice = iterator.stats().advice();
  for (const char* part : {"map(decode)", "already uses all 2 threads of the CPU budget",
                           "cache() its output", "random_resized_crop decodes only the crop"})
    EXPECT_NE(advice.find(part), std::string::npos) << part << " not in: " << advice;
}

TEST(PipelineStatistics, ASlowSourceIsToldToReadFilesInParallelOrCache) {
  const Pipeline slow_source = Pipeline::from_generator([] {
    auto next = std::make_shared<std::int64_t>(0);
    return Pipeline::Generator([next]() -> std::optional<Element> {
      if (*next == 40) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      return Element{{"value", Tensor::scalar(static_cast<double>((*next)++), DType::i64)}};
    });
  });
  ElementIterator iterator = slow_source.batch(4).prefetch(2).start();
  while (iterator.next()) {
  }
  const std::string advice = iterator.stats().advice();
  for (const char* part :
       {"reading is the bottleneck (generator", "interleave(", "cache() the data"})
    EXPECT_NE(advice.find(part), std::string::npos) << part << " not in: " << advice;
}

// Data in memory is not read during the pass: neither interleave nor cache() would help.
TEST(PipelineStatistics, ASourceInMemoryIsNotToldToReadInParallelOrCache) {
  PipelineStats stats;
  for (const auto& [name, busy] : std::vector<std::pair<std::string, double>>{
           {"idx", 0.5}, {"shuffle(60000)", 0.1}, {"batch(128)", 0.2}, {"prefetch(autotune)", 0}})
    stats.stages.push_back({.name = name, .busy_seconds = busy});
  const std::string advice = stats.advice();
  EXPECT_NE(advice.find("none in the pipeline: idx holds its examples in memory and does 62%"),
            std::string::npos)
      << advice;
  EXPECT_EQ(advice.find("interleave("), std::string::npos) << advice;
}

TEST(PipelineAutotune, RaisesTheParallelismOfASlowMapWithinTheBudget) {
  const Pipeline pipeline = Pipeline::range(400)
                                .map(
                                    [](Element element) {
                                      // Waiting, not computing: threads help even on a busy
                                      // machine.
                                      std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                      return element;
                                    },
                                    {.num_parallel_calls = kAutotune, .name = "sleepy"})
                                .prefetch(kAutotune)
                                .with_options({.cpu_budget = 4});
  ElementIterator iterator = pipeline.start();
  int max_parallelism = 1;
  while (iterator.next())
    max_parallelism = std::max(max_parallelism, iterator.stats().stages[1].parallelism);
  EXPECT_GE(max_parallelism, 3);
  EXPECT_LE(max_parallelism, 4);
  EXPECT_TRUE(iterator.stats().stages[1].autotuned);
}

TEST(PipelineAutotune, DeepensAPrefetchThatRunsDryInBurstsWithinTheRamBudget) {
  // Every 8th element comes after a 24 ms stall, the others at once: the producer keeps up on
  // average (3 ms an element against the consumer's 4 ms), but a 2-deep buffer runs dry at
  // every stall. The autotuner deepens it, as far as the RAM budget allows.
  const Pipeline bursty = Pipeline::range(240)
                              .map([](Element element) {
                                if (value_of(element) % 8 == 7)
                                  std::this_thread::sleep_for(std::chrono::milliseconds(24));
                                return element;
                              })
                              .prefetch(kAutotune);
  const auto deepest = [](const Pipeline& pipeline) {
    ElementIterator iterator = pipeline.start();
    int depth = 0;
    while (iterator.next()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(4));
      depth = std::max(depth, iterator.stats().stages.back().buffer);
    }
    EXPECT_TRUE(iterator.stats().stages.back().autotuned);
    return depth;
  };
  EXPECT_GT(deepest(bursty), 2);
  // Elements of 8 bytes (one i64) and a budget of 24 bytes: at most 3 held.
  EXPECT_LE(deepest(bursty.with_options({.ram_budget = 24})), 3);
}

// ---- data::Dataset ----

TEST(PipelineDataset, BatchesFeedModelFitThroughTheKeys) {
  const Tensor images = Tensor::from_vector<float>(std::vector<float>(10 * 4, 0.5f), {10, 4});
  const Tensor labels = Tensor::from_vector<std::int32_t>(std::vector<std::int32_t>(10, 1), {10});
  const Pipeline batches =
      Pipeline::from_tensor_slices({{"image", images}, {"label", labels}}).batch(4);
  EXPECT_EQ(batches.num_batches(), 3);
  EXPECT_EQ(batches.num_examples(), 10);
  EXPECT_EQ(batches.batch_size(), 4);
  auto iterator = batches.iterate(0);
  std::optional<Batch> batch = iterator->next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->features.shape(), (Shape{4, 4}));
  EXPECT_EQ(batch->labels.shape(), (Shape{4}));
  // Other names need with_keys.
  const Pipeline renamed = Pipeline::from_tensor_slices({{"x", images}, {"y", labels}}).batch(5);
  EXPECT_NE(error_of([&] { renamed.iterate(0)->next(); }).find("with_keys"), std::string::npos);
  EXPECT_EQ(renamed.with_keys("x", "y").iterate(0)->next()->features.shape(), (Shape{5, 4}));
  // Unbatched pipelines and endless ones are refused with the fix.
  EXPECT_NE(error_of([&] { Pipeline::range(3).iterate(0); }).find("add .batch(N)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Pipeline::range(3).repeat().batch(2).num_batches(); }).find("take(N)"),
            std::string::npos);
  // An unknown length is counted once.
  const Pipeline filtered =
      Pipeline::range(10).filter([](const Element& e) { return value_of(e) < 7; }).batch(2);
  EXPECT_EQ(filtered.num_batches(), 4);
}

TEST(PipelineArguments, BadArgumentsAreRefusedWithTheFix) {
  EXPECT_NE(error_of([] { Pipeline::range(3).batch(0); }).find("size must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([] { Pipeline::range(3).shuffle(0, 1); }).find("buffer_size must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([] { Pipeline::range(3).prefetch(0); }).find("kAutotune"), std::string::npos);
  EXPECT_NE(error_of([] {
              Pipeline::range(3).map(doubling(), {.num_parallel_calls = 0});
            }).find("num_parallel_calls"),
            std::string::npos);
  EXPECT_NE(error_of([] { Pipeline::range(3).take(-2); }).find("take"), std::string::npos);
  EXPECT_NE(
      error_of([] { Pipeline::range(3).with_options({.cpu_budget = -1}); }).find("cpu_budget"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              Pipeline::range(2).collect().front().at("nope");
            }).find("no component 'nope'; it has value"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::data
