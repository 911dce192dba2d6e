// SPC-2 and M-per-class batch samplers (see sampler.h).
#include "data/sampler.h"

#include <algorithm>

#include "engine/random.h"
#include "kernels/common/check.h"
#include "kernels/random/philox.h"

namespace data {

using engine::fail;

namespace {

// Word i of the Philox stream with key `key` starting at block `first_block` (the layout of
// engine::randint: block first_block + i/4, word i%4).
uint32_t stream_word(uint64_t key, uint64_t first_block, uint64_t i) {
  return engine::kernels::philox4x32_10(first_block + i / 4, 0, key).word[i % 4];
}

// A word scaled to [0, n) (randint's 64-bit multiply; n < 2^32).
int64_t below(uint32_t word, int64_t n) {
  return static_cast<int64_t>((uint64_t(word) * uint64_t(n)) >> 32);
}

uint64_t blocks_for(int64_t words) { return static_cast<uint64_t>((words + 3) / 4); }

std::vector<std::vector<int64_t>> class_members(const std::vector<int64_t>& labels,
                                                const char* sampler) {
  ENGINE_CHECK(!labels.empty(), sampler, ": no labels (empty data set)");
  int64_t max_label = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    ENGINE_CHECK(labels[i] >= 0, sampler, ": negative label ", labels[i], " at index ", i);
    max_label = std::max(max_label, labels[i]);
  }
  std::vector<std::vector<int64_t>> members(static_cast<std::size_t>(max_label + 1));
  for (std::size_t i = 0; i < labels.size(); ++i) {
    members[static_cast<std::size_t>(labels[i])].push_back(static_cast<int64_t>(i));
  }
  return members;
}

int64_t json_int(const nlohmann::json& json, const char* key) {
  if (!json.contains(key)) fail("sampler state: missing key '", key, "'");
  const nlohmann::json& value = json.at(key);
  if (!value.is_number_integer()) fail("sampler state: key '", key, "' must be an integer");
  return value.get<int64_t>();
}

}  // namespace

uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
  return engine::splitmix64(engine::splitmix64(seed) ^ static_cast<uint64_t>(epoch));
}

nlohmann::json to_json(const SamplerState& state) {
  return nlohmann::json{{"kind", state.kind},
                        {"seed", state.seed},
                        {"epoch", state.epoch},
                        {"batch", state.batch},
                        {"num_samples", state.num_samples},
                        {"batch_size", state.batch_size}};
}

SamplerState sampler_state_from_json(const nlohmann::json& json) {
  if (!json.is_object()) fail("sampler state: expected a JSON object, got ", json.type_name());
  SamplerState state;
  if (!json.contains("kind") || !json.at("kind").is_string()) {
    fail("sampler state: missing or non-string key 'kind'");
  }
  state.kind = json.at("kind").get<std::string>();
  if (!json.contains("seed") || !json.at("seed").is_number_integer()) {
    fail("sampler state: missing or non-integer key 'seed'");
  }
  state.seed = json.at("seed").get<uint64_t>();
  state.epoch = json_int(json, "epoch");
  state.batch = json_int(json, "batch");
  state.num_samples = json_int(json, "num_samples");
  state.batch_size = json_int(json, "batch_size");
  return state;
}

// ---- the cursor ---------------------------------------------------------------------------------

void BatchSampler::check_batch_index(int64_t epoch, int64_t k) const {
  ENGINE_CHECK(epoch >= 0 && k >= 0 && k < batches_per_epoch(), kind(), " sampler: batch ", k,
               " of epoch ", epoch, " does not exist (", batches_per_epoch(),
               " batches per epoch)");
}

std::vector<int64_t> BatchSampler::next() {
  std::vector<int64_t> out = batch(epoch_, next_batch_);
  if (++next_batch_ == batches_per_epoch()) {
    ++epoch_;
    next_batch_ = 0;
  }
  return out;
}

SamplerState BatchSampler::state() const {
  SamplerState s;
  s.kind = kind();
  s.seed = seed_;
  s.epoch = epoch_;
  s.batch = next_batch_;
  s.num_samples = num_samples();
  s.batch_size = batch_size();
  return s;
}

