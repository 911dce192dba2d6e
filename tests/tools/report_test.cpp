// `dml report`'s charts (tools/dml/report.cpp, svg.h): the training-curve SVG of a hand-written
// log.jsonl and the ERS bar chart of hand-written `dml ers` files, each checked against values
// worked out by hand (pixel coordinates from the documented layouts). Errors: usage mistakes and
// bad files. The pictures (retrieval grid, attack): report_picture_test.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/common/check.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/stderr_capture.h"
#include "tools/dml/args.h"
#include "tools/dml/commands.h"
#include "tools/dml/svg.h"

namespace {

int report(std::vector<std::string> tokens) {
  dml::Args args(std::move(tokens));
  return dml::run_report(args);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Polyline {
  std::string title;
  std::vector<std::pair<double, double>> points;
};

std::vector<Polyline> polylines(const std::string& svg) {
  std::vector<Polyline> out;
  const std::regex re("<polyline class=\"curve\"[^>]* points=\"([^\"]*)\"><title>([^<]*)</title>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    Polyline p;
    p.title = (*it)[2];
    std::stringstream points((*it)[1].str());
    std::string pair;
    while (points >> pair) {
      const size_t comma = pair.find(',');
      p.points.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
    }
    out.push_back(p);
  }
  return out;
}

// Returns a reference into `curves`, so a temporary vector is refused at compile time (a call on
// polylines(...)'s result read freed memory, found by tools/cpu_asan.sh).
const Polyline& find_curve(std::vector<Polyline>&& curves, const std::string& title) = delete;
const Polyline& find_curve(const std::vector<Polyline>& curves, const std::string& title) {
  for (const Polyline& p : curves) {
    if (p.title == title) return p;
  }
  FAIL("no curve " << title);
  return curves.front();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Coordinates are written with two decimals: 0.005 is the rounding of one number.
constexpr double kPixel = 0.005;

std::string train_record(int step, double mean_loss, double clean, double adversarial) {
  std::ostringstream s;
  s << R"({"type":"train","epoch":1,"batch":)" << step << R"(,"step":)" << step << R"(,"loss":)"
    << adversarial << R"(,"mean_loss":)" << mean_loss << R"(,"clean_loss":)" << clean
    << R"(,"adversarial_loss":)" << adversarial << R"(,"passes_per_batch":2.0})"
    << "\n";
  return s.str();
}

}  // namespace

TEST_CASE("report --log: curves, axes and the documented pixel mapping", "[report]") {
  test::TempDir dir;
  const std::string run = dir.file("run");
  std::filesystem::create_directories(run);
  write_text(run + "/log.jsonl",
             train_record(2, 1.9, 1.0, 1.2) + train_record(4, 1.5, 0.8, 1.1) +
                 R"({"type":"eval","epoch":1,"step":5,"recall@1":0.5,"map_at_r10":0.3})"
                 "\n"
                 R"({"type":"note","text":"ignored"})"
                 "\n" +
                 train_record(6, 1.2, 0.7, 1.0) + train_record(8, 1.0, 0.6, 0.9) +
                 train_record(10, 0.7, 0.5, 0.8) +
                 R"({"type":"eval","epoch":2,"step":10,"recall@1":0.8,"map_at_r10":0.6})"
                 "\n");
  REQUIRE(report({"--log", run}) == 0);
  const std::string svg = read_text(run + "/report.svg");  // the default --out
  REQUIRE(svg.rfind("<svg", 0) == 0);
  REQUIRE(svg.size() > 7);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(count(svg, "<text") == count(svg, "</text>"));
  // Two panels: 40 + 2 * 390 pixels high.
  CHECK(svg.find("height=\"820.00\"") != std::string::npos);
  CHECK(svg.find(run) != std::string::npos);  // the title names the run
  for (const char* label : {">step</text>", ">loss</text>", ">%</text>", ">training loss</text>",
                            ">evaluation</text>", ">mean_loss</text>", ">recall@1</text>"}) {
    CHECK(svg.find(label) != std::string::npos);
  }

  const std::vector<Polyline> curves = polylines(svg);
  REQUIRE(curves.size() == 5);
  CHECK(find_curve(curves, "mean_loss").points.size() == 5);
  CHECK(find_curve(curves, "clean_loss").points.size() == 5);
  CHECK(find_curve(curves, "adversarial_loss").points.size() == 5);
  CHECK(find_curve(curves, "recall@1").points.size() == 2);
  CHECK(find_curve(curves, "map_at_r10").points.size() == 2);

  // x: steps 0..10 (max step 10, tick step 2) over the plot's x = 80..760.
  // Loss panel: plot y = 80..380; y range [0, 2] (max 1.9, raw step 0.38 -> 0.5).
  //   mean_loss at step 4 = 1.5: x = 80 + 4/10 * 680 = 352, y = 380 - 1.5/2 * 300 = 155.
  const auto& loss = find_curve(curves, "mean_loss").points;
  CHECK(loss[1].first == Approx(352.0).margin(kPixel));
  CHECK(loss[1].second == Approx(155.0).margin(kPixel));
  CHECK(svg.find(">0.5</text>") != std::string::npos);  // a y tick of the loss panel
  // (The loss data span 0.5..1.9: with the 5 % margin [0.43, 1.97], step 0.5 -> [0, 2].)
  // Evaluation panel: plot y = 470..770; data 30..80 %, with the margin [27.5, 82.5], raw step
  // 11 -> 20: y range [20, 100] (not from 0: the data are far from it).
  //   map_at_r10 at step 5 = 30 %: x = 80 + 5/10 * 680 = 420, y = 770 - 10/80 * 300 = 732.5;
  //   recall@1 at step 10 = 80 %: x = 760, y = 770 - 60/80 * 300 = 545.
  const auto& map = find_curve(curves, "map_at_r10").points;
  CHECK(map[0].first == Approx(420.0).margin(kPixel));
  CHECK(map[0].second == Approx(732.5).margin(kPixel));
  const auto& recall = find_curve(curves, "recall@1").points;
  CHECK(recall[1].first == Approx(760.0).margin(kPixel));
  CHECK(recall[1].second == Approx(545.0).margin(kPixel));
  CHECK(svg.find(">20</text>") != std::string::npos);
  CHECK(svg.find(">100</text>") != std::string::npos);
  // The evaluations: a circle per point with its value written above it (y - 8).
  CHECK(count(svg, "<circle class=\"value-marker\"") == 4);
  CHECK(svg.find("class=\"value-label\" x=\"420.00\" y=\"724.50\"") != std::string::npos);
  CHECK(svg.find(">30</text>") != std::string::npos);
  // The last value of every curve written right of its last point (x + 6, y + 4).
  CHECK(count(svg, "class=\"last-value\"") == 5);
  CHECK(svg.find("<text class=\"last-value\" x=\"766.00\" y=\"549.00\" font-size=\"11.00\" "
                 "text-anchor=\"start\" font-weight=\"bold\">80</text>") != std::string::npos);
  // mean_loss ends at 0.7 (step 10): x = 760, y = 380 - 0.7/2 * 300 = 275.
  CHECK(svg.find("x=\"766.00\" y=\"279.00\" font-size=\"11.00\" text-anchor=\"start\" "
                 "font-weight=\"bold\">0.7</text>") != std::string::npos);
}

namespace {

// The y tick labels of an SVG (right-aligned at x = 74, font 11), in document order.
std::vector<double> y_tick_labels(const std::string& svg) {
  std::vector<double> out;
  const std::regex re(
      "<text x=\"74.00\" y=\"[^\"]*\" font-size=\"11.00\" "
      "text-anchor=\"end\">([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back(std::stod((*it)[1]));
  }
  return out;
}

}  // namespace

TEST_CASE("report --log: the y range is fitted to the data", "[report]") {
  test::TempDir dir;
  const std::string run = dir.file("run");
  std::filesystem::create_directories(run);
  const std::string out = dir.file("curves.svg");
  SECTION("a loss far from 0 gets a range around it, not from 0") {
    write_text(run + "/log.jsonl", R"({"type":"train","step":1,"mean_loss":10.2})"
                                   "\n"
                                   R"({"type":"train","step":2,"mean_loss":10.8})"
                                   "\n");
    REQUIRE(report({"--log", run, "--out", out}) == 0);
    const std::string svg = read_text(out);
    // Data 10.2..10.8, margin 0.03: [10.17, 10.83], raw step 0.132 -> 0.2: ticks 10 .. 11.
    const std::vector<double> ticks = y_tick_labels(svg);
    REQUIRE(ticks.size() == 6);
    CHECK(ticks.front() == Approx(10.0));
    CHECK(ticks.back() == Approx(11.0));
    const std::vector<Polyline> curves = polylines(svg);
    const auto& points = find_curve(curves, "mean_loss").points;
    REQUIRE(points.size() == 2);
    // x range [0, 2]; 10.2 at y = 380 - 0.2/1 * 300 = 320, 10.8 at 380 - 0.8 * 300 = 140.
    CHECK(points[0].second == Approx(320.0).margin(kPixel));
    CHECK(points[1].second == Approx(140.0).margin(kPixel));
    CHECK(svg.find(">10.8</text>") != std::string::npos);  // its last value
  }
  SECTION("a loss near 0 keeps 0 at the bottom") {
    write_text(run + "/log.jsonl", R"({"type":"train","step":1,"mean_loss":2.0})"
                                   "\n"
                                   R"({"type":"train","step":2,"mean_loss":0.05})"
                                   "\n");
    REQUIRE(report({"--log", run, "--out", out}) == 0);
    // Data 0.05..2, margin 0.0975 takes the bottom below 0: raised to 0. [0, 2.0975], raw step
    // 0.42 -> 0.5: ticks 0 .. 2.5.
    const std::vector<double> ticks = y_tick_labels(read_text(out));
    REQUIRE(ticks.size() == 6);
    CHECK(ticks.front() == 0.0);
    CHECK(ticks.back() == Approx(2.5));
  }
}

TEST_CASE("report --log: a plain run, a resumed log, and bad logs", "[report]") {
  test::TempDir dir;
  const std::string run = dir.file("run");
  std::filesystem::create_directories(run);
  const std::string out = dir.file("curves.svg");
  SECTION("no defense keys, no eval: one panel with mean_loss only") {
    write_text(run + "/log.jsonl", R"({"type":"train","step":1,"loss":2,"mean_loss":2})"
                                   "\n"
                                   R"({"type":"train","step":2,"loss":1,"mean_loss":1.5})"
                                   "\n");
    REQUIRE(report({"--log", run, "--out", out}) == 0);
    const std::string svg = read_text(out);
    CHECK(svg.find("height=\"430.00\"") != std::string::npos);
    const std::vector<Polyline> curves = polylines(svg);
    REQUIRE(curves.size() == 1);
    CHECK(curves[0].title == "mean_loss");
    CHECK(curves[0].points.size() == 2);
  }
  SECTION("a resumed run logs steps 2 and 3 again: the later records win") {
    write_text(run + "/log.jsonl", train_record(1, 1.0, 1, 1) + train_record(2, 1.0, 1, 1) +
                                       train_record(3, 1.0, 1, 1) + train_record(2, 2.0, 1, 1) +
                                       train_record(3, 2.0, 1, 1) + train_record(4, 2.0, 1, 1));
    REQUIRE(report({"--log", run, "--out", out}) == 0);
    const std::vector<Polyline> curves = polylines(read_text(out));
    const auto& points = find_curve(curves, "mean_loss").points;
    REQUIRE(points.size() == 4);
    // x range [0, 4] (raw step 0.8 -> 1); y: data 1..2 with the margin [0.95, 2.05], raw step
    // 0.22 -> 0.5: [0.5, 2.5]. Step 2 is at x = 80 + 2/4 * 680 = 420 with the resumed value 2.0
    // at y = 380 - 1.5/2 * 300 = 155.
    CHECK(points[1].first == Approx(420.0).margin(kPixel));
    CHECK(points[1].second == Approx(155.0).margin(kPixel));
    for (size_t i = 1; i < points.size(); ++i) CHECK(points[i].first > points[i - 1].first);
  }
  SECTION("a last line cut short by a kill is left out") {
    // No newline after it: the trainer was killed mid-write. The run is plotted up to there.
    write_text(run + "/log.jsonl",
               train_record(1, 1.0, 1, 1) + train_record(2, 1.0, 1, 1) + "{\"type\":\"tra");
    REQUIRE(report({"--log", run, "--out", out}) == 0);
    const std::vector<Polyline> curves = polylines(read_text(out));
    CHECK(find_curve(curves, "mean_loss").points.size() == 2);
  }
  SECTION("a malformed line is an error naming the file and line") {
    write_text(run + "/log.jsonl", train_record(1, 1.0, 1, 1) + "{\"type\":\"train\",\n");
    REQUIRE_THROWS_WITH(report({"--log", run, "--out", out}),
                        Catch::Contains(run + "/log.jsonl:2") && Catch::Contains("not a JSON"));
  }
  SECTION("a log without records is an error") {
    write_text(run + "/log.jsonl", R"({"type":"note"})"
                                   "\n");
    REQUIRE_THROWS_WITH(report({"--log", run, "--out", out}),
                        Catch::Contains("log.jsonl") && Catch::Contains("no train or eval"));
  }
  SECTION("a missing run directory is a usage error naming the file (README, Exit codes)") {
    REQUIRE_THROWS_AS(report({"--log", dir.file("nope")}), dml::UsageError);
    REQUIRE_THROWS_WITH(report({"--log", dir.file("nope")}), Catch::Contains("nope/log.jsonl"));
  }
  CHECK_FALSE(std::filesystem::exists(run + "/report.svg"));
}

namespace {

std::string ers_json(const std::vector<double>& raw, double ers) {
  const char* names[] = {"CA+", "CA-", "QA+", "QA-", "TMA", "ES:D", "ES:R", "LTM", "GTM", "GTT"};
  std::ostringstream s;
  s << R"({"profile":"rob28","complete":true)";
  for (size_t c = 0; c < raw.size(); ++c) s << ",\"" << names[c] << "\":" << raw[c];
  s << ",\"ers\":" << ers << "}\n";
  return s.str();
}

struct Bar {
  double x, y, w, h;
  std::string fill, title;
};

std::vector<Bar> bars(const std::string& svg) {
  std::vector<Bar> out;
  const std::regex re(
      "<rect class=\"bar\" x=\"([^\"]*)\" y=\"([^\"]*)\" width=\"([^\"]*)\" "
      "height=\"([^\"]*)\" fill=\"([^\"]*)\"><title>([^<]*)</title>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back({std::stod((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3]),
                   std::stod((*it)[4]), (*it)[5], (*it)[6]});
  }
  return out;
}

}  // namespace

