#!/usr/bin/env bash
# Builds the real Kubernetes control-plane binaries the internal/k8s tests run against:
# kube-apiserver and kube-scheduler (k8s.io/kubernetes v1.37.2) and etcd (v3.7.3), from the Go
# module proxy, stripped, into a cache directory. Idempotent: returns at once when binaries for
# these versions are already there (a stamp file records a complete build).
#
# Usage: bash scripts/build-k8s-test-binaries.sh          prints the directory (the only stdout line)
#        K8S_TEST_BIN_DIR=DIR bash scripts/...             to choose the directory
#
# `go install k8s.io/kubernetes/cmd/kube-apiserver@v1.37.2` fails (k8s.io/kubernetes' go.mod has
# replace directives), so a scratch module requires k8s.io/kubernetes and replaces each staging
# module with its release at the matching v0.x tag. etcd is built in a second module so that
# kube-apiserver keeps exactly the dependency versions upstream pins. See
# docs/adr/0015-real-kubernetes-control-plane-in-tests.md.
set -euo pipefail
K8S=v1.37.2     # k8s.io/kubernetes tag
STAGING=v0.37.2 # the matching k8s.io/* staging modules
ETCD=v3.7.3     # go.etcd.io/etcd/server/v3
OUT=${K8S_TEST_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpupool/k8s-$K8S}
STAMP="$OUT/.stamp-$K8S-$ETCD"
if [[ -x $OUT/kube-apiserver && -x $OUT/kube-scheduler && -x $OUT/etcd && -f $STAMP ]]; then
  echo "k8s test binaries present in $OUT" >&2
  echo "$OUT"
  exit 0
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
start=$(date +%s)

# --- kube-apiserver, kube-scheduler
mkdir "$W/k8s" && cd "$W/k8s"
{
  printf 'module k8stestbins\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S"
  # every k8s.io/* module k8s.io/kubernetes replaces with ./staging/src/k8s.io/* (its go.mod);
  # sample-cli-plugin and sample-controller are not served at the staging tag and not needed
  for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
    cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt \
    kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
    mount-utils pod-security-admission sample-apiserver streaming; do
    printf '\tk8s.io/%s => k8s.io/%s %s\n' "$m" "$m" "$STAGING"
  done
  printf ')\n'
} >go.mod
printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n)\n' >tools.go
go mod tidy >&2
V=${K8S#v}
MAJ=${V%%.*}
MIN=${V#*.}
MIN=${MIN%%.*}
# without these, --version says v0.0.0-master and clients that parse it fail
LDF="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDF+=" -X $p.gitVersion=$K8S -X $p.gitMajor=$MAJ -X $p.gitMinor=$MIN -X $p.gitTreeState=clean"
done
go build -ldflags "$LDF" -o "$OUT/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$OUT/kube-apiserver.tmp" "$OUT/kube-apiserver"
echo "kube-apiserver built after $(($(date +%s) - start)) s" >&2
go build -ldflags "$LDF" -o "$OUT/kube-scheduler.tmp" k8s.io/kubernetes/cmd/kube-scheduler
mv "$OUT/kube-scheduler.tmp" "$OUT/kube-scheduler"
echo "kube-scheduler built after $(($(date +%s) - start)) s" >&2

# --- etcd (the server module's root package is etcd's main)
mkdir "$W/etcd" && cd "$W/etcd"
printf 'module etcdbin\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD" >go.mod
printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
go mod tidy >&2
go build -ldflags "-s -w" -o "$OUT/etcd.tmp" go.etcd.io/etcd/server/v3
mv "$OUT/etcd.tmp" "$OUT/etcd"

touch "$STAMP"
"$OUT/kube-apiserver" --version >&2
"$OUT/etcd" --version | head -1 >&2
echo "k8s test binaries built in $(($(date +%s) - start)) s" >&2
echo "$OUT"
