// The small decoders the backends share: XML, PCI bus ids, gfx targets, compute capabilities,
// values with units.
#include <gtest/gtest.h>

#include "gpu/known_devices.h"
#include "gpu/xml.h"

using namespace gpulab;
using namespace gpulab::gpu;

TEST(Xml, ElementsAttributesTextAndEntities) {
  auto doc = parse_xml(
      "<?xml version=\"1.0\" ?>\n<!DOCTYPE log SYSTEM \"x.dtd\">\n<!-- c -->\n"
      "<log><gpu id=\"00000000:18:00.0\"><name>A &amp; B &lt;1&gt;</name>"
      "<empty/><mem><total>81559 MiB</total></mem></gpu><gpu id='2'/></log>");
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  EXPECT_EQ(doc->name, "log");
  auto gpus = doc->children_named("gpu");
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0]->attributes.at("id"), "00000000:18:00.0");
  EXPECT_EQ(gpus[0]->text_at("name"), "A & B <1>");
  EXPECT_EQ(gpus[0]->text_at("mem/total"), "81559 MiB");
  EXPECT_EQ(gpus[0]->text_at("empty"), "");
  EXPECT_EQ(gpus[0]->text_at("missing/x"), std::nullopt);
  EXPECT_EQ(gpus[1]->attributes.at("id"), "2");
}

TEST(Xml, MalformedInputIsADataErrorWithOffset) {
  for (const char* bad :
       {"", "<a>", "<a></b>", "<a><b></a>", "<a x=1></a>", "<a></a><b/>", "plain text"}) {
    auto doc = parse_xml(bad);
    ASSERT_FALSE(doc.ok()) << bad;
    EXPECT_EQ(doc.error().code, Code::kDataError) << bad;
    EXPECT_NE(doc.error().message.find("byte"), std::string::npos) << bad;
  }
}

TEST(PciBusId, NormalisesVendorSpellings) {
  EXPECT_EQ(normalize_pci_bus_id("00000000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(normalize_pci_bus_id("0000:C1:00.0"), "0000:c1:00.0");
  EXPECT_EQ(normalize_pci_bus_id("65:00.0"), "0000:65:00.0");
  EXPECT_EQ(normalize_pci_bus_id("0001:5:0.1"), "0001:05:00.1");
  EXPECT_EQ(normalize_pci_bus_id("N/A"), std::nullopt);
  EXPECT_EQ(normalize_pci_bus_id("0000:18:00"), std::nullopt);
}

TEST(GfxTarget, DecodesKfdVersions) {
  struct {
    std::uint64_t v;
    const char* gfx;
  } cases[] = {{90402, "gfx942"},   {90010, "gfx90a"},   {90008, "gfx908"},
               {110000, "gfx1100"}, {100300, "gfx1030"}, {90500, "gfx950"}};
  for (const auto& c : cases) EXPECT_EQ(gfx_from_target_version(c.v), c.gfx) << c.v;
  EXPECT_EQ(gfx_from_target_version(0), std::nullopt);
  EXPECT_EQ(amd_architecture("gfx942"), "CDNA3");
}

TEST(ComputeCapability, FromArchitectureOrModel) {
  struct {
    const char* name;
    const char* arch;
    const char* cc;
  } cases[] = {
      {"NVIDIA H100 80GB HBM3", "Hopper", "9.0"},
      {"NVIDIA H100 PCIe", "", "9.0"},
      {"NVIDIA GH200 480GB", "", "9.0"},
      {"NVIDIA GeForce RTX 4090", "Ada Lovelace", "8.9"},
      {"NVIDIA GeForce RTX 4090", "", "8.9"},
      {"NVIDIA L40S", "", "8.9"},
      {"NVIDIA RTX 6000 Ada Generation", "", "8.9"},
      {"NVIDIA A100-SXM4-80GB", "Ampere", "8.0"},
      {"NVIDIA A10", "Ampere", "8.6"},
      {"NVIDIA RTXA6000-24Q", "Ampere", "8.6"},
      {"NVIDIA RTX A6000", "", "8.6"},
      {"NVIDIA GeForce RTX 3090", "Ampere", "8.6"},
      {"Tesla V100-PCIE-32GB", "", "7.0"},
      {"Tesla T4", "", "7.5"},
      {"NVIDIA B200", "Blackwell", "10.0"},
      {"NVIDIA GeForce RTX 5090", "Blackwell", "12.0"},
  };
  for (const auto& c : cases) EXPECT_EQ(nvidia_compute_capability(c.name, c.arch), c.cc) << c.name;
  EXPECT_EQ(nvidia_compute_capability("Some Future GPU"), std::nullopt);
}

TEST(Units, NumbersAndBytes) {
  EXPECT_EQ(bytes_from_text("81559 MiB"), 81559ull * 1024 * 1024);
  EXPECT_EQ(bytes_from_text("2 GiB"), 2ull << 30);
  EXPECT_EQ(bytes_from_text("512"), 512u);
  EXPECT_EQ(bytes_from_text("N/A"), std::nullopt);
  EXPECT_EQ(leading_number("71.16 W"), 71.16);
  EXPECT_EQ(leading_number("31 C"), 31.0);
  EXPECT_EQ(parse_uint("0x1002"), 0x1002u);
  EXPECT_EQ(parse_uint("206158430208"), 206158430208ull);
  EXPECT_EQ(parse_uint("12ab"), std::nullopt);
}
