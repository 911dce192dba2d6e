#!/bin/sh
# usage: dml_metrics_names.sh DML DIR WRITE_NPY (WRITE_NPY: tests/tools/write_npy.cpp)
# dml metrics on six points on a line (metric E): x = 0, 1, 2, 3, 4, 10, labels 7, 3, 7, 7, 3, 5
# (classes A = {0, 2, 3}, B = {1, 4}, C = {5} alone). The hand computation is in
# tests/metrics/retrieval_test.cpp ("six points on a line"): r_precision 3/10, mrr 31/60,
# precision_at_1 1/5, map 1/2, map_at_r 1/5; per class (A, B) precision_at_1 1/6, map 67/144,
# map_at_r 1/6, r_precision 1/4, mrr 23/48. The printed table gains their rows, and the JSON
# carries them under our keys, PML's names and PML's avg_of_avgs names (docs/metrics.md).
set -e
dml=$1; d=$2; write_npy=$3
rm -rf "$d"; mkdir -p "$d"

"$write_npy" "$d/e.npy" f4 6 1 0 1 2 3 4 10
"$write_npy" "$d/l.npy" i8 6 0 7 3 7 7 3 5

"$dml" metrics --embeddings "$d/e.npy" --labels "$d/l.npy" --metric E > "$d/table.txt"
cat "$d/table.txt"
# row VALUE: the table holds the line exactly (name padded to 12, value to 8, in %).
row() { grep -qx "$1" "$d/table.txt" || { echo "missing row: $1"; exit 1; }; }
row 'recall@1        20.00'
row 'map             50.00'
row 'map_at_r        20.00'
row 'r_precision     30.00'
row 'mrr             51.67'
row 'per class           %   (PML avg_of_avgs: the mean per class, then over 2 classes)'
row 'recall@1        16.67'
row 'map             46.53'
row 'map_at_r        16.67'
row 'r_precision     25.00'
row 'mrr             47.92'

"$dml" metrics --embeddings "$d/e.npy" --labels "$d/l.npy" --metric E --json > "$d/m.json"
cat "$d/m.json"
# key NUMBER: the flat JSON object holds "key":NUMBER (to the digits given).
key() { grep -q "\"$1\":$2" "$d/m.json" || { echo "missing key: $1 = $2"; exit 1; }; }
key recall@1 0.2,
key r_precision 0.3,
key mrr 0.51666666
key precision_at_1 0.2,
key mean_average_precision 0.5,
key mean_average_precision_at_r 0.2,
key mean_reciprocal_rank 0.51666666
key NMI 0.
key precision_at_1_avg_of_avgs 0.16666666
key r_precision_avg_of_avgs 0.25,
key mean_average_precision_avg_of_avgs 0.465277777
key mean_average_precision_at_r_avg_of_avgs 0.16666666
key mean_reciprocal_rank_avg_of_avgs 0.47916666
echo "dml metrics names ok"
