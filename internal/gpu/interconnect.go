package gpu

// Interconnect is the link a board's GPUs use to talk to each other inside one node, which
// tensor-parallel engines all-reduce over.
type Interconnect struct {
	// Kind names the link: "nvlink3", "nvlink4", "nvlink5", "nvlink-bridge", "pcie4", "pcie5".
	Kind string `json:"kind"`
	// GBs is the bandwidth per GPU and direction, GB/s: half the bidirectional figure datasheets
	// quote (NVLink 4: 900 GB/s total, 450 each way).
	GBs float64 `json:"gbs"`
	// MaxGPUs is how many GPUs the link connects all-to-all at full bandwidth: 8 behind NVSwitch
	// on HGX and DGX boards, 72 in an NVL72 rack, 2 for an NVLink bridge pair; PCIe boards say 8
	// (the host's switches), at PCIe bandwidth.
	MaxGPUs int `json:"maxGpus"`
	// Source is where the number comes from.
	Source string `json:"source"`
}

const (
	srcNVLinkA100    = "NVIDIA A100 Tensor Core GPU datasheet: third-generation NVLink, 600 GB/s (SXM4, NVSwitch in HGX A100)"
	srcNVLinkA100P   = "NVIDIA A100 80GB PCIe datasheet: NVLink bridge for two GPUs, 600 GB/s; PCIe Gen4 64 GB/s (the catalog models PCIe, the link every card has)"
	srcNVLinkA100P40 = "NVIDIA A100 PCIe 40GB product brief: NVLink bridge for two GPUs, 600 GB/s; PCIe Gen4 64 GB/s (the catalog models PCIe, the link every card has)"
	srcNVLinkA30     = "NVIDIA A30 datasheet: NVLink bridge for two GPUs, 200 GB/s; PCIe Gen4 64 GB/s"
	srcNVLinkH100    = "NVIDIA H100 Tensor Core GPU datasheet: fourth-generation NVLink, 900 GB/s (SXM5, NVSwitch in HGX H100); H100 NVL: NVLink bridge 600 GB/s; H100 PCIe: PCIe Gen5 128 GB/s; the H800, an alias of H100-SXM5-80GB here, has 400 GB/s"
	srcNVLinkH200    = "NVIDIA H200 Tensor Core GPU datasheet: NVLink 900 GB/s (SXM, NVSwitch in HGX H200); H200 NVL: 2- or 4-way NVLink bridge 900 GB/s"
	srcNVLinkGH200   = "NVIDIA GH200 Grace Hopper Superchip datasheet: NVLink 900 GB/s between superchips"
	srcNVLinkH20     = "NVIDIA H20 product brief: NVLink 900 GB/s"
	srcNVLinkB200    = "NVIDIA Blackwell datasheets (HGX B200/B300, GB200/GB300 NVL72): fifth-generation NVLink, 1.8 TB/s per GPU"
	srcPCIeBlackPro  = "NVIDIA RTX PRO Blackwell datasheets: PCIe Gen5 x16, 128 GB/s bidirectional; no NVLink"
)

// interconnects are the boards' links, by canonical name; finish sets Board.Interconnect.
var interconnects = map[string]Interconnect{
	"A100-SXM4-40GB":              {"nvlink3", 300, 8, srcNVLinkA100},
	"A100-SXM4-80GB":              {"nvlink3", 300, 8, srcNVLinkA100},
	"A100-PCIe-40GB":              {"pcie4", 32, 8, srcNVLinkA100P40},
	"A100-PCIe-80GB":              {"pcie4", 32, 8, srcNVLinkA100P},
	"A30-24GB":                    {"pcie4", 32, 8, srcNVLinkA30},
	"H100-SXM5-80GB":              {"nvlink4", 450, 8, srcNVLinkH100},
	"H100-PCIe-80GB":              {"pcie5", 64, 8, srcNVLinkH100},
	"H100-NVL-94GB":               {"nvlink-bridge", 300, 2, srcNVLinkH100},
	"H100-96GB":                   {"nvlink4", 450, 8, srcNVLinkH100},
	"H20-96GB":                    {"nvlink4", 450, 8, srcNVLinkH20},
	"GH200-144GB":                 {"nvlink4", 450, 8, srcNVLinkGH200},
	"H200-141GB":                  {"nvlink4", 450, 8, srcNVLinkH200},
	"B200-180GB":                  {"nvlink5", 900, 8, srcNVLinkB200},
	"B300-269GB":                  {"nvlink5", 900, 8, srcNVLinkB200},
	"GB200-186GB":                 {"nvlink5", 900, 72, srcNVLinkB200},
	"GB200-189GB":                 {"nvlink5", 900, 72, srcNVLinkB200},
	"GB300-278GB":                 {"nvlink5", 900, 72, srcNVLinkB200},
	"RTX-PRO-6000-Blackwell-96GB": {"pcie5", 64, 8, srcPCIeBlackPro},
	"RTX-PRO-5000-Blackwell-48GB": {"pcie5", 64, 8, srcPCIeBlackPro},
	"RTX-PRO-4500-Blackwell-32GB": {"pcie5", 64, 8, srcPCIeBlackPro},
}
