// Hostile files the format readers must refuse with one clear error, before allocating what they
// claim: the cases the fuzz targets (tests/fuzz) found or were written against, kept as tests.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/json.h"
#include "formats/cifar_batch.h"
#include "formats/decoder_config.h"
#include "formats/idx.h"
#include "formats/pickle.h"
#include "formats/safetensors_header.h"
#include "formats/token_file.h"

namespace gpulab::formats {
namespace {

using namespace std::string_literals;  // the inputs hold NUL bytes

std::string safetensors_with(const std::string& header) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header;
}

uint32_t crc32(const std::string& data) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int k = 0; k < 4; ++k) s[k] = static_cast<char>((v >> (8 * k)) & 0xff);
  return s;
}

// A gzip member whose one stored deflate block holds `data`.
std::string gzip_stored(const std::string& data) {
  std::string g("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  const auto len = static_cast<uint16_t>(data.size());
  g += '\x01';
  g += static_cast<char>(len & 0xff);
  g += static_cast<char>(len >> 8);
  g += static_cast<char>(~len & 0xff);
  g += static_cast<char>((~len >> 8) & 0xff);
  return g + data + le32(crc32(data)) + le32(static_cast<uint32_t>(data.size()));
}

TEST(HostileSafetensors, ShapeWhoseElementCountOverflowsIsRefused) {
  // 2^32 × 2^32 elements wrap to 0 in 64 bits, which matched the empty data_offsets.
  auto r = parse_safetensors_header(
      safetensors_with(
          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
      "w.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kDataError);
  EXPECT_NE(
      r.error().message.find("w.safetensors: malformed header entry 'w': shape is implausibly"),
      std::string::npos)
      << r.error().message;
}

TEST(HostileSafetensors, TensorPastTheEndIsRefusedBeforeAllocation) {
  auto r = parse_safetensors_header(
      safetensors_with(
          R"({"w":{"dtype":"F64","shape":[125000000000],"data_offsets":[0,1000000000000]}})"),
      "w.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("truncated: tensor 'w' ends at byte 1000000000000"),
            std::string::npos)
      << r.error().message;
}

// The fuzz target's overlap check (safetensors_fuzz.cpp) found this: an empty tensor sorted
// between two overlapping ones hid the overlap from the reader.
TEST(HostileSafetensors, OverlapBehindAnEmptyTensorIsRefused) {
  auto r = parse_safetensors_header(
      safetensors_with(R"({"a":{"dtype":"U8","shape":[10],"data_offsets":[0,10]},)"
                       R"("b":{"dtype":"U8","shape":[0],"data_offsets":[5,5]},)"
                       R"("c":{"dtype":"U8","shape":[6],"data_offsets":[6,12]}})") +
          std::string(12, 'x'),
      "w.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("tensor data ranges overlap"), std::string::npos)
      << r.error().message;
}

TEST(HostileSafetensors, NamesAndDtypesWithNewlinesStayOnOneLineInTheRefusal) {
  // JSON may spell a newline inside a tensor name or a dtype; the refusal shows it escaped.
  for (const char* header : {R"({"w\nx":{"dtype":"F32","shape":[2],"data_offsets":[0,9]}})",
                             R"({"w":{"dtype":"F3\n2","shape":[2],"data_offsets":[0,8]}})",
                             R"({"w\nx":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"}) {
    auto r = parse_safetensors_header(safetensors_with(header), "w.safetensors");
    ASSERT_FALSE(r.ok()) << header;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("\\n"), std::string::npos) << r.error().message;
  }
}

TEST(HostilePickle, BadMemoKeyIsADataErrorNotAnException) {
  auto r = pickle::parse("(lpxyz\n.");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kDataError);
  EXPECT_NE(r.error().message.find("bad memo key 'xyz'"), std::string::npos) << r.error().message;
}

TEST(HostilePickle, AClassNameWithANewlineStaysOnOneLineInTheRefusal) {
  // STACK_GLOBAL of a module name holding a newline, called with no arguments (found by
  // tests/fuzz/pickle_fuzz.cpp): the refusal names it escaped.
  auto doc = pickle::parse(
      "\x80\x04\x8c\x0enumpy.core.m\nx\x8c\x01"
      "f\x93)R."s);
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  auto a = pickle::to_ndarray(*doc->root);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message.find('\n'), std::string::npos) << a.error().message;
  EXPECT_NE(a.error().message.find("numpy.core.m\\nx"), std::string::npos) << a.error().message;
}

TEST(HostilePickle, SelfReferenceAndDeepNestingParseAndFree) {
  // A list appended to itself (a cycle), then a tuple nested 200,000 deep.
  ASSERT_TRUE(pickle::parse("\x80\x02]q\x00h\x00"
                            "a."s)
                  .ok());
  ASSERT_TRUE(pickle::parse("N" + std::string(200000, '\x85') + ".").ok());
}

TEST(HostilePickle, ArrayShapeLargerThanItsBytesIsRefused) {
  // numpy _frombuffer(b'\0', dtype('u1'), (2^62, 4), 'C'): the shape overflows 64 bits.
  const std::string p =
      "\x80\x02"
      "cnumpy.core.numeric\n_frombuffer\n"
      "(C\x01\x00"
      "cnumpy\ndtype\n(X\x02\x00\x00\x00u1tR"
      "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40K\x04\x86X\x01\x00\x00\x00"
      "CtR."s;
  auto doc = pickle::parse(p);
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  auto a = pickle::to_ndarray(*doc->root);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("array holds 1 bytes"), std::string::npos) << a.error().message;
}

