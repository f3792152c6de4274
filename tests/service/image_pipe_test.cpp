// The bounded pipe between an engine's image save and another's load: every byte in order, never
// more than its capacity held, and a failure on either side ends the other.
#include "service/ops/images/image_pipe.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace gpulab::service {
namespace {

TEST(ImagePipe, CarriesEveryByteInOrderWithinItsCapacity) {
  ImagePipe pipe(64);
  std::string sent;
  for (int i = 0; i < 5000; ++i) sent += static_cast<char>('a' + i % 26);
  std::thread writer([&] {
    for (size_t off = 0; off < sent.size(); off += 37)
      ASSERT_TRUE(pipe.write(std::string_view(sent).substr(off, 37)));
    pipe.close_write(ok_status());
  });
  std::string got;
  char buf[50];
  for (;;) {
    auto n = pipe.read(buf, sizeof buf);
    ASSERT_TRUE(n.ok());
    if (*n == 0) break;
    got.append(buf, *n);
  }
  writer.join();
  EXPECT_EQ(got, sent);
  EXPECT_EQ(pipe.bytes(), static_cast<std::int64_t>(sent.size()));
  EXPECT_FALSE(pipe.reader_went_first());
}

TEST(ImagePipe, AFailedSaveReachesTheReader) {
  ImagePipe pipe(64);
  ASSERT_TRUE(pipe.write("part"));
  pipe.close_write(Error{Code::kUnavailable, "source gone"});
  char buf[16];
  auto n = pipe.read(buf, sizeof buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4u);
  auto err = pipe.read(buf, sizeof buf);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().message, "source gone");
}

TEST(ImagePipe, AReaderThatStopsReleasesABlockedWriter) {
  ImagePipe pipe(8);
  ASSERT_TRUE(pipe.write("12345678"));  // full
  std::thread reader_stops([&] { pipe.close_read(); });
  EXPECT_FALSE(pipe.write("9"));  // blocked until the reader went, then refused
  reader_stops.join();
  EXPECT_TRUE(pipe.reader_went_first());
}

}  // namespace
}  // namespace gpulab::service
