// Device facts and value decoders shared by the GPU backends (see known_devices.h).
#include "gpu/known_devices.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <vector>

#include "core/strings.h"

namespace gpulab::gpu {

namespace {

bool all_hex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Model tokens: "NVIDIA A100-SXM4-40GB" -> NVIDIA, A100, SXM4, 40GB (upper case).
std::vector<std::string> name_tokens(std::string_view name) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '/') {
      if (!cur.empty()) out.push_back(to_upper(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(to_upper(cur));
  return out;
}

// "L40S" -> true for prefix "L" followed by digits (and an optional letter).
bool letter_then_digits(std::string_view tok, std::string_view prefix) {
  if (!starts_with(tok, prefix)) return false;
  std::string_view rest = tok.substr(prefix.size());
  while (!rest.empty() && std::isalpha(static_cast<unsigned char>(rest.back())))
    rest.remove_suffix(1);
  return all_digits(rest);
}

std::optional<std::string> cc_for_series(int number) {
  // Consumer series by thousands: 5090 -> Blackwell, 4090 -> Ada, 3090 -> Ampere, ...
  int series = number / 1000;
  if (number >= 1000 && number < 10000) {
    if (series == 5) return "12.0";
    if (series == 4) return "8.9";
    if (series == 3) return "8.6";
    if (series == 2) return "7.5";
    if (series == 1) return number >= 1600 ? "7.5" : "6.1";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> normalize_pci_bus_id(std::string_view id) {
  std::string s = to_lower(trim(id));
  std::vector<std::string> parts = split(s, ':', false);
  if (parts.size() == 2) parts.insert(parts.begin(), "0000");
  if (parts.size() != 3) return std::nullopt;
  std::string domain = parts[0];
  if (!all_hex(domain) || domain.size() > 8) return std::nullopt;
  // NVML and nvidia-smi print an 8-digit domain; the kernel prints 4.
  while (domain.size() > 4 && domain[0] == '0') domain.erase(0, 1);
  while (domain.size() < 4) domain.insert(0, "0");
  size_t dot = parts[2].find('.');
  if (dot == std::string::npos) return std::nullopt;
  std::string dev = parts[2].substr(0, dot);
  std::string fn = parts[2].substr(dot + 1);
  if (!all_hex(parts[1]) || parts[1].size() > 2 || !all_hex(dev) || dev.size() > 2 ||
      !all_hex(fn) || fn.size() != 1) {
    return std::nullopt;
  }
  auto pad2 = [](std::string v) { return v.size() < 2 ? "0" + v : v; };
  return domain + ":" + pad2(parts[1]) + ":" + pad2(dev) + "." + fn;
}

std::optional<std::string> gfx_from_target_version(std::uint64_t v) {
  if (v == 0) return std::nullopt;
  std::uint64_t major = v / 10000;
  std::uint64_t minor = (v / 100) % 100;
  std::uint64_t step = v % 100;
  if (minor > 15 || step > 15) return std::nullopt;
  char buf[48];
  std::snprintf(buf, sizeof buf, "gfx%llu%llx%llx", static_cast<unsigned long long>(major),
                static_cast<unsigned long long>(minor), static_cast<unsigned long long>(step));
  return std::string(buf);
}

std::optional<std::string> amd_architecture(std::string_view gfx) {
  if (gfx == "gfx940" || gfx == "gfx941" || gfx == "gfx942") return "CDNA3";
  if (gfx == "gfx950") return "CDNA4";
  if (gfx == "gfx90a") return "CDNA2";
  if (gfx == "gfx908") return "CDNA";
  if (starts_with(gfx, "gfx12")) return "RDNA4";
  if (starts_with(gfx, "gfx11")) return "RDNA3";
  if (starts_with(gfx, "gfx103")) return "RDNA2";
  if (starts_with(gfx, "gfx101")) return "RDNA";
  return std::nullopt;
}

std::optional<std::string> nvidia_compute_capability(std::string_view name,
                                                     std::string_view architecture) {
  std::string arch = to_lower(architecture);
  if (arch == "hopper") return "9.0";
  if (arch == "ada lovelace" || arch == "ada") return "8.9";
  if (arch == "turing") return "7.5";
  if (arch == "volta") return "7.0";
  // Ampere, Blackwell and Pascal span several capabilities: the model decides.
  std::vector<std::string> toks = name_tokens(name);
  for (size_t i = 0; i < toks.size(); ++i) {
    const std::string& t = toks[i];
    if (t == "GH200" || letter_then_digits(t, "H")) return "9.0";  // H100, H200, H800, H20
    if (t == "B300" || t == "GB300") return "10.3";
    if (t == "B200" || t == "GB200" || t == "B100") return "10.0";
    if (t == "ADA") return "8.9";
    if (letter_then_digits(t, "L")) return "8.9";  // L4, L40, L40S, L20
    if (t == "A100" || t == "A800" || t == "A30" || t == "A30X") return "8.0";
    if (letter_then_digits(t, "RTXA") || letter_then_digits(t, "A")) return "8.6";
    if (t == "V100") return "7.0";
    if (t == "T4") return "7.5";
    if (t == "P100") return "6.0";
    if (t == "P40" || t == "P4") return "6.1";
    if ((t == "RTX" || t == "GTX") && i + 1 < toks.size()) {
      std::string num = toks[i + 1];
      while (!num.empty() && std::isalpha(static_cast<unsigned char>(num.back()))) num.pop_back();
      if (all_digits(num) && num.size() <= 5) {
        if (auto cc = cc_for_series(std::stoi(num))) return cc;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> nvidia_architecture(std::string_view cc) {
  if (cc == "9.0") return "Hopper";
  if (cc == "8.9") return "Ada Lovelace";
  if (cc == "8.0" || cc == "8.6" || cc == "8.7") return "Ampere";
  if (cc == "10.0" || cc == "10.3" || cc == "12.0") return "Blackwell";
  if (cc == "7.5") return "Turing";
  if (cc == "7.0") return "Volta";
  if (cc == "6.0" || cc == "6.1") return "Pascal";
  return std::nullopt;
}

std::optional<std::string> amd_name_for_device_id(unsigned device_id) {
  switch (device_id) {
    case 0x74a1:
      return "AMD Instinct MI300X";
    case 0x74a0:
      return "AMD Instinct MI300A";
    case 0x74a5:
      return "AMD Instinct MI325X";
    case 0x74b5:
      return "AMD Instinct MI300X VF";
    case 0x740f:
      return "AMD Instinct MI210";
    case 0x740c:
      return "AMD Instinct MI250X / MI250";
    case 0x7408:
      return "AMD Instinct MI250X";
    case 0x738c:
      return "AMD Instinct MI100";
    default:
      return std::nullopt;
  }
}

std::optional<double> leading_number(std::string_view s) {
  std::string t = trim(s);
  if (t.empty()) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p == t.data()) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> bytes_from_text(std::string_view s) {
  auto v = leading_number(s);
  if (!v || *v < 0) return std::nullopt;
  size_t at = s.find_first_not_of("0123456789. \t");
  std::string unit = at == std::string_view::npos ? "" : to_lower(trim(s.substr(at)));
  double mul = 1;
  if (unit == "kib" || unit == "kb") mul = 1024.0;
  if (unit == "mib" || unit == "mb") mul = 1024.0 * 1024;
  if (unit == "gib" || unit == "gb") mul = 1024.0 * 1024 * 1024;
  if (unit == "tib" || unit == "tb") mul = 1024.0 * 1024 * 1024 * 1024;
  return static_cast<std::uint64_t>(*v * mul + 0.5);
}

std::optional<std::uint64_t> parse_uint(std::string_view s) {
  std::string t = trim(s);
  int base = 10;
  std::string_view body = t;
  if (starts_with(body, "0x") || starts_with(body, "0X")) {
    base = 16;
    body.remove_prefix(2);
  }
  if (body.empty()) return std::nullopt;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(body.data(), body.data() + body.size(), v, base);
  if (ec != std::errc() || p != body.data() + body.size()) return std::nullopt;
  return v;
}

}  // namespace gpulab::gpu