void BatchSampler::restore(const SamplerState& s) {
  ENGINE_CHECK(s.kind == kind(), "sampler state: kind '", s.kind, "' cannot resume a ", kind(),
               " sampler");
  ENGINE_CHECK(s.num_samples == num_samples() && s.batch_size == batch_size(),
               "sampler state: saved for ", s.num_samples, " samples in batches of ", s.batch_size,
               ", this ", kind(), " sampler has ", num_samples(), " samples in batches of ",
               batch_size());
  ENGINE_CHECK(s.epoch >= 0 && s.batch >= 0 && s.batch < batches_per_epoch(),
               "sampler state: batch ", s.batch, " of epoch ", s.epoch, " is out of range (",
               batches_per_epoch(), " batches per epoch)");
  seed_ = s.seed;
  epoch_ = s.epoch;
  next_batch_ = s.batch;
}

std::vector<std::vector<int64_t>> BatchSampler::rest_of_epoch() const {
  std::vector<std::vector<int64_t>> out;
  for (int64_t k = next_batch_; k < batches_per_epoch(); ++k) out.push_back(batch(epoch_, k));
  return out;
}

// ---- SPC-2 --------------------------------------------------------------------------------------

Spc2Sampler::Spc2Sampler(std::vector<int64_t> labels, int64_t pairs_per_batch, uint64_t seed,
                         bool drop_last)
    : BatchSampler(seed),
      labels_(std::move(labels)),
      members_(class_members(labels_, "spc2")),
      pairs_(pairs_per_batch),
      drop_last_(drop_last) {
  ENGINE_CHECK(pairs_ > 0, "spc2 sampler: pairs per batch must be positive, got ", pairs_);
  ENGINE_CHECK(labels_.size() < (uint64_t(1) << 32), "spc2 sampler: at most 2^32 samples");
  ENGINE_CHECK(batches_per_epoch() > 0, "spc2 sampler: ", labels_.size(),
               " samples make no full batch of ", pairs_, " pairs (drop_last)");
}

int64_t Spc2Sampler::batches_per_epoch() const {
  const int64_t n = num_samples();
  return drop_last_ ? n / pairs_ : (n + pairs_ - 1) / pairs_;
}

const std::vector<int64_t>& Spc2Sampler::anchor_order(int64_t epoch) const {
  if (cached_epoch_ != epoch || cached_seed_ != seed()) {
    engine::Generator gen(epoch_seed(seed(), epoch));  // blocks [0, ceil(N/4)) of the stream
    cached_order_ = engine::permutation_vector(num_samples(), gen);
    cached_epoch_ = epoch;
    cached_seed_ = seed();
  }
  return cached_order_;
}

std::vector<int64_t> Spc2Sampler::batch(int64_t epoch, int64_t k) const {
  check_batch_index(epoch, k);
  const std::vector<int64_t>& order = anchor_order(epoch);
  const int64_t n = num_samples();
  const int64_t begin = k * pairs_, end = std::min(n, begin + pairs_);
  // The positives use the epoch's stream after the permutation: word i for anchor position i.
  const uint64_t key = epoch_seed(seed(), epoch), first_block = blocks_for(n);
  std::vector<int64_t> out;
  out.reserve(static_cast<std::size_t>(2 * (end - begin)));
  for (int64_t i = begin; i < end; ++i) {
    const int64_t anchor = order[static_cast<std::size_t>(i)];
    // As robrank: for each anchor a positive index is drawn
    // uniformly from **all** indices of the same class (can coincide with the anchor itself)
    // — robrank's random.choice(cls2idx[label]) in MNISTPairDataset.__getitem__ (and
    // random.choice(label2idxs[label]) in CarsPairDataset). So the anchor is a candidate.
    const std::vector<int64_t>& same =
        members_[static_cast<std::size_t>(labels_[static_cast<std::size_t>(anchor)])];
    const int64_t pick = below(stream_word(key, first_block, static_cast<uint64_t>(i)),
                               static_cast<int64_t>(same.size()));
    out.push_back(anchor);
    out.push_back(same[static_cast<std::size_t>(pick)]);
  }
  return out;
}

