// TFRecord framing (gzip or plain): records come out whole or as an IoError; after a data CRC
// mismatch reading goes on, as the reader promises.
#include "memory_file.h"
#include "tandem/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const tandem::fuzzing::MemoryFile file(data, size);
  try {
    tandem::data::TFRecordReader reader(file.path());
    for (int attempts = 0; attempts < 1000; ++attempts) {
      try {
        if (!reader.next()) break;
      } catch (const tandem::IoError&) {
      }
    }
  } catch (const tandem::Error&) {
  }
  return 0;
}
