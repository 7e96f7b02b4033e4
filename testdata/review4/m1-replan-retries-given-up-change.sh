#!/usr/bin/env bash
# M1: a plan's MIG change that the gate gave up on (attempts spent, each rolled back) is asked
# again by the re-planner at the next fleet change (a node registering or lost, a demand rate),
# and given up again: each time the GPU is drained, its replicas move away and back, and the
# smoke check runs again — for as long as the fleet keeps changing. "ask again once the cause is
# fixed" (GateGaveUp) is not what happened. Fixed in dacd78c: the script now counts 1 GateGaveUp
# and each Replanned event says it left the given-up change out.
# Run from the repository root: bash testdata/review4/m1-replan-retries-given-up-change.sh
. testdata/review4/lib.sh
r4_build
cat >"$R4_DIR/smoke.sh" <<'SH'
#!/bin/sh
case "$GPUPOOL_INSTANCE" in 2g.*) echo "injected smoke failure on $GPUPOOL_INSTANCE" >&2; exit 3;; esac
exit 0
SH
chmod +x "$R4_DIR/smoke.sh"
r4_serve --gate-cooldown 1s --gate-attempts 1
r4_agent node-a "$R4_DIR/smoke.sh"
sed 's/name: rn1/name: node-a/' testdata/review2/pool-rn1.yaml >"$R4_DIR/pool.yaml"
echo "== apply a plan whose GPU 1 is 2g.20gb@4 1g.10gb@6 (the smoke check fails on 2g instances)"
c -XPOST $S/v1/plans/apply --data-binary @"$R4_DIR/pool.yaml" -o /dev/null
r4_wait_gates 60
for n in 1 2 3; do
	echo "== fleet change $n: node-x$n registers (an empty node)"
	c -XPUT $S/v1/nodes/node-x$n -d '{"gpus":[]}' -o /dev/null
	sleep 4
	r4_wait_gates 30
done
echo "== GateGaveUp for GPU 1 (expected: 1; actual:)"
r4_events 0 | grep -c 'GateGaveUp'
r4_events 0 | grep -E 'Replanned|GateGaveUp|GateRequested' | cut -c1-150