TEST_CASE("report --ers: 2 x 11 bars with heights of the normalized values", "[report]") {
  test::TempDir dir;
  // Normalized by hand (metrics/ers.h): CA+ 2z, CA- 100-z, QA+ 2z, QA- 100-z, TMA 100(1-z),
  // ES:D 100(2-z)/2, then ES:R, LTM, GTM, GTT as they are; ERS = their mean.
  // vanilla: 40 70 20 60 50 50 60 55 45 35 -> ERS 485 / 10 = 48.5
  // act:     90 90 70 75 80 80 85 80 75 70 -> ERS 795 / 10 = 79.5
  write_text(dir.file("vanilla.json"), ers_json({20, 30, 10, 40, 0.5, 1.0, 60, 55, 45, 35}, 48.5));
  write_text(dir.file("act.json"), ers_json({45, 10, 35, 25, 0.2, 0.4, 85, 80, 75, 70}, 79.5));
  const std::vector<std::vector<double>> expected = {
      {40, 70, 20, 60, 50, 50, 60, 55, 45, 35, 48.5},
      {90, 90, 70, 75, 80, 80, 85, 80, 75, 70, 79.5}};
  const std::string out = dir.file("ers.svg");
  std::string names[2] = {"vanilla", "act"};
  SECTION("repeated --ers, default names") {
    REQUIRE(report({"--ers", dir.file("vanilla.json"), "--ers", dir.file("act.json"), "--out",
                    out}) == 0);
  }
  SECTION("a comma-separated --ers list and --names") {
    REQUIRE(report({"--ers", dir.file("vanilla.json") + "," + dir.file("act.json"), "--names",
                    "base,ACT", "--out", out}) == 0);
    names[0] = "base";
    names[1] = "ACT";
  }
  const std::string svg = read_text(out);
  REQUIRE(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find(">" + names[0] + "</text>") != std::string::npos);  // legend
  CHECK(svg.find(">" + names[1] + "</text>") != std::string::npos);
  CHECK(svg.find(">ES:D</text>") != std::string::npos);
  CHECK(svg.find(">ERS</text>") != std::string::npos);
  const std::vector<Bar> b = bars(svg);
  REQUIRE(b.size() == 22);
  // y range [0, 100] (raw step 20) over the plot's y = 80..380: 3 pixels per point, bars stand
  // on y = 380. Groups of 680 / 11 pixels; two bars of 0.8 * 680 / 11 / 2 each from 10 % in.
  const double group_w = 680.0 / 11.0, bar_w = 0.4 * group_w;
  for (size_t g = 0; g < 11; ++g) {
    for (size_t s = 0; s < 2; ++s) {
      const Bar& bar = b[2 * g + s];
      INFO("group " << g << " series " << s << ": " << bar.title);
      CHECK(bar.title.rfind(names[s] + " ", 0) == 0);
      CHECK(bar.h == Approx(3.0 * expected[s][g]).margin(kPixel));
      CHECK(bar.y + bar.h == Approx(380.0).margin(2 * kPixel));
      CHECK(bar.x == Approx(80.0 + group_w * g + 0.1 * group_w + bar_w * s).margin(kPixel));
      CHECK(bar.w == Approx(bar_w).margin(kPixel));
      CHECK(bar.fill == b[s].fill);
    }
  }
  CHECK(b[0].fill != b[1].fill);
}

