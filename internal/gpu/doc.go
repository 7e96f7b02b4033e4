// Package gpu owns the board catalog and the MIG placement rules: which GPUs exist, what each
// of their MIG profiles holds (per board), where instances may start, and which layouts are legal.
// It is pure: no IO, no clock, no randomness; every function is deterministic.
//
// # Catalog
//
// Boards returns the catalog; Lookup finds a board by canonical name ("H100-SXM5-80GB"), alias
// ("H100", "H800-80GB", "B200") or the name NVML reports ("NVIDIA H100 80GB HBM3"); ByPCIDeviceID
// maps the PCI ids mig-parted filters on ("0x233010DE") to boards. Canonical names read
// <model>[-<form factor>]-<memory>, where memory is the GB in the board's full-GPU (7g/4g/2g)
// profile name: B200-180GB, GB200-186GB, GB200-189GB, B300-269GB, GB300-278GB.
//
// The tables are Go code, built from public sources that each row names in Sources:
//
//   - the NVIDIA MIG User Guide (Supported GPUs, Supported MIG Profiles, the A100 `-lgipp` example);
//   - real `nvidia-smi mig -lgip` output published in issues and docs (H100 SXM5, H100 PCIe,
//     H100 NVL, H200, GH200 144GB, first rows of B200 and GB200, A100 80GB, RTX PRO 6000);
//   - NVIDIA mig-parted's config-default.yaml (profile names and device ids of B300, GB300 and the
//     larger GB200/GH200 rows, and the only trace of GB200-189GB);
//   - the project's own measurement of one H200 SXM with driver 580.159.04 (NVML and
//     `nvidia-smi mig -lgip/-lgipp`; copies under testdata/observed/, checked by a test);
//   - datasheets, product pages and public logs for full-board facts (bandwidth, TDP, TFLOPS,
//     memory totals, SM counts),
//     and for each board's GPU-to-GPU link (Board.Interconnect: NVLink generation or PCIe, GB/s
//     each way, how many GPUs it connects, with its own Source), which tensor-parallel replicas
//     all-reduce over.
//
// The package's tests cross-check every profile row against the project's machine-readable MIG
// tables and every config of mig-parted's default file (copies under testdata/).
//
// A value that was inferred rather than seen in driver output or an NVIDIA table is listed, by
// its JSON field name, in the Unverified field of its Board or Profile; callers should show it as
// such. Missing values follow fixed rules: Profile.SMs == 0 and Board.SMs/SMsInMIG == 0 mean
// unknown; empty NVMLNames or PCIDeviceIDs mean unknown and are listed in Unverified as
// "nvmlNames" / "pciDeviceIds" (such a board is found by name only, never by ByPCIDeviceID);
// Profile.ID == -1 means the NVML id is unknown; a profile without published usable
// memory gets a conservative estimate (nominal GB x 0.97 for half a GPU or more, x 0.88 below,
// the lowest ratios seen in real rows; a test keeps the estimate below every real row). Profile
// memory is the MiB the driver reports: for rows known as printed GiB, the 64-MiB multiple that
// prints as that GiB (every MIG size seen in real output is such a multiple).
//
// Usable profile memory moves slightly between driver releases. Where two drivers disagree the
// catalog carries the older, smaller figure, which is safe to plan with on either: H200 rows keep
// the R550 driver's 32.25 / 69.50 / 139.75 GiB although driver 580.159.04 reports 32.50 / 69.75 /
// 140.00 GiB on the project's own H200 (the newer figures are in those rows' Sources and the
// board's Notes). Everything else measured there (ids, SMs, engines, counts, placements, memory
// total) matches the catalog exactly.
//
// Every board has a positive SM count, bandwidth and dense BF16 TFLOPS (a test keeps it so), as
// perf needs all three to size a replica. Where NVIDIA publishes only a sparse FP4 figure ("AI
// TOPS"), dense FP8 is a quarter of it and dense BF16 an eighth, marked unverified and said in
// Notes: RTX PRO 6000 (4,000: 1,000 / 500) and RTX PRO 5000 (2,064: 516 / 258). The RTX PRO 4500
// has no such figure: its TFLOPS are the RTX PRO 6000's scaled by SM count at the same boost
// clock (82/188: 436 / 218). RTX PRO SM counts are the product pages' CUDA cores at 128 per SM
// (5000: 110, 4500: 82). No NVIDIA table gives a per-GPU SM count for GB200 or GB300: both carry
// 152, the count public kernel notes and device queries report, marked unverified (GB200-189GB
// takes GB200-186GB's).
//
// SM counts are per board, never per profile name: 1g.20gb is 26 SMs on H100 SXM5 and 14 on H100
// PCIe, and SMs are not compute slices x 16 (3g.40gb has 60 SMs on H100 SXM5).
//
// Where the catalog departs from the tables or from mig-parted's grouping it says so in Notes:
// H20 (0x2329) is its own board with the H100 96GB profile table because its compute is far
// lower; H800 PCIe (0x2322) is mapped to H100-PCIe-80GB; B300's SM count (160) is kept although
// one public device query reports 148; GB200-189GB, the board of mig-parted's filter-less
// all-3g.95gb / all-4g.95gb / all-7g.189gb configs, has no known PCI id or NVML name, and its
// 1g/2g rows are GB200-186GB's, assumed and marked unverified.
//
// # Placement model
//
// A MIG GPU has MemorySlices memory slices (8, 4 or 2) and ComputeSlices compute slices (7, 4 or
// 2). An instance of a profile occupies the memory slices [start, start+MemorySlices); its start
// must be one of the profile's Starts, which depend only on its shape:
//
//	8-slice boards: 1g (1 slice) {0..6}   1g (2 slices) {0,2,4,6}   2g {0,2,4}   3g {0,4}   4g {0}   7g {0}
//	4-slice boards: 1g {0..3}   2g {0,2}   4g {0}          (unverified: no -lgipp output found)
//	2-slice boards: 1g {0,1}    2g {0}                      (unverified)
//
// So slot 7 of an 8-slice board is reachable only by 3g@4, 7g@0 and the 2-slice 1g at 6. This
// interval model reproduces NVIDIA's "19 combinations" on A100 (see Enumerate) and is all the
// rules need: compute slices are not placed separately.
//
// # Rules
//
// A layout is legal when (Board.Validate):
//
//  1. every profile exists on the board;
//  2. every start is legal for its profile;
//  3. no two instances share a memory slice;
//  4. no profile has more than its MaxCount instances;
//  5. there are at most MaxInstances instances;
//  6. the compute slices add up to at most ComputeSlices;
//  7. at most one media-extension instance (+me, and +me.all on RTX PRO boards) is present.
//
// Place finds starts for a multiset of profiles by exhaustive search, largest profile first over
// all legal starts, and returns the legal layout that leaves the most room (ties to the lowest
// starts), or a *PlacementError (errors.Is ErrNoPlacement) naming where it got stuck. Creation
// order on a real GPU is a separate matter: CreationOrder sorts a layout largest first, which
// avoids the creation-order failure the MIG User Guide describes for A100.
//
// Enumerate lists every maximal legal layout over a set of profiles; Summarize counts them,
// their distinct multisets and those using every compute slice.
//
// Layouts print as "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4" (Layout.String) and parse back with
// ParseLayout.
package gpu
