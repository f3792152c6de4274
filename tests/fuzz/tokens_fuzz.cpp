// libFuzzer target over token data folders (formats/token_file.cpp): the input is meta.json,
// train.bin and val.bin joined by "\n@@\n" (a part left out is a missing file), written to a
// scratch folder and opened as the trainer opens it; a folder it accepts reads in bounds.
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "formats/token_file.h"
#include "fuzz_check.h"

namespace {

namespace fs = std::filesystem;
using namespace gpulab;

const fs::path& scratch() {
  static const fs::path dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "gpulab-fuzz-tokens-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    std::atexit([] { fs::remove_all(scratch()); });
    return fs::path(tmpl);
  }();
  return dir;
}

void put(const fs::path& file, const std::string_view* part) {
  std::error_code ec;
  fs::remove(file, ec);
  if (!part) return;
  std::ofstream(file, std::ios::binary)
      .write(part->data(), static_cast<std::streamsize>(part->size()));
}

// Reads a window of a split the way the LM batches do, then every id: verify promised each one
// is in [0, vocab) (the fuzzer's inputs are small, so all of them is cheap).
void read_all(const formats::TokenFile& f, int64_t vocab) {
  std::vector<int64_t> out(16);
  const int64_t n = std::min<int64_t>(f.size(), 16);
  f.read(0, n, out.data());
  for (int64_t i = 0; i < f.size(); ++i) {
    const int64_t id = f.at(i);
    if (id < 0 || id >= vocab || (i < n && out[static_cast<size_t>(i)] != id)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  while (parts.size() < 2) {
    const size_t at = rest.find("\n@@\n");
    if (at == std::string_view::npos) break;
    parts.push_back(rest.substr(0, at));
    rest.remove_prefix(at + 4);
  }
  parts.push_back(rest);
  const fs::path& dir = scratch();
  put(dir / "meta.json", &parts[0]);
  put(dir / "train.bin", parts.size() > 1 ? &parts[1] : nullptr);
  put(dir / "val.bin", parts.size() > 2 ? &parts[2] : nullptr);
  for (bool verify : {false, true}) {
    auto d = formats::TokenData::open(dir, {verify});
    if (!d.ok()) {
      fuzz::check_refusal(d.error());
      continue;
    }
    (void)d->check_vocab(50000);
    (void)d->check_seq_len(8);
    (void)d->tokenizer_spec();
    if (verify) {
      read_all(d->train(), d->meta().vocab_size);
      read_all(d->val(), d->meta().vocab_size);
    }
  }
  return 0;
}
