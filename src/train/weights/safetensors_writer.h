// A safetensors file written tensor by tensor: the header from every tensor's name, shape and
// dtype first, then each tensor's bytes as it comes, in name order, so the writer holds one
// tensor at a time (the final weights of a model larger than one process's memory). Atomic as
// write_safetensors (which writes through it) is: a reader never sees half a file.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/result.h"
#include "train/weights/safetensors.h"
#include "train/weights/tensor_stream.h"

namespace gpulab::train {

class SafetensorsWriter {
 public:
  // `layout`: every tensor's name, shape and dtype (meta tensors will do). The file's size is
  // reserved first, so a full disk fails here; a dtype safetensors cannot hold is kInvalidArgument.
  // `with_crc`: the CRC-32 of the bytes is computed as they are written (commit's `crc`).
  static Result<SafetensorsWriter> create(const std::filesystem::path& path,
                                          const StateDict& layout,
                                          const std::map<std::string, std::string>& metadata,
                                          bool with_crc = false);
  // The next tensor in name order (any device; copied to the CPU alone). A name, shape or dtype
  // other than the layout's next is kInternal: the caller broke the order.
  Status write(const std::string& name, const torch::Tensor& t);
  // After the last tensor: fsync and rename over the target. With `crc` (a writer created
  // with_crc): the CRC-32 (core/crc32.h) of every byte written. Without a commit the target is
  // untouched.
  Status commit(uint32_t* crc = nullptr);

 private:
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    torch::ScalarType dtype;
  };
  SafetensorsWriter(AtomicFile file, std::vector<Entry> entries, bool with_crc)
      : file_(std::move(file)), entries_(std::move(entries)), with_crc_(with_crc) {}
  Status put(std::string_view bytes);

  AtomicFile file_;
  std::vector<Entry> entries_;
  bool with_crc_ = false;
  size_t next_ = 0;
  uint32_t crc_ = 0;
};

// Every tensor of `stream` into a safetensors file at `path` (on the rank that writes; the others
// drain the stream). A write that fails still takes every tensor, so that ranks sending them are
// not left waiting, and leaves the target untouched. With `crc`: the CRC-32 of the bytes.
Status write_stream(const std::filesystem::path& path, TensorStream& stream,
                    const std::map<std::string, std::string>& metadata, uint32_t* crc = nullptr);

}  // namespace gpulab::train
