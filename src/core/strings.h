// Small string helpers used across modules: split, trim, join, case, number formatting, and the
// near-miss search behind every "did you mean".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpulab {

std::vector<std::string> split(std::string_view s, char sep, bool skip_empty = true);
// A command line into words as a shell splits it: blanks separate, single and double quotes
// group (no escapes, no expansion); nullopt when a quote is left open.
std::optional<std::vector<std::string>> split_shell_words(std::string_view s);
std::string trim(std::string_view s);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string to_lower(std::string_view s);
std::string to_upper(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
// `s` fit for a one-line message when it comes from a file (an archive member's name may hold a
// newline or a terminal escape): control bytes as \n, \r, \t or \xNN, the rest (UTF-8
// included) as it is.
std::string printable(std::string_view s);
// "1,234,567.89"-style grouping, as the seed prints GFLOPS.
std::string with_thousands(double value, int decimals);
// 1536 -> "1.50 KiB"; GB uses 1e9 when `decimal` is true (vendors quote memory that way).
std::string human_bytes(double bytes, bool decimal = false);
// The whole of `s` as a number ("8080", "0.5", "-3"): nullopt for "", "8080x", " 80", "+1" and
// values out of range. One home for the parsers that used stoi/stod with a try/catch.
std::optional<long long> parse_int(std::string_view s);
std::optional<double> parse_double(std::string_view s);
// Levenshtein distance (insertions, deletions, substitutions of one byte each).
std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidate a typo most likely meant: the nearest within max_distance edits, or else one
// that contains the word whole ("epochs" -> "num_epochs"); "" when none is close.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates,
                         std::size_t max_distance);

}  // namespace gpulab
