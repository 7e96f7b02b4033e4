#!/usr/bin/env bash
# M4: `serve --node-timeout` below the agent's fixed 5 s heartbeat used to be accepted silently;
# a healthy agent's node was then declared lost between heartbeats again and again: epoch 5 after
# 20 s with --node-timeout 3s, 5 NodeLost, 10 moves or preemptions. Since the fix serve refuses a
# node timeout under two heartbeats (10 s) before it starts (exit 1).
# Run from the repository root: bash testdata/review4/m4-node-timeout-below-heartbeat.sh
. testdata/review4/lib.sh
r4_build
echo "== serve --node-timeout 3s (expected: refused, exit 1):"
"$R4_BIN" serve --data "$R4_DIR/data" --listen 127.0.0.1:$R4_PORT --node-timeout 3s
echo "exit $?"
echo "== serve --node-timeout 12s with a live agent: its epoch after 20 s (expected 0):"
r4_serve --node-timeout 12s
r4_agent node-a
sleep 20
c_json $S/v1/nodes | python3 -c 'import sys,json; [print(n["name"], "epoch", n.get("epoch", 0), "lost", n.get("lost", False)) for n in json.load(sys.stdin)]'
