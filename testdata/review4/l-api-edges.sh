#!/usr/bin/env bash
# API edges (cases 1-8, cited by README.md), each with what was expected; cases 5-7 show the
# behaviour since their fixes.
# Run from the repository root: bash testdata/review4/l-api-edges.sh
. testdata/review4/lib.sh
r4_build
r4_serve
c -XPUT $S/v1/nodes/n1 -d '{"gpus":[{"uuid":"G1","board":"H100-SXM5-80GB","slices":["7g.80gb"]},{"uuid":"G2","board":"H100-SXM5-80GB","slices":["7g.80gb"]}]}' -o /dev/null
c -XPUT $S/v1/tenants/chat -d '{"name":"chat","demand":2}' -o /dev/null
echo "== case 1: an empty demand body sets the demand to 0 and stops every replica (expected 400: give replicas or rate):"
c -XPUT $S/v1/tenants/chat/demand -d '{}'
c -XPUT $S/v1/tenants/chat/demand -d 'null'
echo "== case 2: the body's content type is not looked at (expected 415 for application/xml):"
c -XPUT $S/v1/tenants/chat -H 'Content-Type: application/xml' -d '{"name":"chat","demand":2}'
echo "== case 3: a stale version in a tenant body is ignored (no optimistic concurrency; expected 409 or a documented 'ignored'):"
c -XPUT $S/v1/tenants/chat -d '{"name":"chat","demand":2,"version":99}'
echo "== case 4: whole-body problems print an empty path (\"invalid request: : …\") and Go type names:"
c -XPOST $S/v1/tenants -d '[]'
c -XPUT $S/v1/tenants/chat/demand -d '{"replicas":1e400}'
echo "== case 5: malformed query parameters (ignored before 274ffee; expected and now: 400 naming after / wait):"
c "$S/v1/events?after=abc" -o /dev/null
c "$S/v1/nodes/n1/layout?after=1&wait=abc" -o /dev/null
echo "== case 6: an agent token with a stray tenant, a malformed node name (before 688f980: taken, and a missing name):"
c -XPOST $S/v1/tokens -d '{"role":"agent","node":"n1","tenant":"chat"}' | sed 's/gp_[0-9a-f]*/gp_…/'
c -XPOST $S/v1/tokens -d '{"role":"agent","node":"N 1"}'
echo "== case 7: the CLI's usage hint (before 8bbcec4 it named gpupool set):"
GPUPOOL_SERVER=$S GPUPOOL_TOKEN=$T "$R4_BIN" tenant set chat 1 --demand 1 2>&1 | tail -1
echo "== case 8: unknown routes are not counted in gpupool_api_requests_total (401s are):"
curl -s -o /dev/null $S/v1/nope; curl -s -o /dev/null -H "Authorization: Bearer $T" $S/v1/nope
curl -s $S/metrics | grep '^gpupool_api_requests_total' | grep -c nope
