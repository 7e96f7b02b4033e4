#!/usr/bin/env bash
# The one command that runs every gpupool test: formatting, vet, the race-enabled test suite
# (unit, property, fuzz seed corpora, golden files, architecture rules) and a CLI smoke run.
# Usage: bash scripts/test.sh        (from the repository root; needs only Go and gcc)
set -euo pipefail
cd "$(dirname "$0")/.."

export CGO_ENABLED=${CGO_ENABLED:-1}   # the race detector needs cgo

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.*'))
if [[ -n $unformatted ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 30m ./...

echo "== CLI smoke"
bin=$(mktemp -d)/gpupool
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/gpupool
"$bin" version
echo "all tests passed"
