// A pipeline stage that dies, or hangs, mid-step: the other stage does not wait
// forever in its receive. It leaves with an error naming the stage it waited for: at once when
// the peer's process is gone (its sockets close), and within the communicator's timeout when the
// peer is alive but stuck (here a 3 s timeout against a process that sleeps).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "train/dist_worker.h"
#include "train/models/lm_families.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/pipeline_executor.h"
#include "train/parallel/vocab_parallel_cross_entropy.h"

using namespace gpulab;
using namespace gpulab::train;
using namespace gpulab::train::parallel;
namespace fs = std::filesystem;

namespace {

constexpr auto kTimeout = std::chrono::seconds(3);

DecoderConfig small_llama() {
  DecoderConfig c;
  c.name = "llama-pp-peer";
  c.vocab_size = 37;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.max_positions = 16;
  return c;
}

// Stage 1 runs two steps, then dies (GPULAB_PP_PEER=kill: SIGKILL) or hangs (hang: it sleeps, its
// sockets open; a SIGSTOP would not do, the launcher counts a stopped rank as failed and ends
// it); stage 0 runs a third step, which needs stage 1, and writes what ended it
// and how long its step ran. Stage 0 ignores the launcher's SIGTERM (sent when stage 1 dies) so
// that it can report; the launcher's SIGKILL after its grace still bounds it.
int peer_loss_scenario() {
  const std::string how = std::getenv("GPULAB_PP_PEER");
  dist::Communicator world = train::testing::worker_world(kTimeout);
  DeviceMesh mesh(world, 1, 2);
  const DecoderConfig c = small_llama();
  torch::manual_seed(3);
  const StateDict whole = module_state_dict(*build_causal_lm(c));
  const PipelineShape shape{2, 1, 4};
  PipelineStage stage(c, shape, split_stages(c.num_layers, 2, 1, decoder_stage_costs(c, 8)),
                      mesh.coord().pp, whole);
  PipelineExecutor pipe(stage, mesh.pp());
  const auto ids = torch::randint(c.vocab_size, {8, 8});
  if (stage.stage() == 0) std::signal(SIGTERM, SIG_IGN);
  for (int step = 0; step < 2; ++step) pipe.step(ids, ids);
  if (stage.stage() == 1) {
    if (how == "kill") std::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(60));  // the launcher ends it
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  std::string what = "no error";
  try {
    pipe.step(ids, ids);
  } catch (const Exception& e) {
    what = e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ofstream(train::testing::worker_out() / "stage0.txt") << s << "\n" << what << "\n";
  return 2;
}
train::testing::DistScenario peer_loss_worker("pipeline_peer_loss", peer_loss_scenario);

class PipelinePeerLoss : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelinePeerLoss, TheOtherStageLeavesNamingItWithinTheTimeout) {
  auto dir = fs::temp_directory_path() / ("gpulab-pp-peer-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto r =
      train::testing::run_ranks("pipeline_peer_loss", 2, dir, {{"GPULAB_PP_PEER", GetParam()}});
  EXPECT_NE(r.exit_code, 0);
  std::ifstream in(dir / "stage0.txt");
  double seconds = -1;
  std::string line, message;
  in >> seconds;
  std::getline(in, line);
  std::getline(in, message);
  fs::remove_all(dir);
  ASSERT_GE(seconds, 0) << "stage 0 wrote no report; the launcher said: " << r.message;
  EXPECT_NE(message.find("from pipeline stage 1"), std::string::npos) << message;
  // A dead peer closes its sockets: the receive fails at once. A hung one is caught by the
  // timeout: 3 s, plus scheduling slack on a loaded machine.
  const double bound = std::chrono::duration<double>(kTimeout).count() + 2.0;
  EXPECT_LT(seconds, bound) << message;
  if (GetParam() == "hang") {
    EXPECT_NE(message.find("timeout"), std::string::npos) << message;
    EXPECT_GE(seconds, std::chrono::duration<double>(kTimeout).count() - 0.1) << message;
  }
  std::printf("stage 1 %s: stage 0 left its step after %.2f s: %s\n",
              GetParam() == "kill" ? "killed" : "hung", seconds, message.c_str());
}

INSTANTIATE_TEST_SUITE_P(Peers, PipelinePeerLoss, ::testing::Values("kill", "hang"));

}  // namespace
