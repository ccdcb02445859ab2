#!/usr/bin/env bash
# scheduling.sh — DESIGN §5 as seen from the attempt table:
#   * a reduce gets its children in ordinal order whatever order they completed in
#     (children sleep 300/10/150/... ms on 3 workers);
#   * reserve=elastic batches take the queue's head and mix parents; reserve=parent
#     batches hold the siblings of one parent only (attempt.batch grouped, joined to the
#     grain's entity's parent).
source "$(dirname "$0")/lib.sh"

# ---- ordered reduce ----------------------------------------------------------------------
printf '%s\n' '300 a|10 b|150 c|0 d|200 e' '120 f|0 g|60 h' > "$T/slow.txt"
cat > "$T/ordered.orch" <<'EOF'
pipeline ordered
domain doc
domain part in doc
source doc.line = lines("slow.txt")
call cut  = split(sep="|")
call nap  = sleep()             with workers=3
call join = concat(sep=",")
part.raw  = expand cut(doc.line)
part.done = nap(part.raw)       # sleeps the number each part starts with
doc.all   = reduce join(part.done)
EOF
J=$T/ordered
run_job "$T/ordered.orch" "$J" --cpus 3
job_done "$J"
expect_eq "reduce in ordinal order" "300 a|10 b|150 c|0 d|200 e|present|300 a,10 b,150 c,0 d,200 e
120 f|0 g|60 h|present|120 f,0 g,60 h" "$(states "$J" doc.all)"
# For the log only (timing, not asserted): the order the parts completed in.
echo "completion order: $(q "$J" "SELECT group_concat(k.key, ' ; ') FROM (SELECT k.key FROM attempt a
  JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id AND c.name = 'nap'
  JOIN entity_key k ON k.entity_id = g.entity_id ORDER BY a.ended_at, a.id) AS k")"

# ---- batch composition: elastic vs parent ------------------------------------------------
# cut takes all 6 roots in one batch (they are admitted before its worker is ready), so
# all 19 children become READY in one turn and wait together in up's queue.
printf '%s\n' 'a b c' 'd e' 'f g h i' 'j' 'k l m' 'n o p q r' > "$T/words.txt"
for mode in elastic parent; do
  cat > "$T/$mode.orch" <<EOF
pipeline batches_$mode
domain doc
domain w in doc
source doc.line = lines("words.txt")
call cut = split(sep=" ")   with batch=8
call up  = upper()          with batch=8, reserve=$mode
w.raw = expand cut(doc.line)
w.up  = up(w.raw)
EOF
  # --batch-fixed: every dispatch is its call's batch, the batches this test names.
  run_job "$T/$mode.orch" "$T/$mode" --batch-fixed
  job_done "$T/$mode"
  expect_eq "$mode: values" "A B C D E F G H I J K L M N O P Q R" \
    "$(states "$T/$mode" w.up | cut -d'|' -f3 | tr '\n' ' ' | sed 's/ $//')"
done
# per batch of up: its size and the number of distinct parents of its grains
batches() {
  q "$1" "SELECT count(*) || ':' || count(DISTINCT e.parent_id) FROM attempt a
          JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id AND c.name = 'up'
          JOIN entity e ON e.id = g.entity_id GROUP BY a.batch ORDER BY a.batch"
}
expect_eq "cut ran one batch of 6 roots" "6" \
  "$(q "$T/elastic" "SELECT count(*) FROM attempt a JOIN grain g ON g.id = a.grain_id
                     JOIN call c ON c.id = g.call_id AND c.name = 'cut' GROUP BY a.batch")"
elastic=$(batches "$T/elastic")
echo "elastic batches (size:parents): $(echo $elastic)"
[ "$(echo "$elastic" | awk -F: '$2 > 1' | wc -l)" -ge 1 ] ||
  fail "elastic: no batch mixes parents: $(echo $elastic)"
expect_eq "elastic: the first batch is the queue's head, 8 grains of 3 parents" "8:3" \
  "$(echo "$elastic" | head -1)"
# parent: each batch holds the siblings of one parent, and since all of them were queued
# together and batch=8 is more than any parent's count, each parent's children in one batch.
expect_eq "parent: one batch per parent, all of its children" "3:1 2:1 4:1 1:1 3:1 5:1" \
  "$(echo $(batches "$T/parent"))"
echo "scheduling: ok"
