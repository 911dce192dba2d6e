// Adam and AdamW, exactly torch.optim.Adam / AdamW (formulas in kernels/optim/optim.h):
//   Adam:  g = g + wd p (L2, coupled);            AdamW: p = p (1 - lr wd) first (decoupled)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  t counts this parameter's updates
//   p = p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// amsgrad and maximize are not implemented.
#pragma once

#include <vector>

#include "engine/optim/optimizer.h"

namespace engine::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // true: AdamW
};

struct AdamGroup {
  std::vector<Tensor> params;
  AdamOptions options;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = AdamOptions());
  explicit Adam(std::vector<AdamGroup> groups);

  AdamOptions& options(size_t group);
  double lr(size_t group) const override;
  void set_lr(size_t group, double lr) override;

 protected:
  Adam(std::string name, std::vector<AdamGroup> groups);
  void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void update_cuda(size_t group, const std::vector<PendingUpdate>& pending) override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 private:
  std::vector<AdamOptions> options_;  // one per group
};

// Adam with decoupled weight decay; every group gets decoupled_weight_decay = true. PyTorch's
// AdamW default weight decay is 1e-2: defaults() returns those options.
class AdamW : public Adam {
 public:
  static AdamOptions defaults();
  AdamW(std::vector<Tensor> params, const AdamOptions& options = defaults());
  explicit AdamW(std::vector<AdamGroup> groups);
};

}  // namespace engine::optim
