// ChatML and Llama 3 chat rendering (see chat_format.h).
#include "train/data/chat_format.h"

namespace gpulab::train {
namespace {

bool is_single_token(const Tokenizer& tok, const char* text) {
  return tok.encode(text).size() == 1;
}

// The UTF-8 of the non-ASCII characters Python's str.isspace() accepts (Jinja's trim is
// str.strip()); the ASCII ones are \t..\r, \x1c..\x1f and space.
constexpr std::string_view kUnicodeSpaces[] = {
    "\xC2\x85",     "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81",
    "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86",
    "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89", "\xE2\x80\x8A", "\xE2\x80\xA8",
    "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};

bool ascii_space(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
}

// Jinja's `| trim`: whitespace off both ends.
std::string_view trim(std::string_view s) {
  for (bool more = true; more && !s.empty();) {
    more = false;
    if (ascii_space(s.front())) {
      s.remove_prefix(1);
      more = true;
    }
    for (auto sp : kUnicodeSpaces)
      if (s.starts_with(sp)) {
        s.remove_prefix(sp.size());
        more = true;
      }
  }
  for (bool more = true; more && !s.empty();) {
    more = false;
    if (ascii_space(s.back())) {
      s.remove_suffix(1);
      more = true;
    }
    for (auto sp : kUnicodeSpaces)
      if (s.ends_with(sp)) {
        s.remove_suffix(sp.size());
        more = true;
      }
  }
  return s;
}

}  // namespace

Result<ChatFormat> parse_chat_format(std::string_view name) {
  if (name == "chatml") return ChatFormat::kChatMl;
  if (name == "llama3") return ChatFormat::kLlama3;
  return Error(Code::kInvalidArgument, "unknown chat format '" + std::string(name) + "'",
               "use chatml (<|im_start|>role ... <|im_end|>) or llama3");
}

Result<ChatFormat> detect_chat_format(const Tokenizer& tok) {
  if (is_single_token(tok, "<|im_start|>") && is_single_token(tok, "<|im_end|>"))
    return ChatFormat::kChatMl;
  if (is_single_token(tok, "<|start_header_id|>") && is_single_token(tok, "<|end_header_id|>") &&
      is_single_token(tok, "<|eot_id|>"))
    return ChatFormat::kLlama3;
  return Error(Code::kUnsupported,
               "the tokenizer (" + tok.kind() + ") has neither ChatML's nor Llama 3's chat tokens",
               "give prompts as text, or use a tokenizer.json of a chat model");
}

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt) {
  std::string out;
  if (format == ChatFormat::kChatMl) {
    for (const auto& m : messages)
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
  }
  out = "<|begin_of_text|>";
  for (const auto& m : messages)
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + std::string(trim(m.content)) +
           "<|eot_id|>";
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace gpulab::train
