package v1

// The node wire types: what a node agent reports to the control plane (`gpupool serve`,
// PUT /v1/nodes/{node}) and the desired layout it receives (GET /v1/nodes/{node}/layout). The
// control plane (internal/control) and the node agent (internal/agent) both speak them, so they
// live here, once.

// NodeReport is what an agent reports about its node.
type NodeReport struct {
	GPUs []NodeGPU `json:"gpus"`
	// Ready lists the standby grants of the node's layout that run and are ready.
	Ready []string `json:"ready,omitempty"`
	// Failed lists the standby grants whose replicas did not become healthy within the agent's
	// startup budget: the control plane stops them (the replicas they stand in for keep running)
	// and starts new standbys.
	Failed []string `json:"failed,omitempty"`
	// Epoch is the epoch of the layout the agent runs (NodeLayout.Epoch; 0 before its first).
	// Once the node has an epoch, a report from another epoch is refused (409, fenced): the agent
	// runs replicas the control plane has moved away.
	Epoch uint64 `json:"epoch,omitempty"`
}

// NodeGPU is one GPU an agent reports, with the slices it is cut into now.
type NodeGPU struct {
	UUID   string   `json:"uuid"`
	Board  string   `json:"board"`
	Slices []string `json:"slices"` // slice kinds, e.g. "3g.40gb", "mps-50", "exclusive"
	// MIG is the GPU's MIG layout as the agent reads it ("3g.40gb@0 3g.40gb@4"); empty when the
	// GPU is not in MIG mode or the agent does not say.
	MIG string `json:"mig,omitempty"`
	// Gate is the outcome of the last layout change the agent ran on this GPU for a gate
	// operation of the control plane.
	Gate *GateReport `json:"gate,omitempty"`
}

// GateReport is what an agent says about a gate operation it ran: the operation's id and the
// gate's closed outcome code (GateDone, GateRolledBack, GateRollbackFailed, GateCordonFailed,
// GateDrainFailed, GateCooldown, GateRateLimit) with its sentence.
type GateReport struct {
	Op      uint64 `json:"op"`
	Attempt int    `json:"attempt"`
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// Slice is one unit a replica runs on.
type Slice struct {
	ID    string `json:"id"` // NODE/GPU-UUID/INDEX
	Node  string `json:"node"`
	GPU   string `json:"gpu"`
	Board string `json:"board"`
	Kind  string `json:"kind"`
}

// LayoutSlice is one slice of a node's desired layout and who should run on it.
type LayoutSlice struct {
	Slice
	Tenant string `json:"tenant,omitempty"`
	Grant  string `json:"grant,omitempty"`
	// Standby marks a replica started for a grant that moves off a draining GPU or a cordoned
	// node: the agent reports it in NodeReport.Ready once it runs and is healthy.
	Standby bool `json:"standby,omitempty"`
	// Draining marks a slice of a GPU that leaves the pool for a MIG change, or of a cordoned
	// node: its replica keeps running until its standby elsewhere is ready.
	Draining bool `json:"draining,omitempty"`
	// Limits are the replica's sharing limits from the applied plan: for an MPS share, the active
	// thread percentage and pinned device memory its MPS client gets.
	Limits *Limits `json:"limits,omitempty"`
}

// NodeLayout is what a node's agent should make true.
type NodeLayout struct {
	Node     string `json:"node"`
	Revision uint64 `json:"revision"`
	// Epoch is the node's fencing epoch: it grows when the control plane declares the node lost
	// and moves its replicas; an agent holding replicas of an older epoch stops them all before
	// it runs this layout, and reports this epoch from then on.
	Epoch  uint64        `json:"epoch,omitempty"`
	Slices []LayoutSlice `json:"slices"`
	// GPUs are the MIG layouts the node's gate should apply now, one per GPU with a gate
	// operation handed to the agent.
	GPUs []GPULayout `json:"gpus,omitempty"`
}

// GPULayout is a GPU's desired MIG layout and the gate operation it belongs to.
type GPULayout struct {
	UUID  string `json:"uuid"`
	Board string `json:"board"`
	MIG   string `json:"mig"`
	// MIGOff asks for MIG mode off once MIG is empty (a GPU the plan runs whole: exclusive, MPS or
	// time-sliced); the agent turns it off only when its NVML can, and reports what it reads.
	MIGOff bool   `json:"migOff,omitempty"`
	Op     uint64 `json:"op"`
	// Attempt numbers the tries of the operation (a retry is a new attempt for the agent).
	Attempt int `json:"attempt"`
}
