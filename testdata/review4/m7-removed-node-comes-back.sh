#!/usr/bin/env bash
# M7: a cordoned node removed with `gpupool node rm` whose agent still runs. Before, the agent's
# next heartbeat (404) made it report again, and the node was registered anew: back in the pool
# with its 8 slices. Now the removal leaves a tombstone: the reports are refused with 410 until
# `gpupool node admit` re-admits the node.
. testdata/review4/lib.sh
r4_build
r4_serve
r4_agent node-a
echo "== capacity with node-a: $(c_json $S/v1/pool | python3 -c 'import sys,json; print(json.load(sys.stdin)["capacity"])')"
c -XPUT $S/v1/nodes/node-a/cordon -d '{"cordoned":true}' >/dev/null
echo "== node rm node-a (its agent keeps running)"
"$R4_BIN" node rm node-a --server $S --token "$T"
sleep 12 # two agent heartbeats
echo "== after 12 s: nodes $(c_json $S/v1/nodes | python3 -c 'import sys,json; print([n["name"] for n in json.load(sys.stdin) or []])'), capacity $(c_json $S/v1/pool | python3 -c 'import sys,json; print(json.load(sys.stdin)["capacity"])')"
echo "== the agent's log:"
grep -i "removed\|refuses" "$R4_DIR/node-a/agent.log" | cut -c1-300 | head -3
echo "== node admit node-a"
"$R4_BIN" node admit node-a --server $S --token "$T"
for _ in $(seq 1 100); do c_json $S/v1/nodes | grep -q '"node-a"' && break; sleep 0.1; done
echo "== after admit: nodes $(c_json $S/v1/nodes | python3 -c 'import sys,json; print([n["name"] for n in json.load(sys.stdin) or []])')"
r4_events | grep -E "NodeRemoved|NodeAdmitted|NodeRegistered"
