// Slurm's duration notation as seconds (slurm_time.h).
#include "launch/slurm_time.h"

#include <limits>
#include <regex>

namespace gpulab::launch {

std::optional<double> parse_slurm_duration(const std::string& text) {
  if (text == "UNLIMITED" || text == "INFINITE") return std::numeric_limits<double>::infinity();
  // sbatch(1): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
  // days-hours:minutes and days-hours:minutes:seconds.
  static const std::regex form(R"(^(?:(\d+)-)?(\d+)(?::(\d{2}))?(?::(\d{2}))?$)");
  std::smatch m;
  if (text.size() > 32 || !std::regex_match(text, m, form)) return std::nullopt;
  const auto num = [&](int i) { return m[i].matched ? std::stod(m[i].str()) : 0.0; };
  const bool days = m[1].matched;
  const int fields = 1 + static_cast<int>(m[3].matched) + static_cast<int>(m[4].matched);
  if (days) {  // D-HH[:MM[:SS]]
    return num(1) * 86400 + num(2) * 3600 + num(3) * 60 + num(4);
  }
  if (fields == 1) return num(2) * 60;           // minutes
  if (fields == 2) return num(2) * 60 + num(3);  // MM:SS
  return num(2) * 3600 + num(3) * 60 + num(4);   // HH:MM:SS
}

}  // namespace gpulab::launch
