// Going over a dataset split batch by batch, for the commands that read a whole split once: `dml
// eval` and evaluation during training, `dml embed --data`, and `dml attack` / `dml ers` (the
// gallery, then the attacked images).
//
// Why not load the split: a decoded 3x224x224 image is 602,112 bytes of f32, so CUB's test split
// is 3.6 GB, CARS196's 4.9 GB and SOP's 36 GB. Here at most a few batches are decoded at a time
// (data::BatchLoader: worker threads decode the next batches while the model runs on this one);
// what is kept is the embeddings, [N, D] floats (SOP at D = 512: 124 MB).
//
// The datasets these commands open do not augment (open_dataset(..., augment = false)), so an
// image's pixels do not depend on the loader's per-sample generators: every batch equals the
// images dataset.image(i) would give, and the embeddings equal models::embed of the stacked split
// with the same batch size (same batch boundaries, same arithmetic).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "engine/tensor.h"
#include "models/model.h"
#include "tools/dml/args.h"
#include "tools/dml/load_model.h"

namespace dml {

// data::open_dataset(name, split, root, augment = false, transform) for a command's --data option:
// a dataset that cannot be opened (unknown name, missing or broken files) is a UsageError (exit
// code 2) that starts with "--data NAME: ", in every subcommand, as in dml train's config
// (docs/config.md, data.root).
std::unique_ptr<data::Dataset> open_data_option(const std::string& name, const std::string& split,
                                                const std::string& root,
                                                const std::string& transform);

// The split a checkpoint's command reads: --data NAME (default: the data it was trained on),
// --split train|test and --root DIR (default: the training root, or the dataset's default root
// with --data), for `dml eval`, `dml hardness`, `dml report --grid/--attack`, `dml attack` and
// `dml ers`.
struct SplitOptions {
  std::optional<std::string> data, root;
  std::string split = "test";
  std::string dataset_name(const TrainedModel& trained) const {
    return data.value_or(trained.data);
  }
};
// Takes --data, --split (default `default_split`) and --root; a split other than train or test is
// a UsageError naming it.
SplitOptions take_split_options(Args& args, const std::string& default_split);
// open_data_option for the options and the checkpoint (its root and image transform).
std::unique_ptr<data::Dataset> open_split(const SplitOptions& options, const TrainedModel& trained);

// "<what>: 2560/10000 images" on stderr while a split is embedded: overwritten in place on a
// terminal, else a line about every 10% (so a log stays short); `update` is embed_split's
// progress callback.
class ImageProgress {
 public:
  ImageProgress(std::string what, int64_t total);
  void update(int64_t done);

 private:
  std::string what_;
  int64_t total_;
  bool tty_;
  int64_t shown_ = 0;
};

// The labels of the first `count` items of the split (0 < count <= dataset.size()).
std::vector<int64_t> split_labels(const data::Dataset& dataset, int64_t count);

// Calls visit(begin, images) for the first `count` images in order, in batches of `batch_size`:
// images f32 [end - begin, C, H, W] on the CPU, in [0, 1]. An error from decoding (an unreadable
// image) or from visit stops the walk and propagates.
void for_each_split_batch(const data::Dataset& dataset, int64_t count, int64_t batch_size,
                          const std::function<void(int64_t, const engine::Tensor&)>& visit);

// for_each_split_batch's walk over the batches numbered [first_batch, end_batch) only (batch b
// holds images [b * batch_size, min(count, (b + 1) * batch_size))): one rank's share of the walk.
void for_each_split_batch_in(const data::Dataset& dataset, int64_t count, int64_t batch_size,
                             int64_t first_batch, int64_t end_batch,
                             const std::function<void(int64_t, const engine::Tensor&)>& visit);

// The model's raw embeddings (eval mode, before any L2 normalization) of the first `count` images:
// f32 [count, D] on the CPU. progress(done, count) after each batch, if given (on rank 0). Over
// several MPI ranks (docs/distributed.md) each rank embeds its share of the batches and every
// rank gets all rows, equal bit for bit to a single process's.
engine::Tensor embed_split(models::Model& model, const data::Dataset& dataset, int64_t count,
                           int64_t batch_size,
                           const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace dml
