#!/usr/bin/env bash
# propagation.sh — every rule of DESIGN §3, end to end, asserted on item states (export
# --all) and on the attempt table (a grain sealed without running has no attempt row):
#   rule 1  a Failed or Suppressed input seals the grain Suppressed, without running;
#   rule 2  an unresolved input makes the grain wait (observed while its input runs);
#   rule 3  a required Dropped input seals it Dropped without running; an optional one
#           reaches the UDF as absent (it runs);
#   expand  zero children (Succeeded, empty: reduce sees []) vs Dropped (reduce Dropped)
#           vs Failed (reduce Suppressed); aligned: count mismatch is a RecordFailure on
#           every child, a match fills by ordinal;
#   broadcast  to children and grandchildren, state and value, published before or after
#           the descendants exist;
#   reduce  a Failed child input suppresses it; Dropped children are left out;
#   aligned sealed without running before the plain expansion exists: its outputs on the
#           children take its state when they are published (else their consumers wait).
source "$(dirname "$0")/lib.sh"

# Doc 5 sleeps 900 ms in `slow` (sleep() reads the leading number), the others 0.
printf '%s\n' 'a,b c' '' 'x y z' 'p  WFAIL q' 'DOCFAIL m' '900 s' > "$T/docs.txt"
cat > "$T/prop.orch" <<'EOF'
pipeline prop
domain doc
domain w in doc              # words of a doc (split on " ")
domain c in w                # pieces of a word (split on ":"): two levels below doc
domain t in doc              # words of doc.kept: Dropped for the empty doc
domain f in doc              # words of doc.bad: Failed for DOCFAIL
source doc.line = lines("docs.txt")

call keep   = nonempty()
call bad    = fail_if(contains="DOCFAIL", kind=record)
call after  = identity()
call after2 = identity()
call req    = identity()
call opt    = identity()
call slow   = sleep()
call afters = identity()
call cut    = split(sep=" ")
call cutc   = split(sep=",")
call wkeep  = nonempty()
call wchk   = fail_if(contains="WFAIL", kind=record)
call cutw   = split(sep=":")
call cutt   = split(sep=" ")
call cutf   = split(sep=" ")
call join   = concat(sep="+")
call tally  = count()
call tjoin  = concat(sep="+")
call fjoin  = concat(sep="+")
call cjoin  = concat(sep="+")

doc.kept   = filter keep(doc.line)        # Dropped for the empty line
doc.bad    = bad(doc.line)                # Failed for DOCFAIL
doc.after  = after(doc.bad)               # rule 1: Failed input
doc.after2 = after2(doc.after)            # rule 1: Suppressed input
doc.req    = req(doc.kept)                # rule 3: required Dropped input
doc.opt    = opt(?doc.kept)               # rule 3: optional Dropped input runs
doc.slow   = slow(doc.line)
doc.afters = afters(doc.slow)             # rule 2: waits while slow runs
w.raw      = expand cut(doc.line)
w.alt      = expand aligned cutc(doc.line)
w.kept     = filter wkeep(w.raw)
w.chk      = wchk(w.raw)
w.doc      = broadcast doc.line
c.raw      = expand cutw(w.raw)
c.doc      = broadcast doc.line           # published before the grandchildren exist
c.bad      = broadcast doc.bad            # carries the Failed state
c.slow     = broadcast doc.slow           # usually published after they exist
t.raw      = expand cutt(doc.kept)
f.raw      = expand cutf(doc.bad)
doc.j      = reduce join(w.kept)
doc.n      = reduce tally(w.kept)
doc.tj     = reduce tjoin(t.raw)
doc.fj     = reduce fjoin(f.raw)
doc.cj     = reduce cjoin(w.chk)
EOF

J=$T/job
"$ORCH" run "$T/prop.orch" --job "$J" --progress none 2> "$T/run.log" &
pid=$!

# ---- rule 2, observed live: while slow runs on doc "900 s", afters on it waits, has no
# attempt, and the broadcast c.slow has reached none of its grandchildren. One SELECT is
# one snapshot, so "slow is in flight" and the rest are read together.
live_check() {
  [ -f "$J/state.db" ] || return 1
  local row
  row=$(qlive "$J" "
    SELECT (SELECT g.phase FROM grains g JOIN call c ON c.id = g.call_id
            JOIN entity_key k ON k.entity_id = g.entity_id
            WHERE c.name = 'slow' AND k.key = '900 s'),
           (SELECT g.phase || ',' || (SELECT count(*) FROM attempt a WHERE a.grain_id = g.id)
            FROM grain g JOIN call c ON c.id = g.call_id
            JOIN entity_key k ON k.entity_id = g.entity_id
            WHERE c.name = 'afters' AND k.key = '900 s'),
           (SELECT count(*) FROM item i JOIN port p ON p.id = i.port_id
            JOIN entity_key k ON k.entity_id = i.entity_id
            WHERE p.qualified = 'c.slow' AND k.key LIKE '900 s/%')" 2> /dev/null) || return 1
  case $row in
  in_flight\|*)
    expect_eq "while slow runs, afters waits unrun and c.slow is unresolved" \
      "in_flight|waiting,0|0" "$row"
    return 0 ;;
  esac
  return 1
}
wait_until 20 "slow in flight on doc '900 s'" live_check
wait "$pid" || { cat "$T/run.log" >&2; fail "orch run exited $?"; }
job_done "$J"

