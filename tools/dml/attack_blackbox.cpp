// `dml attack` in black-box and transfer mode (header: tools/dml/attack_blackbox.h).
#include "tools/dml/attack_blackbox.h"

#include <chrono>
#include <cstdio>

#include "attacks/whitebox_comparison.h"
#include "kernels/common/check.h"
#include "models/embed.h"
#include "tools/dml/split_stream.h"

namespace dml {

namespace {

constexpr int64_t kSourceGalleryBatch = 256;  // images per forward, as the target's gallery

}  // namespace

TransferSource load_transfer_source(const std::string& path, const AttackSetup& setup) {
  TransferSource source;
  source.trained = load_trained_model(path, setup.device);
  ENGINE_CHECK(source.trained.model->input_shape() == setup.trained.model->input_shape(),
               "--source-checkpoint ", path, ": the model takes ",
               engine::shape_str(source.trained.model->input_shape()), " images, the attacked one ",
               engine::shape_str(setup.trained.model->input_shape()));
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(setup.images.labels.size());
  // The target's metric: the source follows the same objective as a white-box attack would.
  source.gallery = attacks::gallery_from_embeddings(
      embed_split(*source.trained.model, *setup.data, n, kSourceGalleryBatch), setup.images.labels,
      setup.metric, models::module_device(*source.trained.model));
  std::fprintf(stderr, "source gallery: %lld images embedded through %s (%s) in %.1fs\n",
               static_cast<long long>(n), path.c_str(), source.trained.config.name.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return source;
}

int run_blackbox_or_transfer(AttackSetup& setup, const attacks::AttackSpec& spec,
                             const std::string& checkpoint, const TransferSource* source,
                             const std::string& source_checkpoint) {
  // The white-box reference: the same spec as a gradient attack on the target. Its selection is
  // the same (the stream depends on --seed and the attack's label only), and it writes no images.
  attacks::AttackSpec whitebox_spec = spec;
  whitebox_spec.nes = attacks::NesOptions{};
  AttackRunSettings whitebox_run = setup.run;
  whitebox_run.dump_dir.clear();
  whitebox_run.save_adversarial.clear();
  const AttackSummary whitebox =
      run_attack(*setup.trained.model, setup.images, setup.gallery, whitebox_spec, whitebox_run);
  AttackRunSettings run = setup.run;
  if (source != nullptr) {
    run.source_model = source->trained.model.get();
    run.source_gallery = &source->gallery;
  }
  const AttackSummary s = run_attack(*setup.trained.model, setup.images, setup.gallery, spec, run);
  const std::vector<attacks::StrengthComparison> comparison =
      attacks::compare_with_whitebox(s.names, whitebox.adversarial, s.adversarial);
  const bool suspected = attacks::gradient_masking_suspected(comparison);
  const char* mode =
      source != nullptr ? (spec.nes.population > 0 ? "transfer+nes" : "transfer") : "black-box";
  if (setup.json) {
    nlohmann::ordered_json out = attack_summary_json(s);
    out["mode"] = mode;
    if (source != nullptr) out["source_checkpoint"] = source_checkpoint;
    nlohmann::ordered_json reference = nlohmann::ordered_json::object();
    for (const attacks::StrengthComparison& c : comparison) {
      reference[c.measure] = {{"adversarial", c.whitebox}, {"other_stronger", c.other_stronger}};
    }
    out["whitebox"] = {{"attack", whitebox.spec}, {"measures", reference}};
    out["gradient_masking_suspected"] = suspected;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("attack      %s (%s)\n", s.spec.c_str(), mode);
  std::printf("model       %s (%s) on %s\n", checkpoint.c_str(), setup.trained.config.name.c_str(),
              setup.device.str().c_str());
  if (source != nullptr) {
    std::printf("source      %s (%s): the perturbation is computed through it\n",
                source_checkpoint.c_str(), source->trained.config.name.c_str());
  }
  if (s.queries_per_image > 0) {
    std::printf("queries     %lld per image\n", static_cast<long long>(s.queries_per_image));
  }
  std::printf("images      %lld attacked of %s %s, %.1fs (white-box %.1fs)\n\n",
              static_cast<long long>(s.images), setup.dataset.c_str(), setup.split.c_str(),
              s.seconds, whitebox.seconds);
  std::printf("%-16s %12s %12s %12s\n", "measure", "clean", "adversarial", "white-box");
  for (size_t m = 0; m < s.names.size(); ++m) {
    std::printf("%-16s %12.4f %12.4f %12.4f\n", s.names[m].c_str(), s.clean[m], s.adversarial[m],
                whitebox.adversarial[m]);
  }
  std::printf("\nsanity: max|delta|_inf %.6f (eps %.6f), NaN %lld, pixels [%.4f, %.4f]\n",
              s.perturbation.max_delta, spec.pgd.eps,
              static_cast<long long>(s.perturbation.nan_count), s.perturbation.min_pixel,
              s.perturbation.max_pixel);
  std::printf("gradient masking: %s\n",
              suspected ? "SUSPECTED (this attack beats the white-box one on the same spec)"
                        : "not indicated (the white-box attack is at least as strong)");
  return 0;
}

}  // namespace dml
