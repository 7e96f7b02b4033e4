package gpu

// Engines are the media and copy engines of one GPU instance, as `nvidia-smi mig -lgip` lists them.
type Engines struct {
	NVDEC       int `json:"nvdec"`
	NVJPG       int `json:"nvjpg"`
	OFA         int `json:"ofa"`
	NVENC       int `json:"nvenc"`
	CopyEngines int `json:"copyEngines"`
}

// Profile is one MIG GPU-instance profile on one board. Its SMs and usable memory are per board:
// the same name carries different numbers on different boards (1g.20gb is 26 SMs on H100 SXM5 and
// 14 on H100 PCIe).
type Profile struct {
	Name          string  `json:"name"`          // "3g.40gb", "1g.10gb+me"
	ID            int     `json:"id"`            // NVML GPU-instance profile id (`nvidia-smi mig -cgi`); -1 when unknown
	ComputeSlices int     `json:"computeSlices"` // the N in Ng
	MemorySlices  int     `json:"memorySlices"`  // out of Board.MemorySlices
	MemoryMiB     int64   `json:"memoryMiB"`     // usable MiB as the driver reports it
	SMs           int     `json:"sms"`           // 0 when unknown
	MaxCount      int     `json:"maxCount"`      // instances of this profile on one GPU
	Starts        []int   `json:"starts"`        // legal start memory slices
	Engines       Engines `json:"engines"`
	// MediaExtension marks +me profiles: at most one +me instance per GPU.
	MediaExtension bool `json:"mediaExtension,omitempty"`
	// Unverified names the fields whose values were inferred, not seen in real driver output.
	Unverified []string `json:"unverified,omitempty"`
	Sources    []string `json:"sources,omitempty"`
}

// Board is a GPU product with fixed facts.
type Board struct {
	Name         string   `json:"name"` // canonical: "H100-SXM5-80GB"
	Aliases      []string `json:"aliases,omitempty"`
	Arch         string   `json:"arch"`         // ampere, hopper, blackwell
	NVMLNames    []string `json:"nvmlNames"`    // nvmlDeviceGetName strings, e.g. "NVIDIA H100 80GB HBM3"
	PCIDeviceIDs []string `json:"pciDeviceIds"` // mig-parted device-filter form, "0x233010DE"
	MemoryMiB    int64    `json:"memoryMiB"`    // total device memory
	SMs          int      `json:"sms"`          // full GPU
	SMsInMIG     int      `json:"smsInMig,omitempty"`
	BandwidthGBs float64  `json:"bandwidthGBs"` // HBM/GDDR bandwidth, GB/s
	TDPWatts     float64  `json:"tdpWatts"`
	BF16TFLOPS   float64  `json:"bf16Tflops"` // dense
	FP8TFLOPS    float64  `json:"fp8Tflops"`  // dense; 0 where the board has no FP8 tensor cores
	// MIG geometry; MemorySlices == 0 means the board has no MIG.
	MemorySlices  int       `json:"memorySlices"`
	ComputeSlices int       `json:"computeSlices"`
	MaxInstances  int       `json:"maxInstances"`
	Profiles      []Profile `json:"profiles,omitempty"`
	Unverified    []string  `json:"unverified,omitempty"`
	// Estimated names the compute figures ("sms", "bf16Tflops", "fp8Tflops") that are the
	// catalog's own estimates (derived from another figure, or from public device queries),
	// not values of an NVIDIA table; each is also Unverified. Predictions on the board rest on
	// them, and the planner says so on every tenant it places there.
	Estimated []string `json:"estimated,omitempty"`
	Sources   []string `json:"sources,omitempty"`
	// ComputeCapability is the CUDA compute capability, "9.0".
	ComputeCapability string `json:"computeCapability,omitempty"`
	// MinDriver is the oldest NVIDIA driver branch with MIG support for the board, "R525".
	MinDriver string `json:"minDriver,omitempty"`
	// Notes are facts a user should see next to the numbers (variants lumped in, disagreements).
	Notes []string `json:"notes,omitempty"`
	// Interconnect is the GPU-to-GPU link inside a node (tensor-parallel all-reduce), with its
	// source.
	Interconnect Interconnect `json:"interconnect,omitzero"`
}

// Instance is one MIG GPU instance on a GPU: a profile at a start memory slice.
type Instance struct {
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

// Layout is the list of MIG instances on one GPU.
type Layout []Instance
