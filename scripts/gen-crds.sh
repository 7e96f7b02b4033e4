#!/usr/bin/env bash
# Generates the gpupool.dev/v1 CustomResourceDefinitions from the markers on the Go types
# (internal/k8s, and the api/v1 types GPUPool and InferenceTenant embed) with controller-gen, the
# module's tool dependency (go.mod `tool`).
#
#   scripts/gen-crds.sh          write internal/k8s/crds/ (embedded in the binary) and
#                                deploy/kubernetes/crds/ (the kustomize base)
#   scripts/gen-crds.sh DIR      write only DIR (the drift test compares it with the files above)
#
# allowDangerousTypes: tenant weights, traffic rates and prices are JSON numbers (type: number), as
# the Pool document writes them.
set -euo pipefail
cd "$(dirname "$0")/.."

gen() {
	mkdir -p "$1"
	rm -f "$1"/gpupool.dev_*.yaml
	go tool controller-gen crd:allowDangerousTypes=true paths=./internal/k8s output:crd:dir="$1"
}

if [ $# -gt 0 ]; then
	gen "$1"
	exit 0
fi
gen internal/k8s/crds
rm -f deploy/kubernetes/crds/gpupool.dev_*.yaml
cp internal/k8s/crds/gpupool.dev_*.yaml deploy/kubernetes/crds/
