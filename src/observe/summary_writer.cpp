// SummaryWriter: TensorBoard's Event protos (src/observe/proto, compiled by protoc) for scalars,
// histograms, images, text and HParams sessions, written through an EventFile.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>

#include "observe/event_file.h"
#include "observe/histogram.h"
#include "observe/proto/event.pb.h"
#include "observe/proto/hparams.pb.h"
#include "tandem/image.h"
#include "tandem/observe.h"
#include "tandem/ops.h"

namespace tandem::observe {
namespace {

namespace pb = tandem::tensorboard;

// Plugin names and versions that TensorBoard's plugins look for in SummaryMetadata.
constexpr const char* kTextPlugin = "text";
constexpr const char* kHParamsPlugin = "hparams";
constexpr const char* kSessionStartTag = "_hparams_/session_start_info";
constexpr const char* kSessionEndTag = "_hparams_/session_end_info";
constexpr const char* kFileVersion = "brain.Event:2";

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The images of `images` as (N, H, W, C) u8 on the host: floating values in [0, 1] are scaled
// to 0..255 (clipped, rounded), as tf.summary.image does.
Tensor images_as_u8(const std::string& tag, const Tensor& images) {
  if (!images.defined() || (images.rank() != 3 && images.rank() != 4)) {
    throw InvalidArgument("SummaryWriter::add_image('" + tag +
                          "'): expects an image (H, W, C) or a batch (N, H, W, C), got " +
                          (images.defined() ? shape_str(images.shape()) : "an undefined tensor"));
  }
  Tensor batch = images.to(Device::cpu());
  if (batch.rank() == 3) {
    Shape shape = batch.shape();
    shape.insert(shape.begin(), 1);
    batch = reshape(batch, shape);
  }
  const std::int64_t channels = batch.dim(3);
  if (channels != 1 && channels != 3 && channels != 4) {
    throw InvalidArgument("SummaryWriter::add_image('" + tag + "'): images " +
                          shape_str(images.shape()) + " have " + std::to_string(channels) +
                          " channels; give 1 (grey), 3 (RGB) or 4 (RGBA)");
  }
  if (batch.dtype() == DType::u8) return batch;
  if (!is_floating(batch.dtype())) {
    throw InvalidArgument("SummaryWriter::add_image('" + tag + "'): images must be u8 or " +
                          "floating in [0, 1], got " + dtype_name(batch.dtype()));
  }
  const std::vector<double> values = batch.to_vector<double>();
  std::vector<std::uint8_t> pixels(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double scaled = std::isfinite(values[i]) ? values[i] * 255.0 : 0.0;
    pixels[i] = static_cast<std::uint8_t>(std::lround(std::clamp(scaled, 0.0, 255.0)));
  }
  return Tensor::from_vector(pixels, batch.shape());
}

// The rows of (N, H, W, C) `batch` from `index` as an (H, W, C) tensor.
Tensor image_at(const Tensor& batch, std::int64_t index) {
  const Shape shape(batch.shape().begin() + 1, batch.shape().end());
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape));
  return Tensor::from_storage(batch.storage(), batch.storage_offset() + index * bytes, shape,
                              DType::u8);
}

}  // namespace

struct SummaryWriter::Impl {
  std::string log_dir;
  std::unique_ptr<EventFile> file;
  std::shared_ptr<LogGuard> guard;  // null: failures throw

  // Runs `call` on the file, through the guard when there is one. Once the guard has stopped
  // (by this writer's failure or another's), the file is abandoned: the failure was reported.
  void on_file(const std::function<void()>& call) {
    if (!guard) return call();
    if (!guard->stopped()) guard->run(call);
    if (guard->stopped()) file->abandon();
  }

  void write(pb::Event& event, std::optional<double> wall_time = std::nullopt) {
    event.set_wall_time(wall_time.value_or(unix_seconds()));
    std::string serialized;
    event.SerializeToString(&serialized);
    on_file([&] { file->append(serialized); });
  }

  // An Event holding one Summary.Value, ready for its payload.
  static pb::Summary::Value* value_of(pb::Event& event, const std::string& tag, std::int64_t step) {
    event.set_step(step);
    pb::Summary::Value* value = event.mutable_summary()->add_value();
    value->set_tag(tag);
    return value;
  }

  void write_hparams(const char* tag, const pb::hparams::HParamsPluginData& data) {
    pb::Event event;
    pb::Summary::Value* value = value_of(event, tag, 0);
    pb::SummaryMetadata::PluginData* plugin = value->mutable_metadata()->mutable_plugin_data();
    plugin->set_plugin_name(kHParamsPlugin);
    plugin->set_content(data.SerializeAsString());
    // The plugin's records carry an empty float tensor of shape (0,), as TensorBoard's own.
    pb::TensorProto* tensor = value->mutable_tensor();
    tensor->set_dtype(pb::DT_FLOAT);
    tensor->mutable_tensor_shape()->add_dim()->set_size(0);
    write(event);
  }
};

SummaryWriter::SummaryWriter(const std::string& log_dir, SummaryWriterOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (log_dir.empty()) {
    throw InvalidArgument("SummaryWriter: log_dir is empty; give the folder for the event file");
  }
  if (!(options.flush_seconds > 0.0) || !std::isfinite(options.flush_seconds)) {
    throw InvalidArgument(
        "SummaryWriter: flush_seconds must be a positive number of seconds, got " +
        std::to_string(options.flush_seconds));
  }
  std::error_code error;
  std::filesystem::create_directories(log_dir, error);
  if (error || !std::filesystem::is_directory(log_dir)) {
    throw IoError("cannot create the log folder " + log_dir + ": " +
                  (error ? error.message() : std::string("a file of that name exists")) +
                  "; choose another --logdir or fix its permissions");
  }
  impl_->log_dir = log_dir;
  impl_->guard = std::move(options.guard);
  impl_->file = std::make_unique<EventFile>(log_dir, options.filename_suffix, options.flush_seconds,
                                            options.max_pending_bytes);
  pb::Event header;
  header.set_file_version(kFileVersion);
  impl_->write(header);
}

