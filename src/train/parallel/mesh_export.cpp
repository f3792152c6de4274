// The final weights of a model-parallel run joined on rank 0 tensor by tensor (mesh_export.h).
#include "train/parallel/mesh_export.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/parallel/tp_slices.h"

namespace gpulab::train::parallel {
namespace {

// A piece of an ordinary tensor a rank holds: the tensor's index in name order, its box, and
// (on the rank that holds it) a view of the rank's tensor.
struct Piece {
  int64_t tensor = 0;
  Box box;
  torch::Tensor data;
};

// The pieces a mesh checkpoint of this rank would write of its parameters and buffers.
std::vector<Piece> my_pieces(DeviceMesh& mesh, torch::nn::Module& model, StageLayout& layout,
                             const StateDict& ordinary) {
  std::map<std::string, int64_t> index;
  for (const auto& [name, t] : ordinary) index.emplace(name, static_cast<int64_t>(index.size()));
  std::vector<Piece> out;
  for (auto& p : first_copy_pieces(model, mesh.coord().pp, layout, ordinary, held_state(model)))
    out.push_back({index.at(p.name), std::move(p.box), std::move(p.data)});
  return out;
}

// Boxes as numbers: per piece its tensor, its rank, where it starts and its size.
torch::Tensor encode(const std::vector<Piece>& pieces) {
  std::vector<int64_t> v;
  for (const auto& p : pieces) {
    v.push_back(p.tensor);
    v.push_back(static_cast<int64_t>(p.box.at.size()));
    v.insert(v.end(), p.box.at.begin(), p.box.at.end());
    v.insert(v.end(), p.box.size.begin(), p.box.size.end());
  }
  return torch::tensor(v, torch::kLong);
}

std::vector<Piece> decode(const torch::Tensor& t) {
  const auto* v = t.data_ptr<int64_t>();
  std::vector<Piece> out;
  for (int64_t i = 0; i < t.numel();) {
    Piece p;
    p.tensor = v[i];
    const int64_t dims = v[i + 1];
    p.box.at.assign(v + i + 2, v + i + 2 + dims);
    p.box.size.assign(v + i + 2 + dims, v + i + 2 + 2 * dims);
    i += 2 + 2 * dims;
    out.push_back(std::move(p));
  }
  return out;
}

class MeshModelStream : public TensorStream {
 public:
  MeshModelStream(DeviceMesh& mesh, torch::nn::Module& model, StageLayout& layout)
      : world_(mesh.world()),
        ordinary_(layout.ordinary_layout(model)),
        senders_(mesh.layout().tp() * mesh.layout().pp()) {
    if (mesh.coord().dp == 0) mine_ = my_pieces(mesh, model, layout, ordinary_);
    learn_pieces();
    for (const auto& [name, t] : ordinary_) names_.push_back(name);
  }

  const StateDict& layout() const override { return ordinary_; }

  torch::Tensor take(const std::string& name) override {
    const uint32_t tag = world_.next_tag();  // every rank, every tensor: in step
    const auto i = static_cast<int64_t>(next_++);
    GPULAB_ASSERT(names_.at(static_cast<size_t>(i)) == name, "the stream's tensors in name order");
    if (world_.rank() == 0) return join(i, tag);
    send(i, tag);
    return {};
  }

 private:
  // Rank 0 learns every sender's boxes (the first replica's ranks are world ranks 0..tp*pp-1).
  void learn_pieces() {
    const uint32_t count_tag = world_.next_tag(), list_tag = world_.next_tag();
    const std::string what = "the pieces of the final weights";
    if (world_.rank() != 0) {
      if (world_.rank() >= senders_) return;
      auto list = encode(mine_).to(world_.device());
      auto count = torch::tensor({list.numel()}, torch::kLong).to(world_.device());
      world_.wait(world_.send_async(count, 0, count_tag, what), what);
      if (list.numel() > 0) world_.wait(world_.send_async(list, 0, list_tag, what), what);
      return;
    }
    from_.assign(static_cast<size_t>(senders_), {});
    from_[0] = mine_;
    for (int r = 1; r < senders_; ++r) {
      auto count = torch::zeros({1}, torch::kLong).to(world_.device());
      world_.wait(world_.recv_async(count, r, count_tag, what), what);
      auto list = torch::empty({count.cpu().item<int64_t>()}, torch::kLong).to(world_.device());
      if (list.numel() > 0) world_.wait(world_.recv_async(list, r, list_tag, what), what);
      from_[static_cast<size_t>(r)] = decode(list.cpu());
    }
    check_coverage();
  }

  // Every tensor's pieces hold its values once (what the senders' slices promise).
  void check_coverage() const {
    std::vector<std::vector<const Box*>> boxes(ordinary_.size());
    for (const auto& pieces : from_)
      for (const auto& p : pieces) boxes.at(static_cast<size_t>(p.tensor)).push_back(&p.box);
    size_t i = 0;
    for (const auto& [name, t] : ordinary_)
      GPULAB_ASSERT(tiled_values(boxes[i++]) == t.numel(), "the ranks' pieces tile each tensor");
  }

  void send(int64_t i, uint32_t tag) {
    std::vector<torch::Tensor> parts;
    for (const auto& p : mine_)
      if (p.tensor == i) parts.push_back(p.data.reshape({-1}));
    if (parts.empty()) return;
    auto flat = torch::cat(parts).to(world_.device()).contiguous();
    const std::string what = "sending the final weights' " + names_[static_cast<size_t>(i)];
    world_.wait(world_.send_async(flat, 0, tag, what), what);
  }

  torch::Tensor join(int64_t i, uint32_t tag) {
    const auto& like = ordinary_.at(names_[static_cast<size_t>(i)]);
    auto out = torch::empty(like.sizes(), like.options().device(torch::kCPU));
    const std::string what = "receiving the final weights' " + names_[static_cast<size_t>(i)];
    struct Incoming {
      std::vector<const Piece*> pieces;
      torch::Tensor buf;
      dist::WorkPtr work;
    };
    std::vector<Incoming> incoming;
    for (size_t r = 0; r < from_.size(); ++r) {
      Incoming in;
      int64_t numel = 0;
      for (const auto& p : from_[r])
        if (p.tensor == i) {
          in.pieces.push_back(&p);
          numel += p.box.numel();
        }
      if (in.pieces.empty()) continue;
      if (r == 0) {
        for (const auto* p : in.pieces) in_box(out, p->box.at, p->box.size).copy_(p->data);
        continue;
      }
      in.buf = torch::empty({numel}, like.options().device(world_.device()));
      in.work = world_.recv_async(in.buf, static_cast<int>(r), tag, what);
      incoming.push_back(std::move(in));
    }
    for (auto& in : incoming) {
      world_.wait(in.work, what);
      const auto flat = in.buf.cpu();
      int64_t at = 0;
      for (const auto* p : in.pieces) {
        const int64_t n = p->box.numel();
        in_box(out, p->box.at, p->box.size).copy_(flat.narrow(0, at, n).view(p->box.size));
        at += n;
      }
    }
    return out;
  }

  dist::Communicator& world_;
  StateDict ordinary_;
  int senders_ = 1;
  std::vector<Piece> mine_;
  std::vector<std::vector<Piece>> from_;  // rank 0: every sender's pieces
  std::vector<std::string> names_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<TensorStream> mesh_model_stream(DeviceMesh& mesh, torch::nn::Module& model,
                                                StageLayout& layout) {
  return std::make_unique<MeshModelStream>(mesh, model, layout);
}

}  // namespace gpulab::train::parallel
