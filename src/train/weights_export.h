// Exports a trained model's parameters and buffers (torchvision names, i.e. its state_dict) as
// a .safetensors file, written atomically, for PyTorch, torchvision and other tools to load; and
// a language model as a Hugging Face folder that transformers' from_pretrained reads.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "train/models/decoder_config.h"
#include "train/weights/safetensors.h"
#include "train/weights/tensor_stream.h"

namespace gpulab::train {

// The safetensors metadata gpulab writes: {"format": "pt"}, which transformers' loader requires,
// and the producer.
std::map<std::string, std::string> safetensors_metadata(const std::string& producer);

void export_weights(torch::nn::Module& model, const std::filesystem::path& file);

// Writes `dir`/model.safetensors (or, for weights larger than `max_shard_bytes`, Hugging Face's
// shards and model.safetensors.index.json: weights/hf_shards.h), config.json (the family's
// fields, bos/eos/pad ids of the tokenizer or null, torch_dtype) and, for a known tokenizer, its
// files in a form AutoTokenizer reads: bytes as a byte-level tokenizer.json, SentencePiece as
// tokenizer.model with a tokenizer_config.json. Every file atomically; the weights last, tensor
// by tensor as `tensors` hands them (every one taken, even after a failure: model-parallel ranks
// send them). Returns the weights' path (model.safetensors or the index). Throws on failure.
std::filesystem::path write_hf_folder(const std::filesystem::path& dir, const DecoderConfig& config,
                                      TensorStream& tensors, const std::string& tokenizer_spec,
                                      const std::string& producer, uint64_t max_shard_bytes);
std::filesystem::path write_hf_folder(const std::filesystem::path& dir, const DecoderConfig& config,
                                      const StateDict& tensors, const std::string& tokenizer_spec,
                                      const std::string& producer, uint64_t max_shard_bytes);

}  // namespace gpulab::train
