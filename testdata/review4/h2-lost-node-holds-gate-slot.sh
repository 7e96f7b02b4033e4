#!/usr/bin/env bash
# H2: a node dies while its GPU's gate operation is applying. The node is declared lost, but the
# operation stays "applying" for ever and keeps the pool's --max-unavailable slot: every other MIG
# change in the pool waits (GateMaxUnavailable) until that node comes back. The operator cannot
# cancel an applying operation (409) and there is no way to remove a node.
# Run from the repository root: bash testdata/review4/h2-lost-node-holds-gate-slot.sh
. testdata/review4/lib.sh
r4_build
r4_serve --gate-cooldown 1s --node-timeout 12s
r4_agent node-a
# node-b: a node whose agent dies; registered by hand so that it never reports back.
c -XPUT $S/v1/nodes/node-b -d '{"gpus":[{"uuid":"GPU-b0","board":"H100-SXM5-80GB","slices":["7g.80gb"],"mig":"7g.80gb@0"}]}' -o /dev/null
echo "== node-b's GPU is asked for 3g.40gb@0 3g.40gb@4; it is handed to node-b's agent, which never answers"
c -XPUT $S/v1/nodes/node-b/gpus/GPU-b0/layout -d '{"layout":"3g.40gb@0 3g.40gb@4"}' -o /dev/null
sleep 15
echo "== node-b is lost by now; node-a's GPU 0 is asked for a change"
G0=$(r4_uuid node-a 0)
c -XPUT $S/v1/nodes/node-a/gpus/$G0/layout -d '{"layout":"3g.40gb@0 3g.40gb@4"}' -o /dev/null
sleep 10
echo "== gates 10 s later (expected: node-a's operation done, node-b's given up or not counted; actual:)"
c_json $S/v1/gates | python3 -c 'import sys,json; [print(g["node"], g["gpu"][-2:], g["state"], g.get("reason","")) for g in json.load(sys.stdin)]'
echo "== cancel node-b's operation:"
c -XPUT $S/v1/nodes/node-b/gpus/GPU-b0/layout -d '{"layout":""}'
echo "== remove node-b:"
c -XDELETE $S/v1/nodes/node-b
r4_events 0 | grep -E 'NodeLost|Gate' | cut -c1-170
