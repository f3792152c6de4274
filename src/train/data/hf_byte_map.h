// GPT-2's byte-to-unicode table, which byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2) use to
// spell every byte as one printable character in their vocabularies and merges.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpulab::train::hf {

// The code point byte b is spelled with: printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
// stand for themselves, the other 68 bytes take U+0100 onwards in byte order.
char32_t byte_to_char(uint8_t b);

// The byte a code point spells, or none when it is not one of the 256 characters.
std::optional<uint8_t> char_to_byte(char32_t c);

// Bytes -> their byte-level spelling (UTF-8), and back. unspell is none when the text holds a
// character outside the table (then it is not a byte-level token).
std::string spell_bytes(std::string_view bytes);
std::optional<std::string> unspell(std::string_view spelled);

}  // namespace gpulab::train::hf
