// The --require-partition check: parsing the list, passing on NPS1/SPX, failing on NPS2/CPX with
// the seed's message and a hint, and refusing hosts without an AMD GPU.
#include <gtest/gtest.h>

#include "fixtures.h"
#include "gpu/detect.h"
#include "gpu/partition.h"

using namespace gpulab;
using namespace gpulab::gpu;
using gpulab::gpu::testing::fixture;

namespace {

Inventory inv_of(const std::string& name) {
  DetectOptions o;
  o.root = fixture(name);
  o.host_checks = false;
  return detect(o);
}

}  // namespace

TEST(PartitionRequirement, ParsesEitherOrderAndCase) {
  auto r = parse_partition_requirement("spx, NPS1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->memory, "NPS1");
  EXPECT_EQ(r->compute, "SPX");
  auto only = parse_partition_requirement("CPX");
  ASSERT_TRUE(only.ok());
  EXPECT_FALSE(only->memory.has_value());
}

TEST(PartitionRequirement, RejectsUnknownAndConflictingModes) {
  for (const char* bad : {"NPS3", "SPX,foo", "NPS1,NPS2", "", " , "}) {
    auto r = parse_partition_requirement(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Code::kInvalidArgument) << bad;
    EXPECT_FALSE(r.error().hint.empty()) << bad;
  }
}

TEST(PartitionCheck, PassesOnNps1Spx) {
  auto req = parse_partition_requirement("NPS1,SPX").value();
  EXPECT_TRUE(check_partition(inv_of("mi300x-x2"), req).ok());
}

TEST(PartitionCheck, FailsOnNps2CpxWithSeedMessageAndHint) {
  auto req = parse_partition_requirement("NPS1,SPX").value();
  Status st = check_partition(inv_of("mi300x-nps2-cpx"), req);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Code::kUnsupported);
  EXPECT_EQ(st.error().message,
            "Detected unsupported configuration\nCurrent configuration: NPS2, CPX");
  EXPECT_NE(st.error().hint.find("amd-smi set --memory-partition NPS1"), std::string::npos);
  EXPECT_NE(st.error().hint.find("amd-smi set --compute-partition SPX"), std::string::npos);
  EXPECT_NE(st.error().hint.find("rocm-smi --setmemorypartition NPS1 --setcomputepartition SPX"),
            std::string::npos);
}

TEST(PartitionCheck, ComputeOnlyRequirementIgnoresMemoryMode) {
  auto req = parse_partition_requirement("CPX").value();
  EXPECT_TRUE(check_partition(inv_of("mi300x-nps2-cpx"), req).ok());
  EXPECT_FALSE(check_partition(inv_of("mi300x-x2"), req).ok());
}

TEST(PartitionCheck, NvidiaHostHasNoPartitionsToCheck) {
  auto req = parse_partition_requirement("NPS1,SPX").value();
  Status st = check_partition(inv_of("h100"), req);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Code::kUnavailable);
}

TEST(RequirePartition, ThrowsForTheDdpCaller) {
  DetectOptions o;
  o.root = fixture("mi300x-nps2-cpx");
  try {
    require_partition("NPS1,SPX", o);
    FAIL() << "expected an exception";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kUnsupported);
    EXPECT_EQ(exit_code_for(e.code()), 2);
  }
  o.root = fixture("mi300x-x2");
  EXPECT_NO_THROW(require_partition("NPS1,SPX", o));
}
