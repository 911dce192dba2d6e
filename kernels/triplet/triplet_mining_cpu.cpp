// The triplet miners on the host (rules, layout and cost in triplet_mining.h). Each rule is a
// short scan of one anchor's row of the mining distance matrix.
#include "kernels/triplet/triplet_mining.h"

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/common/check.h"

namespace engine::kernels {
namespace {

// One anchor's view of the batch: its distance row and who shares its label.
struct AnchorRow {
  const double* d;        // d[j] = distance from the anchor to item j
  const int64_t* labels;  // all B labels
  int64_t label;          // the anchor's label
  int64_t batch;          // B

  bool same(int64_t j) const { return labels[j] == label; }
};

// candidates[floor(u * n)] for u in [0, 1): a uniform pick.
int64_t pick_uniform(const std::vector<int64_t>& candidates, double u) {
  const auto n = static_cast<int64_t>(candidates.size());
  int64_t k = static_cast<int64_t>(u * static_cast<double>(n));
  if (k >= n) k = n - 1;  // u rounds to 1 only in pathological arithmetic; stay in range
  return candidates[static_cast<size_t>(k)];
}

std::vector<int64_t> all_items(int64_t batch) {
  std::vector<int64_t> out(static_cast<size_t>(batch));
  for (int64_t j = 0; j < batch; ++j) out[static_cast<size_t>(j)] = j;
  return out;
}

std::vector<int64_t> different_label(const AnchorRow& row) {
  std::vector<int64_t> out;
  for (int64_t j = 0; j < row.batch; ++j)
    if (!row.same(j)) out.push_back(j);
  return out;
}

int64_t random_negative(const AnchorRow& row, double u) {
  std::vector<int64_t> negatives = different_label(row);
  return pick_uniform(negatives.empty() ? all_items(row.batch) : negatives, u);
}

int64_t semihard_negative(const AnchorRow& row, int64_t positive, double margin, double u) {
  const double dap = row.d[positive];
  std::vector<int64_t> band;
  for (int64_t j = 0; j < row.batch; ++j) {
    // robrank's three masks: farther than the positive (compared squared), and still violating
    // the margin, and a different label.
    if (!row.same(j) && dap * dap < row.d[j] * row.d[j] && dap - row.d[j] + margin > 0.0)
      band.push_back(j);
  }
  if (!band.empty()) return pick_uniform(band, u);
  return random_negative(row, u);
}

// Softhard picks the negative with u_neg and the positive with u_pos.
void softhard_pair(const AnchorRow& row, int64_t partner, double u_neg, double u_pos,
                   int64_t& positive, int64_t& negative) {
  std::vector<int64_t> negatives = different_label(row);
  if (negatives.empty()) {
    negative = pick_uniform(all_items(row.batch), u_neg);
    positive = partner;
    return;
  }
  double max_ap = -std::numeric_limits<double>::infinity();  // the anchor itself counts
  double min_an = std::numeric_limits<double>::infinity();
  std::vector<int64_t> positives;
  for (int64_t j = 0; j < row.batch; ++j) {
    if (row.same(j)) {
      positives.push_back(j);
      if (row.d[j] > max_ap) max_ap = row.d[j];
    } else if (row.d[j] < min_an) {
      min_an = row.d[j];
    }
  }
  std::vector<int64_t> soft_negatives, soft_positives;
  for (int64_t j : negatives)
    if (row.d[j] * row.d[j] < max_ap * max_ap) soft_negatives.push_back(j);
  for (int64_t j : positives)
    if (row.d[j] * row.d[j] > min_an * min_an) soft_positives.push_back(j);
  negative = pick_uniform(soft_negatives.empty() ? negatives : soft_negatives, u_neg);
  positive = pick_uniform(soft_positives.empty() ? positives : soft_positives, u_pos);
}

// Inverse-CDF draw from robrank's distance-weighted distribution (triplet_mining.h for the quirks).
int64_t distance_weighted_negative(const AnchorRow& row, int64_t dim, double u) {
  const double D = static_cast<double>(dim);
  std::vector<double> log_weight(static_cast<size_t>(row.batch), 0.0);
  double max_log_weight = -std::numeric_limits<double>::infinity();
  bool any_nan = false;
  for (int64_t j = 0; j < row.batch; ++j) {
    double w = 0.0;  // same-label entries: 0 before the max (robrank), weight 0 after
    if (!row.same(j)) {
      const double d = row.d[j];
      w = (2.0 - D) * std::log(d) - ((D - 3.0) / 2.0) * std::log(1.0 - 0.25 * d * d);
    }
    log_weight[static_cast<size_t>(j)] = w;
    if (std::isnan(w)) any_nan = true;  // torch's max propagates NaN
    if (w > max_log_weight) max_log_weight = w;
  }
  if (any_nan) max_log_weight = std::numeric_limits<double>::quiet_NaN();

  std::vector<double> weight(static_cast<size_t>(row.batch), 0.0);
  double total = 0.0;
  for (int64_t j = 0; j < row.batch; ++j) {
    if (row.same(j)) continue;
    double w = std::exp(log_weight[static_cast<size_t>(j)] - max_log_weight);
    if (std::isnan(w)) w = 0.0;  // numpy.nan_to_num
    weight[static_cast<size_t>(j)] = w;
    total += w;
  }
  if (!(total > 0.0)) return pick_uniform(all_items(row.batch), u);  // robrank: all 1e-7

  // First j whose cumulative weight exceeds u * total; it has a positive weight.
  const double target = u * total;
  double cumulative = 0.0;
  int64_t last_positive = -1;
  for (int64_t j = 0; j < row.batch; ++j) {
    const double w = weight[static_cast<size_t>(j)];
    if (w <= 0.0) continue;
    cumulative += w;
    last_positive = j;
    if (cumulative > target) return j;
  }
  return last_positive;  // u * total rounded up to the full sum
}

int64_t hardest_negative(const AnchorRow& row, double u) {
  int64_t best = -1, first_zero = -1;
  for (int64_t j = 0; j < row.batch; ++j) {
    if (row.same(j)) continue;
    if (row.d[j] == 0.0) {
      if (first_zero < 0) first_zero = j;
      continue;  // robrank's mask * distance cannot tell a zero distance from a masked entry
    }
    if (best < 0 || row.d[j] < row.d[best]) best = j;
  }
  if (best >= 0) return best;
  if (first_zero >= 0) return first_zero;
  return pick_uniform(all_items(row.batch), u);
}

}  // namespace

std::optional<Miner> find_miner(const std::string& name) {
  if (name == "random" || name == "r") return Miner::Random;
  if (name == "semihard" || name == "m") return Miner::Semihard;
  if (name == "softhard" || name == "s") return Miner::Softhard;
  if (name == "distance" || name == "d") return Miner::Distance;
  if (name == "hardest" || name == "h") return Miner::Hardest;
  return std::nullopt;
}

Miner parse_miner(const std::string& name) {
  if (const std::optional<Miner> miner = find_miner(name)) return *miner;
  engine::fail("unknown triplet miner '", name,
               "' (expected random|r, semihard|m, softhard|s, distance|d or hardest|h)");
}

const char* miner_name(Miner miner) {
  switch (miner) {
    case Miner::Random:
      return "random";
    case Miner::Semihard:
      return "semihard";
    case Miner::Softhard:
      return "softhard";
    case Miner::Distance:
      return "distance";
    case Miner::Hardest:
      return "hardest";
  }
  return "?";
}

const std::vector<std::string>& miner_names() {
  static const std::vector<std::string> names = {
      miner_name(Miner::Random), miner_name(Miner::Semihard), miner_name(Miner::Softhard),
      miner_name(Miner::Distance), miner_name(Miner::Hardest)};
  return names;
}

void mine_triplets_cpu(const double* dist, const int64_t* labels, int64_t B, int64_t dim,
                       Miner miner, double margin, const double* draws, int64_t* anchor,
                       int64_t* positive, int64_t* negative, double* hardness) {
  for (int64_t i = 0; i < B / 2; ++i) {
    const int64_t a = 2 * i, partner = 2 * i + 1;
    const AnchorRow row{dist + a * B, labels, labels[a], B};
    const double u0 = draws[i * kMiningDrawsPerAnchor];
    const double u1 = draws[i * kMiningDrawsPerAnchor + 1];
    int64_t p = partner, n = 0;
    switch (miner) {
      case Miner::Random:
        n = random_negative(row, u0);
        break;
      case Miner::Semihard:
        n = semihard_negative(row, partner, margin, u0);
        break;
      case Miner::Softhard:
        softhard_pair(row, partner, u0, u1, p, n);
        break;
      case Miner::Distance:
        n = distance_weighted_negative(row, dim, u0);
        break;
      case Miner::Hardest:
        n = hardest_negative(row, u0);
        break;
    }
    anchor[i] = a;
    positive[i] = p;
    negative[i] = n;
    hardness[i] = row.d[p] - row.d[n];
  }
}

}  // namespace engine::kernels
