// The peer files of `dml bench --train` (tools/dml/bench_peers.h): a PyTorch peer's rows parsed
// with their timings, malformed files refused naming the file and the key, and which peer row
// compares with which of our runs (config, overrides, images, passes, precision).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/dml/args.h"
#include "tools/dml/bench_peers.h"

using namespace dml::bench;

namespace {

nlohmann::json peer_document() {
  return nlohmann::json::parse(R"({
    "peer": "PyTorch", "version": "2.5.1", "device": "cuda", "device_name": "NVIDIA H100",
    "threads": 16, "overrides": ["defense.pgd.steps=32", "seed=1"],
    "rows": [{"config": "est.json", "variant": "P0 robrank as-is", "images": 256, "passes": 33,
              "steps": 10, "warmup": 2, "ms": {"median": 812.5, "min": 801.0, "max": 830.0}},
             {"config": "act.json", "variant": "P1 best eager", "images": 256, "passes": 33,
              "steps": 10, "warmup": 2, "ms": {"median": 400, "min": 390, "max": 410}}]})");
}

// The message of the UsageError parse_peer_rows throws for `doc`.
std::string peer_error(const nlohmann::json& doc) {
  try {
    parse_peer_rows(doc, "peer.json");
  } catch (const dml::UsageError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("bench peers: a peer file's rows are read with their timings") {
  const std::vector<PeerRow> rows = parse_peer_rows(peer_document(), "peer.json");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].peer == "PyTorch 2.5.1");
  CHECK(rows[0].variant == "P0 robrank as-is");
  CHECK(rows[0].device == "cuda");
  CHECK(rows[0].device_name == "NVIDIA H100");
  CHECK(rows[0].threads == 16);
  CHECK(rows[0].overrides == std::vector<std::string>{"defense.pgd.steps=32", "seed=1"});
  CHECK(rows[0].config == "est.json");
  CHECK(rows[0].images == 256);
  CHECK(rows[0].passes == 33);
  CHECK(rows[0].steps == 10);
  CHECK(rows[0].ms.median == 812.5);
  CHECK(rows[0].ms.min == 801.0);
  CHECK(rows[0].ms.max == 830.0);
  CHECK(rows[1].ms.median == 400.0);  // integers are accepted as milliseconds too
}

TEST_CASE("bench peers: a malformed peer file is a usage error naming the file and the key") {
  nlohmann::json doc = peer_document();
  doc.erase("version");
  CHECK(peer_error(doc) == "peer.json: missing key \"version\"");
  doc = peer_document();
  doc["device"] = "tpu";
  CHECK(peer_error(doc) == "peer.json: \"device\" must be \"cpu\" or \"cuda\", not \"tpu\"");
  doc = peer_document();
  doc["rows"][1]["ms"].erase("median");
  CHECK(peer_error(doc) == "peer.json: rows[1].ms: missing key \"median\"");
  doc = peer_document();
  doc["rows"][0]["images"] = -4;
  CHECK(peer_error(doc) == "peer.json: rows[0]: \"images\" must be a non-negative integer");
  doc = peer_document();
  doc["rows"][0]["ms"]["median"] = 0;
  CHECK(peer_error(doc) == "peer.json: rows[0]: \"ms.median\" must be > 0");
  doc = peer_document();
  doc.erase("overrides");
  CHECK(peer_error(doc) == "peer.json: missing key \"overrides\"");
  doc = peer_document();
  doc["overrides"] = {1};
  CHECK(peer_error(doc) == "peer.json: \"overrides\" must hold strings");
  doc = peer_document();
  doc["rows"] = "none";
  CHECK(peer_error(doc) == "peer.json: \"rows\" must be an array");
  CHECK(peer_error(nlohmann::json::array()) == "peer.json: missing key \"peer\"");
}