SummaryWriter::~SummaryWriter() {
  // With a guard, a failed last write is reported like any other; without one, the event file's
  // destructor warns.
  if (impl_->guard) impl_->on_file([&] { impl_->file->close(); });
}

void SummaryWriter::add_scalar(const std::string& tag, double value, std::int64_t step,
                               std::optional<double> wall_time) {
  pb::Event event;
  Impl::value_of(event, tag, step)->set_simple_value(static_cast<float>(value));
  impl_->write(event, wall_time);
}

void SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, std::int64_t step,
                                  int buckets) {
  if (!values.defined()) {
    throw InvalidArgument("SummaryWriter::add_histogram('" + tag + "'): the tensor is undefined");
  }
  if (buckets < 1) {
    throw InvalidArgument("SummaryWriter::add_histogram('" + tag +
                          "'): buckets must be positive, got " + std::to_string(buckets));
  }
  const Histogram histogram = make_histogram(values.to_vector<double>(), buckets);
  pb::Event event;
  pb::HistogramProto* proto = Impl::value_of(event, tag, step)->mutable_histo();
  proto->set_min(histogram.min);
  proto->set_max(histogram.max);
  proto->set_num(histogram.count);
  proto->set_sum(histogram.sum);
  proto->set_sum_squares(histogram.sum_squares);
  for (std::size_t i = 0; i < histogram.bucket_counts.size(); ++i) {
    proto->add_bucket_limit(histogram.bucket_limits[i]);
    proto->add_bucket(histogram.bucket_counts[i]);
  }
  impl_->write(event);
}

void SummaryWriter::add_image(const std::string& tag, const Tensor& images, std::int64_t step,
                              int max_images) {
  if (max_images < 1) {
    throw InvalidArgument("SummaryWriter::add_image('" + tag +
                          "'): max_images must be positive, got " + std::to_string(max_images));
  }
  const bool single = images.defined() && images.rank() == 3;
  const Tensor batch = images_as_u8(tag, images);  // (N, H, W, C) u8
  const std::int64_t count = std::min<std::int64_t>(batch.dim(0), max_images);
  pb::Event event;
  event.set_step(step);
  for (std::int64_t i = 0; i < count; ++i) {
    const Tensor image = image_at(batch, i);  // (H, W, C)
    const Tensor png = image::encode_png(image);
    pb::Summary::Value* value = event.mutable_summary()->add_value();
    value->set_tag(single ? tag : tag + "/image/" + std::to_string(i));
    pb::Summary::Image* proto = value->mutable_image();
    proto->set_height(static_cast<int>(image.dim(0)));
    proto->set_width(static_cast<int>(image.dim(1)));
    proto->set_colorspace(static_cast<int>(image.dim(2)));
    proto->set_encoded_image_string(static_cast<const char*>(png.raw_data()),
                                    static_cast<std::size_t>(png.numel()));
  }
  impl_->write(event);
}

void SummaryWriter::add_text(const std::string& tag, const std::string& markdown,
                             std::int64_t step) {
  pb::Event event;
  pb::Summary::Value* value = Impl::value_of(event, tag, step);
  // The text plugin's content is its TextPluginData at version 0, which serialises to nothing.
  value->mutable_metadata()->mutable_plugin_data()->set_plugin_name(kTextPlugin);
  pb::TensorProto* tensor = value->mutable_tensor();
  tensor->set_dtype(pb::DT_STRING);
  tensor->mutable_tensor_shape();  // a scalar: no dimensions
  tensor->add_string_val(markdown);
  impl_->write(event);
}

void SummaryWriter::add_hparams_session_start(const HParams& hparams,
                                              const std::string& group_name) {
  pb::hparams::HParamsPluginData data;
  pb::hparams::SessionStartInfo* start = data.mutable_session_start_info();
  for (const auto& [name, value] : hparams) {
    google::protobuf::Value& entry = (*start->mutable_hparams())[name];
    if (const double* number = std::get_if<double>(&value)) {
      entry.set_number_value(*number);
    } else if (const bool* flag = std::get_if<bool>(&value)) {
      entry.set_bool_value(*flag);
    } else {
      entry.set_string_value(std::get<std::string>(value));
    }
  }
  start->set_group_name(group_name);
  start->set_start_time_secs(unix_seconds());
  impl_->write_hparams(kSessionStartTag, data);
}

void SummaryWriter::add_hparams_session_end(SessionStatus status) {
  pb::hparams::HParamsPluginData data;
  pb::hparams::SessionEndInfo* end = data.mutable_session_end_info();
  switch (status) {
    case SessionStatus::success:
      end->set_status(pb::hparams::STATUS_SUCCESS);
      break;
    case SessionStatus::failure:
      end->set_status(pb::hparams::STATUS_FAILURE);
      break;
    case SessionStatus::running:
      end->set_status(pb::hparams::STATUS_RUNNING);
      break;
  }
  end->set_end_time_secs(unix_seconds());
  impl_->write_hparams(kSessionEndTag, data);
}

void SummaryWriter::flush() {
  impl_->on_file([&] { impl_->file->flush(); });
}

void SummaryWriter::close() {
  impl_->on_file([&] { impl_->file->close(); });
}

const std::string& SummaryWriter::log_dir() const {
  return impl_->log_dir;
}

const std::string& SummaryWriter::path() const {
  return impl_->file->path();
}

}  // namespace tandem::observe