TEST_CASE("report --ers warns when the files were attacked under different conditions",
          "[report]") {
  test::TempDir dir;
  const std::vector<double> raw = {20, 30, 10, 40, 0.5, 1.0, 60, 55, 45, 35};
  auto with = [&](const std::string& name, const std::string& extra) {
    std::string text = ers_json(raw, 48.5);
    text.insert(1, extra + ",");
    write_text(dir.file(name), text);
    return dir.file(name);
  };
  const std::string all = with("all.json", R"("images":10000,"robrank_compat":true)");
  const std::string same = with("same.json", R"("images":10000,"robrank_compat":true)");
  const std::string fewer = with("fewer.json", R"("images":500,"robrank_compat":true)");
  const std::string papers = with("papers.json", R"("images":10000,"robrank_compat":false)");
  const std::string out = dir.file("ers.svg");
  const std::string log = dir.file("stderr.txt");
  CHECK(test::standard_error_of(log, [&] {
          report({"--ers", all, "--ers", same, "--out", out});
        }).find("different conditions") == std::string::npos);
  const std::string images = test::standard_error_of(log, [&] {
    report({"--ers", all, "--ers", fewer, "--out", out});
  });
  CHECK_THAT(images, Catch::Contains("different conditions") && Catch::Contains("500 images") &&
                         Catch::Contains("10000 images"));
  const std::string mode = test::standard_error_of(log, [&] {
    report({"--ers", all, "--ers", papers, "--out", out});
  });
  CHECK_THAT(mode,
             Catch::Contains("different conditions") && Catch::Contains("robrank_compat false"));
}

