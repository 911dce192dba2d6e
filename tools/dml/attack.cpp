// dml attack: one adversarial ranking attack over a dataset split (docs/attacks.md).
//
//   dml attack --checkpoint FILE --attack SPEC [--data NAME --split test] [--json] [-X DIR]
//              [--save-adversarial FILE.npy] ...
//
// Prints the clean and adversarial value of the attack's measures and the sanity report
// (max|delta|_inf, NaN count, pixel range); exits 1 if the perturbation breaks eps by more than
// 1e-6 (attacks::check_perturbation, per batch).
#include <cstdio>
#include <memory>
#include <string>

#include "attacks/attack.h"
#include "engine/dist/communicator.h"
#include "engine/precision.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"
#include "tools/dml/attack_blackbox.h"
#include "tools/dml/attack_runner.h"
#include "tools/dml/attack_setup.h"
#include "tools/dml/commands.h"
#include "tools/dml/distributed.h"
#include "tools/dml/output_files.h"

namespace dml {

namespace {

const char kUsage[] =
    "usage: dml attack --checkpoint FILE --attack SPEC [options]\n"
    "\n"
    "Attacks every image of a split (query set = gallery = the split) and prints the clean and\n"
    "adversarial value of the attack's measure, with max|delta|_inf, NaN count and pixel range.\n"
    "\n"
    "  --attack SPEC       KIND[:key=value]..., robrank style, e.g.\n"
    "                        CA:pm=+:W=1:eps=0.30196:alpha=0.011764:pgditer=32\n"
    "                        QA:pm=-:M=1:...   SPQA:pm=+:M=1:zeta=4e4:...   TMA:...   ES:...\n"
    "                        LTM:...   GTM:...   GTT:...   STAX:...   MTAX:T=5:...\n"
    "                      keys: pm W M T G zeta eps alpha pgditer rinit; NES black-box:\n"
    "                      nes queries sigma (docs/attacks.md)\n"
    "  -X DIR              write original/adversarial PNG pairs of the first batch to DIR\n"
    "  --save-adversarial FILE.npy\n"
    "                      write every attacked image's adversarial version as float32\n"
    "                      [N, C, H, W], row i = image i of the split (the first N with\n"
    "                      --max-images); written as the batches finish, renamed into place at\n"
    "                      the end; an existing file is refused unless --overwrite\n"
    "  --overwrite         replace an existing --save-adversarial file\n"
    "  --source-checkpoint FILE\n"
    "                      transfer attack: the perturbation is computed through this model,\n"
    "                      the selection and the measures through --checkpoint's; printed beside\n"
    "                      the white-box attack on --checkpoint, with the gradient-masking flag\n"
    "                      (also for a black-box spec, nes=N: docs/attacks.md)\n";

// `mpirun -n N dml attack` splits the white-box attack's batches over the ranks
// (docs/distributed.md); what it does not split is refused instead of run N times.
void refuse_unsplit_attack(const attacks::AttackSpec& spec, const std::string& source_checkpoint,
                           const std::string& save_adversarial) {
  const std::string ranks = std::to_string(engine::dist::world().size) + " MPI ranks";
  if (!source_checkpoint.empty() || spec.nes.population > 0) {
    throw UsageError("--source-checkpoint and NES (nes=) attacks run in one process; started as " +
                     ranks + " (docs/distributed.md)");
  }
  if (!save_adversarial.empty()) {
    throw UsageError("--save-adversarial writes from one process; started as " + ranks +
                     " (docs/distributed.md)");
  }
}

}  // namespace

int run_attack_command(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    std::fputs(kAttackCommonUsage, stdout);
    return 0;
  }
  const std::string spec_text = args.take_string("--attack");
  const std::string dump_dir = args.take_string("-X", "");
  const std::string save_adversarial = args.take_string("--save-adversarial", "");
  const ExistingResult existing = take_existing_result_flags(args, /*can_resume=*/false);
  const std::string source_checkpoint = args.take_string("--source-checkpoint", "");
  AttackCommonOptions options = take_attack_options(args);
  args.finish();
  if (!source_checkpoint.empty()) require_input_file(source_checkpoint, "--source-checkpoint");
  refuse_output_over_input(save_adversarial, "--save-adversarial", options.checkpoint,
                           "--checkpoint");
  check_result_file(save_adversarial, "--save-adversarial", existing);
  prepare_output_folder(dump_dir, "-X");
  attacks::AttackSpec spec;
  try {
    spec = attacks::parse_attack_spec(spec_text);
  } catch (const engine::Error& e) {
    throw UsageError(std::string("--attack: ") + e.what());
  }
  options.run.dump_dir = dump_dir;
  options.run.save_adversarial = save_adversarial;
  const bool several_ranks = engine::dist::world().size > 1;
  if (several_ranks) refuse_unsplit_attack(spec, source_checkpoint, save_adversarial);
  options.run.split_over_ranks = several_ranks;
  AttackSetup setup = setup_attack(options);
  if (!writes_results()) setup.run.progress = false;  // several MPI ranks: rank 0 shows progress
  complete_spec(spec, setup.dataset);
  if (!source_checkpoint.empty() || spec.nes.population > 0) {
    std::unique_ptr<TransferSource> source;
    if (!source_checkpoint.empty()) {
      source = std::make_unique<TransferSource>(load_transfer_source(source_checkpoint, setup));
    }
    return run_blackbox_or_transfer(setup, spec, options.checkpoint, source.get(),
                                    source_checkpoint);
  }
  const AttackSummary s =
      run_attack(*setup.trained.model, setup.images, setup.gallery, spec, setup.run);
  if (!writes_results()) return 0;  // several MPI ranks: rank 0 prints
  if (setup.json) {
    nlohmann::ordered_json out = attack_summary_json(s);
    out["precision"] = engine::precision_name(engine::precision());
    out["trained_precision"] = engine::precision_name(setup.trained.precision);
    out["bn_branch"] = setup.bn_branch;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("attack      %s\n", s.spec.c_str());
  std::printf("model       %s (%s, D=%lld) on %s\n", options.checkpoint.c_str(),
              setup.trained.config.name.c_str(),
              static_cast<long long>(setup.trained.config.embedding_dim),
              setup.device.str().c_str());
  std::printf("precision   trained in %s, attacked in %s, BN branch %lld\n",
              engine::precision_name(setup.trained.precision),
              engine::precision_name(engine::precision()), static_cast<long long>(setup.bn_branch));
  std::printf("images      %lld attacked of %s %s (gallery %lld), %.1fs\n\n",
              static_cast<long long>(s.images), setup.dataset.c_str(), setup.split.c_str(),
              static_cast<long long>(setup.images.labels.size()), s.seconds);
  std::printf("%-16s %12s %12s\n", "measure", "clean", "adversarial");
  for (size_t m = 0; m < s.names.size(); ++m) {
    std::printf("%-16s %12.4f %12.4f\n", s.names[m].c_str(), s.clean[m], s.adversarial[m]);
  }
  std::printf("\nsanity: max|delta|_inf %.6f (eps %.6f), NaN %lld, pixels [%.4f, %.4f]\n",
              s.perturbation.max_delta, spec.pgd.eps,
              static_cast<long long>(s.perturbation.nan_count), s.perturbation.min_pixel,
              s.perturbation.max_pixel);
  return 0;
}

}  // namespace dml
