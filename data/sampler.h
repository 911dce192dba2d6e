// Batch samplers for deep metric learning (docs/architecture.md): SPC-2 exactly as robrank, and
// M-per-class.
//
// Determinism: batch k of epoch e is a pure function of (seed, e, k). Each epoch has its own
// Philox stream, keyed by epoch_seed(seed, e) (so epochs are independent and any batch can be
// recomputed without replaying earlier ones). A sampler's resumable state is therefore just
// (seed, epoch, next batch) — plus the sizes, recorded to refuse a resume against other data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace data {

// The Philox key of epoch `epoch` for a run seeded with `seed` (a SplitMix64 mix of both).
uint64_t epoch_seed(uint64_t seed, int64_t epoch);

struct SamplerState {
  std::string kind;  // "spc2" or "m_per_class"
  uint64_t seed = 0;
  int64_t epoch = 0;        // epoch of the next batch
  int64_t batch = 0;        // index of the next batch within that epoch
  int64_t num_samples = 0;  // data set size the sampler was built for
  int64_t batch_size = 0;   // images per full batch
};

nlohmann::json to_json(const SamplerState& state);
// Throws naming the missing or malformed key.
SamplerState sampler_state_from_json(const nlohmann::json& json);

class BatchSampler {
 public:
  virtual ~BatchSampler() = default;
  virtual std::string kind() const = 0;
  virtual int64_t batch_size() const = 0;  // images in a full batch
  virtual int64_t batches_per_epoch() const = 0;
  virtual int64_t num_samples() const = 0;
  // Dataset indices of batch `k` of epoch `epoch`; depends only on (seed, epoch, k).
  virtual std::vector<int64_t> batch(int64_t epoch, int64_t k) const = 0;

  uint64_t seed() const { return seed_; }

  // The cursor: next() returns the batch at (epoch, batch) and advances, rolling over into the
  // next epoch after the last batch. state()/restore() save and resume it mid-epoch.
  std::vector<int64_t> next();
  SamplerState state() const;
  // Refuses a state of another kind or built for another data set size or batch size.
  void restore(const SamplerState& state);
  // The batches from the cursor to the end of its epoch (what a resumed epoch still has to do);
  // does not move the cursor.
  std::vector<std::vector<int64_t>> rest_of_epoch() const;

 protected:
  explicit BatchSampler(uint64_t seed) : seed_(seed) {}
  void check_batch_index(int64_t epoch, int64_t k) const;

 private:
  uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t next_batch_ = 0;
};

// SPC-2 (robrank datasets/mnist.py, MNISTPairDataset): every epoch visits
// each of the N training images once as an anchor, in a random order (a seeded permutation:
// robrank's DataLoader(shuffle=True)); each anchor gets a positive drawn uniformly from ALL indices
// of its class, the anchor itself included. A batch of P pairs is laid out [a0, p0, a1, p1, ...],
// labels [y0, y0, y1, y1, ...]. The last batch of an epoch holds the N mod P leftover pairs unless
// drop_last (robrank keeps it: PyTorch's DataLoader default).
class Spc2Sampler : public BatchSampler {
 public:
  Spc2Sampler(std::vector<int64_t> labels, int64_t pairs_per_batch, uint64_t seed,
              bool drop_last = false);

  std::string kind() const override { return "spc2"; }
  int64_t batch_size() const override { return 2 * pairs_; }
  int64_t batches_per_epoch() const override;
  int64_t num_samples() const override { return static_cast<int64_t>(labels_.size()); }
  std::vector<int64_t> batch(int64_t epoch, int64_t k) const override;

 private:
  const std::vector<int64_t>& anchor_order(int64_t epoch) const;

  std::vector<int64_t> labels_;
  std::vector<std::vector<int64_t>> members_;  // indices of each class, increasing
  int64_t pairs_;
  bool drop_last_;
  // The permutation of the last epoch asked for (recomputing it per batch would cost O(N)).
  // Not thread-safe: call batch() from one thread (the loader's owner does).
  mutable int64_t cached_epoch_ = -1;
  mutable uint64_t cached_seed_ = 0;
  mutable std::vector<int64_t> cached_order_;
};

// M-per-class: each batch takes `classes_per_batch` distinct classes (uniformly, among classes
// with at least one image) and `m` images of each — distinct images when the class has at least
// m, otherwise drawn with replacement (as pytorch-metric-learning's MPerClassSampler). With
// `with_replacement`, every class slot and every image is an independent uniform draw, so a batch
// may repeat a class or an image (the "Revisiting DML" class sampler of Roth et al., which
// MDProp's code uses). Layout: [c0 x m, c1 x m, ...]. An epoch is
// max(1, N / (classes_per_batch * m)) batches, so it shows about N images.
class MPerClassSampler : public BatchSampler {
 public:
  MPerClassSampler(std::vector<int64_t> labels, int64_t classes_per_batch, int64_t m, uint64_t seed,
                   bool with_replacement = false);

  std::string kind() const override { return "m_per_class"; }
  int64_t batch_size() const override { return classes_per_batch_ * m_; }
  int64_t batches_per_epoch() const override;
  int64_t num_samples() const override { return num_samples_; }
  std::vector<int64_t> batch(int64_t epoch, int64_t k) const override;

 private:
  std::vector<std::vector<int64_t>> members_;  // non-empty classes only, by increasing label
  int64_t num_samples_;
  int64_t classes_per_batch_;
  int64_t m_;
  bool with_replacement_;
};

// Consecutive batches 0..n-1 of at most `batch_size` (evaluation order, no shuffling).
std::vector<std::vector<int64_t>> sequential_batches(int64_t n, int64_t batch_size);

}  // namespace data