# ---- rule 1: Failed and Suppressed inputs ------------------------------------------------
expect_eq "doc.bad" "a,b c|present|a,b c
|present|
x y z|present|x y z
p  WFAIL q|present|p  WFAIL q
DOCFAIL m|failed|fail_if: input contains \"DOCFAIL\"
900 s|present|900 s" "$(states "$J" doc.bad)"
expect_eq "failure row of the record failure" "record" \
  "$(q "$J" "SELECT kind FROM failures WHERE call = 'bad'")"
for p in after after2; do
  expect_eq "doc.$p suppressed on DOCFAIL" "DOCFAIL m|suppressed|" \
    "$(states "$J" doc.$p | grep '^DOCFAIL')"
  expect_eq "$p never ran on DOCFAIL" 0 "$(attempts "$J" $p 'DOCFAIL m')"
  expect_eq "$p sealed suppressed" "sealed|suppressed|0" "$(grain "$J" $p 'DOCFAIL m')"
  expect_eq "$p ran on the others" 1 "$(attempts "$J" $p 'x y z')"
done

# ---- rule 3: required vs optional Dropped input -----------------------------------------
expect_eq "doc.kept of the empty line" "|dropped|" "$(states "$J" doc.kept | grep '^|')"
expect_eq "doc.req dropped" "|dropped|" "$(states "$J" doc.req | grep '^|')"
expect_eq "req never ran on the empty line" 0 "$(attempts "$J" req '')"
expect_eq "doc.opt dropped (identity drops an absent value)" "|dropped|" \
  "$(states "$J" doc.opt | grep '^|')"
expect_eq "opt ran on the empty line, absent input" "1|dropped" \
  "$(q "$J" "SELECT count(*), group_concat(a.outcome) FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id JOIN entity_key k ON k.entity_id = g.entity_id
             WHERE c.name = 'opt' AND k.key = ''")"

# ---- rule 2 afterwards: afters ran once, after slow, on the value slow passed ------------
expect_eq "doc.afters" "900 s|present|900 s" "$(states "$J" doc.afters | grep '^900')"

