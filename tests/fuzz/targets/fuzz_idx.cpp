// IDX reader (gzip or plain): any bytes give a tensor or an IoError, nothing else.
#include "memory_file.h"
#include "tandem/data.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const tandem::fuzzing::MemoryFile file(data, size);
  try {
    const tandem::Tensor tensor = tandem::data::read_idx(file.path());
    if (tensor.numel() > 0) (void)tensor.raw_data();
  } catch (const tandem::Error&) {
  }
  return 0;
}
