// What each ranking attack reports (definitions in measures.h), from host distances.
//
//   candidate_percentile_b = (1/W) sum_w |{x : d(x, q_bw) < d(c~_b, q_bw)}| / NX
//   query_percentile_b     = (1/M) sum_m |{x : (d_bx, x) < (d_bc, c)}| / NX,  c = candidate bm
//   recall_at_1_b          = [label of the nearest non-self item == query label]
//   retained_in_top_b      = [|{x != self : (d_bx, x) < (d_bi, i)}| < k],  i = items_b
// where (d, x) < (d', x') orders by distance, then gallery index (NaN as +inf), as selection.h.
#include "attacks/measures.h"

#include <cmath>
#include <limits>

#include "kernels/common/check.h"

namespace attacks {
namespace {

double ordering_key(float distance) {
  return std::isnan(distance) ? std::numeric_limits<double>::infinity() : double(distance);
}

// The number of gallery items ranked ahead of `item` in row `row`, skipping `skipped` (-1: none).
int64_t items_ahead(const DistanceTable& table, int64_t row, int64_t item, int64_t skipped) {
  const double key = ordering_key(table.at(row, item));
  int64_t ahead = 0;
  for (int64_t x = 0; x < table.gallery; ++x) {
    if (x == skipped || x == item) continue;
    const double other = ordering_key(table.at(row, x));
    if (other < key || (other == key && x < item)) ++ahead;
  }
  return ahead;
}

void check_table(const DistanceTable& table, const char* op) {
  ENGINE_CHECK(table.rows >= 1 && table.gallery >= 1 &&
                   static_cast<int64_t>(table.distances.size()) == table.rows * table.gallery &&
                   static_cast<int64_t>(table.self_index.size()) == table.rows,
               op, ": a distance table of ", table.rows, " rows x ", table.gallery,
               " items needs that many distances and one self index per row, got ",
               table.distances.size(), " and ", table.self_index.size());
  for (int64_t b = 0; b < table.rows; ++b) {
    ENGINE_CHECK(table.self_index[b] >= -1 && table.self_index[b] < table.gallery, op,
                 ": self index ", table.self_index[b], " of row ", b, " is outside the gallery of ",
                 table.gallery, " items");
  }
}

void check_items(const DistanceTable& table, const std::vector<int64_t>& items, int64_t per_row,
                 const char* op) {
  ENGINE_CHECK(per_row >= 1 && static_cast<int64_t>(items.size()) == table.rows * per_row, op,
               ": expected ", table.rows, " x ", per_row, " gallery indices, got ", items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    ENGINE_CHECK(items[i] >= 0 && items[i] < table.gallery, op, ": index ", items[i], " (entry ", i,
                 ") is outside the gallery of ", table.gallery, " items");
  }
}

}  // namespace

std::vector<double> candidate_percentile(const std::vector<float>& query_gallery,
                                         const std::vector<float>& candidate_to_query, int64_t rows,
                                         int64_t per_row, int64_t gallery) {
  ENGINE_CHECK(rows >= 1 && per_row >= 1 && gallery >= 1 &&
                   static_cast<int64_t>(query_gallery.size()) == rows * per_row * gallery &&
                   static_cast<int64_t>(candidate_to_query.size()) == rows * per_row,
               "candidate_percentile: expected ", rows, " x ", per_row, " x ", gallery,
               " query-gallery distances and ", rows, " x ", per_row,
               " candidate-query distances, got ", query_gallery.size(), " and ",
               candidate_to_query.size());
  std::vector<double> percentiles(rows, 0.0);
  for (int64_t b = 0; b < rows; ++b) {
    double total = 0.0;
    for (int64_t w = 0; w < per_row; ++w) {
      const int64_t pair = b * per_row + w;
      const float* row = query_gallery.data() + pair * gallery;
      int64_t ahead = 0;
      // robrank's (d(c~, q) > d(x, q)).mean(): strictly nearer only, ties do not count.
      for (int64_t x = 0; x < gallery; ++x) ahead += row[x] < candidate_to_query[pair] ? 1 : 0;
      total += double(ahead) / double(gallery);
    }
    percentiles[b] = total / double(per_row);
  }
  return percentiles;
}

std::vector<double> query_percentile(const DistanceTable& table,
                                     const std::vector<int64_t>& candidates, int64_t per_row) {
  check_table(table, "query_percentile");
  check_items(table, candidates, per_row, "query_percentile");
  std::vector<double> percentiles(table.rows, 0.0);
  for (int64_t b = 0; b < table.rows; ++b) {
    double total = 0.0;
    for (int64_t m = 0; m < per_row; ++m) {
      // The full ranking: the query's own clean copy counts, as in robrank.
      const int64_t rank = items_ahead(table, b, candidates[b * per_row + m], -1);
      total += double(rank) / double(table.gallery);
    }
    percentiles[b] = total / double(per_row);
  }
  return percentiles;
}

std::vector<bool> recall_at_1(const DistanceTable& table, const std::vector<int64_t>& query_labels,
                              const std::vector<int64_t>& gallery_labels) {
  check_table(table, "recall_at_1");
  ENGINE_CHECK(static_cast<int64_t>(query_labels.size()) == table.rows &&
                   static_cast<int64_t>(gallery_labels.size()) == table.gallery,
               "recall_at_1: expected ", table.rows, " query labels and ", table.gallery,
               " gallery labels, got ", query_labels.size(), " and ", gallery_labels.size());
  std::vector<bool> hits(table.rows, false);
  for (int64_t b = 0; b < table.rows; ++b) {
    const int64_t self = table.self_index[b];
    int64_t nearest = -1;
    for (int64_t x = 0; x < table.gallery; ++x) {
      if (x == self) continue;
      if (nearest < 0 || ordering_key(table.at(b, x)) < ordering_key(table.at(b, nearest))) {
        nearest = x;  // strict: ties keep the lower index
      }
    }
    ENGINE_CHECK(nearest >= 0, "recall_at_1: row ", b, " has no gallery item besides itself");
    hits[b] = gallery_labels[nearest] == query_labels[b];
  }
  return hits;
}

std::vector<bool> retained_in_top(const DistanceTable& table, const std::vector<int64_t>& items,
                                  int64_t k) {
  check_table(table, "retained_in_top");
  check_items(table, items, 1, "retained_in_top");
  ENGINE_CHECK(k >= 1, "retained_in_top: k must be at least 1, got ", k);
  std::vector<bool> retained(table.rows, false);
  for (int64_t b = 0; b < table.rows; ++b) {
    const int64_t self = table.self_index[b];
    ENGINE_CHECK(items[b] != self, "retained_in_top: row ", b, "'s item ", items[b],
                 " is its own copy, which the ranking excludes");
    retained[b] = items_ahead(table, b, items[b], self) < k;
  }
  return retained;
}

}  // namespace attacks
