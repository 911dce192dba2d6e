// The ERS arithmetic (metrics/ers.h) against the papers' published rows: raw scores in, the ERS
// column out. The published raw scores are rounded (percentages to 0.1, TMA and ES:D to 0.001) and
// the ERS was computed by the authors before rounding, so the comparison allows the largest error
// that rounding of the inputs can cause (half a unit in the last digit of every column, through
// each column's normalization) plus half a unit of the printed ERS.
#include <catch2/catch.hpp>

#include <cmath>

#include "metrics/ers.h"

namespace {

struct PublishedRow {
  const char* source;
  metrics::ErsRow raw;  // CA+ CA- QA+ QA- TMA ES:D ES:R LTM GTM GTT
  double ers;
};

// Zhou et al. TPAMI, Table 2 (every dataset, no defense / EST / ACT), Table 3 (REST), and HM
// (CVPR'22) HM[S,M] with eta = 8.
const PublishedRow kRows[] = {
    {"004 Tab.2 MNIST vanilla", {3.3, 69.9, 3.7, 83.8, 0.940, 1.314, 0.6, 21.7, 10.5, 0.0}, 13.3},
    {"004 Tab.2 MNIST EST", {6.8, 36.0, 15.3, 51.3, 0.920, 0.572, 78.4, 58.6, 31.6, 0.0}, 40.5},
    {"004 Tab.2 MNIST ACT", {33.4, 7.6, 35.7, 3.8, 0.145, 0.259, 93.2, 96.6, 96.1, 1.1}, 78.6},
    {"004 Tab.2 Fashion vanilla", {1.0, 95.0, 0.5, 94.2, 0.993, 1.531, 0.1, 0.8, 6.7, 0.0}, 4.5},
    {"004 Tab.2 Fashion EST", {12.1, 32.7, 19.6, 49.6, 0.955, 0.381, 57.2, 22.4, 17.6, 0.0}, 36.4},
    {"004 Tab.2 Fashion ACT", {34.7, 11.3, 39.1, 9.0, 0.216, 0.450, 58.5, 66.2, 68.0, 0.5}, 67.7},
    {"004 Tab.2 CUB vanilla", {0.0, 100.0, 0.0, 99.9, 0.883, 1.762, 0.0, 0.0, 14.1, 0.0}, 3.8},
    {"004 Tab.2 CUB EST", {2.7, 97.9, 0.4, 97.3, 0.848, 1.576, 1.4, 0.0, 4.0, 0.0}, 5.3},
    {"004 Tab.2 CUB ACT", {15.5, 37.7, 15.1, 32.2, 0.472, 0.821, 11.1, 9.4, 14.9, 1.0}, 33.9},
    {"004 Tab.2 CARS vanilla", {0.2, 100.0, 0.1, 99.6, 0.874, 1.816, 0.0, 0.0, 13.4, 0.0}, 3.6},
    {"004 Tab.2 CARS EST", {1.2, 98.1, 0.4, 91.8, 0.880, 1.281, 2.9, 0.7, 8.2, 0.0}, 7.3},
    {"004 Tab.2 CARS ACT", {18.0, 32.3, 17.5, 30.5, 0.383, 0.763, 16.3, 15.3, 20.7, 1.6}, 38.6},
    {"004 Tab.2 SOP vanilla", {0.1, 99.3, 0.2, 99.1, 0.845, 1.685, 0.0, 0.0, 6.3, 0.0}, 4.0},
    {"004 Tab.2 SOP EST", {12.5, 43.6, 10.6, 34.8, 0.468, 0.830, 9.6, 7.2, 17.3, 3.8}, 31.7},
    {"004 Tab.2 SOP ACT", {24.1, 10.5, 22.7, 9.4, 0.253, 0.532, 21.2, 21.6, 27.8, 15.3}, 50.8},
    {"004 Tab.3 Fashion REST", {28.3, 17.0, 36.8, 13.6, 0.701, 0.360, 51.1, 49.4, 57.2, 0.1}, 56.9},
    {"004 Tab.3 MNIST REST", {26.9, 9.5, 32.9, 6.4, 0.391, 0.291, 88.4, 90.8, 89.4, 0.1}, 71.9},
    {"003 HM[S,M] eta=8", {10.9, 50.5, 10.8, 44.6, 0.680, 0.722, 13.3, 11.2, 25.8, 1.2}, 29.6},
};

// The largest |ERS(true) - ERS(rounded)|: half a unit of each column times the column's slope.
double rounding_bound() {
  const double half_percent = 0.05, half_thousandth = 0.0005;
  const double per_column[metrics::kErsColumns] = {
      2 * half_percent,      half_percent,
      2 * half_percent,      half_percent,          // CA+ CA- QA+ QA-
      100 * half_thousandth, 50 * half_thousandth,  // TMA ES:D
      half_percent,          half_percent,
      half_percent,          half_percent};  // ES:R LTM GTM GTT
  double total = 0.0;
  for (double v : per_column) total += v;
  return total / metrics::kErsColumns + 0.05;  // + the printed ERS's own rounding
}

}  // namespace

TEST_CASE("ERS: normalization of each column by hand", "[metrics][ers]") {
  const metrics::ErsRow raw = {10, 20, 30, 40, 0.25, 0.5, 60, 70, 80, 90};
  const metrics::ErsRow n = metrics::ers_normalized(raw);
  // 2*10, 100-20, 2*30, 100-40, 100*(1-0.25), 100*(2-0.5)/2, 60, 70, 80, 90
  const metrics::ErsRow expected = {20, 80, 60, 60, 75, 75, 60, 70, 80, 90};
  for (int c = 0; c < metrics::kErsColumns; ++c) CHECK(n[c] == Approx(expected[c]));
  // (20 + 80 + 60 + 60 + 75 + 75 + 60 + 70 + 80 + 90) / 10 = 670 / 10
  CHECK(metrics::empirical_robustness_score(raw) == Approx(67.0));
  CHECK(metrics::ers_column_names()[5] == "ES:D");
}

TEST_CASE("ERS: a perfectly robust and a completely broken model", "[metrics][ers]") {
  // Unmoved ranks (50 % for +, 0 % for -), orthogonal TMA target, no shift, recall kept.
  CHECK(metrics::empirical_robustness_score({50, 0, 50, 0, 0, 0, 100, 100, 100, 100}) ==
        Approx(100.0));
  CHECK(metrics::empirical_robustness_score({0, 100, 0, 100, 1, 2, 0, 0, 0, 0}) ==
        Approx(0.0).margin(1e-12));
  // Not clipped: metric E can shift by more than 2 (robrank's -40.1 row for ptripletE).
  CHECK(metrics::ers_normalized({0, 0, 0, 0, 0, 10.91, 0, 0, 0, 0})[5] == Approx(-445.5));
}

TEST_CASE("ERS: reproduces the published rows from their raw scores", "[metrics][ers]") {
  const double bound = rounding_bound();
  for (const PublishedRow& row : kRows) {
    INFO(row.source);
    const double ers = metrics::empirical_robustness_score(row.raw);
    CHECK(std::abs(ers - row.ers) <= bound);
  }
}
