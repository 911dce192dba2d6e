// The prefetching batch loader (see loader.h).
#include "data/loader.h"

#include <cstring>
#include <system_error>

#include "data/sampler.h"
#include "engine/random.h"
#include "kernels/common/check.h"

namespace data {

namespace {

// Keeps the loader's streams apart from the samplers' (which use epoch_seed(seed, epoch)).
constexpr uint64_t kLoaderSalt = 0x6C6F61646572ull;  // "loader"

}  // namespace

engine::Generator sample_generator(uint64_t seed, int64_t epoch, int64_t batch_number,
                                   int64_t slot) {
  const uint64_t key = engine::splitmix64(engine::splitmix64(epoch_seed(seed ^ kLoaderSalt, epoch) ^
                                                             static_cast<uint64_t>(batch_number)) ^
                                          static_cast<uint64_t>(slot));
  return engine::Generator(key);
}

engine::Tensor Batch::image_rows(int64_t begin, int64_t end) const {
  const int64_t decoded_end = first_row + images.size(0);
  ENGINE_CHECK(begin >= first_row && end <= decoded_end && begin <= end, "loader: rows ", begin,
               "..", end, " of batch ", number, " were not decoded (this process decoded rows ",
               first_row, "..", decoded_end, " of ", size(), ")");
  return images.slice(0, begin - first_row, end - first_row);
}

Batch load_batch(const Dataset& dataset, const std::vector<int64_t>& indices, uint64_t seed,
                 int64_t epoch, int64_t batch_number) {
  return load_batch(dataset, indices, seed, epoch, batch_number,
                    RowRange{0, static_cast<int64_t>(indices.size())});
}

Batch load_batch(const Dataset& dataset, const std::vector<int64_t>& indices, uint64_t seed,
                 int64_t epoch, int64_t batch_number, RowRange decoded) {
  const engine::Shape shape = dataset.image_shape();
  const int64_t per_image = engine::shape_numel(shape);
  const int64_t b = static_cast<int64_t>(indices.size());
  ENGINE_CHECK(decoded.begin >= 0 && decoded.begin <= decoded.end && decoded.end <= b,
               "loader: rows ", decoded.begin, "..", decoded.end,
               " to decode are not within batch ", batch_number, "'s ", b, " rows");
  engine::Shape batch_shape = {decoded.end - decoded.begin};
  batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());

  Batch out;
  out.number = batch_number;
  out.indices = indices;
  out.first_row = decoded.begin;
  out.images = engine::Tensor::empty(batch_shape);
  std::vector<int64_t> labels(indices.size());
  float* dst = out.images.data<float>();
  for (int64_t j = 0; j < b; ++j) {
    const int64_t index = indices[static_cast<std::size_t>(j)];
    ENGINE_CHECK(index >= 0 && index < dataset.size(), "loader: index ", index, " in batch ",
                 batch_number, " is out of range for ", dataset.name(), " ", dataset.split(), " (",
                 dataset.size(), " images)");
    labels[static_cast<std::size_t>(j)] = dataset.label(index);
    if (j < decoded.begin || j >= decoded.end) continue;  // another rank's row
    // The slot's own generator: the same pixels whichever rows this process decodes.
    engine::Generator gen = sample_generator(seed, epoch, batch_number, j);
    const engine::Tensor image = dataset.image(index, gen).contiguous();
    ENGINE_CHECK(image.shape() == shape && image.dtype() == engine::DType::F32,
                 "loader: ", dataset.name(), " image ", index, " is ", image.str(),
                 ", expected f32", engine::shape_str(shape));
    std::memcpy(dst + (j - decoded.begin) * per_image, image.data<float>(),
                static_cast<std::size_t>(per_image) * sizeof(float));
  }
  out.labels = engine::Tensor::from_indices(labels, {b});
  return out;
}

BatchLoader::BatchLoader(const Dataset& dataset, std::vector<std::vector<int64_t>> batches,
                         LoaderOptions options)
    : dataset_(dataset), batches_(std::move(batches)), options_(options) {
  ENGINE_CHECK(options_.num_workers >= 0 && options_.prefetch >= 1,
               "loader: num_workers must be >= 0 and prefetch >= 1, got ", options_.num_workers,
               " and ", options_.prefetch);
  ENGINE_CHECK(options_.first_batch >= 0 && options_.epoch >= 0, "loader: negative epoch (",
               options_.epoch, ") or first batch (", options_.first_batch, ")");
  try {
    for (int w = 0; w < options_.num_workers; ++w) workers_.emplace_back([this] { work(); });
  } catch (const std::system_error& e) {
    // The threads already started must be joined before the members go, or their destructors
    // terminate the process (the destructor does not run when the constructor throws).
    const size_t started = workers_.size();
    stop_workers();
    engine::fail("loader: could not start worker thread ", started + 1, " of ",
                 options_.num_workers, " (", e.what(), "); use fewer workers");
  }
}

BatchLoader::~BatchLoader() { stop_workers(); }

void BatchLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

BatchLoader::Result BatchLoader::load(int64_t position) const {
  Result result;
  try {
    const std::vector<int64_t>& indices = batches_[static_cast<std::size_t>(position)];
    const int64_t b = static_cast<int64_t>(indices.size());
    const RowRange decoded = options_.decoded_rows ? options_.decoded_rows(b) : RowRange{0, b};
    result.batch = load_batch(dataset_, indices, options_.seed, options_.epoch,
                              options_.first_batch + position, decoded);
  } catch (...) {
    result.error = std::current_exception();
  }
  return result;
}

void BatchLoader::work() {
  while (true) {
    int64_t position = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Claim the next batch once it is within `prefetch` of the consumer.
      work_ready_.wait(lock, [this] {
        return stop_ || next_claim_ >= size() || next_claim_ < consumed_ + options_.prefetch;
      });
      if (stop_ || next_claim_ >= size()) return;
      position = next_claim_++;
    }
    Result result = load(position);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace(position, std::move(result));
    }
    batch_ready_.notify_all();
  }
}

bool BatchLoader::next(Batch& out) {
  Result result;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (consumed_ >= size()) return false;
    const int64_t position = consumed_;
    if (workers_.empty()) {
      lock.unlock();
      result = load(position);
      lock.lock();
    } else {
      batch_ready_.wait(lock, [&] { return ready_.count(position) > 0; });
      result = std::move(ready_.at(position));
      ready_.erase(position);
    }
    ++consumed_;
  }
  work_ready_.notify_all();  // one more batch may now be prefetched
  if (result.error) std::rethrow_exception(result.error);
  out = std::move(result.batch);
  return true;
}

}  // namespace data