# ---- expansions: zero children vs Dropped vs Failed --------------------------------------
expect_eq "expansions of the empty line and of DOCFAIL" "cut||succeeded|0
cutt||dropped|0
cutf|DOCFAIL m|failed|0" "$(q "$J" "SELECT c.name, k.key, x.state, x.nchildren FROM expansion x
    JOIN call c ON c.id = x.call_id JOIN entity_key k ON k.entity_id = x.parent_id
    WHERE (k.key = '' AND c.name IN ('cut', 'cutt')) OR (k.key = 'DOCFAIL m' AND c.name = 'cutf')
    ORDER BY c.id")"
expect_eq "doc.j: empty list gives \"\"; the Dropped word of doc 3 is left out" "a,b c|present|a,b+c
|present|
x y z|present|x+y+z
p  WFAIL q|present|p+WFAIL+q
DOCFAIL m|present|DOCFAIL+m
900 s|present|900+s" "$(states "$J" doc.j)"
expect_eq "doc.n: empty list counts 0; Dropped children not counted" "a,b c|present|2
|present|0
x y z|present|3
p  WFAIL q|present|3
DOCFAIL m|present|2
900 s|present|2" "$(states "$J" doc.n)"
expect_eq "doc.tj: Dropped expansion → Dropped, never run" "|dropped|" \
  "$(states "$J" doc.tj | grep '^|')"
expect_eq "tjoin never ran on the empty line" 0 "$(attempts "$J" tjoin '')"
expect_eq "doc.fj: Failed expansion → Suppressed, never run" "DOCFAIL m|suppressed|" \
  "$(states "$J" doc.fj | grep '^DOCFAIL')"
expect_eq "fjoin never ran on DOCFAIL" 0 "$(attempts "$J" fjoin 'DOCFAIL m')"
expect_eq "cutf never ran on DOCFAIL" 0 "$(attempts "$J" cutf 'DOCFAIL m')"

# ---- reduce with a Failed child input: Suppressed, never run -----------------------------
expect_eq "w.chk of doc 3" "p  WFAIL q/0|present|p
p  WFAIL q/1|present|
p  WFAIL q/2|failed|fail_if: input contains \"WFAIL\"
p  WFAIL q/3|present|q" "$(states "$J" w.chk | grep '^p ')"
expect_eq "doc.cj suppressed" "p  WFAIL q|suppressed|" "$(states "$J" doc.cj | grep '^p ')"
expect_eq "cjoin never ran on doc 3" 0 "$(attempts "$J" cjoin 'p  WFAIL q')"
expect_eq "doc.cj of the others" "a,b c|present|a,b+c" "$(states "$J" doc.cj | head -1)"

# ---- expand aligned: match fills by ordinal, mismatch fails every child ------------------
mismatch='expand aligned cutc gave 1 children; the expansion of this parent has'
expect_eq "w.alt" "a,b c/0|present|a
a,b c/1|present|b c
x y z/0|failed|$mismatch 3
x y z/1|failed|$mismatch 3
x y z/2|failed|$mismatch 3
p  WFAIL q/0|failed|$mismatch 4
p  WFAIL q/1|failed|$mismatch 4
p  WFAIL q/2|failed|$mismatch 4
p  WFAIL q/3|failed|$mismatch 4
DOCFAIL m/0|failed|$mismatch 2
DOCFAIL m/1|failed|$mismatch 2
900 s/0|failed|$mismatch 2
900 s/1|failed|$mismatch 2" "$(states "$J" w.alt)"
expect_eq "one record failure per mismatching parent" "x y z|record
p  WFAIL q|record
DOCFAIL m|record
900 s|record" "$(q "$J" "SELECT key, kind FROM failures WHERE call = 'cutc' ORDER BY entity_id")"
expect_eq "the attempts of the mismatching parents say record, not ok" "record" \
  "$(q "$J" "SELECT group_concat(DISTINCT a.outcome) FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id WHERE c.name = 'cutc' AND g.outcome = 'failed'")"
expect_eq "their attempts say why" 4 \
  "$(q "$J" "SELECT count(*) FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id WHERE c.name = 'cutc' AND g.outcome = 'failed'
             AND a.message LIKE 'expand aligned cutc gave % children; the expansion%'")"
expect_eq "the aligned expansion of the empty line: 0 = 0 children, sealed ok" "sealed|ok|0" \
  "$(grain "$J" cutc '')"

# ---- broadcast: one level and two levels down, Present and Failed ------------------------
expect_eq "w.doc" "$(q "$J" "SELECT k.key || '|present|' || r.key FROM entity_key k
    JOIN entity e ON e.id = k.entity_id JOIN entity r ON r.id = e.parent_id
    WHERE k.domain = 'w' ORDER BY r.ordinal, e.ordinal")" "$(states "$J" w.doc)"
expect_eq "c.doc (two levels down)" "a,b c/0/0|present|a,b c
a,b c/1/0|present|a,b c
x y z/0/0|present|x y z
x y z/1/0|present|x y z
x y z/2/0|present|x y z
p  WFAIL q/0/0|present|p  WFAIL q
p  WFAIL q/2/0|present|p  WFAIL q
p  WFAIL q/3/0|present|p  WFAIL q
DOCFAIL m/0/0|present|DOCFAIL m
DOCFAIL m/1/0|present|DOCFAIL m
900 s/0/0|present|900 s
900 s/1/0|present|900 s" "$(states "$J" c.doc)"
expect_eq "c.bad carries the Failed state" "DOCFAIL m/0/0|failed
DOCFAIL m/1/0|failed" "$(states "$J" c.bad | grep '^DOCFAIL' | cut -d'|' -f1,2)"
expect_eq "c.slow reached every grandchild" "$(states "$J" c.doc)" "$(states "$J" c.slow)"

# ---- an aligned expand sealed without running before the children exist ------------------
# Its input fails at once while the plain expansion waits 300 ms (sleep orders the inputs;
# the states asserted are the same whichever comes first). Its outputs on the children
# published later must take its state, or their consumers wait forever.
printf '%s\n' '300 x,y z' '0 a,b c,d' > "$T/al.txt"
cat > "$T/al.orch" <<'EOF'
pipeline al
domain doc
domain w in doc
source doc.line = lines("al.txt")
call slow = sleep()
call bad  = fail_if(contains="x", kind=record)
call cut  = split(sep=" ")
call cutc = split(sep=",")
call z    = identity()
call j    = concat(sep="+")
doc.slow = slow(doc.line)
doc.bad  = bad(doc.line)
w.raw = expand cut(doc.slow)
w.alt = expand aligned cutc(doc.bad)
w.z   = z(w.alt)
doc.j = reduce j(w.z)
EOF
A=$T/al
run_job "$T/al.orch" "$A"
job_done "$A"
expect_eq "al: w.alt" "300 x,y z/0|suppressed|
300 x,y z/1|suppressed|
300 x,y z/2|suppressed|
0 a,b c,d/0|present|0 a
0 a,b c,d/1|present|b c
0 a,b c,d/2|present|d" "$(states "$A" w.alt)"
expect_eq "al: w.z" "300 x,y z/0|suppressed|
300 x,y z/1|suppressed|
300 x,y z/2|suppressed|
0 a,b c,d/0|present|0 a
0 a,b c,d/1|present|b c
0 a,b c,d/2|present|d" "$(states "$A" w.z)"
expect_eq "al: doc.j" "300 x,y z|suppressed|
0 a,b c,d|present|0 a+b c+d" "$(states "$A" doc.j)"
expect_eq "al: cutc never ran on the failed doc" 0 "$(attempts "$A" cutc '300 x,y z')"
echo "propagation: ok"
