#!/usr/bin/env bash
# Reproduces the measurements in docs/bench/measured.md: a thread sweep MyISAM vs InnoDB on a 2M-row
# game table in a private sandbox server, without and with a background report scan, and sysbench
# running the same 16:7:1 mix for comparison. Not part of the test run: it takes ~6 minutes and
# measures the machine it runs on (numbers vary with load; run it on an idle machine, twice).
#
#   bench/scripts/sweep.sh [OUTDIR]        env: ROWS (2000000), THREADS (1,4,16,64), DURATION (10s),
#                                               SYSBENCH_THREADS ("4 16"), SYSBENCH_TIME (10), ROUNDS (2),
#                                               SKIP_SWEEP=1 (only the sysbench comparison),
#                                               PORT (use a running benchsandbox instead of starting one)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/tmp/enginemig-bench}
rows=${ROWS:-2000000}
threads=${THREADS:-1,4,16,64}
duration=${DURATION:-10s}
mkdir -p "$out"
go build -o "$out/enginemig" ./cmd/enginemig
go build -o "$out/benchsandbox" ./cmd/benchsandbox
if [ -n "${PORT:-}" ]; then
  # Reuse a running benchsandbox (its port) instead of starting one.
  echo "$PORT" >"$out/info"; sandbox_pid=
else
rm -f "$out/info"
"$out/benchsandbox" -rows "$rows" -info "$out/info" 2>"$out/sandbox.log" &
sandbox_pid=$!
trap 'kill $sandbox_pid 2>/dev/null; wait $sandbox_pid 2>/dev/null || true' EXIT
while [ ! -s "$out/info" ]; do
  kill -0 $sandbox_pid 2>/dev/null || { cat "$out/sandbox.log"; exit 1; }
  sleep 1
done
fi
port=$(head -1 "$out/info")
empty="$out/empty.cnf"; : >"$empty"
conn=(--defaults-file "$empty" --host 127.0.0.1 --port "$port" --user root --ssl-mode DISABLED --database game)
# Both tables exist in this sandbox, so the write mix runs on them directly (a staging setup).
bench=("$out/enginemig" bench "${conn[@]}" --on-live-table --table players_myisam --compare players_innodb
  --threads "$threads" --duration "$duration" --warmup 2s --seed 42)

if [ -z "${SKIP_SWEEP:-}" ]; then
echo "== PK mix 16:7:1 =="
"${bench[@]}" --chart "$out/pk-mix.html" --output json >"$out/pk-mix.json"
python3 - "$out/pk-mix.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
for res in r["results"]:
    for s in res["steps"]:
        t = s["total"]
        print(f'{res["engine"]:7} threads={s["threads"]:3} qps={t["qps"]:9.0f} p50={t["p50_ms"]:7.2f} p95={t["p95_ms"]:7.2f} p99={t["p99_ms"]:8.2f} max={t["max_ms"]:8.1f} errors={t["errors"]}')
PY

echo "== PK mix 16:7:1 + one client looping SELECT SUM(coins) =="
"${bench[@]}" --background 'SELECT SUM(coins) FROM players_myisam' --chart "$out/report-scan.html" --output json >"$out/report-scan.json"
python3 - "$out/report-scan.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
for res in r["results"]:
    for s in res["steps"]:
        t, b = s["total"], s["background"][0]
        print(f'{res["engine"]:7} threads={s["threads"]:3} qps={t["qps"]:9.0f} p50={t["p50_ms"]:7.2f} p99={t["p99_ms"]:8.2f} max={t["max_ms"]:8.1f} reports={b["count"]} report_p50={b["p50_ms"]:.0f}ms')
PY

fi

echo "== sysbench vs enginemig bench, same mix, same table, alternating runs =="
# Alternating the two tools, several rounds, spreads machine noise over both. client-cpu/query is
# the load generator's own CPU (user+sys) per statement: the measure of its overhead that noise
# from other processes disturbs least. (enginemig's includes its few setup queries and start-up.)
for t in ${SYSBENCH_THREADS:-4 16}; do
  for table in players_myisam players_innodb; do
    for round in $(seq "${ROUNDS:-2}"); do
      /usr/bin/time -f "%U %S" -o "$out/cpu-sb" sysbench bench/scripts/enginemig_mix.lua --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$port" --mysql-user=root \
        --mysql-db=game --table="$table" --max_id="$rows" --threads="$t" --time="${SYSBENCH_TIME:-10}" \
        --percentile=99 --rand-type=uniform --report-interval=0 run >"$out/sysbench-$table-$t-$round.txt"
      sb=$(awk '/queries:/ && /per sec/ {gsub(/[()]/,""); q=$3} /99th percentile/ {p=$3} /ignored errors/ {e=$3} END {printf "qps=%.0f p99=%sms errors=%s", q, p, e}' "$out/sysbench-$table-$t-$round.txt")
      sb="$sb client-cpu/query=$(awk -v n="$(awk '/queries:/ && /per sec/ {print $2}' "$out/sysbench-$table-$t-$round.txt")" '{printf "%.0fus", ($1+$2)/n*1e6}' "$out/cpu-sb")"
      /usr/bin/time -f "%U %S" -o "$out/cpu-em" "$out/enginemig" bench "${conn[@]}" --on-live-table --table "$table" --threads "$t" --duration "${SYSBENCH_TIME:-10}s" \
        --warmup 0s --output json 2>/dev/null >"$out/enginemig-$table-$t-$round.json"
      em=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["results"][0]["steps"][0]["total"]; u,s=map(float,open(sys.argv[2]).read().split()); print("qps=%.0f p99=%.2fms errors=%d client-cpu/query=%.0fus" % (t["qps"], t["p99_ms"], t["errors"], (u+s)/t["count"]*1e6))' "$out/enginemig-$table-$t-$round.json" "$out/cpu-em")
      echo "$table threads=$t round=$round  sysbench: $sb  enginemig: $em"
    done
  done
done
echo "charts: $out/pk-mix.html $out/report-scan.html"
