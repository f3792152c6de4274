// Plain-text and JSONL corpus reader (see text_source.h).
#include "train/data/text_source.h"

#include <fmt/format.h>

#include "core/files.h"
#include "core/json.h"
#include "core/utf8.h"

namespace gpulab::train {

namespace {

const char* const kConvertHint =
    "tokenizers read UTF-8 text: convert the file first, e.g. iconv -f LATIN1 -t UTF-8 IN > OUT "
    "(or -f UTF-16 for UTF-16), and pass the converted file";

}  // namespace

std::optional<Error> check_utf8_text(std::string_view text, const std::string& where) {
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\0')
      return Error(Code::kDataError,
                   fmt::format("{}: a NUL byte at column {}: this is not a text file (binary "
                               "data, or UTF-16 without a byte-order mark)",
                               where, i + 1),
                   kConvertHint);
    if (!decode_utf8(text, i))
      return Error(Code::kDataError,
                   fmt::format("{}: byte 0x{:02X} at column {} is not UTF-8 (Latin-1 or another "
                               "8-bit encoding?)",
                               where, static_cast<unsigned char>(text[i]), i + 1),
                   kConvertHint);
  }
  return std::nullopt;
}

bool is_jsonl_path(const fs::path& p) {
  const auto ext = p.extension().string();
  return ext == ".jsonl" || ext == ".json" || ext == ".ndjson";
}

Result<TextReader> TextReader::open(std::vector<fs::path> inputs, int64_t block_bytes) {
  if (inputs.empty()) return Error(Code::kInvalidArgument, "no --input files given");
  TextReader r;
  for (const auto& p : inputs) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
      return Error(Code::kNotFound, "no such input file: " + p.string(),
                   "pass plain text or JSONL files (a `text` field per line) to --input");
    std::ifstream probe(p, std::ios::binary);
    if (!probe) return Error(Code::kNotFound, "cannot read input file: " + p.string());
    r.total_bytes_ += static_cast<int64_t>(fs::file_size(p, ec));
  }
  r.inputs_ = std::move(inputs);
  r.block_bytes_ = std::max<int64_t>(1, block_bytes);
  return r;
}

bool TextReader::open_next_file() {
  if (in_.is_open()) in_.close();
  if (file_index_ >= inputs_.size()) return false;
  const auto& p = inputs_[file_index_++];
  in_.open(p, std::ios::binary);
  jsonl_ = is_jsonl_path(p);
  line_no_ = 0;
  // A UTF-8 byte-order mark is not text; a UTF-16 one means the file needs converting.
  char bom[3] = {0, 0, 0};
  in_.read(bom, 3);
  const std::string head(bom, static_cast<size_t>(in_.gcount()));
  in_.clear();
  if (head == "\xEF\xBB\xBF") {
    bytes_read_ += 3;
    return true;
  }
  in_.seekg(0);
  if (head.rfind("\xFF\xFE", 0) == 0 || head.rfind("\xFE\xFF", 0) == 0)
    bom_error_ = Error(Code::kDataError,
                       p.string() + " is UTF-16 text (it starts with a UTF-16 byte-order mark)",
                       kConvertHint);
  return true;
}

Result<bool> TextReader::next(TextBlock& out) {
  out.text.clear();
  out.document_end = false;
  std::string line;
  while (true) {
    if (!in_.is_open() && !open_next_file()) return !out.text.empty();
    if (bom_error_) return *bom_error_;
    if (!std::getline(in_, line)) {
      in_.close();
      if (!out.text.empty()) {
        out.document_end = true;
        return true;
      }
      continue;
    }
    ++line_no_;
    const bool had_newline = !in_.eof();
    bytes_read_ += static_cast<int64_t>(line.size()) + (had_newline ? 1 : 0);
    const auto where = fmt::format("{}:{}", inputs_[file_index_ - 1].string(), line_no_);
    if (auto bad = check_utf8_text(line, where)) return *bad;
    if (jsonl_) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto j = parse_json(line, "JSONL line");
      if (!j)
        return Error(Code::kDataError, where + ": not valid JSON (" + j.error().message + ")",
                     "JSONL input needs one JSON object per line with a string \"text\" field");
      if (!j->is_object() || !j->contains("text") || !(*j)["text"].is_string())
        return Error(Code::kDataError, where + ": no string \"text\" field",
                     "JSONL input needs one JSON object per line with a string \"text\" field");
      out.text = (*j)["text"].get<std::string>();
      if (auto bad = check_utf8_text(out.text, where + " (its \"text\")")) return *bad;
      out.document_end = true;
      return true;
    }
    out.text += line;
    if (had_newline) out.text += '\n';
    if (static_cast<int64_t>(out.text.size()) >= block_bytes_) return true;
  }
}

}  // namespace gpulab::train
