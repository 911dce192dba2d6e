# Sourced by tools/repro.sh and tools/seeds.sh: where an adversarial set's results live.
# adversarial_set_name SPEC prints the folder name of `--adversarial-set SPEC`: the attack's kind
# in lower case, with -t<T> when the spec has a T= key (STAX:eps=0.01 -> stax, MTAX:T=5:... ->
# mtax-t5), so that MTAX with different target counts get different folders.
adversarial_set_name() {
  local kind targets
  kind="$(printf '%s' "${1%%:*}" | tr 'A-Z' 'a-z')"
  targets="$(printf '%s' "$1" | sed -n 's/.*:T=\([0-9]*\).*/\1/p')"
  printf '%s%s\n' "$kind" "${targets:+-t$targets}"
}