TEST_CASE("report --ers: a bar of 0 is drawn and written", "[report]") {
  test::TempDir dir;
  // CA+ 0 -> 2 * 0 = 0 and GTT 0: two normalized columns of exactly 0; the others 50.
  write_text(dir.file("e.json"), ers_json({0, 50, 25, 50, 0.5, 1.0, 50, 50, 50, 0}, 40));
  REQUIRE(report({"--ers", dir.file("e.json"), "--out", dir.file("e.svg")}) == 0);
  const std::string svg = read_text(dir.file("e.svg"));
  const std::vector<Bar> b = bars(svg);
  REQUIRE(b.size() == 11);
  CHECK(b[0].h == 0.0);
  // y range [0, 100] over y = 80..380: the zero line is y = 380. A 4-pixel line on it at each 0
  // bar (group 0 from x = 80 + 0.1 * 680 / 11; group 9 from 80 + 9.1 * 680 / 11), and "0.0".
  CHECK(count(svg, "<rect class=\"zero-bar\"") == 2);
  const double bar_w = 0.8 * 680.0 / 11.0;
  std::ostringstream first, last;
  first << "<rect class=\"zero-bar\" x=\"" << dml::svg::number(80 + 0.1 * 680.0 / 11.0)
        << "\" y=\"378.00\" width=\"" << dml::svg::number(bar_w) << "\" height=\"4.00\"";
  last << "<rect class=\"zero-bar\" x=\"" << dml::svg::number(80 + 9.1 * 680.0 / 11.0) << "\"";
  CHECK(svg.find(first.str()) != std::string::npos);
  CHECK(svg.find(last.str()) != std::string::npos);
  CHECK(count(svg, "font-size=\"10.00\" text-anchor=\"middle\">0.0</text>") == 2);
}