TEST(HostileIdx, GzipHeaderClaimingMoreThanDeflateCanHoldIsRefusedUnread) {
  // 0xffffffff labels in a 40-byte file: 4 GiB would have been inflated and allocated.
  auto r = parse_idx(gzip_stored(std::string("\x00\x00\x08\x01\xff\xff\xff\xff", 8)), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("its header says 4294967295 data bytes, more than"),
            std::string::npos)
      << r.error().message;
}

TEST(HostileIdx, DimensionsWhoseProductOverflowsAreRefused) {
  std::string h("\x00\x00\x08\x03", 4);
  h += std::string(12, '\xff');
  auto r = parse_idx(h, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("holds 0 data bytes"), std::string::npos) << r.error().message;
}

TEST(HostileTokens, TokenCountWhoseByteSizeOverflowsIsRefused) {
  // 2^62 + 1 uint32 tokens are 4 bytes mod 2^64: a 4-byte train.bin matched.
  const std::string meta = R"({"format":"gpulab-tokens","format_version":1,"vocab_size":70000,
    "dtype":"uint32","tokenizer":"bytes","train":{"tokens":4611686018427387905,"text_bytes":1,
    "fnv1a64":"0"},"val":{"tokens":0,"text_bytes":0,"fnv1a64":"cbf29ce484222325"}})";
  auto m = token_meta_from_json(meta);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("more than any file holds"), std::string::npos)
      << m.error().message;
  auto f = token_meta_from_json(R"({"format":"gpulab-tokens","format_version":1e300})");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("format_version is missing or not an integer"),
            std::string::npos)
      << f.error().message;
}

TEST(HostileHfConfig, FloatsHugeShapesAndWrongTypesAreRefused) {
  auto parse = [](const std::string& text) {
    auto j = parse_json(text, "config.json");
    if (!j.ok()) return Result<DecoderConfig>(j.error());
    return decoder_config_from_json(*j, "config.json");
  };
  const std::string base =
      R"("num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":172,
         "vocab_size":512,"max_position_embeddings":256,"rms_norm_eps":1e-6)";
  ASSERT_TRUE(parse("{\"hidden_size\":64," + base + "}").ok());
  auto fl = parse("{\"hidden_size\":1e300," + base + "}");
  ASSERT_FALSE(fl.ok());
  EXPECT_NE(fl.error().message.find("lacks integer or numeric field(s): hidden_size"),
            std::string::npos)
      << fl.error().message;
  auto huge = parse("{\"hidden_size\":4000000000000," + base + "}");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("implausibly large"), std::string::npos);
  EXPECT_FALSE(parse("{\"hidden_size\":64,\"rope_theta\":\"x\"," + base + "}").ok());
  // A number beyond double's range: nlohmann throws out_of_range, not a parse_error.
  auto inf = parse("{\"hidden_size\":1e400," + base + "}");
  ASSERT_FALSE(inf.ok());
  EXPECT_NE(inf.error().message.find("malformed config.json"), std::string::npos);
}

