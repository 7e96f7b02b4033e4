// Package agent is the node agent: the reconcile loop of `gpupool agent` and the executor of the
// MIG gate.
//
// Executor drives internal/gate's pure state machine: it feeds an event to gate.Step, appends the
// resulting state to the journal (written and fsynced) and only then performs the action the state
// names, through its ports (MIG, Node, Smoker), feeding the outcome back as the next event. After
// kill -9 at any instant, NewExecutor reads the journal's last good state and sends EvRecover: the
// gate re-issues the pending action or, for a destroy or create whose effect is unknown, reads the
// GPU again and continues from what is there. The journal is an append-only file of CRC-checked
// records (journal.go; docs/adr/0012): a torn tail is dropped, a damaged record before good
// ones is an error (ErrCorrupt; SetAsideJournal renames such a file aside for a new journal), a
// new journal is fsynced with its directory, and the file is compacted to its last record every
// 1024 appends. An action the gate wants no earlier than a time (a failed uncordon's retry,
// gate.Action.NotBefore) is waited for with Deps.Sleep and the context, without the executor's
// lock, so State (and /healthz) answers meanwhile; a kill during the wait resumes it from the
// journal with the attempt count (docs/adr/0073). The retries' attempts, longest wait and jitter
// are the config's policy.uncordon (Settings.Uncordon, gate.UncordonPolicy); the executor draws
// from Deps.Rand, its own seeded source, for each failed action and hands the draw to the gate in
// the event (gate.Event.Draw), which turns it into the retry's time: no randomness of its own.
// LockStateDir keeps one process (an agent, or --reset) per state directory: an exclusive flock on
// StateDir/lock, which the kernel drops when the process dies.
//
// LocalNode is the Node of a bare machine: the cordon is a file with its reason. CommandSmoker
// runs the smoke command per new instance with a timeout.
//
// Agent polls: inventory (Telemetry), desired layouts from the Config into the gate, MPS daemons
// kept up (MPS), clocks locked per GPU when allowed (Clocks), energy counters and engine metrics
// read (Scraper) and each GPU's energy attributed to its tenants (internal/metrics). It is the
// metrics.Source of the /metrics endpoint and answers /healthz.
//
// Link connects an Agent to the control plane through the ControlPlane port (HTTPControlPlane
// speaks `gpupool serve`'s agent API): register and report the GPUs, heartbeat, long-poll the
// desired layout, whose MIG layouts the poll submits to the gate (turning MIG mode on before
// instances are cut into a GPU out of MIG mode, and off once a GPU the plan runs whole has none:
// Executor.SetMIGMode, idempotent and not journaled); the gate's outcomes are reported against the
// control plane's operation and attempt.
//
// Ports are declared here and implemented elsewhere: internal/nvml (MIG and MIGMode directly, Telemetry and
// Clocks through the command's adapters), internal/mps (MPS through an adapter). Node has one
// implementation, LocalNode, in the Kubernetes DaemonSet too: the agent calls no Kubernetes API
// (docs/kubernetes.md). On nodes whose MIG layout mig-manager drives, the controller's gate
// (internal/k8s) cordons and drains through the API instead; the agent does not run there.
package agent
