// PCRE2 expressions for pre-tokenizers (see hf_regex.h).
#include "train/data/hf_regex.h"

#include "core/error.h"

#include <fmt/format.h>

#if GPULAB_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace gpulab::train::hf {

#if GPULAB_HAVE_PCRE2

Result<Regex> Regex::compile(const std::string& pattern, std::string_view what) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return Error(Code::kInvalidArgument,
                 fmt::format("{} '{}' does not compile at offset {}: {}", what, pattern, offset,
                             reinterpret_cast<const char*>(msg)));
  }
  Regex r;
  r.code_ =
      std::shared_ptr<void>(code, [](void* p) { pcre2_code_free(static_cast<pcre2_code*>(p)); });
  // Without JIT (a platform PCRE2 cannot JIT for) the interpreter gives the same matches.
  r.jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return r;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_.get());
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create_from_pattern(code, nullptr), pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), at, 0, md.get(), nullptr);
    // A JIT stack or match limit reached: the interpreter (heap frames) tries again; if it too
    // fails, the text is refused rather than cut where the expression would not cut it.
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
      rc = pcre2_match(code, subject, text.size(), at, PCRE2_NO_JIT, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Exception(Code::kResourceExhausted,
                      fmt::format("the pre-tokenizer expression failed at byte {} of a {}-byte "
                                  "text: {}",
                                  at, text.size(), reinterpret_cast<const char*>(msg)),
                      "split the input into smaller documents");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    if (ov[1] == ov[0]) {  // an empty match: step over one character, keep nothing
      at = ov[0] + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
      continue;
    }
    out.emplace_back(ov[0], ov[1]);
    at = ov[1];
  }
  return out;
}

Result<bool> Regex::search(std::string_view text) const {
  auto* code = static_cast<pcre2_code*>(code_.get());
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create_from_pattern(code, nullptr), pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(code, subject, text.size(), 0, 0, md.get(), nullptr);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)  // JIT limits: the interpreter tries again
    rc = pcre2_match(code, subject, text.size(), 0, PCRE2_NO_JIT, md.get(), nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    return Error(Code::kResourceExhausted,
                 fmt::format("the expression cannot be matched against a {}-byte text: {}",
                             text.size(), reinterpret_cast<const char*>(msg)));
  }
  return true;
}

#else

Result<bool> Regex::search(std::string_view) const {
  return false;
}

Result<Regex> Regex::compile(const std::string&, std::string_view) {
  return Error(Code::kUnsupported,
               "this gpulab was built without PCRE2, which tokenizer.json's pre-tokenizer "
               "expressions need (Unicode classes, lookahead)",
               "rebuild gpulab where libpcre2-dev is installed (scripts/install-deps.sh)");
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view) const {
  return {};
}

#endif

}  // namespace gpulab::train::hf
