// The bounded pipe of image_pipe.h.
#include "service/ops/images/image_pipe.h"

#include <algorithm>
#include <cstring>

namespace gpulab::service {

bool ImagePipe::write(std::string_view data) {
  std::unique_lock<std::mutex> lk(mu_);
  // A piece larger than the whole capacity still goes in alone once the pipe is empty.
  cv_.wait(lk, [&] { return read_closed_ || held_ == 0 || held_ + data.size() <= capacity_; });
  if (read_closed_) return false;
  pieces_.emplace_back(data);
  held_ += data.size();
  cv_.notify_all();
  return true;
}

void ImagePipe::close_write(const Status& why) {
  std::lock_guard<std::mutex> lk(mu_);
  write_closed_ = true;
  write_status_ = why;
  cv_.notify_all();
}

Result<std::size_t> ImagePipe::read(char* buf, std::size_t cap) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return !pieces_.empty() || write_closed_; });
  if (pieces_.empty()) {
    if (!write_status_) return write_status_.error();
    return std::size_t{0};
  }
  std::size_t n = 0;
  while (n < cap && !pieces_.empty()) {
    const std::string& p = pieces_.front();
    std::size_t take = std::min(cap - n, p.size() - front_offset_);
    std::memcpy(buf + n, p.data() + front_offset_, take);
    n += take;
    front_offset_ += take;
    if (front_offset_ == p.size()) {
      held_ -= p.size();
      pieces_.pop_front();
      front_offset_ = 0;
    }
  }
  bytes_ += static_cast<std::int64_t>(n);
  cv_.notify_all();
  return n;
}

void ImagePipe::close_read() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!write_closed_) reader_first_ = true;
  read_closed_ = true;
  pieces_.clear();
  held_ = 0;
  cv_.notify_all();
}

bool ImagePipe::reader_went_first() const {
  std::lock_guard<std::mutex> lk(mu_);
  return reader_first_;
}

std::int64_t ImagePipe::bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return bytes_;
}

}  // namespace gpulab::service
