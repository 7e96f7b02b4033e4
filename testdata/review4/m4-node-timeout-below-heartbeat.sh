#!/usr/bin/env bash
# M4: `serve --node-timeout` shorter than the agent's fixed 5 s heartbeat is accepted without a
# word; a healthy agent's node is then declared lost between heartbeats, again and again: each
# time its epoch grows, its slices leave the pool and its replicas move (NodeLost, NodeFenced,
# NodeBack). Expected: serve refuses (or warns about) a node timeout below about twice the
# agent's heartbeat, or the layout tells the agent how often to heartbeat.
# Run from the repository root: bash testdata/review4/m4-node-timeout-below-heartbeat.sh
. testdata/review4/lib.sh
r4_build
r4_serve --node-timeout 3s
r4_agent node-a
c -XPUT $S/v1/tenants/chat -d '{"name":"chat","demand":2}' -o /dev/null
sleep 20
echo "== node-a's epoch after 20 s with a live agent (expected 0; actual):"
c_json $S/v1/nodes | python3 -c 'import sys,json; [print(n["name"], "epoch", n.get("epoch", 0), "lost", n.get("lost", False)) for n in json.load(sys.stdin)]'
echo "== NodeLost / Moved events:"
r4_events 0 | grep -cE 'NodeLost'
r4_events 0 | grep -cE 'Moved|Preempted'
