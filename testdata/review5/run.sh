#!/usr/bin/env bash
# Plans every pool of testdata/review5 with `gpupool plan --out` (queueing model only,
# --sim-requests -1), cross-checks each output directory against its plan (crosscheck.py) and
# creates every Deployment, ResourceClaim(Template) and ConfigMap on a scratch kube-apiserver with
# strict field validation (kapply; needs scripts/build-k8s-test-binaries.sh's binaries).
# Run from the repository root: bash testdata/review5/run.sh
set -u
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/gpupool" ./cmd/gpupool || exit 1
go build -o "$dir/kapply" ./testdata/review5/kapply || exit 1
mkdir "$dir/out"
bad=0
for pool in testdata/review5/*.yaml; do
	name=$(basename "$pool" .yaml)
	"$dir/gpupool" plan "$pool" --out "$dir/out/$name" --sim-requests -1 >"$dir/$name.txt" 2>&1
	echo "$name: plan exit $? ($(tail -1 "$dir/$name.txt" | cut -c1-110))"
	if ! python3 testdata/review5/crosscheck.py "$dir/out/$name" >"$dir/$name.check"; then
		grep -v '^info' "$dir/$name.check"
		bad=1
	fi
done
(cd "$dir/out" && "$dir/kapply" */k8s/*.yaml */dra/*.yaml */*/configmap.yaml) >"$dir/kapply.txt" 2>&1 || bad=1
grep -v '^ok' "$dir/kapply.txt"
echo "objects created on the API server: $(grep -c '^ok' "$dir/kapply.txt"), refused: $(grep -c '^FAIL' "$dir/kapply.txt")"
exit $bad
