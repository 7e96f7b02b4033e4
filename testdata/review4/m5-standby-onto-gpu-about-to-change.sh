#!/usr/bin/env bash
# M5: a draining GPU's replica gets its standby on a free slice of a GPU whose own gate operation
# is already waiting; when that operation starts, the replica moves a second time. Each move is a
# replica start (and on a real node a model load). Expected: a standby avoids GPUs with a pending
# gate operation while other free slices exist.
# Run from the repository root: bash testdata/review4/m5-standby-onto-gpu-about-to-change.sh
. testdata/review4/lib.sh
r4_build
r4_serve --gate-cooldown 15s
r4_agent node-a
G0=$(r4_uuid node-a 0); G2=$(r4_uuid node-a 2)
c -XPUT $S/v1/tenants/chat -d '{"name":"chat","demand":2}' -o /dev/null
echo "== GPU 2 is cut in two (done at once: nothing runs there)"
c -XPUT $S/v1/nodes/node-a/gpus/$G2/layout -d '{"layout":"3g.40gb@0 3g.40gb@4"}' -o /dev/null
r4_wait_gates 30
echo "== GPU 2 asked back to 7g.80gb (waits for the 15 s cooldown), then GPU 0, where chat runs, is changed"
c -XPUT $S/v1/nodes/node-a/gpus/$G2/layout -d '{"layout":"7g.80gb@0"}' -o /dev/null
c -XPUT $S/v1/nodes/node-a/gpus/$G0/layout -d '{"layout":"3g.40gb@0 3g.40gb@4"}' -o /dev/null
r4_wait_gates 60
echo "== chat's moves (expected: one, to a GPU with no pending operation; actual:)"
r4_events 0 | grep -E '^[0-9]+ Moved' | cut -c1-220
