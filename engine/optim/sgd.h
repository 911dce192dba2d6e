// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay,
// exactly torch.optim.SGD (update formulas in kernels/optim/optim.h):
//   d = g + wd p;  b = d (first step) or momentum b + (1 - dampening) d;
//   d = d + momentum b (nesterov) or b;  p = p - lr d.
#pragma once

#include <vector>

#include "engine/optim/optimizer.h"

namespace engine::optim {

struct SgdOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;  // requires momentum > 0 and dampening == 0 (as PyTorch)
};

struct SgdGroup {
  std::vector<Tensor> params;
  SgdOptions options;
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<Tensor> params, const SgdOptions& options);
  explicit Sgd(std::vector<SgdGroup> groups);

  SgdOptions& options(size_t group);
  double lr(size_t group) const override;
  void set_lr(size_t group, double lr) override;

 protected:
  void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void update_cuda(size_t group, const std::vector<PendingUpdate>& pending) override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  std::vector<std::string> required_state(size_t group) const override;

 private:
  std::vector<SgdOptions> options_;  // one per group
};

}  // namespace engine::optim