// transformers 5 writes rope_theta inside rope_parameters; Mistral's sliding window bounds the
// positions gpulab's full causal attention reproduces exactly; variants gpulab does not compute
// are refused.
TEST(HostileHfConfig, RopeParametersSlidingWindowAndVariantsAreRead) {
  auto parse = [](const std::string& text) {
    auto j = parse_json(text, "config.json");
    if (!j.ok()) return Result<DecoderConfig>(j.error());
    return decoder_config_from_json(*j, "config.json");
  };
  const std::string base =
      R"("hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":172,
         "vocab_size":512,"max_position_embeddings":256,"rms_norm_eps":1e-6)";
  auto v5 =
      parse(R"({"rope_parameters":{"rope_theta":500000.0,"rope_type":"default"},)" + base + "}");
  ASSERT_TRUE(v5.ok()) << v5.error().message;
  EXPECT_EQ(v5->rope_theta, 500000.0);
  EXPECT_EQ(v5->max_positions, 256);
  auto v4 = parse(R"({"rope_theta":1000000.0,)" + base + "}");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->rope_theta, 1000000.0);
  auto window = parse(R"({"model_type":"mistral","sliding_window":32,)" + base + "}");
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(window->max_positions, 32);
  auto off = parse(R"({"use_sliding_window":false,"sliding_window":32,)" + base + "}");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->max_positions, 256);
  auto none = parse(R"({"sliding_window":null,)" + base + "}");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->max_positions, 256);
  for (const char* bad : {R"("rope_parameters":{"rope_theta":"x"},)", R"("rope_parameters":3,)",
                          R"("sliding_window":"x",)", R"("sliding_window":1.5,)"}) {
    auto r = parse(std::string("{") + bad + base + "}");
    EXPECT_FALSE(r.ok()) << bad;
  }
  // Fields that would make another model than gpulab's modules compute are refused, not
  // defaulted; their usual values pass.
  ASSERT_TRUE(
      parse(R"({"hidden_act":"silu","attention_bias":false,"mlp_bias":false,)" + base + "}").ok());
  for (const char* other :
       {R"("hidden_act":"gelu",)", R"("attention_bias":true,)", R"("mlp_bias":true,)"}) {
    auto r = parse(std::string("{") + other + base + "}");
    ASSERT_FALSE(r.ok()) << other;
    EXPECT_NE(r.error().message.find("is not supported"), std::string::npos) << r.error().message;
  }
  const std::string gpt2 =
      R"("model_type":"gpt2","n_embd":64,"n_layer":2,"n_head":4,"vocab_size":512)";
  ASSERT_TRUE(
      parse("{" + gpt2 + R"(,"scale_attn_weights":true,"scale_attn_by_inverse_layer_idx":false})")
          .ok());
  for (const char* other :
       {R"(,"scale_attn_weights":false)", R"(,"scale_attn_by_inverse_layer_idx":true)"}) {
    auto r = parse("{" + gpt2 + other + "}");
    ASSERT_FALSE(r.ok()) << other;
    EXPECT_NE(r.error().message.find("is not supported"), std::string::npos) << r.error().message;
  }
}

TEST(HostileCifar, LabelOutsideTheClassesIsRefused) {
  // {'data': _frombuffer(3072 zero bytes, u1, (1, 3072)), 'labels': [10]} for 10 classes.
  std::string p =
      "\x80\x02}(X\x04\x00\x00\x00"
      "data"
      "cnumpy.core.numeric\n_frombuffer\n(B"s;
  p += std::string("\x00\x0c\x00\x00", 4) + std::string(3072, '\0');
  p += "cnumpy\ndtype\n(X\x02\x00\x00\x00u1tRK\x01M\x00\x0c\x86X\x01\x00\x00\x00"
       "CtR"s;
  p += "X\x06\x00\x00\x00"
       "labels]K\x0a"
       "au."s;
  auto ok = parse_cifar_python_batch(p, "labels", 11);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  auto r = parse_cifar_python_batch(p, "labels", 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("label 10 of image 0 is outside 0..9"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace gpulab::formats
