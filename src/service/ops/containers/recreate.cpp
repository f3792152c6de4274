// Recreating a container from a commit of itself (recreate.h).
#include "service/ops/containers/recreate.h"

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "service/base/api_error.h"
#include "service/base/clock.h"
#include "service/base/crypto.h"
#include "service/domain/gpu_allocator.h"
#include "service/ops/containers/allocation.h"
#include "service/ops/containers/engine_container.h"
#include "service/ops/containers/refused_port.h"
#include "service/ops/images/internal_images.h"
#include "service/ops/policies/quota.h"
#include "service/ops/policies/usage_meter.h"

namespace gpulab::service {

namespace {

// The row's GPUs (null: its GPU rows untouched), SSH port, spec and state, in the caller's
// transaction.
void book_row(Service& s, std::int64_t id, const ContainerSpec& spec,
              const std::vector<GpuAssignment>* gpus, int ssh_port, const std::string& st) {
  if (gpus) {
    s.store->clear_gpus(id);
    for (const auto& g : *gpus) s.store->add_gpu(id, g);
  }
  s.store->set_ssh_port(id, ssh_port);
  s.store->set_spec(id, spec);
  s.store->set_state(id, st);
}

// Chooses what `change` asks for and books it with `spec` (the recreate image) and the
// "recreating" intent, under the allocation lock. `outside`: GPUs held outside the book.
void book_recreate(Service& s, const ContainerRecord& c, const Engine& engine,
                   const ContainerSpec& spec, RecreateChange change,
                   const std::set<std::string>& outside) {
  std::lock_guard<std::mutex> lock(s.alloc_mu);
  s.store->transaction([&] {
    std::vector<GpuAssignment> gpus;
    if (change.gpus) {
      meter_tick(*s.store, s.clock->now());
      check_quota(s, c.owner, spec, false, c.id);
      const std::set<std::string> used = gpus_in_use(s, outside, c.name);
      auto pick = choose_gpus(engine.gpus()->gpus, used, spec.gpu_count, s.policy);
      if (!pick) throw ApiError(ApiCode::kGpuAllocationFailed, "GPU allocation failed");
      for (const auto& g : *pick) gpus.push_back(GpuAssignment{g.uuid, g.index});
    }
    int ssh_port = c.ssh_port;
    if (change.ssh_port) ssh_port = choose_host_ports(s, *s.find_host(c.host), {}, true);
    book_row(s, c.id, spec, change.gpus ? &gpus : nullptr, ssh_port, state::kRecreating);
  });
}

}  // namespace

void recreate_container(Service& s, const ContainerRecord& c, const Engine& engine,
                        ContainerSpec spec, RecreateChange change) {
  const std::string ref = c.engine_ref();
  // Unique even for two recreates in one second: a reused tag would move off the image the
  // old container runs, leaving that image untagged and never removed.
  std::string tag = c.name + "-" + std::to_string(unix_now()) + "-" + random_secret(4);
  auto claim = s.image_claims.claim(kRecreateRepo + tag);  // until the booking below owns it
  auto img = engine.archives()->commit(ref, ImageCommit{"gpulab-recreate",
                                                        tag,
                                                        "gpulab recreate",
                                                        "gpulab",
                                                        {{"gpulab.recreate.source", c.name}}});
  if (!img) {
    s.store->set_spec(c.id, c.spec);
    throw_engine_error(img.error());
  }
  const std::string old_image = spec.image;
  spec.run_from(kRecreateRepo + tag);
  // Asked before the allocation lock: a slow host must not hold up every other booking.
  std::set<std::string> outside;
  if (change.gpus) outside = unleased_ddp_gpus(s);
  try {
    book_recreate(s, c, engine, spec, change, outside);
  } catch (...) {
    s.store->set_spec(c.id, c.spec);
    (void)engine.remove_image(spec.image);
    throw;
  }
  auto rm = engine.remove_container(ref);
  if (!rm && rm.error().code != Code::kNotFound) {
    // The old container is still there: the change is refused and the row is as it was.
    {
      std::lock_guard<std::mutex> lock(s.alloc_mu);
      s.store->transaction(
          [&] { book_row(s, c.id, c.spec, change.gpus ? &c.gpus : nullptr, c.ssh_port, c.state); });
    }
    (void)engine.remove_image(spec.image);
    throw_engine_error(rm.error());
  }
  finish_recreate(s, c.id);
  release_internal_image(s, old_image);  // an earlier recreate's or a restored backup's
}

void finish_recreate(Service& s, std::int64_t id) {
  std::string refused_ports;
  for (int attempt = 1;; ++attempt) {
    const ContainerRecord now = *s.store->find_container(id);
    try {
      const std::string docker_id = create_engine_container(s, now);
      s.store->transaction([&] {
        s.store->set_docker_id(id, docker_id);
        s.store->set_state(id, state::kRunning);
      });
      return;
    } catch (const ApiError& e) {
      const bool refused =
          e.api_code() == ApiCode::kPortConflict && names_port(e.error().message, now.ssh_port);
      if (!refused) throw;
      // Held back even after the last try: the reconciler's next pass tries another.
      hold_back_refused_ssh_port(s, now.host, now.ssh_port);
      refused_ports += (refused_ports.empty() ? "" : ", ") + std::to_string(now.ssh_port);
      int next = 0;
      {
        std::lock_guard<std::mutex> lock(s.alloc_mu);
        s.store->transaction([&] {
          next = choose_host_ports(s, *s.find_host(now.host), {}, true);
          s.store->set_ssh_port(id, next);
        });
      }
      if (attempt >= kSshPortTries)
        throw ApiError(ApiCode::kPortConflict,
                       "Container '" + now.name + "' is being made again on host '" + now.host +
                           "', which refused SSH ports " + refused_ports +
                           " as taken outside this service; it is booked on SSH port " +
                           std::to_string(next) + " and the service finishes it there",
                       "list shows it running once done (state recreating until then)");
    }
  }
}

}  // namespace gpulab::service
