#pragma once
// HDF5 files held in memory, through libhdf5's core driver: Keras' weights (the
// model.weights.h5 of a .keras file, .h5 files of model.save and save_weights) read from bytes,
// and written to bytes for a .keras archive. Every failure is an IoError naming `what` (the file)
// and the object.
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/tensor.h"

namespace tandem::io::detail {

class Hdf5File {
 public:
  // An HDF5 file read from `bytes`; `what` names it in errors ("model.h5", "x.keras's
  // model.weights.h5").
  static Hdf5File open(const std::vector<std::uint8_t>& bytes, const std::string& what);
  // An empty file to write.
  static Hdf5File create(const std::string& what);
  ~Hdf5File();
  Hdf5File(Hdf5File&& other) noexcept;
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;
  Hdf5File& operator=(Hdf5File&&) = delete;

  // Whether the group or dataset at `path` ("layers/dense/vars/0") exists.
  bool exists(const std::string& path) const;
  // The names of the members of the group at `path`, in HDF5's (alphabetical) order.
  std::vector<std::string> members(const std::string& path) const;
  // A float dataset as an f32 tensor of its shape (f64 data is rounded to f32).
  Tensor read(const std::string& path) const;
  // The strings of an attribute of the object at `path` (fixed-length or variable, as h5py
  // writes lists of names).
  std::vector<std::string> string_attribute(const std::string& path, const std::string& name) const;
  void create_group(const std::string& path);                // parents made as needed
  void write(const std::string& path, const Tensor& value);  // an f32 dataset
  // The file's bytes as written so far.
  std::vector<std::uint8_t> bytes();

 private:
  Hdf5File(std::int64_t file, std::string what) : file_(file), what_(std::move(what)) {}
  std::int64_t file_ = -1;
  std::string what_;
};

}  // namespace tandem::io::detail
