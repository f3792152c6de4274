// gpulab ddp's positional form, as the seed's run-ddp.sh took it: N, the mode, "auto", the
// master's address and the train flags in any order after N; bad input is one clear error.
#include <gtest/gtest.h>

#include "builder/ddp.h"
#include "core/error.h"

namespace gpulab::builder {
namespace {

std::string error_of(const std::vector<std::string>& args, DdpOptions base = {}) {
  try {
    parse_ddp_args(args, base);
  } catch (const Exception& e) {
    return e.error().message;
  }
  return "";
}

TEST(DdpArgs, TheSeedsFormsParse) {
  DdpOptions o = parse_ddp_args({"2"});
  EXPECT_EQ(o.gpus, 2);
  EXPECT_EQ(o.mode, DdpMode::kInteractive);
  o = parse_ddp_args({"8", "auto", "192.168.1.100", "script_multi_node", "--model resnet50"});
  EXPECT_EQ(o.gpus, 8);
  EXPECT_EQ(o.mode, DdpMode::kScriptMultiNode);
  EXPECT_EQ(o.master_addr, "192.168.1.100");
  EXPECT_EQ(o.train_flags, "--model resnet50");
  o = parse_ddp_args({"4", "script_single_node", "--num_epochs 2"});
  EXPECT_EQ(o.mode, DdpMode::kScriptSingleNode);
  EXPECT_EQ(o.train_flags, "--num_epochs 2");
}

TEST(DdpArgs, BadInputSaysWhatIsWrong) {
  EXPECT_EQ(error_of({}), "missing the number of GPUs");
  EXPECT_EQ(error_of({"two"}), "N must be a number of GPUs, got 'two'");
  EXPECT_EQ(error_of({"2x"}), "N must be a number of GPUs, got '2x'");
  EXPECT_EQ(error_of({"9"}), "N must be between 1 and 8 GPUs per node");
  EXPECT_EQ(error_of({"0"}), "N must be between 1 and 8 GPUs per node");
  EXPECT_EQ(error_of({"2", "script_multi_node"}), "script_multi_node needs the master's address");
  EXPECT_EQ(error_of({"2", "host-a", "host-b"}), "unexpected argument 'host-b'");
  DdpOptions bad_port;
  bad_port.master_port = 70000;
  EXPECT_NE(error_of({"2"}, bad_port).find("--master_port 70000 is outside 1..65535"),
            std::string::npos);
  DdpOptions bad_rank;
  bad_rank.node_rank = 5;
  bad_rank.nnodes = 2;
  EXPECT_NE(error_of({"2", "10.0.0.1", "script_multi_node"}, bad_rank)
                .find("--node_rank 5 is outside 0..1"),
            std::string::npos);
}

}  // namespace
}  // namespace gpulab::builder
