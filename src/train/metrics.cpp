// Epoch records, their console lines and the JSONL metrics log.
#include "train/metrics.h"

#include <fmt/format.h>

#include <cmath>

namespace gpulab::train {

Json EpochRecord::to_json() const {
  Json j = {{"type", "epoch"},
            {"epoch", epoch},
            {"num_epochs", num_epochs},
            {"step", step},
            {"time_s", time_s},
            {"data_time_s", data_time_s},
            {"train_loss", train_loss},
            {"train_acc", train_acc},
            {"train_images", train_images},
            {"images_per_s", images_per_s},
            {"lr", lr},
            {"skipped_steps", skipped_steps}};
  if (lm) {
    // A language model's words: tokens, perplexity; no image rate, no top-5 of a vocabulary.
    j.erase("images_per_s");
    j.erase("train_images");
    j["train_tokens"] = train_images;
    j["tokens_per_s"] = lm->tokens_per_s;
    j["tokens_per_s_per_device"] = lm->tokens_per_s_per_device;
    j["tflops_per_device"] = lm->tflops_per_device;
    j["mfu"] = lm->mfu;
    j["peak_host_memory_bytes"] = lm->peak_host_memory_bytes;
    if (lm->peak_device_allocated_bytes) {
      j["peak_device_allocated_bytes"] = *lm->peak_device_allocated_bytes;
      j["peak_device_reserved_bytes"] = lm->peak_device_reserved_bytes.value_or(0.0);
    }
    if (lm->val_bits_per_byte) j["val_bits_per_byte"] = *lm->val_bits_per_byte;
    if (lm->pipeline_idle_fraction) j["pipeline_idle_fraction"] = *lm->pipeline_idle_fraction;
    if (lm->pipeline_bubble_fraction) j["pipeline_bubble_fraction"] = *lm->pipeline_bubble_fraction;
  }
  if (!comm_per_step.is_null()) j["comm_per_step"] = comm_per_step;
  for (const auto& [k, v] : task_figures.items()) j[k] = v;
  if (!task_figures.empty()) j["task_figures"] = task_figures;
  if (test_top1 && lm) {
    j["test_loss"] = *test_loss;  // validation loss in nats per token
    j["val_perplexity"] = std::exp(*test_loss);
    j["val_next_token_accuracy"] = *test_top1;
    j["val_tokens"] = test_images;
  } else if (test_top1) {
    j["test_loss"] = *test_loss;
    j["test_top1"] = *test_top1;
    j["test_top5"] = *test_top5;
    j["test_images"] = test_images;
  }
  return j;
}

EpochRecord EpochRecord::from_json(const Json& j) {
  EpochRecord r;
  r.epoch = j.value("epoch", int64_t{0});
  r.num_epochs = j.value("num_epochs", int64_t{0});
  r.step = j.value("step", int64_t{0});
  r.time_s = j.value("time_s", 0.0);
  r.data_time_s = j.value("data_time_s", 0.0);
  r.train_loss = j.value("train_loss", 0.0);
  r.train_acc = j.value("train_acc", 0.0);
  r.train_images = j.value("train_images", int64_t{0});
  r.images_per_s = j.value("images_per_s", 0.0);
  r.lr = j.value("lr", 0.0);
  r.skipped_steps = j.value("skipped_steps", int64_t{0});
  if (j.contains("comm_per_step")) r.comm_per_step = j["comm_per_step"];
  if (j.contains("task_figures") && j["task_figures"].is_object())
    r.task_figures = j["task_figures"];
  if (j.contains("tokens_per_s")) {
    Lm lm;
    lm.tokens_per_s = j.value("tokens_per_s", 0.0);
    lm.tokens_per_s_per_device = j.value("tokens_per_s_per_device", 0.0);
    lm.tflops_per_device = j.value("tflops_per_device", 0.0);
    lm.mfu = j.value("mfu", 0.0);
    // Logs before 2026-11-27 named the host peak "peak_memory_bytes".
    lm.peak_host_memory_bytes =
        j.value("peak_host_memory_bytes", j.value("peak_memory_bytes", 0.0));
    if (j.contains("peak_device_allocated_bytes")) {
      lm.peak_device_allocated_bytes = j.value("peak_device_allocated_bytes", 0.0);
      lm.peak_device_reserved_bytes = j.value("peak_device_reserved_bytes", 0.0);
    }
    if (j.contains("val_bits_per_byte")) lm.val_bits_per_byte = j.value("val_bits_per_byte", 0.0);
    if (j.contains("pipeline_idle_fraction"))
      lm.pipeline_idle_fraction = j.value("pipeline_idle_fraction", 0.0);
    if (j.contains("pipeline_bubble_fraction"))
      lm.pipeline_bubble_fraction = j.value("pipeline_bubble_fraction", 0.0);
    r.lm = lm;
  }
  if (r.lm) {  // a language model's record (older logs held the image names too)
    r.images_per_s = j.value("images_per_s", r.lm->tokens_per_s);
    r.train_images = j.value("train_tokens", r.train_images);
    if (j.contains("test_loss")) {
      r.test_loss = j.value("test_loss", 0.0);
      r.test_top1 = j.value("val_next_token_accuracy", j.value("test_top1", 0.0));
      r.test_top5 = j.value("test_top5", 0.0);
      r.test_images = j.value("val_tokens", j.value("test_images", int64_t{0}));
    }
  } else if (j.contains("test_top1")) {
    r.test_loss = j.value("test_loss", 0.0);
    r.test_top1 = j.value("test_top1", 0.0);
    r.test_top5 = j.value("test_top5", 0.0);
    r.test_images = j.value("test_images", int64_t{0});
  }
  return r;
}

std::string EpochRecord::line() const {
  if (!task_summary.empty())
    return fmt::format("Epoch {}/{} (step {}): time={:.2f}s || loss={:.4f} || {} || lr={:.6g}",
                       epoch, num_epochs, step, time_s, train_loss, task_summary, lr);
  if (lm) {
    const auto mib = [](double b) { return b / (1 << 20); };
    const std::string memory =
        lm->peak_device_allocated_bytes
            ? fmt::format("peak GPU mem {:.0f} MiB allocated, {:.0f} MiB reserved; host {:.0f} MiB",
                          mib(*lm->peak_device_allocated_bytes),
                          mib(lm->peak_device_reserved_bytes.value_or(0.0)),
                          mib(lm->peak_host_memory_bytes))
            : fmt::format("peak host mem {:.0f} MiB", mib(lm->peak_host_memory_bytes));
    return fmt::format(
        "Epoch {}/{} (step {}): time={:.2f}s || loss={:.4f} || {:.0f} tok/s ({:.0f} per device) || "
        "{:.3f} TFLOPS/device || MFU {:.1f}% || {}{} || lr={:.6g}",
        epoch, num_epochs, step, time_s, train_loss, lm->tokens_per_s, lm->tokens_per_s_per_device,
        lm->tflops_per_device, 100 * lm->mfu, memory,
        lm->pipeline_idle_fraction ? fmt::format(" || pipeline idle {:.1f}% (bubble {:.1f}%)",
                                                 100 * *lm->pipeline_idle_fraction,
                                                 100 * lm->pipeline_bubble_fraction.value_or(0.0))
                                   : "",
        lr);
  }
  return fmt::format(
      "Epoch {}/{}: time={:.2f}s || loss={:.4f} || acc={:.4f} || {:.1f} img/s || lr={:.6g}", epoch,
      num_epochs, time_s, train_loss, train_acc, images_per_s, lr);
}

std::string EpochRecord::test_line() const {
  if (!test_top1) return {};
  if (lm)
    return fmt::format(
        "Validation: loss {:.4f}{} (next-token accuracy {:.4f}, {} tokens)", *test_loss,
        lm->val_bits_per_byte ? fmt::format(", {:.4f} bits per byte", *lm->val_bits_per_byte) : "",
        *test_top1, test_images);
  return fmt::format("Test accuracy: {:.4f} (top-5 {:.4f}, loss {:.4f}, {} images)", *test_top1,
                     *test_top5, *test_loss, test_images);
}

MetricsLog::MetricsLog(const std::filesystem::path& dir, const Json& history,
                       const Json& run_info) {
  std::filesystem::create_directories(dir);
  out_.open(dir / "metrics.jsonl", std::ios::trunc);
  append(run_info);
  for (const auto& r : history) append(r);
}

void MetricsLog::append(const Json& record) {
  out_ << record.dump() << '\n';
  out_.flush();  // a reader (tail -f, a dashboard) sees each epoch as it ends
}

}  // namespace gpulab::train
