// Command gpupool plans, allocates and operates shared NVIDIA GPUs for LLM inference tenants.
//
// This package is the command line and nothing more: it parses flags (cobra, root.go), reads
// and size-checks every file argument before it is parsed (input.go), calls the policy packages
// (internal/plan, internal/fair, internal/sim, internal/cost, internal/render, …) and prints or
// writes what they return. Every subcommand has its own file: plan, render, simulate, fair,
// gpus, layouts, lora, validate, fit, perf, cost and version work on files alone; agent, serve
// and controller run the node agent, the control plane and the Kubernetes controller (the agent's
// reset socket, through which `agent --reset` asks a running agent to reset its gate, is
// agent_reset.go, its peer's uid check agent_reset_linux.go; docs/adr/0066); tenant, grants, token, node, gate and apply are clients of a
// running control plane (client.go).
//
// What holds for every subcommand, as the README's CLI reference states it:
//
//   - exit codes (exit.go): 0 success, 1 something the user can fix (nothing written), 2 a partial
//     result, 3 a bug in gpupool (a panic is caught and reported so), 130 interrupted;
//   - SIGINT or SIGTERM cancels the command's context; a command that has not stopped within
//     interruptGrace, or a second signal, ends the process (main.go);
//   - -o table|json|yaml on the commands that read files (output.go);
//   - --out DIR is replaced as a whole and atomically, with a .gpupool-output manifest of SHA-256
//     sums that lets a later run refuse a directory someone else wrote or edited (outdir.go).
package main
