#!/usr/bin/env bash
# M3: with burst leases, while any tenant waits, every lease that expires is stopped
# ("Preempted … LeaseExpired") and lent again to the same tenant on the same slice under a new
# grant id ("Granted … LeaseRenewed"): the lease holder's replica is restarted once per lease term
# for as long as someone waits, although nothing changes hands. docs/control-plane.md says a
# lease is renewed in place (same grant, new `expires`) when nobody waits; when the allocator
# gives it to the same tenant anyway, the expected result is the same in-place renewal.
# Run from the repository root: bash testdata/review4/m3-lease-restarts-while-others-wait.sh
. testdata/review4/lib.sh
r4_build
r4_serve --burst-pool-percent 50 --lease 4s
c -XPUT $S/v1/nodes/n1 -d '{"gpus":[{"uuid":"G1","board":"H100-SXM5-80GB","slices":["1g.10gb","1g.10gb","1g.10gb","1g.10gb"]}]}' -o /dev/null
(while true; do curl -s -o /dev/null -XPOST -H "Authorization: Bearer $T" $S/v1/nodes/n1/heartbeat; sleep 2; done) &
R4_PIDS+=($!)
c -XPUT $S/v1/tenants/a -d '{"name":"a","demand":4}' -o /dev/null
c -XPUT $S/v1/tenants/b -d '{"name":"b","demand":2}' -o /dev/null
sleep 14
echo "== grants of the same slice n1/G1/3 over 14 s (expected: one grant renewed in place; actual:)"
r4_events 0 | grep -E 'n1/G1/3' | cut -c1-150
