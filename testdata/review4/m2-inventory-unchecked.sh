#!/usr/bin/env bash
# M2: PUT /v1/nodes/{node} checks names, UUID lengths and duplicates within the node, but not the
# board, the MIG layout, the slices against the layout, or a UUID another node reports. Each is
# taken into the pool: the bogus slices are granted, a GPU reported by two nodes counts twice, and
# one unknown board makes every later re-plan of the applied pool fail (ReplanFailed) until that
# node is lost.
# Run from the repository root: bash testdata/review4/m2-inventory-unchecked.sh
. testdata/review4/lib.sh
r4_build
r4_serve --node-timeout 10m
r4_agent node-a
G4=$(r4_uuid node-a 4)
sed 's/name: rn1/name: node-a/' testdata/review2/pool-rn1.yaml >"$R4_DIR/pool.yaml"
c -XPOST $S/v1/plans/apply --data-binary @"$R4_DIR/pool.yaml" -o /dev/null
echo "== unknown board (expected 400 inventory.gpus[0].board):"
c -XPUT $S/v1/nodes/node-f -d '{"gpus":[{"uuid":"GPU-q","board":"H999","slices":["7g.80gb"]}]}'
echo "== MIG layout that does not parse (expected 400 inventory.gpus[0].mig):"
c -XPUT $S/v1/nodes/node-g -d '{"gpus":[{"uuid":"GPU-r","board":"H100-SXM5-80GB","slices":["7g.80gb"],"mig":"garbage"}]}'
echo "== three 1g slices on a GPU whose layout is one 7g.80gb (expected 400 inventory.gpus[0].slices):"
c -XPUT $S/v1/nodes/node-h -d '{"gpus":[{"uuid":"GPU-s","board":"H100-SXM5-80GB","slices":["1g.10gb","1g.10gb","1g.10gb"],"mig":"7g.80gb@0"}]}'
echo "== node-a's GPU 4 reported by node-c too (expected 409 inventory.gpus[0].uuid):"
c -XPUT $S/v1/nodes/node-c -d "{\"gpus\":[{\"uuid\":\"$G4\",\"board\":\"H100-SXM5-80GB\",\"slices\":[\"7g.80gb\"],\"mig\":\"7g.80gb@0\"}]}"
echo "== slice kind \"banana\" (expected 400):"
c -XPUT $S/v1/nodes/node-d -d '{"gpus":[{"uuid":"GPU-z","board":"H100-SXM5-80GB","slices":["banana"]}]}'
echo "== capacity (8 real GPUs after the plan; the bogus ones add 7):"
curl -s $S/metrics | grep '^gpupool_capacity_slices'
sleep 3
r4_events 0 | grep -E 'ReplanFailed' | cut -c1-200