TEST_CASE("report --ers: a negative normalized value hangs below the zero line", "[report]") {
  test::TempDir dir;
  // ES:D 2.5 -> 100 (2 - 2.5) / 2 = -25; the others 50: ERS (9 * 50 - 25) / 10 = 42.5.
  write_text(dir.file("e.json"), ers_json({25, 50, 25, 50, 0.5, 2.5, 50, 50, 50, 50}, 42.5));
  REQUIRE(report({"--ers", dir.file("e.json"), "--out", dir.file("e.svg")}) == 0);
  const std::vector<Bar> b = bars(read_text(dir.file("e.svg")));
  REQUIRE(b.size() == 11);
  // y range [-50, 100] (span 125, raw step 25 -> 50): 2 pixels per point, zero at y = 280.
  CHECK(b[5].y == Approx(280.0).margin(kPixel));
  CHECK(b[5].h == Approx(50.0).margin(kPixel));
  CHECK(b[0].y == Approx(180.0).margin(kPixel));
  CHECK(b[0].h == Approx(100.0).margin(kPixel));
  CHECK(b[10].h == Approx(85.0).margin(kPixel));
}

TEST_CASE("report: usage and file errors", "[report]") {
  test::TempDir dir;
  CHECK(report({"--help"}) == 0);
  CHECK_THROWS_AS(report({}), dml::UsageError);
  CHECK_THROWS_AS(report({"--log", "a", "--ers", "b.json", "--out", "x.svg"}), dml::UsageError);
  CHECK_THROWS_AS(report({"--log", "a", "--grid"}), dml::UsageError);
  CHECK_THROWS_WITH(report({"--log", "a", "--bogus"}), Catch::Contains("--bogus"));
  CHECK_THROWS_WITH(report({"--ers", "a.json"}), Catch::Contains("--out"));
  CHECK_THROWS_WITH(report({"--ers", "a.json", "--names", "x,y", "--out", "e.svg"}),
                    Catch::Contains("--names"));
  CHECK_THROWS_WITH(
      report({"--grid", "--checkpoint", "m.safetensors", "--out", "g.png", "--k", "0"}),
      Catch::Contains("--k"));
  CHECK_THROWS_WITH(
      report({"--grid", "--checkpoint", "m.safetensors", "--out", "g.png", "--queries", "x"}),
      Catch::Contains("--queries"));
  // Files: missing (a usage error, README "Exit codes"), not JSON, without the ERS columns
  // (runtime errors naming the file).
  CHECK_THROWS_AS(report({"--ers", dir.file("none.json"), "--out", dir.file("e.svg")}),
                  dml::UsageError);
  write_text(dir.file("bad.json"), "{\"CA+\": ");
  CHECK_THROWS_WITH(report({"--ers", dir.file("bad.json"), "--out", dir.file("e.svg")}),
                    Catch::Contains("bad.json") && Catch::Contains("not a JSON"));
  write_text(dir.file("partial.json"), R"({"CA+": 1, "complete": false})");
  CHECK_THROWS_WITH(report({"--ers", dir.file("partial.json"), "--out", dir.file("e.svg")}),
                    Catch::Contains("partial.json") && Catch::Contains("CA-"));
  CHECK_FALSE(std::filesystem::exists(dir.file("e.svg")));
}
