// A dataset split batch by batch (header: tools/dml/split_stream.h).
#include "tools/dml/split_stream.h"

#include <algorithm>

#include "data/loader.h"
#include "kernels/common/check.h"
#include "models/embed.h"
#include "tools/dml/args.h"

namespace dml {

namespace {

void check_count(const data::Dataset& dataset, int64_t count, const char* what) {
  ENGINE_CHECK(count > 0 && count <= dataset.size(), what, ": ", count, " images asked of ",
               dataset.name(), " ", dataset.split(), ", which has ", dataset.size());
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

std::vector<int64_t> split_labels(const data::Dataset& dataset, int64_t count) {
  check_count(dataset, count, "split_labels");
  std::vector<int64_t> labels = dataset.labels();
  labels.resize(static_cast<size_t>(count));
  return labels;
}

void for_each_split_batch(const data::Dataset& dataset, int64_t count, int64_t batch_size,
                          const std::function<void(int64_t, const engine::Tensor&)>& visit) {
  check_count(dataset, count, "for_each_split_batch");
  ENGINE_CHECK(batch_size > 0, "for_each_split_batch: batch size must be positive, got ",
               batch_size);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t begin = 0; begin < count; begin += batch_size) {
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
  engine::Tensor out = engine::Tensor::empty({count, model.embedding_dim()}, engine::DType::F32);
  for_each_split_batch(dataset, count, batch_size,
                       [&](int64_t begin, const engine::Tensor& images) {
                         const int64_t end = begin + images.size(0);
                         model.check_input(images);
                         out.slice(0, begin, end).copy_(models::embed_batch(model, images));
                         if (progress) progress(end, count);
                       });
  return out;
}

}  // namespace dml
