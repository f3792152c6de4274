// Reading GRPO prompts from JSONL (see prompt_set.h).
#include "train/rl/prompt_set.h"

#include <fmt/format.h>

#include "core/files.h"

namespace gpulab::train::rl {
namespace {

constexpr const char* kPromptHint =
    "each line is one JSON object with `prompt`: a string, or a list of "
    "{\"role\": ..., \"content\": ...} messages; its other members are fields for the rewards";

Error line_error(const std::string& source, size_t line, const std::string& what) {
  return Error(Code::kInvalidArgument, fmt::format("{}:{}: {}", source, line, what), kPromptHint);
}

// The messages of a chat prompt; an error string names what is wrong with them.
Result<std::vector<ChatMessage>> chat_messages(const Json& list) {
  if (list.empty()) return Error(Code::kInvalidArgument, "`prompt` is an empty list of messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& m = list[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      return Error(Code::kInvalidArgument,
                   fmt::format("message {} of `prompt` is not an object with string `role` and "
                               "`content`",
                               i + 1));
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return out;
}

// One non-blank line of the file as a prompt.
Result<Prompt> parse_line(std::string_view text, const std::string& source, size_t line) {
  auto j = parse_json(text, "the line");
  if (!j.ok()) return line_error(source, line, j.error().message);
  if (!j->is_object()) return line_error(source, line, "not a JSON object");
  if (!j->contains("prompt")) return line_error(source, line, "no `prompt` member");
  Prompt p;
  p.line = line;
  p.prompt = (*j)["prompt"];
  if (p.prompt.is_string()) {
    p.text = p.prompt.get<std::string>();
    if (p.text.empty()) return line_error(source, line, "`prompt` is empty");
  } else if (p.prompt.is_array()) {
    auto messages = chat_messages(p.prompt);
    if (!messages.ok()) return line_error(source, line, messages.error().message);
    p.messages = std::move(messages).value();
  } else {
    return line_error(source, line, "`prompt` is neither a string nor a list of messages");
  }
  j->erase("prompt");
  p.fields = std::move(*j);
  return p;
}

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

Result<PromptSet> parse_prompt_set(std::string_view text, std::string source) {
  PromptSet set{std::move(source), {}};
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte-order mark
  size_t line = 0;
  while (!text.empty()) {
    ++line;
    const size_t eol = text.find('\n');
    std::string_view row = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (blank(row)) continue;
    auto p = parse_line(row, set.source, line);
    if (!p.ok()) return p.error();
    set.prompts.push_back(std::move(p).value());
  }
  if (set.prompts.empty())
    return Error(Code::kInvalidArgument, set.source + " holds no prompt", kPromptHint);
  return set;
}

Result<PromptSet> read_prompt_set(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Error(Code::kInvalidArgument, "the prompts " + path.string() + " are a folder",
                 "name a JSONL file");
  auto text = read_file(path);
  if (!text.ok()) return text.error();
  return parse_prompt_set(*text, path.string());
}

Result<std::string> prompt_text(const PromptSet& set, const Prompt& p,
                                std::optional<ChatFormat> format) {
  if (!p.is_chat()) return p.text;
  if (!format)
    return Error(Code::kInvalidArgument,
                 set.where(p) +
                     ": a chat prompt, and the tokenizer speaks no chat format gpulab "
                     "knows",
                 "name one (chatml or llama3), or give the prompt as text");
  return render_chat(*format, p.messages, /*add_generation_prompt=*/true);
}

}  // namespace gpulab::train::rl
