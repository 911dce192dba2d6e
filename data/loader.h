// A multi-threaded prefetching batch loader (docs/architecture.md).
//
// Given a Dataset and the index batches of (part of) an epoch, worker threads assemble batches
// ahead of the consumer: images f32 [B, C, H, W] and labels I64 [B]. Batches come out in the
// given order, and their content — pixels included — depends only on (seed, epoch, batch number,
// position in the batch) and the indices, never on the number of threads or their timing: the
// random transform of the sample in slot j of batch number b draws from
// sample_generator(seed, epoch, b, j), a Philox key of its own.
//
// Resuming mid-epoch: pass the remaining batches with first_batch = the number of the first one
// (BatchSampler::state().batch), and every sample gets the same generator, hence the same
// pixels, as in the uninterrupted run.
//
// A rank of data-parallel training decodes only its own rows of each batch (decoded_rows below;
// docs/distributed.md): the other rows keep their indices and labels, and since each row's
// generator depends on its slot alone, a decoded row has the bytes it has in a whole batch.
//
// Dataset::image() is called concurrently from the workers, so it must be thread-safe (ours
// are: they only read immutable state and files).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace data {

// Rows [begin, end) of a batch.
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
};

struct Batch {
  int64_t number = 0;            // batch number within its epoch
  std::vector<int64_t> indices;  // data set indices, in batch order (all B rows)
  engine::Tensor images;  // f32 [rows decoded, C, H, W]: batch rows first_row, first_row + 1..
  int64_t first_row = 0;  // the batch row of images' row 0 (0 unless only some were decoded)
  engine::Tensor labels;  // I64 [B], every row's

  int64_t size() const { return static_cast<int64_t>(indices.size()); }  // B
  // Images of batch rows [begin, end), which must have been decoded (an error names them).
  engine::Tensor image_rows(int64_t begin, int64_t end) const;
};

struct LoaderOptions {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t first_batch = 0;  // batch number of the first batch given (resume)
  int num_workers = 2;      // 0 = load on the caller's thread when next() asks
  int prefetch = 4;         // batches ready or being loaded ahead of the consumer (>= 1)
  // The rows of a batch of B rows to decode (a data-parallel rank's share); empty: all B.
  std::function<RowRange(int64_t batch_size)> decoded_rows;
};

// The generator of the sample in slot `slot` of batch number `batch_number` of `epoch`.
engine::Generator sample_generator(uint64_t seed, int64_t epoch, int64_t batch_number,
                                   int64_t slot);

// One batch, synchronously (what each worker does; also the reference the tests compare to).
Batch load_batch(const Dataset& dataset, const std::vector<int64_t>& indices, uint64_t seed,
                 int64_t epoch, int64_t batch_number);
// The same with only rows `decoded` decoded (labels of all rows); each row's pixels are those of
// the whole batch's row.
Batch load_batch(const Dataset& dataset, const std::vector<int64_t>& indices, uint64_t seed,
                 int64_t epoch, int64_t batch_number, RowRange decoded);

class BatchLoader {
 public:
  BatchLoader(const Dataset& dataset, std::vector<std::vector<int64_t>> batches,
              LoaderOptions options = {});
  ~BatchLoader();  // stops the workers (finishing the batches they are loading) and joins them
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The next batch in order; false once all batches were returned. A worker's error (e.g. an
  // undecodable image) is rethrown here, for the batch it occurred in; later batches still load.
  bool next(Batch& out);
  int64_t size() const { return static_cast<int64_t>(batches_.size()); }

 private:
  struct Result {
    Batch batch;
    std::exception_ptr error;
  };
  void work();
  void stop_workers();  // tells the workers to finish and joins them
  Result load(int64_t position) const;

  const Dataset& dataset_;
  std::vector<std::vector<int64_t>> batches_;
  LoaderOptions options_;

  std::mutex mutex_;
  std::condition_variable work_ready_;   // workers: a batch may be claimed, or stop
  std::condition_variable batch_ready_;  // consumer: a batch finished
  int64_t next_claim_ = 0;               // next batch position a worker will load
  int64_t consumed_ = 0;                 // next batch position next() returns
  bool stop_ = false;
  std::map<int64_t, Result> ready_;  // finished batches not yet returned, by position
  std::vector<std::thread> workers_;
};

}  // namespace data
