#include "io/hdf5_file.h"

#include <hdf5.h>

#include <cstring>
#include <utility>

#include "tandem/error.h"
#include "tandem/ops.h"

namespace tandem::io::detail {
namespace {

// libhdf5 prints its own error stack to stderr by default; Tandem reports the failure itself.
void silence_hdf5() {
  static const bool silenced = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)silenced;
}

// Closes an HDF5 identifier with its own close function when it goes out of scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// A file access list for the core (memory) driver, without writing to disk.
Handle memory_access() {
  Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_core(access.get(), 1 << 16, 0);
  return access;
}

}  // namespace

Hdf5File Hdf5File::open(const std::vector<std::uint8_t>& bytes, const std::string& what) {
  silence_hdf5();
  const Handle access = memory_access();
  if (H5Pset_file_image(access.get(), const_cast<std::uint8_t*>(bytes.data()), bytes.size()) < 0) {
    throw IoError(what + ": libhdf5 could not take the file's bytes");
  }
  // The name only labels the image: one of a file on disk would make the core driver read that.
  const hid_t file = H5Fopen("tandem-memory-image.h5", H5F_ACC_RDONLY, access.get());
  if (file < 0) {
    throw IoError(what +
                  ": not an HDF5 file libhdf5 can read; the file is damaged or was not "
                  "written by Keras (save the model again)");
  }
  return Hdf5File(file, what);
}

Hdf5File Hdf5File::create(const std::string& what) {
  silence_hdf5();
  const Handle access = memory_access();
  const hid_t file = H5Fcreate("tandem-memory-image.h5", H5F_ACC_TRUNC, H5P_DEFAULT, access.get());
  if (file < 0) throw IoError(what + ": libhdf5 could not create the file in memory");
  return Hdf5File(file, what);
}

Hdf5File::~Hdf5File() {
  if (file_ >= 0) H5Fclose(file_);
}

Hdf5File::Hdf5File(Hdf5File&& other) noexcept
    : file_(std::exchange(other.file_, -1)), what_(std::move(other.what_)) {}

bool Hdf5File::exists(const std::string& path) const {
  // H5Lexists needs each parent to exist: check the path one component at a time.
  std::string prefix;
  std::size_t start = 0;
  while (start < path.size()) {
    const std::size_t slash = path.find('/', start);
    prefix += (prefix.empty() ? "" : "/") + path.substr(start, slash - start);
    if (H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

std::vector<std::string> Hdf5File::members(const std::string& path) const {
  const Handle group(H5Gopen2(file_, path.c_str(), H5P_DEFAULT), H5Gclose);
  if (!group.valid()) throw IoError(what_ + ": no group " + path);
  H5G_info_t info{};
  H5Gget_info(group.get(), &info);
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size = H5Lget_name_by_idx(group.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i,
                                            nullptr, 0, H5P_DEFAULT);
    std::string name(static_cast<std::size_t>(size), '\0');
    H5Lget_name_by_idx(group.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                       static_cast<std::size_t>(size) + 1, H5P_DEFAULT);
    names.push_back(name);
  }
  return names;
}

Tensor Hdf5File::read(const std::string& path) const {
  const Handle dataset(H5Dopen2(file_, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) throw IoError(what_ + ": no dataset " + path);
  const Handle type(H5Dget_type(dataset.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_FLOAT) {
    throw IoError(what_ + ": dataset " + path + " does not hold floats");
  }
  const Handle space(H5Dget_space(dataset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  const Shape shape(dims.begin(), dims.end());
  Tensor value = Tensor::empty(shape, DType::f32);
  if (H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, value.raw_data()) <
      0) {
    throw IoError(what_ + ": dataset " + path + " could not be read; the file is damaged");
  }
  return value;
}

std::vector<std::string> Hdf5File::string_attribute(const std::string& path,
                                                    const std::string& name) const {
  if (H5Aexists_by_name(file_, path.c_str(), name.c_str(), H5P_DEFAULT) <= 0) {
    throw IoError(what_ + ": " + path + " has no attribute " + name +
                  "; it is not a Keras .h5 weights file");
  }
  const Handle attribute(
      H5Aopen_by_name(file_, path.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const Handle type(H5Aget_type(attribute.get()), H5Tclose);
  const Handle space(H5Aget_space(attribute.get()), H5Sclose);
  const hssize_t count = H5Sget_simple_extent_npoints(space.get());
  std::vector<std::string> values;
  // An empty list (a layer without weights) is an empty array of whatever type numpy gave it.
  if (count == 0) return values;
  if (H5Tget_class(type.get()) != H5T_STRING || count < 0) {
    throw IoError(what_ + ": attribute " + name + " of " + path + " is not a list of strings");
  }
  if (H5Tis_variable_str(type.get()) > 0) {
    std::vector<char*> texts(static_cast<std::size_t>(count), nullptr);
    H5Aread(attribute.get(), type.get(), texts.data());
    for (char* text : texts) {
      values.emplace_back(text != nullptr ? text : "");
      H5free_memory(text);
    }
    return values;
  }
  const std::size_t width = H5Tget_size(type.get());
  std::vector<char> buffer(width * static_cast<std::size_t>(count) + 1, '\0');
  H5Aread(attribute.get(), type.get(), buffer.data());
  for (hssize_t i = 0; i < count; ++i) {
    const char* start = buffer.data() + static_cast<std::size_t>(i) * width;
    values.emplace_back(start, strnlen(start, width));
  }
  return values;
}

void Hdf5File::create_group(const std::string& path) {
  if (exists(path)) return;
  const Handle links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(links.get(), 1);
  const Handle group(H5Gcreate2(file_, path.c_str(), links.get(), H5P_DEFAULT, H5P_DEFAULT),
                     H5Gclose);
  if (!group.valid()) throw IoError(what_ + ": could not create group " + path);
}

void Hdf5File::write(const std::string& path, const Tensor& value) {
  const Tensor host = cast(value, DType::f32).to(Device::cpu());
  const std::vector<hsize_t> dims(host.shape().begin(), host.shape().end());
  const Handle space(dims.empty()
                         ? H5Screate(H5S_SCALAR)
                         : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                     H5Sclose);
  const Handle links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(links.get(), 1);
  const Handle dataset(H5Dcreate2(file_, path.c_str(), H5T_IEEE_F32LE, space.get(), links.get(),
                                  H5P_DEFAULT, H5P_DEFAULT),
                       H5Dclose);
  if (!dataset.valid() || H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                   host.raw_data()) < 0) {
    throw IoError(what_ + ": could not write dataset " + path);
  }
}

std::vector<std::uint8_t> Hdf5File::bytes() {
  H5Fflush(file_, H5F_SCOPE_GLOBAL);
  const ssize_t size = H5Fget_file_image(file_, nullptr, 0);
  if (size < 0) throw IoError(what_ + ": libhdf5 could not give the file's bytes");
  std::vector<std::uint8_t> image(static_cast<std::size_t>(size));
  H5Fget_file_image(file_, image.data(), image.size());
  return image;
}

}  // namespace tandem::io::detail
