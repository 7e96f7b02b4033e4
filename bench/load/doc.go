// Command load drives a running `gpupool serve` with a mix of reads and demand changes and prints
// a latency table. It sets up its own pool first (nodes registered through the API with the
// operator token, tenants lt00…), so point it at a server with an empty or scratch data directory.
//
//	go run ./bench/load --server http://127.0.0.1:8080 --token "$(cat DATA/operator.token)" \
//	    --duration 20s --workers 32 --writes 0.2
//
// --rate 0 runs closed-loop (as fast as the workers go); --rate N paces the whole load at N
// requests per second (the soak uses --rate 2000 --duration 1h and reports the server's RSS).
//
// It is a benchmark beside the gpupool binary, not part of it; docs/control-plane.md reports what
// it measured.
package main
