// NFC through ICU (see hf_normalizer.h).
#include "train/data/hf_normalizer.h"

#include "core/utf8.h"
#include "train/data/hf_byte_map.h"

#if GPULAB_HAVE_ICU
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#endif

namespace gpulab::train::hf {

#if GPULAB_HAVE_ICU

namespace {

const icu::Normalizer2* nfc() {
  static const icu::Normalizer2* n = [] {
    UErrorCode st = U_ZERO_ERROR;
    const icu::Normalizer2* p = icu::Normalizer2::getNFCInstance(st);
    return U_SUCCESS(st) ? p : nullptr;
  }();
  return n;
}

// Appends the NFC of one well-formed run.
void append_nfc(std::string_view run, std::string& out) {
  UErrorCode st = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(&out);
  nfc()->normalizeUTF8(0, icu::StringPiece(run.data(), static_cast<int32_t>(run.size())), sink,
                       nullptr, st);
  if (U_FAILURE(st)) out.append(run);
}

}  // namespace

bool nfc_available() {
  return nfc() != nullptr;
}

bool to_nfc(std::string_view text, std::string& out) {
  if (!nfc()) return false;
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return false;  // ASCII is always NFC
  std::string result;
  result.reserve(text.size());
  size_t run = 0, i = 0;
  while (i < text.size()) {
    if (decode_utf8(text, i)) continue;
    append_nfc(text.substr(run, i - run), result);
    result += text[i++];  // an ill-formed byte, kept as it is
    run = i;
  }
  append_nfc(text.substr(run), result);
  if (result == text) return false;
  out = std::move(result);
  return true;
}

#else

bool nfc_available() {
  return false;
}

bool to_nfc(std::string_view, std::string&) {
  return false;
}

#endif

}  // namespace gpulab::train::hf
