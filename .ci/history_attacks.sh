#!/usr/bin/env bash
# Issue 19's attacks through the CLI, printing one figure per attack, so
# the same script measures a binary before and after the fix:
#   .ci/history_attacks.sh path/to/claude-memory [postgres://…]
# Not part of CI's pass/fail (the tests in tests/history_attacks*.rs and
# tests/history/many_writers.rs are); it prints the figures for the closing note.
set -uo pipefail
CM=${1:?the claude-memory binary}
PG=${2:-}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
call() { printf '{"type":"tool_use","id":"%s","name":"memory","input":%s}\n' "$1" "$2"; }

# 1. a symlinked journal: does the read-only `history` cut the outside file?
S=$T/s1; "$CM" --store "$S" --history serve </dev/null >/dev/null 2>&1
printf 'precious\nno newline' >"$T/outside"
rm -f "$S/.claude-memory-history/journal.jsonl"
ln -s "$T/outside" "$S/.claude-memory-history/journal.jsonl"
"$CM" --store "$S" history >/dev/null 2>&1
echo "1 symlinked journal: outside file $(wc -c <"$T/outside") of 19 bytes left after \`history\`"

# 2. one planted hard link: does serve --history open?
S=$T/s2; "$CM" --store "$S" --history serve </dev/null >/dev/null 2>&1
echo x >"$T/out2"; ln "$T/out2" "$S/linked.md"
call t '{"command":"view","path":"/memories"}' | "$CM" --store "$S" --history serve >/dev/null 2>&1
echo "2 planted hard link: serve --history exit $?"

# 3. 20 refused creates of 1 MB and 20 renames of a 1,000,000-byte U+0001 file.
S=$T/s3; python3 -c 'import json;print(json.dumps({"type":"tool_use","id":"c","name":"memory","input":{"command":"create","path":"/memories/f0.md","file_text":"\u0001"*1000000}}))' | "$CM" --store "$S" --history --max-store-size 1048576 --max-file-size 2000000 serve >/dev/null 2>&1
J=$S/.claude-memory-history/journal.jsonl
b=$(stat -c %s "$J")
python3 -c 'import json
for i in range(20): print(json.dumps({"type":"tool_use","id":"r%d"%i,"name":"memory","input":{"command":"create","path":"/memories/f0.md","file_text":"x"*1000000}}))' | "$CM" --store "$S" --max-store-size 1048576 --max-file-size 2000000 serve >/dev/null 2>&1
r=$(stat -c %s "$J")
python3 -c 'import json
for i in range(20): print(json.dumps({"type":"tool_use","id":"m%d"%i,"name":"memory","input":{"command":"rename","old_path":"/memories/f%d.md"%i,"new_path":"/memories/f%d.md"%(i+1)}}))' | "$CM" --store "$S" --max-store-size 1048576 --max-file-size 2000000 serve >/dev/null 2>&1
m=$(stat -c %s "$J")
echo "3 disk: journal after one 1 MB U+0001 create $b bytes; +$((r-b)) after 20 refused creates; +$((m-r)) after 20 renames"

# 7. redaction sticks: key in v1, another line edited in v2, redact v1.
S=$T/s7
{ call t1 '{"command":"create","path":"/memories/k.md","file_text":"key=sk-LEAK-1\nother\n"}'
  call t2 '{"command":"str_replace","path":"/memories/k.md","old_str":"other","new_str":"edited"}'; } |
  "$CM" --store "$S" --history serve >/dev/null 2>&1
"$CM" --store "$S" redact v1 >/dev/null 2>&1
n=$("$CM" --store "$S" show v2 2>/dev/null | grep -c sk-LEAK-1)
"$CM" --store "$S" redact --text sk-LEAK-1 >/dev/null 2>&1
t=$("$CM" --store "$S" show v2 2>/dev/null | grep -c sk-LEAK-1)
echo "7 redact v1: show v2 prints the key $n time(s); after redact --text: $t time(s)"

# 9. restore after prune --keep 1 to a time the file existed.
S=$T/s9
call t1 '{"command":"create","path":"/memories/a.md","file_text":"v1\n"}' | "$CM" --store "$S" --history serve >/dev/null 2>&1
sleep 1.1; AT=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ); sleep 1.1
call t2 '{"command":"str_replace","path":"/memories/a.md","old_str":"v1","new_str":"v2"}' | "$CM" --store "$S" serve >/dev/null 2>&1
"$CM" --store "$S" history prune --keep 1 >/dev/null 2>&1
out=$("$CM" --store "$S" restore --at "$AT" 2>&1)
echo "9 restore after prune: a.md $([ -f "$S/a.md" ] && echo kept || echo DELETED); says: $(echo "$out" | grep -m1 skipped)"

# 12. terminal injection: raw ESC bytes in show/diff, rows in history.
S=$T/s12
{ call t1 '{"command":"create","path":"/memories/a.md","file_text":"hello\n"}'
  call t2 '{"command":"str_replace","path":"/memories/a.md","old_str":"hello","new_str":"hello\nevil\u001b[2K\r\u001b[1A"}'
  call 'x\nv99\tforged' '{"command":"create","path":"/memories/b.md","file_text":"b\n"}'; } |
  "$CM" --store "$S" --history serve >/dev/null 2>&1
esc=$( { "$CM" --store "$S" show v2; "$CM" --store "$S" diff v1 v2; } 2>/dev/null | tr -cd '\033' | wc -c)
rows=$("$CM" --store "$S" history 2>/dev/null | grep -c '^v')
echo "12 terminal: $esc raw ESC bytes in show+diff; history prints $rows rows for 3 versions"

# 13. baseline message, dry runs.
S=$T/s13; mkdir -p "$S"; echo old >"$S/old.md"
msg=$("$CM" --store "$S" --history serve </dev/null 2>&1)
"$CM" --store "$S" restore --at 1h --dry-run >/dev/null 2>&1; d1=$?
"$CM" --store "$S" history prune --keep 1 --dry-run >/dev/null 2>&1; d2=$?
echo "13 first open says: $msg | restore --dry-run exit $d1, history prune --dry-run exit $d2"

if [ -n "$PG" ]; then
  psql "$PG" -q -c "DROP TABLE IF EXISTS claude_memory_history, claude_memory_history_ids, claude_memory_entries, claude_memory_schema CASCADE" >/dev/null 2>&1
  "$CM" --store "$PG" history >/dev/null 2>&1
  e=$?
  "$CM" --store "$PG" --history serve </dev/null >/dev/null 2>&1
  for i in 0 1 2; do call "pg$i" "{\"command\":\"create\",\"path\":\"/memories/$i.md\",\"file_text\":\"x\\n\"}"; done | "$CM" --store "$PG" serve >/dev/null 2>&1
  n=$("$CM" --store "$PG" history --actor pg0 2>/dev/null; "$CM" --store "$PG" history --actor pg1 2>/dev/null; "$CM" --store "$PG" history --actor pg2 2>/dev/null)
  echo "10 PostgreSQL: history on a store without one exit $e; $(echo "$n" | grep -c '^v') of 3 creates without --history recorded"
fi
