// Reads text corpora for tokenizing: plain text files (cut into blocks of whole lines, at least
// block_bytes each) and JSONL files (`.jsonl`/`.json`: one document per line, its "text" field).
// Blocks are the unit of the train/validation split; a JSONL record is one block.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab::train {

struct TextBlock {
  std::string text;
  bool document_end = false;  // a JSONL record, or the end of a plain file
};

class TextReader {
 public:
  // Checks every input exists and is a readable regular file (kNotFound otherwise) before any
  // is read, so a typo fails before work starts.
  static Result<TextReader> open(std::vector<std::filesystem::path> inputs,
                                 int64_t block_bytes = 4096);
  // The next block; false at the end. A JSONL line that is not an object with a string "text",
  // and text that is not UTF-8 (Latin-1, UTF-16, NUL bytes) are kDataError naming file and line.
  // A UTF-8 byte-order mark is skipped.
  Result<bool> next(TextBlock& out);

  int64_t total_bytes() const { return total_bytes_; }  // of all inputs, for progress
  int64_t bytes_read() const { return bytes_read_; }
  const std::vector<std::filesystem::path>& inputs() const { return inputs_; }

 private:
  bool open_next_file();
  std::vector<std::filesystem::path> inputs_;
  int64_t block_bytes_ = 4096, total_bytes_ = 0, bytes_read_ = 0;
  size_t file_index_ = 0;
  int64_t line_no_ = 0;
  bool jsonl_ = false;
  std::ifstream in_;
  std::optional<Error> bom_error_;
};

// kDataError naming `where` (file:line) when text holds a NUL byte or is not valid UTF-8.
std::optional<Error> check_utf8_text(std::string_view text, const std::string& where);

bool is_jsonl_path(const std::filesystem::path& p);

}  // namespace gpulab::train
