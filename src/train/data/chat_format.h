// Chat formats built in for chat-message prompts (GRPO prompts, generate): ChatML (Qwen2 and
// others with <|im_start|>/<|im_end|>) and Llama 3's header tokens, rendered to the text the
// tokenizer then encodes, as the models' own chat templates render it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "train/data/tokenizer.h"

namespace gpulab::train {

struct ChatMessage {
  std::string role;  // system, user, assistant, ...
  std::string content;
};

enum class ChatFormat { kChatMl, kLlama3 };

// "chatml" or "llama3"; anything else is kInvalidArgument naming both.
Result<ChatFormat> parse_chat_format(std::string_view name);

// The format a tokenizer's special tokens speak: ChatML when <|im_start|> and <|im_end|> are single
// tokens, Llama 3 when <|start_header_id|>, <|end_header_id|> and <|eot_id|> are; else
// kUnsupported (pass the prompt as text).
Result<ChatFormat> detect_chat_format(const Tokenizer& tok);

// The messages as the format's template renders them; add_generation_prompt opens the
// assistant's turn. Llama 3's starts with <|begin_of_text|> and trims each content's
// surrounding whitespace (its template's `| trim`); ChatML keeps content as it is.
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt);

}  // namespace gpulab::train
