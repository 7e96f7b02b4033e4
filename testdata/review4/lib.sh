# Shared helpers of the review4 reproductions: build gpupool, start `gpupool serve` on a scratch
# data directory and, optionally, a node agent on the NVML fake that follows it.
# Source it from the repository root: `. testdata/review4/lib.sh`.
set -u
R4_DIR=$(mktemp -d)
R4_BIN=$R4_DIR/gpupool
R4_PORT=${R4_PORT:-18480}
S=http://127.0.0.1:$R4_PORT
R4_PIDS=()

r4_cleanup() {
	for p in "${R4_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$R4_DIR"
}
trap r4_cleanup EXIT

r4_build() { go build -o "$R4_BIN" ./cmd/gpupool || exit 1; }

# r4_serve [serve flags…]: starts the server, waits for /healthz, sets T (operator token).
r4_serve() {
	"$R4_BIN" serve --data "$R4_DIR/data" --listen 127.0.0.1:$R4_PORT "$@" >>"$R4_DIR/serve.log" 2>&1 &
	R4_SERVE=$!
	R4_PIDS+=($R4_SERVE)
	for _ in $(seq 1 100); do curl -sf $S/healthz >/dev/null && break; sleep 0.1; done
	T=$(cat "$R4_DIR/data/operator.token")
}

# r4_agent NODE [smoke command]: an agent on 8 fake H100s (one 7g.80gb each) following the server.
r4_agent() {
	local node=$1 smoke=${2:-}
	mkdir -p "$R4_DIR/$node"
	cat >"$R4_DIR/$node/agent.yaml" <<YAML
node: $node
stateDir: $R4_DIR/$node/state
listen: 127.0.0.1:0
pollInterval: 1s
policy: {reconfigCooldown: 1s, maxChanges: 100, window: 1h}
YAML
	if [ -n "$smoke" ]; then
		echo "smoke: {command: [\"$smoke\"], timeout: 10s}" >>"$R4_DIR/$node/agent.yaml"
	fi
	local tok
	tok=$(c_json -XPOST $S/v1/tokens -d "{\"role\":\"agent\",\"node\":\"$node\"}" | python3 -c 'import sys,json; print(json.load(sys.stdin)["token"])')
	"$R4_BIN" agent --fake --config "$R4_DIR/$node/agent.yaml" --server $S --token "$tok" >>"$R4_DIR/$node/agent.log" 2>&1 &
	R4_AGENT=$!
	R4_PIDS+=($R4_AGENT)
	for _ in $(seq 1 100); do c_json $S/v1/nodes | grep -q "\"$node\"" && break; sleep 0.1; done
}

# c: curl with the operator token, printing the body and "[status]".
c() { curl -s -w ' [%{http_code}]\n' -H "Authorization: Bearer $T" "$@"; }
# c_json: the body alone.
c_json() { curl -s -H "Authorization: Bearer $T" "$@"; }

# r4_events AFTER: the events after a sequence number, one line each.
r4_events() { c_json "$S/v1/events?after=${1:-0}" | python3 -c 'import sys,json; [print(e["seq"], e["code"], e["message"][:200]) for e in json.load(sys.stdin)]'; }

# r4_gpus NODE: each GPU's uuid tail, slices and MIG layout as the node reports them.
r4_gpus() { c_json $S/v1/nodes | python3 -c 'import sys,json
for n in json.load(sys.stdin):
    if n["name"] == sys.argv[1]:
        for g in n["inventory"]["gpus"]: print(g["uuid"][-2:], g.get("slices"), repr(g.get("mig", "")))' "$1"; }

# r4_wait_gates SECONDS: waits until no gate operation is left (or the time is up).
r4_wait_gates() { for _ in $(seq 1 $((${1:-30} * 5))); do [ "$(c_json $S/v1/gates)" = "[]" ] && return 0; sleep 0.2; done; return 1; }

# r4_uuid NODE INDEX: the UUID of the node's GPU at that index, as it reported it.
r4_uuid() { c_json $S/v1/nodes | python3 -c 'import sys,json
for n in json.load(sys.stdin):
    if n["name"] == sys.argv[1]: print(n["inventory"]["gpus"][int(sys.argv[2])]["uuid"])' "$1" "$2"; }
