package v1

import (
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// Generators of arbitrary (not necessarily valid) documents whose every field can be encoded.

var (
	anyText = rapid.StringOf(rapid.Rune().Filter(textRune)) // any text a document may hold
	refNode = rapid.StringMatching(`[a-z0-9][a-z0-9.-]{0,12}`)
	anyDur  = rapid.Map(rapid.Int64(), func(n int64) Duration { return Duration(n) })
	anySize = rapid.Map(rapid.Int64Min(0), func(n int64) Bytes { return Bytes(n) })
	anyNum  = rapid.Float64Range(-1e12, 1e12)
)

func genPool(t *rapid.T) *Pool {
	return &Pool{
		APIVersion: APIVersion, Kind: KindPool,
		Metadata: Metadata{Name: anyText.Draw(t, "name")},
		Fleet:    Fleet{Nodes: rapid.SliceOfN(rapid.Custom(genNode), 0, 3).Draw(t, "nodes")},
		Policy: Policy{
			CanaryGPUs:       rapid.SliceOfN(rapid.Custom(genGPURef), 0, 3).Draw(t, "canaries"),
			BurstPoolPercent: rapid.Ptr(rapid.Int(), true).Draw(t, "burst"),
			AllowedModes:     rapid.SliceOfN(rapid.SampledFrom(append(allModes, "bogus")), 0, 4).Draw(t, "modes"),
			MaxUnavailable: rapid.Ptr(rapid.Custom(func(t *rapid.T) IntOrPercent {
				return IntOrPercent{Value: rapid.Int().Draw(t, "v"), Percent: rapid.Bool().Draw(t, "pct")}
			}), true).Draw(t, "maxUnavailable"),
			ReconfigCooldown: rapid.Ptr(anyDur, true).Draw(t, "cooldown"),
		},
		Tenants: rapid.SliceOfN(rapid.Custom(genTenant), 0, 4).Draw(t, "tenants"),
	}
}

func genNode(t *rapid.T) Node {
	return Node{
		Name:   anyText.Draw(t, "name"),
		Labels: rapid.MapOfN(anyText, anyText, 0, 3).Draw(t, "labels"),
		GPUs: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) GPUGroup {
			return GPUGroup{Board: anyText.Draw(t, "board"), Count: rapid.Int().Draw(t, "count")}
		}), 0, 2).Draw(t, "gpus"),
	}
}

func genGPURef(t *rapid.T) GPURef {
	return GPURef{Node: refNode.Draw(t, "node"), Index: rapid.IntRange(0, 1<<20).Draw(t, "index")}
}

func genTenant(t *rapid.T) Tenant {
	return Tenant{
		Name: anyText.Draw(t, "name"), Path: anyText.Draw(t, "path"),
		Weight:    rapid.Ptr(anyNum, true).Draw(t, "weight"),
		Isolation: Isolation(anyText.Draw(t, "isolation")),
		Model: Model{Name: anyText.Draw(t, "model"), Dir: anyText.Draw(t, "dir"),
			KVCacheDtype: anyText.Draw(t, "kv")},
		MaxContext: rapid.Int().Draw(t, "maxContext"),
		Traffic: Traffic{RPS: anyNum.Draw(t, "rps"), InputTokens: rapid.Int().Draw(t, "in"),
			Pattern: Pattern(anyText.Draw(t, "pattern"))},
		SLO:          SLO{TTFTP99: rapid.Ptr(anyDur, true).Draw(t, "ttft"), E2EP99: rapid.Ptr(anyDur, true).Draw(t, "e2e")},
		Reservation:  rapid.Int().Draw(t, "reservation"),
		Cap:          rapid.Ptr(rapid.Int(), true).Draw(t, "cap"),
		Replicas:     rapid.Ptr(rapid.Int(), true).Draw(t, "replicas"),
		Redundancy:   rapid.Bool().Draw(t, "redundancy"),
		LowFrequency: rapid.Bool().Draw(t, "lowFrequency"),
	}
}

