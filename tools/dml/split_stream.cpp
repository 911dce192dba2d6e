// A dataset split batch by batch (header: tools/dml/split_stream.h).
#include "tools/dml/split_stream.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "data/loader.h"
#include "engine/dist/communicator.h"
#include "kernels/common/check.h"
#include "models/embed.h"
#include "tools/dml/args.h"

namespace dml {

ImageProgress::ImageProgress(std::string what, int64_t total)
    : what_(std::move(what)), total_(total), tty_(isatty(fileno(stderr)) != 0) {}

void ImageProgress::update(int64_t done) {
  const bool last = done >= total_;
  if (!tty_ && !last && done * 10 / total_ == shown_ * 10 / total_) return;  // total_ > 0
  shown_ = done;
  std::fprintf(stderr, "%s%s: %lld/%lld images%s", tty_ ? "\r" : "", what_.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_),
               tty_ && !last ? "" : "\n");
  std::fflush(stderr);
}

namespace {

void check_count(const data::Dataset& dataset, int64_t count, const char* what) {
  ENGINE_CHECK(count > 0 && count <= dataset.size(), what, ": ", count, " images asked of ",
               dataset.name(), " ", dataset.split(), ", which has ", dataset.size());
}

// Replaces `rows` (f32 [N, D] on the CPU, of which this rank filled the rows from `first_row`
// up to the next rank's first row) by every rank's rows: an all-gather of bytes, exact.
void gather_embedding_rows(engine::Tensor& rows, int64_t first_row) {
  const engine::dist::World& world = engine::dist::world();
  const int64_t n = rows.size(0), d = rows.size(1);
  const std::vector<int64_t> firsts = engine::dist::all_gather(&first_row, 1);
  const int64_t begin = std::min(n, first_row);
  const int64_t end =
      world.rank + 1 < world.size ? std::min(n, firsts[static_cast<size_t>(world.rank) + 1]) : n;
  const float* data = rows.data<float>();
  std::vector<float> mine(data + begin * d, data + end * d);
  const std::vector<float> all = engine::dist::all_gather_varying(mine);
  ENGINE_CHECK(static_cast<int64_t>(all.size()) == n * d, "embed_split: gathered ", all.size(),
               " floats, expected ", n * d);
  std::copy(all.begin(), all.end(), rows.data<float>());
}

}  // namespace

std::unique_ptr<data::Dataset> open_data_option(const std::string& name, const std::string& split,
                                                const std::string& root,
                                                const std::string& transform) {
  try {
    return data::open_dataset(name, split, root, /*augment=*/false, transform);
  } catch (const engine::Error& e) {
    throw UsageError("--data " + name + ": " + e.what());
  }
}

SplitOptions take_split_options(Args& args, const std::string& default_split) {
  SplitOptions o;
  o.data = args.take_optional("--data");
  o.split = args.take_string("--split", default_split);
  o.root = args.take_optional("--root");
  if (o.split != "train" && o.split != "test") {
    throw UsageError("--split must be train or test, got '" + o.split + "'");
  }
  return o;
}

std::unique_ptr<data::Dataset> open_split(const SplitOptions& o, const TrainedModel& trained) {
  // A --data other than the training data has its own default root, not the training one.
  return open_data_option(o.dataset_name(trained), o.split,
                          o.root.value_or(o.data ? "" : trained.root), trained.transform);
}

std::vector<int64_t> split_labels(const data::Dataset& dataset, int64_t count) {
  check_count(dataset, count, "split_labels");
  std::vector<int64_t> labels = dataset.labels();
  labels.resize(static_cast<size_t>(count));
  return labels;
}

void for_each_split_batch(const data::Dataset& dataset, int64_t count, int64_t batch_size,
                          const std::function<void(int64_t, const engine::Tensor&)>& visit) {
  ENGINE_CHECK(batch_size > 0, "for_each_split_batch: batch size must be positive, got ",
               batch_size);
  for_each_split_batch_in(dataset, count, batch_size, 0, (count + batch_size - 1) / batch_size,
                          visit);
}

void for_each_split_batch_in(const data::Dataset& dataset, int64_t count, int64_t batch_size,
                             int64_t first_batch, int64_t end_batch,
                             const std::function<void(int64_t, const engine::Tensor&)>& visit) {
  check_count(dataset, count, "for_each_split_batch");
  ENGINE_CHECK(batch_size > 0, "for_each_split_batch: batch size must be positive, got ",
               batch_size);
  ENGINE_CHECK(0 <= first_batch && first_batch <= end_batch &&
                   end_batch <= (count + batch_size - 1) / batch_size,
               "for_each_split_batch: batches [", first_batch, ", ", end_batch, ") of ", count,
               " images in batches of ", batch_size);
  if (first_batch == end_batch) return;
  std::vector<std::vector<int64_t>> batches;
  for (int64_t begin = first_batch * batch_size; begin < std::min(count, end_batch * batch_size);
       begin += batch_size) {
    std::vector<int64_t> indices(static_cast<size_t>(std::min(count, begin + batch_size) - begin));
    for (size_t j = 0; j < indices.size(); ++j) indices[j] = begin + static_cast<int64_t>(j);
    batches.push_back(std::move(indices));
  }
  data::LoaderOptions options;
  options.num_workers = 2;
  options.prefetch = 2;  // decoded batches in memory: the one in use plus at most two more
  data::BatchLoader loader(dataset, std::move(batches), options);
  data::Batch batch;
  while (loader.next(batch)) visit(batch.indices.front(), batch.images);
}

engine::Tensor embed_split(models::Model& model, const data::Dataset& dataset, int64_t count,
                           int64_t batch_size,
                           const std::function<void(int64_t, int64_t)>& progress) {
  check_count(dataset, count, "embed_split");
  ENGINE_CHECK(batch_size > 0, "embed_split: batch size must be positive, got ", batch_size);
  engine::Tensor out = engine::Tensor::empty({count, model.embedding_dim()}, engine::DType::F32);
  // Over several ranks each embeds its share of whole batches, the same batches a single process
  // embeds (so the same rows, bit for bit), and the rows are gathered in order.
  const engine::dist::World& world = engine::dist::world();
  const engine::dist::Share share =
      engine::dist::share_of((count + batch_size - 1) / batch_size, world.rank, world.size);
  for_each_split_batch_in(dataset, count, batch_size, share.begin, share.end,
                          [&](int64_t begin, const engine::Tensor& images) {
                            const int64_t end = begin + images.size(0);
                            model.check_input(images);
                            out.slice(0, begin, end).copy_(models::embed_batch(model, images));
                            if (progress && world.rank == 0) progress(end, count);
                          });
  if (world.size > 1) gather_embedding_rows(out, share.begin * batch_size);
  return out;
}

}  // namespace dml
