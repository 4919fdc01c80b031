#pragma once
// Factories for the stage and source nodes, implemented in stages.cpp, parallel_map.cpp,
// interleave.cpp, cache.cpp, sources.cpp and the reader files.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/pipeline_node.h"
#include "tandem/pipeline.h"

namespace tandem::data {

using NodePtr = std::shared_ptr<const Node>;

// Sources.
NodePtr make_tensor_slices_node(const Element& columns);
NodePtr make_range_node(std::int64_t count);
NodePtr make_generator_node(std::function<Pipeline::Generator()> start, std::int64_t count);
NodePtr make_synthetic_node(std::vector<SyntheticComponent> components, std::int64_t count,
                            std::uint64_t seed);
NodePtr make_list_files_node(std::vector<std::string> patterns);
NodePtr make_idx_node(const std::string& images_path, const std::string& labels_path,
                      const IdxOptions& options);
NodePtr make_cifar10_node(std::vector<std::string> files, const ReaderOptions& options);
NodePtr make_tfrecord_node(std::vector<std::string> files, const ReaderOptions& options);
NodePtr make_image_folder_node(const std::string& root, const ImageFolderOptions& options);

// Stages.
NodePtr make_map_node(NodePtr input, MapFn fn, MapOptions options);
NodePtr make_filter_node(NodePtr input, Predicate keep, std::string name);
NodePtr make_shuffle_node(NodePtr input, std::int64_t buffer_size, std::uint64_t seed,
                          bool reshuffle_each_iteration);
NodePtr make_batch_node(NodePtr input, std::int64_t size, bool drop_remainder);
NodePtr make_padded_batch_node(NodePtr input, std::int64_t size, PaddedBatchOptions options);
NodePtr make_prefetch_node(NodePtr input, int buffer_size);
NodePtr make_cache_node(NodePtr input, std::string path);
NodePtr make_repeat_node(NodePtr input, std::int64_t count);
NodePtr make_take_node(NodePtr input, std::int64_t count);
NodePtr make_assert_cardinality_node(NodePtr input, std::int64_t count);
NodePtr make_skip_node(NodePtr input, std::int64_t count);
NodePtr make_shard_node(NodePtr input, std::int64_t num_shards, std::int64_t index);
NodePtr make_interleave_node(NodePtr input, std::function<Pipeline(const Element&)> open,
                             InterleaveOptions options);

// Shared by the sources: element `index` of a source has random key
// mix_keys(stream_key(pass, source), index); the stream key is computed once per pass and file.
std::uint64_t stream_key(std::uint64_t pass, const std::string& source);

}  // namespace tandem::data