func genPlan(t *rapid.T) *Plan {
	replica := rapid.Custom(func(t *rapid.T) PlanReplica {
		return PlanReplica{Tenant: anyText.Draw(t, "tenant"), Index: rapid.Int().Draw(t, "index"),
			Limits:   Limits{SMPercent: rapid.Int().Draw(t, "sm"), Memory: anySize.Draw(t, "mem")},
			VLLMArgs: rapid.SliceOfN(anyText, 0, 3).Draw(t, "args")}
	})
	reason := rapid.Custom(func(t *rapid.T) Reason {
		return Reason{Code: rapid.SampledFrom(ReasonCodes()).Draw(t, "code"), Message: anyText.Draw(t, "msg"),
			Retryable: rapid.Bool().Draw(t, "retry")}
	})
	instance := rapid.Custom(func(t *rapid.T) PlanInstance {
		return PlanInstance{Profile: anyText.Draw(t, "profile"), Start: rapid.Int().Draw(t, "start"),
			Sharing:  Sharing{Mode: SharingMode(anyText.Draw(t, "sharing"))},
			Replicas: rapid.SliceOfN(replica, 0, 2).Draw(t, "replicas")}
	})
	gpuGen := rapid.Custom(func(t *rapid.T) PlanGPU {
		return PlanGPU{Node: anyText.Draw(t, "node"), Index: rapid.Int().Draw(t, "index"),
			Board: anyText.Draw(t, "board"), Role: Role(anyText.Draw(t, "role")), Mode: Mode(anyText.Draw(t, "mode")),
			Instances: rapid.SliceOfN(instance, 0, 2).Draw(t, "instances"),
			Replicas:  rapid.SliceOfN(replica, 0, 2).Draw(t, "replicas"),
			Reasons:   rapid.SliceOfN(reason, 0, 2).Draw(t, "reasons")}
	})
	tenant := rapid.Custom(func(t *rapid.T) PlanTenant {
		return PlanTenant{Name: anyText.Draw(t, "name"),
			Replicas: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) ReplicaRef {
				r := ReplicaRef{Index: rapid.Int().Draw(t, "index"), GPU: genGPURef(t), Slice: SliceKind(anyText.Draw(t, "slice"))}
				if rapid.Bool().Draw(t, "mig") {
					r.Instance = InstanceRef{Profile: rapid.StringMatching(`[0-9a-z.+]{1,10}`).Draw(t, "profile"),
						Start: rapid.IntRange(0, 7).Draw(t, "start")}
				}
				return r
			}), 0, 2).Draw(t, "replicas"),
			Predicted: Prediction{TTFTP99: anyDur.Draw(t, "ttft"), TokensPerSecond: anyNum.Draw(t, "tps")},
			Reasons:   rapid.SliceOfN(reason, 0, 2).Draw(t, "reasons"), Infeasible: rapid.Bool().Draw(t, "infeasible")}
	})
	return &Plan{APIVersion: APIVersion, Kind: KindPlan, Metadata: Metadata{Name: anyText.Draw(t, "name")},
		Pool: anyText.Draw(t, "pool"), GPUs: rapid.SliceOfN(gpuGen, 0, 3).Draw(t, "gpus"),
		Tenants: rapid.SliceOfN(tenant, 0, 3).Draw(t, "tenants"),
		Summary: Summary{GPUsUsed: rapid.Int().Draw(t, "used"), Objective: anyNum.Draw(t, "objective"),
			Baselines: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Baseline {
				return Baseline{Name: anyText.Draw(t, "name"), GPUs: rapid.Int().Draw(t, "gpus"), Confirmed: rapid.Bool().Draw(t, "confirmed")}
			}), 0, 2).Draw(t, "baselines")}}
}

// TestPropertyEncodeDecodeRoundTrip: any Pool or Plan value whose strings are text, however
// invalid otherwise, encodes to YAML and JSON that decode back to an equal value.
func TestPropertyEncodeDecodeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var d Document = genPool(t)
		if rapid.Bool().Draw(t, "plan") {
			d = genPlan(t)
		}
		for _, enc := range []func(Document) ([]byte, error){EncodeYAML, EncodeJSON} {
			b, err := enc(d)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			back, err := Decode(b)
			if err != nil {
				t.Fatalf("decode: %v\n%s", err, b)
			}
			if !reflect.DeepEqual(back, d) {
				t.Fatalf("round trip changed the value:\n%s", b)
			}
		}
	})
}

// TestPropertyValidationIsStable: validation never panics, its errors are sorted by path and
// free of duplicates, and a second Default changes neither the pool nor the errors.
func TestPropertyValidationIsStable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPool(t)
		Default(p)
		err1 := testValidator.Pool(p)
		Default(p)
		err2 := testValidator.Pool(p)
		if !reflect.DeepEqual(err1, err2) {
			t.Fatalf("errors changed after a second Default:\n%v\n---\n%v", err1, err2)
		}
		if err1 == nil {
			return
		}
		l := err1.(FieldErrors)
		for i := 1; i < len(l); i++ {
			c := comparePaths(l[i-1].Path, l[i].Path)
			if c > 0 || (c == 0 && l[i-1].Msg >= l[i].Msg) {
				t.Fatalf("errors out of order or repeated at %d:\n%v", i, err1)
			}
		}
		_ = testValidator.Plan(genPlan(t), p)
	})
}

// TestPropertyNonTextIsRefused: a string with any non-text character is refused by both encoders
// (a decoder would refuse it too), never silently changed.
func TestPropertyNonTextIsRefused(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bad := rapid.Rune().Filter(func(r rune) bool { return !textRune(r) }).Draw(t, "bad")
		p := genPool(t)
		p.Metadata.Name = anyText.Draw(t, "before") + string(bad) + anyText.Draw(t, "after")
		for _, enc := range []func(Document) ([]byte, error){EncodeYAML, EncodeJSON} {
			if b, err := enc(p); err == nil {
				t.Fatalf("encoded %U without error:\n%s", bad, b)
			}
		}
	})
}
