package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// placementDigest hashes what a plan decides: the GPUs used and the lower bound, every GPU's
// mode, instances and replicas (with their limits and vLLM arguments), and every tenant's
// replica references and feasibility. Reasons and predictions are left out.
func placementDigest(t *testing.T, pl *v1.Plan) string {
	t.Helper()
	type gpuPart struct {
		Node      string
		Index     int
		Board     string
		Role      v1.Role
		Mode      v1.Mode
		Instances []v1.PlanInstance
		Replicas  []v1.PlanReplica
	}
	type tenantPart struct {
		Name       string
		Replicas   []v1.ReplicaRef
		Infeasible bool
	}
	var d struct {
		Used, Bound int
		GPUs        []gpuPart
		Tenants     []tenantPart
	}
	d.Used, d.Bound = pl.Summary.GPUsUsed, pl.Summary.LowerBound
	for _, g := range pl.GPUs {
		d.GPUs = append(d.GPUs, gpuPart{g.Node, g.Index, g.Board, g.Role, g.Mode, g.Instances, g.Replicas})
	}
	for _, tn := range pl.Tenants {
		d.Tenants = append(d.Tenants, tenantPart{tn.Name, tn.Replicas, tn.Infeasible})
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// TestPlacementDigest pins the placements of a few synthetic pools, standard and varied, to the
// digests the planner produced before its memoisation of step times, queueing models and group
// keys: those are speed-ups only, and a change here means a plan changed. A deliberate change of
// the planner's decisions updates the digests (the test logs the new ones). The digest includes
// the lower bound: the TTFT floor raised the varied pools' bounds from 74 and 146 to 79 and 154
// with the placements as they were (the old digests come back with the old bounds put in).
// Since MIG+MPS is a candidate on the DRA device path only, the pools on the default
// (device-plugin) path plan without it and have new digests; on the DRA path the same pools
// gave the digests from before that change, placements and bounds alike. On the DRA path the
// packer no longer keeps the device plugin's per-node rules (perClaim), so its pools have new
// digests: 64, 101 and 194 GPUs where the node rules took 66, 104 and 199. Since the bound's
// counts assume idle neighbours (ADR 0032) the bounds are lower (64, 82 and 159 before, 63, 78
// and 151 after, on the device-plugin pools below; on the DRA pools 62, 79 and 154 before,
// 61, 74 and 146 after), and the placements the same (digests with the bound left out equal
// before and after). Since the choice empties shared groups' last units together
// (emptyLastUnits) the pools have new digests: on the device-plugin path 67 GPUs for the 300
// standard tenants where 68 were used, 103 for the 300 varied where 104 were, and 181 for 600
// on 300 GPUs with 38 tenants short where 154 left 140 short; on the DRA path the standard pool
// as before, the varied 100 GPUs where 101 were used and 194 as before, every tenant served.
// Since the sharing-group bound runs on pools of up to 2,000 tenants (it did up to 400), the
// 600 varied tenants' bound is 152 where it was 151, with the same placements. Since the slot
// wait beside MPS or time-sliced neighbours counts twice (ADR 0034), the varied pools have new
// digests: on the device-plugin path 103 GPUs for 300 tenants as before, and for 600 on 300
// GPUs 183 with 35 tenants short where 181 left 38 short; on the DRA path 100 and 194 GPUs as
// before, every tenant served. Since the KV cache's hold counts the tokens the requests in
// flight keep (ADR 0037) every pool has new digests: the standard 300 tenants take 66 GPUs
// where they took 67 (63 where 64 on the DRA path), the varied pools as many as before
// (103 and 183; 100 and 194 on the DRA path), with the same bounds. Since the TTFT floor
// counts its places where the KV cache may preempt (ADR 0038) the varied pools' bounds are 79
// and 154 where they were 78 and 152 (75 and 148 where 74 and 146 on the DRA path), with the
// same placements (the old digests come back with the old bounds put in). Since tenants left
// short try their other candidates on the pool GPUs left idle (rescue), the 600 varied tenants
// on 300 GPUs (device-plugin path) have a new digest: 24 tenants short where 35 were, on 194
// GPUs where 183 were used (the other pools leave no tenant short, and are as before). Since
// a packing that leaves units short for a node rule makes the next choices count whole-GPU MPS
// of that board in whole nodes (countNodes), the 600 varied tenants on 300 GPUs have a new
// digest: every tenant served, on 219 GPUs, where 24 were short on 194 (the other pools are as
// before). Since the bound counts every share a plan may use (ADR 0053), the varied pools have
// new digests with the same placements and lower bounds: on the device-plugin path 77 where
// it was 79 (300 tenants) and 148 where 154 (600 on 300 GPUs), on the DRA path 74 where 75 and
// 146 where 148; the standard pools' bounds and digests are as before. Since the planner tries
// whole-GPU shares finer than 1/8 (ADR 0056) five pools have new digests: on the device-plugin
// path the standard 300 on 66 GPUs as before (67 without the choice's start on the coarse
// ladders, coarseSeed), the varied 300 on 102 where 103 were used (bound 78 where 77: the finer
// shares are evaluated candidates now), the 600 on 300 GPUs on 219 as before; on the DRA path
// the varied 300 on 100 and the 600 on 194, as before. Every tenant is served; the standard DRA
// pool's digest is unchanged. Since the sharing-group bound rounds to the prices' grid and
// searches the groups it gave up on again with more nodes (ADR 0058), three pools have new
// digests with the same placements (the old digests come back with the old bounds put in) and
// higher bounds: the 600 varied tenants on 300 GPUs 151 where 148 (219 GPUs), on the DRA path
// the varied 300 75 where 74 (100 GPUs) and the 600 on 300 GPUs 147 where 146 (194 GPUs).
// Since the group bound's search caps each unit kind's share at the most replicas the group can
// put there (ADR 0114), the same three pools have new digests with the same placements (the old
// digests come back with the old bounds put in) and higher bounds: 152 where 151, on the DRA
// path 76 where 75 and 148 where 147.
func TestPlacementDigest(t *testing.T) {
	cases := []struct {
		name          string
		tenants, gpus int
		varied        bool
		api           v1.KubernetesDeviceAPI
		want          string
	}{
		{"standard-300", 300, 300, false, "", "ed028bf362ddb74f"},
		{"varied-300", 300, 300, true, "", "3c57fe86864716c0"},
		{"varied-600-on-300", 600, 300, true, "", "5e7db38c34032328"},
		{"standard-300-dra", 300, 300, false, v1.DeviceAPIDRA, "1823f5d2df8c0d97"},
		{"varied-300-dra", 300, 300, true, v1.DeviceAPIDRA, "d52f77cd170e626e"},
		{"varied-600-on-300-dra", 600, 300, true, v1.DeviceAPIDRA, "d0505a99dd37473a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := Synthetic(SyntheticOptions{Tenants: c.tenants, GPUs: c.gpus, Varied: c.varied, DeviceAPI: c.api}, rand.New(rand.NewPCG(1, 2)))
			pl := build(t, pool)
			got := placementDigest(t, pl)
			short := 0
			for _, tn := range pl.Tenants {
				if tn.Infeasible {
					short++
				}
			}
			t.Logf("%s: %d GPUs used, lower bound %d, %d tenants short, digest %s", c.name, pl.Summary.GPUsUsed, pl.Summary.LowerBound, short, got)
			if got != c.want {
				t.Errorf("%s: placement digest %s, want %s: the plan changed", c.name, got, c.want)
			}
		})
	}
}