TEST_CASE(
    "bench peers: a row matches our run by config, overrides, device, batch, passes and threads") {
  const PeerRow row = parse_peer_rows(peer_document(), "peer.json")[0];
  CHECK(config_file_name("configs/fashion/est.json") == "est.json");
  CHECK(config_file_name("est.json") == "est.json");
  OurRun ours;
  ours.config_path = "configs/fashion/est.json";
  ours.device = "cuda";
  ours.images = 256;
  ours.passes = 33;
  ours.threads = 2;                                     // not compared on CUDA
  ours.overrides = {"seed=1", "defense.pgd.steps=32"};  // the same set in another order
  CHECK(peer_matches(row, ours));
  auto differs = [&](auto change) {
    OurRun other = ours;
    change(other);
    return !peer_matches(row, other);
  };
  CHECK(differs([](OurRun& o) { o.config_path = "configs/fashion/act.json"; }));
  CHECK(differs([](OurRun& o) { o.device = "cpu"; }));
  CHECK(differs([](OurRun& o) { o.images = 128; }));
  CHECK(differs([](OurRun& o) { o.passes = 2; }));            // --set defense.pgd.steps=1
  CHECK(differs([](OurRun& o) { o.overrides.pop_back(); }));  // one override fewer
  CHECK(differs([](OurRun& o) { o.overrides[0] = "seed=2"; }));
  // On the CPU the peer must have used as many threads as we did.
  PeerRow cpu_row = row;
  cpu_row.device = "cpu";
  OurRun cpu = ours;
  cpu.device = "cpu";
  cpu.threads = 16;
  CHECK(peer_matches(cpu_row, cpu));
  cpu.threads = 2;
  CHECK_FALSE(peer_matches(cpu_row, cpu));
}

TEST_CASE("bench peers: the peer's precision is read, fp32 when the file predates the key") {
  CHECK(parse_peer_rows(peer_document(), "peer.json")[0].precision == "fp32");
  nlohmann::json doc = peer_document();
  doc["precision"] = "pytorch-default";
  CHECK(parse_peer_rows(doc, "peer.json")[1].precision == "pytorch-default");
  doc["precision"] = "fp16";
  CHECK(peer_error(doc) ==
        "peer.json: \"precision\" must be \"fp32\", \"pytorch-default\", "
        "\"tf32\" or \"bf16\", not \"fp16\"");
  doc["precision"] = 32;
  CHECK(peer_error(doc) == "peer.json: \"precision\" must be a string");
}

TEST_CASE("bench peers: a P3 row with its candidates is read like the others") {
  // As tools/peers/pytorch_train_step.py writes it: the faster candidate named in the variant,
  // every candidate's outcome under "p3" (not read).
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "peer": "PyTorch", "version": "2.5.1", "device": "cuda", "device_name": "NVIDIA H200",
    "threads": 16, "precision": "tf32", "overrides": [],
    "rows": [{"config": "est.json", "variant": "P3 torch.cuda.graph", "images": 256,
              "passes": 33, "steps": 10, "warmup": 3,
              "ms": {"median": 31.5, "min": 31.0, "max": 33.0},
              "p3": {"chosen": "torch.cuda.graph",
                     "candidates": {"torch.cuda.graph": {"ms": {"median": 31.5}},
                                    "compile reduce-overhead": {"error": "failed"}}}}]})");
  const std::vector<PeerRow> rows = parse_peer_rows(doc, "peer.json");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].variant == "P3 torch.cuda.graph");
  CHECK(rows[0].precision == "tf32");
  CHECK(rows[0].ms.median == 31.5);
  CHECK(rows[0].passes == 33);
}

TEST_CASE("bench peers: a row compares in our precision, or PyTorch's default in any of ours") {
  PeerRow row = parse_peer_rows(peer_document(), "peer.json")[0];
  OurRun ours;
  ours.config_path = "configs/fashion/est.json";
  ours.device = "cuda";
  ours.images = 256;
  ours.passes = 33;
  ours.overrides = {"seed=1", "defense.pgd.steps=32"};
  CHECK(peer_matches(row, ours));  // fp32 both
  ours.precision = "tf32";
  CHECK_FALSE(peer_matches(row, ours));  // a strict FP32 PyTorch against our TF32
  row.precision = "tf32";
  CHECK(peer_matches(row, ours));
  row.precision = "bf16";
  CHECK_FALSE(peer_matches(row, ours));
  row.precision = "pytorch-default";  // what PyTorch's users run, against each of ours
  for (const char* mine : {"fp32", "tf32", "bf16"}) {
    ours.precision = mine;
    CHECK(peer_matches(row, ours));
  }
}
