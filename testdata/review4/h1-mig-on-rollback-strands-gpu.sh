#!/usr/bin/env bash
# H1: a GPU run whole (MIG mode off) is asked for a MIG layout; the agent turns MIG mode on, the
# gate creates the instances, the smoke check fails and the gate rolls back to "no instance".
# Before d8ddad5 MIG mode stayed on: the GPU reported no slice and left the pool for good (neither
# a retry nor a plan, which sees layout "" == "" and asks nothing, turned the mode off again).
# Now the agent turns the mode off again and the GPU is reported whole: expected output
# "00 ['exclusive'] ''" after the failed change and capacity 9. A restart of the agent between the
# rollback and the mode change is covered by `go test ./internal/agent -run
# TestModeOffSurvivesSIGKILL` (the record is in the agent's stateDir/migmode.json); a GPU left in
# MIG mode with no instance some other way gets migOff from a plan that runs it whole, or from
# `gpupool gate set NODE GPU --whole` (the last step here: a 400 while the GPU is whole).
# Run from the repository root: bash testdata/review4/h1-mig-on-rollback-strands-gpu.sh
. testdata/review4/lib.sh
r4_build
cat >"$R4_DIR/smoke.sh" <<'SH'
#!/bin/sh
[ -f "$(dirname "$0")/fail-smoke" ] && { echo "injected smoke failure on $GPUPOOL_INSTANCE" >&2; exit 3; }
exit 0
SH
chmod +x "$R4_DIR/smoke.sh"
r4_serve --gate-cooldown 1s --gate-attempts 1
r4_agent node-a "$R4_DIR/smoke.sh"
G0=$(r4_uuid node-a 0)
echo "== GPU 0 to MIG mode off, through a plan that runs it whole: testdata/review2/pool-rn1.yaml with"
echo "   the node renamed"
sed 's/name: rn1/name: node-a/' testdata/review2/pool-rn1.yaml >"$R4_DIR/pool.yaml"
c -XPOST $S/v1/plans/apply --data-binary @"$R4_DIR/pool.yaml" -o /dev/null
r4_wait_gates 60
echo "GPU 0 before:"; r4_gpus node-a | sed -n 1p
echo "== ask GPU 0 (MIG mode off) for 3g.40gb@0 3g.40gb@4; the smoke check fails"
touch "$R4_DIR/fail-smoke"
c -XPUT $S/v1/nodes/node-a/gpus/$G0/layout -d '{"layout":"3g.40gb@0 3g.40gb@4"}' -o /dev/null
r4_wait_gates 60
sleep 2
echo "GPU 0 after (expected: ['exclusive'] '' as before; before the fix: [] '' — MIG mode on, no instance, no slice):"
r4_gpus node-a | sed -n 1p
rm -f "$R4_DIR/fail-smoke"
echo "== a plan that runs GPU 0 whole asks nothing for it (right now that it is whole; before the fix the stranded GPU got no migOff either):"
c_json -XPOST $S/v1/plans/apply --data-binary @"$R4_DIR/pool.yaml" | python3 -c 'import sys,json; d=json.load(sys.stdin); print("gate operations:", [(g["gpu"][-2:], g["layout"], g.get("migOff", False)) for g in d.get("gates", [])])'
r4_events 0 | grep -E 'Gate(Failed|GaveUp|Done)' | cut -c1-160
echo "capacity (9 before the failed change): $(curl -s $S/metrics | grep '^gpupool_capacity_slices')"
echo "== gate set --whole of GPU 0, already whole (400 on migOff):"
"$R4_BIN" gate set node-a "$G0" --whole --server $S --token "$T" 2>&1 | cut -c1-200
