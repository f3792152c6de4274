// Final-weights export in safetensors format (through train/weights/safetensors.h).
#include "train/weights_export.h"

#include "core/error.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {

void export_weights(torch::nn::Module& model, const std::filesystem::path& file) {
  // module_state_dict gives torchvision's names; the writer stores standard (NCHW) layout, so
  // channels_last training changes nothing in the file.
  auto st = write_safetensors(file, module_state_dict(model), {{"producer", "gpulab train"}});
  if (!st) throw Exception(st.error());
}

}  // namespace gpulab::train
