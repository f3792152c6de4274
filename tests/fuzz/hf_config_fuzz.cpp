// libFuzzer target over Hugging Face config.json (formats/decoder_config*.cpp; Llama and GPT-2
// dialects): a shape it accepts can be counted (parameters, FLOPs: positive and finite, no
// overflow) and written back as a config that reads again with the same counts.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "core/json.h"
#include "formats/decoder_config.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpulab;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = parse_json(text, "config.json");
  if (!j.ok()) {
    fuzz::check_refusal(j.error());
    return 0;
  }
  auto c = formats::decoder_config_from_json(*j, "config.json");
  if (!c.ok()) {
    fuzz::check_refusal(c.error());
    return 0;
  }
  if (c->num_parameters() <= 0 || c->matmul_parameters() <= 0) std::abort();
  const double flops = c->train_flops_per_token(std::min<int64_t>(c->max_positions, 8192));
  if (!std::isfinite(flops) || flops <= 0) std::abort();
  // Written back, it reads again as the same shape (the same counts).
  auto back = formats::decoder_config_from_json(c->to_json(), "written config.json");
  if (!back.ok() || back->num_parameters() != c->num_parameters() ||
      back->matmul_parameters() != c->matmul_parameters())
    std::abort();
  return 0;
}
