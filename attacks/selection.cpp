// Query, candidate and target selection of the ranking attacks (rules in selection.h), on the
// clean distances held on the host.
//
// Ranks order a row by (distance, gallery index) ascending, NaN counting as +inf so the order is
// total and every pick deterministic; the attacked image's own row is removed by index.
#include "attacks/selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "kernels/common/check.h"

namespace attacks {
namespace {

void check_table(const DistanceTable& table, const char* op) {
  ENGINE_CHECK(table.rows >= 1 && table.gallery >= 1, op, ": empty distance table (", table.rows,
               " rows x ", table.gallery, " gallery items)");
  ENGINE_CHECK(static_cast<int64_t>(table.distances.size()) == table.rows * table.gallery, op,
               ": the distance table holds ", table.distances.size(), " values for ", table.rows,
               " rows x ", table.gallery, " gallery items");
  ENGINE_CHECK(static_cast<int64_t>(table.self_index.size()) == table.rows, op, ": ",
               table.self_index.size(), " self indices for ", table.rows, " rows");
  for (int64_t b = 0; b < table.rows; ++b) {
    ENGINE_CHECK(table.self_index[b] >= -1 && table.self_index[b] < table.gallery, op,
                 ": self index ", table.self_index[b], " of row ", b, " is outside the gallery of ",
                 table.gallery, " items");
  }
}

void check_labels(const DistanceTable& table, const std::vector<int64_t>& query_labels,
                  const std::vector<int64_t>& gallery_labels, const char* op) {
  ENGINE_CHECK(static_cast<int64_t>(query_labels.size()) == table.rows &&
                   static_cast<int64_t>(gallery_labels.size()) == table.gallery,
               op, ": expected ", table.rows, " query labels and ", table.gallery,
               " gallery labels, got ", query_labels.size(), " and ", gallery_labels.size());
}

void check_per_row(int64_t per_row, const char* op) {
  ENGINE_CHECK(per_row >= 1, op, ": the number of picks per row must be at least 1, got ", per_row);
}

double ordering_key(float distance) {
  return std::isnan(distance) ? std::numeric_limits<double>::infinity() : double(distance);
}

// True when item a comes before item b in row `row`'s ranking.
bool ranks_before(const DistanceTable& table, int64_t row, int64_t a, int64_t b) {
  const double da = ordering_key(table.at(row, a)), db = ordering_key(table.at(row, b));
  return da < db || (da == db && a < b);
}

// The nearest non-self item of `row` passing `accept`, or -1.
template <typename Accept>
int64_t nearest_where(const DistanceTable& table, int64_t row, Accept accept) {
  int64_t best = -1;
  for (int64_t x = 0; x < table.gallery; ++x) {
    if (x == table.self_index[row] || !accept(x)) continue;
    if (best < 0 || ranks_before(table, row, x, best)) best = x;
  }
  return best;
}

bool contains(const std::vector<int64_t>& values, int64_t begin, int64_t end, int64_t value) {
  return std::find(values.begin() + begin, values.begin() + end, value) != values.begin() + end;
}

}  // namespace

std::vector<int64_t> ranked_items(const DistanceTable& table, int64_t row, int64_t count) {
  check_table(table, "ranked_items");
  ENGINE_CHECK(row >= 0 && row < table.rows, "ranked_items: row ", row, " of a table with ",
               table.rows, " rows");
  std::vector<int64_t> items;
  items.reserve(table.gallery);
  for (int64_t x = 0; x < table.gallery; ++x) {
    if (x != table.self_index[row]) items.push_back(x);
  }
  const int64_t available = static_cast<int64_t>(items.size());
  const int64_t kept = count < 0 ? available : std::min(count, available);
  auto before = [&](int64_t a, int64_t b) { return ranks_before(table, row, a, b); };
  std::partial_sort(items.begin(), items.begin() + kept, items.end(), before);
  items.resize(kept);
  return items;
}

int64_t top_percent_size(int64_t gallery) {
  ENGINE_CHECK(gallery >= 2, "top_percent_size: a gallery of ", gallery,
               " items has no top-1% besides the query's own copy (need at least 2)");
  // Integer division is the exact floor(0.01 NX).
  return std::min(std::max<int64_t>(gallery / 100, 1), gallery - 1);
}

std::vector<int64_t> select_uniform(const DistanceTable& table, int64_t per_row,
                                    engine::Generator& gen) {
  check_table(table, "select_uniform");
  check_per_row(per_row, "select_uniform");
  return engine::randint({table.rows, per_row}, 0, table.gallery, gen).to_indices();
}

std::vector<int64_t> select_from_top(const DistanceTable& table, int64_t per_row,
                                     engine::Generator& gen) {
  check_table(table, "select_from_top");
  check_per_row(per_row, "select_from_top");
  const int64_t top = top_percent_size(table.gallery);
  const std::vector<int64_t> draws =
      engine::randint({table.rows, per_row}, 0, top, gen).to_indices();
  std::vector<int64_t> picks(draws.size());
  for (int64_t b = 0; b < table.rows; ++b) {
    const std::vector<int64_t> nearest = ranked_items(table, b, top);
    ENGINE_CHECK(static_cast<int64_t>(nearest.size()) == top, "select_from_top: row ", b,
                 " has only ", nearest.size(), " items besides itself, fewer than the top-1% (",
                 top, ")");
    for (int64_t w = 0; w < per_row; ++w) picks[b * per_row + w] = nearest[draws[b * per_row + w]];
  }
  return picks;
}

std::vector<int64_t> select_distinct_from_top(const DistanceTable& table, int64_t per_row,
                                              engine::Generator& gen) {
  check_table(table, "select_distinct_from_top");
  check_per_row(per_row, "select_distinct_from_top");
  const int64_t top = top_percent_size(table.gallery);
  ENGINE_CHECK(per_row <= top, "select_distinct_from_top: ", per_row,
               " distinct candidates requested from a top-1% of only ", top, " items (gallery of ",
               table.gallery, ")");
  std::vector<int64_t> picks(table.rows * per_row);
  for (int64_t b = 0; b < table.rows; ++b) {
    const std::vector<int64_t> nearest = ranked_items(table, b, top);
    ENGINE_CHECK(static_cast<int64_t>(nearest.size()) == top, "select_distinct_from_top: row ", b,
                 " has only ", nearest.size(), " items besides itself, fewer than the top-1% (",
                 top, ")");
    const std::vector<int64_t> order = engine::permutation_vector(top, gen);
    for (int64_t m = 0; m < per_row; ++m) picks[b * per_row + m] = nearest[order[m]];
  }
  return picks;
}

std::vector<int64_t> select_semantic_references(const DistanceTable& table,
                                                const std::vector<int64_t>& candidates,
                                                int64_t per_row, int64_t references, bool raise) {
  const char* op = "select_semantic_references";
  check_table(table, op);
  check_per_row(per_row, op);
  ENGINE_CHECK(references >= 1, op, ": the number of references must be at least 1, got ",
               references);
  ENGINE_CHECK(static_cast<int64_t>(candidates.size()) == table.rows * per_row, op, ": ",
               candidates.size(), " candidates for ", table.rows, " rows x ", per_row);
  // SP-QA-: the non-candidates of the top-1%, of which there are at least top - M in every row.
  // SP-QA+: the nearest non-candidates of the whole ranking; among the first G + M ranks at
  // least G are not candidates.
  const int64_t top = raise ? -1 : top_percent_size(table.gallery);
  const int64_t kept =
      raise ? references : std::min(references, std::max<int64_t>(top - per_row, 0));
  const int64_t searched = raise ? references + per_row : top;
  std::vector<int64_t> picks;
  picks.reserve(table.rows * kept);
  for (int64_t b = 0; b < table.rows; ++b) {
    const int64_t first = b * per_row;
    int64_t found = 0;
    for (int64_t x : ranked_items(table, b, searched)) {
      if (found == kept) break;
      if (contains(candidates, first, first + per_row, x)) continue;
      picks.push_back(x);
      ++found;
    }
    ENGINE_CHECK(found == kept, op, ": row ", b, " has only ", found, " non-candidate items for ",
                 kept, " references (gallery of ", table.gallery, ")");
  }
  return picks;
}

std::vector<int64_t> select_greedy_misrank_targets(const DistanceTable& table,
                                                   const std::vector<int64_t>& query_labels,
                                                   const std::vector<int64_t>& gallery_labels,
                                                   bool robrank_compat) {
  const char* op = "select_greedy_misrank_targets";
  check_table(table, op);
  check_labels(table, query_labels, gallery_labels, op);
  std::vector<int64_t> targets(table.rows);
  for (int64_t b = 0; b < table.rows; ++b) {
    int64_t compared_label = query_labels[b];
    if (robrank_compat) {
      const int64_t top1 = nearest_where(table, b, [](int64_t) { return true; });
      ENGINE_CHECK(top1 >= 0, op, ": row ", b, " has no gallery item besides itself");
      compared_label = gallery_labels[top1];
    }
    auto other_class = [&](int64_t x) { return gallery_labels[x] != compared_label; };
    const int64_t nearest = nearest_where(table, b, other_class);
    ENGINE_CHECK(nearest >= 0, op, ": row ", b, " has no gallery item with a label other than ",
                 compared_label);
    if (!robrank_compat) {
      targets[b] = nearest;
      continue;
    }
    // robrank's bug: the target's position within the gallery rows of another class (in index
    // order; the self row stays in that list, as robrank only masks its distance) is used as a
    // gallery index.
    int64_t position = 0;
    for (int64_t x = 0; x < nearest; ++x) position += other_class(x) ? 1 : 0;
    targets[b] = position;
  }
  return targets;
}

std::vector<int64_t> select_nearest(const DistanceTable& table) {
  check_table(table, "select_nearest");
  std::vector<int64_t> nearest(table.rows);
  for (int64_t b = 0; b < table.rows; ++b) {
    nearest[b] = nearest_where(table, b, [](int64_t) { return true; });
    ENGINE_CHECK(nearest[b] >= 0, "select_nearest: row ", b, " has no gallery item besides itself");
  }
  return nearest;
}

std::vector<int64_t> select_feature_targets(const std::vector<int64_t>& query_labels,
                                            const std::vector<int64_t>& gallery_labels,
                                            int64_t targets, engine::Generator& gen) {
  const char* op = "select_feature_targets";
  ENGINE_CHECK(!query_labels.empty() && !gallery_labels.empty(), op, ": ", query_labels.size(),
               " query labels and ", gallery_labels.size(), " gallery labels (need both)");
  check_per_row(targets, op);
  // The gallery rows of each class, classes in increasing label order.
  std::map<int64_t, std::vector<int64_t>> members;
  for (int64_t x = 0; x < static_cast<int64_t>(gallery_labels.size()); ++x) {
    members[gallery_labels[x]].push_back(x);
  }
  const int64_t rows = static_cast<int64_t>(query_labels.size());
  // One uniform per pick, drawn up front: the stream's use depends only on (rows, targets).
  const std::vector<double> draws =
      engine::uniform({rows, targets}, 0.0, 1.0, gen, engine::DType::F64).to_vector();
  std::vector<int64_t> picks(rows * targets);
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t own = query_labels[b];
    ENGINE_CHECK(members.size() > 1 || members.count(own) == 0, op, ": query ", b, " (label ", own,
                 ") has no gallery item of another class");
    std::map<int64_t, bool> used;  // classes already targeted in this row
    for (int64_t j = 0; j < targets; ++j) {
      // Classes still open: other than the query's and not yet used; all others again once every
      // class has been used (fewer classes than targets).
      auto open = [&](int64_t label) { return label != own && !used[label]; };
      int64_t pool = 0;
      for (const auto& [label, items] : members) pool += open(label) ? int64_t(items.size()) : 0;
      if (pool == 0) {
        used.clear();
        for (const auto& [label, items] : members) pool += open(label) ? int64_t(items.size()) : 0;
      }
      // The k-th item (in class order, then index order) of the open classes: uniform over them.
      int64_t k = std::min(static_cast<int64_t>(draws[b * targets + j] * double(pool)), pool - 1);
      for (const auto& [label, items] : members) {
        if (!open(label)) continue;
        if (k < static_cast<int64_t>(items.size())) {
          picks[b * targets + j] = items[k];
          used[label] = true;
          break;
        }
        k -= static_cast<int64_t>(items.size());
      }
    }
  }
  return picks;
}

}  // namespace attacks
