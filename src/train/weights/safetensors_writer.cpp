// Every way gpulab writes safetensors: the header from names, shapes and dtypes, then the data
// tensor by tensor (safetensors_writer.h), and serialize_safetensors / write_safetensors
// (safetensors.h) on top of it.
#include "train/weights/safetensors_writer.h"

#include <cstring>
#include <utility>

#include "core/crc32.h"
#include "core/json.h"

namespace gpulab::train {
namespace {

// The 8-byte header length and the JSON header (padded to 8 bytes), and the data's size.
struct Head {
  std::string bytes;
  uint64_t data_bytes = 0;
};

Result<Head> head_of(const StateDict& layout, const std::map<std::string, std::string>& metadata) {
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  Head h;
  for (const auto& [name, t] : layout) {
    const std::string dtype = safetensors_dtype_name(t.scalar_type());
    if (dtype.empty()) {
      return Error{Code::kInvalidArgument, "tensor '" + name + "' has dtype " +
                                               std::string(c10::toString(t.scalar_type())) +
                                               ", which safetensors cannot hold"};
    }
    const auto size = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {h.data_bytes, h.data_bytes + size}}};
    h.data_bytes += size;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const uint64_t header_len = json.size();
  h.bytes.assign(8, '\0');
  std::memcpy(h.bytes.data(), &header_len, 8);
  h.bytes += json;
  return h;
}

// A contiguous CPU copy (none for a tensor that is one already) and its bytes.
torch::Tensor on_cpu(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU).contiguous();
}

std::string_view bytes_of(const torch::Tensor& t) {
  return {static_cast<const char*>(t.data_ptr()),
          static_cast<size_t>(t.numel() * t.element_size())};
}

}  // namespace

Result<SafetensorsWriter> SafetensorsWriter::create(
    const std::filesystem::path& path, const StateDict& layout,
    const std::map<std::string, std::string>& metadata, bool with_crc) {
  auto head = head_of(layout, metadata);
  if (!head) return head.error();
  auto file = AtomicFile::create(path, head->bytes.size() + head->data_bytes);
  if (!file) return file.error();
  std::vector<Entry> entries;
  for (const auto& [name, t] : layout) entries.push_back({name, t.sizes().vec(), t.scalar_type()});
  SafetensorsWriter w(std::move(*file), std::move(entries), with_crc);
  if (auto st = w.put(head->bytes); !st) return st.error();
  return w;
}

Status SafetensorsWriter::put(std::string_view bytes) {
  if (with_crc_) crc_ = crc32(bytes, crc_);
  return file_.write(bytes);
}

Status SafetensorsWriter::write(const std::string& name, const torch::Tensor& t) {
  if (next_ >= entries_.size() || entries_[next_].name != name ||
      entries_[next_].shape != t.sizes().vec() || entries_[next_].dtype != t.scalar_type())
    return Error{Code::kInternal,
                 "safetensors writer: tensor " + name + " out of order or reshaped"};
  ++next_;
  return put(bytes_of(on_cpu(t)));
}

Status SafetensorsWriter::commit(uint32_t* crc) {
  if (next_ != entries_.size())
    return Error{Code::kInternal, "safetensors writer: committed after " + std::to_string(next_) +
                                      " of " + std::to_string(entries_.size()) + " tensors"};
  if (crc) *crc = crc_;  // 0 unless created with_crc
  return file_.commit();
}

Status write_stream(const std::filesystem::path& path, TensorStream& stream,
                    const std::map<std::string, std::string>& metadata, uint32_t* crc) {
  auto w = SafetensorsWriter::create(path, stream.layout(), metadata, crc != nullptr);
  Status st = w ? ok_status() : Status(w.error());
  for (const auto& [name, like] : stream.layout()) {
    const auto t = stream.take(name);  // taken even after a failure: the senders finish
    if (st) st = w->write(name, t);
  }
  return st ? w->commit(crc) : st;
}

Result<std::string> serialize_safetensors(const StateDict& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  auto head = head_of(tensors, metadata);
  if (!head) return head.error();
  std::string out;
  out.reserve(head->bytes.size() + head->data_bytes);
  out += head->bytes;
  for (const auto& [name, t] : tensors) out += bytes_of(on_cpu(t));
  return out;
}

// Tensor by tensor: a serialized copy of the whole model would double the writer's memory (rank
// 0 at the end of a run, where --rank_memory_max caps it), and a GPU model is copied to the CPU
// one tensor at a time.
Status write_safetensors(const std::filesystem::path& path, const StateDict& tensors,
                         const std::map<std::string, std::string>& metadata, uint32_t* crc) {
  StateDictStream stream(tensors);
  return write_stream(path, stream, metadata, crc);
}

}  // namespace gpulab::train