// ---- M-per-class --------------------------------------------------------------------------------

MPerClassSampler::MPerClassSampler(std::vector<int64_t> labels, int64_t classes_per_batch,
                                   int64_t m, uint64_t seed, bool with_replacement)
    : BatchSampler(seed),
      num_samples_(static_cast<int64_t>(labels.size())),
      classes_per_batch_(classes_per_batch),
      m_(m),
      with_replacement_(with_replacement) {
  for (std::vector<int64_t>& members : class_members(labels, "m_per_class")) {
    if (!members.empty()) members_.push_back(std::move(members));
  }
  ENGINE_CHECK(m_ > 0 && classes_per_batch_ > 0, "m_per_class sampler: classes per batch (",
               classes_per_batch_, ") and m (", m_, ") must be positive");
  ENGINE_CHECK(with_replacement_ || classes_per_batch_ <= static_cast<int64_t>(members_.size()),
               "m_per_class sampler: ", classes_per_batch_,
               " classes per batch but the data set "
               "has only ",
               members_.size(), " classes");
}

int64_t MPerClassSampler::batches_per_epoch() const {
  return std::max<int64_t>(1, num_samples_ / batch_size());
}

std::vector<int64_t> MPerClassSampler::batch(int64_t epoch, int64_t k) const {
  check_batch_index(epoch, k);
  const int64_t num_classes = static_cast<int64_t>(members_.size());
  // Batch k owns a fixed range of the epoch's stream: one word per class draw and per image
  // (with replacement there may be more class slots than classes).
  const uint64_t key = epoch_seed(seed(), epoch);
  const int64_t class_words = std::max(num_classes, classes_per_batch_);
  const uint64_t first_block = static_cast<uint64_t>(k) * blocks_for(class_words + batch_size());
  uint64_t word = 0;

  // Partial Fisher-Yates: positions 0..C-1 of a shuffled class list; or, with replacement, C
  // independent draws.
  std::vector<int64_t> classes(static_cast<std::size_t>(class_words));
  for (int64_t c = 0; c < num_classes; ++c) classes[static_cast<std::size_t>(c)] = c;
  for (int64_t j = 0; j < classes_per_batch_; ++j) {
    if (with_replacement_) {
      classes[static_cast<std::size_t>(j)] =
          below(stream_word(key, first_block, word++), num_classes);
      continue;
    }
    const int64_t pick = j + below(stream_word(key, first_block, word++), num_classes - j);
    std::swap(classes[static_cast<std::size_t>(j)], classes[static_cast<std::size_t>(pick)]);
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<std::size_t>(batch_size()));
  for (int64_t j = 0; j < classes_per_batch_; ++j) {
    std::vector<int64_t> pool =
        members_[static_cast<std::size_t>(classes[static_cast<std::size_t>(j)])];
    const int64_t size = static_cast<int64_t>(pool.size());
    for (int64_t t = 0; t < m_; ++t) {
      if (size >= m_ && !with_replacement_) {  // partial Fisher-Yates over the class
        const int64_t pick = t + below(stream_word(key, first_block, word++), size - t);
        std::swap(pool[static_cast<std::size_t>(t)], pool[static_cast<std::size_t>(pick)]);
        out.push_back(pool[static_cast<std::size_t>(t)]);
      } else {  // with replacement (asked for, or too few images)
        out.push_back(
            pool[static_cast<std::size_t>(below(stream_word(key, first_block, word++), size))]);
      }
    }
  }
  return out;
}

std::vector<std::vector<int64_t>> sequential_batches(int64_t n, int64_t batch_size) {
  ENGINE_CHECK(n >= 0 && batch_size > 0, "sequential_batches: n = ", n, ", batch size ",
               batch_size);
  std::vector<std::vector<int64_t>> out;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    std::vector<int64_t> b;
    for (int64_t i = begin; i < std::min(n, begin + batch_size); ++i) b.push_back(i);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace data
