// GRPO prompts from a JSONL file: each line an object whose `prompt` is text or a list of chat
// messages ({role, content}); its other members are kept as fields for the rewards to read
// (an answer to compare with, test cases). Chat prompts are rendered with a built-in chat format.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/result.h"
#include "train/data/chat_format.h"

namespace gpulab::train::rl {

struct Prompt {
  Json prompt;                        // as the file gave it: a string or the messages
  std::string text;                   // a text prompt
  std::vector<ChatMessage> messages;  // a chat prompt (text then empty)
  Json fields = Json::object();       // every other member of the line
  size_t line = 0;                    // 1-based, for messages that name it
  bool is_chat() const { return !messages.empty(); }
};

struct PromptSet {
  std::string source;  // the file, as messages name it
  std::vector<Prompt> prompts;
  // "FILE:LINE", for a reward's or a check's message about one prompt.
  std::string where(const Prompt& p) const { return source + ":" + std::to_string(p.line); }
};

// Reads a JSONL file; blank lines are skipped. A malformed line (not JSON, not an object, no
// `prompt`, an empty prompt, a message without string role and content) is kInvalidArgument
// naming the file and line; a file with no prompt is kInvalidArgument; an unreadable one kNotFound.
Result<PromptSet> read_prompt_set(const std::filesystem::path& path);
// The same from text in memory; `source` names it in messages.
Result<PromptSet> parse_prompt_set(std::string_view text, std::string source);

// The text the tokenizer encodes: a text prompt as it is, a chat prompt rendered in `format` with
// the assistant's turn opened. A chat prompt without a format is kInvalidArgument.
Result<std::string> prompt_text(const PromptSet& set, const Prompt& p,
                                std::optional<ChatFormat> format);

}  // namespace gpulab::train::rl
