package v1

import (
	"math"
	"testing"
)

func TestValidPoolIsValid(t *testing.T) {
	if err := testValidator.Pool(loadValidPool(t)); err != nil {
		t.Fatalf("pool-valid.yaml:\n%v", err)
	}
}

// TestValidPoolIsValidWithBuiltinCatalog checks the example against the real gpu and llm catalogs.
func TestValidPoolIsValidWithBuiltinCatalog(t *testing.T) {
	if err := Validate(loadValidPool(t)); err != nil {
		t.Fatalf("pool-valid.yaml:\n%v", err)
	}
}

// TestValidatePoolRules changes one thing in pool-valid.yaml per case and expects exactly the
// listed errors. Tenants there: [0] chat (acme/assistant, hard), [1] code-complete
// (acme/devtools), [2] summarizer (acme/devtools), [3] docs-qa (research/nlp), [4] eval-batch.
func TestValidatePoolRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *Pool)
		want   string
	}{
		// Header and metadata.
		{"apiVersion", func(p *Pool) { p.APIVersion = "v1" }, `apiVersion: must be "gpupool.dev/v1" (got "v1")`},
		{"kind", func(p *Pool) { p.Kind = "Plan" }, `kind: must be "Pool" (got "Plan")`},
		{"metadata.name required", func(p *Pool) { p.Metadata.Name = "" }, `metadata.name: required`},
		{"metadata.name syntax", func(p *Pool) { p.Metadata.Name = "Prod_Pool" },
			`metadata.name: ` + subdomainRule + ` (got "Prod_Pool")`},

		// Fleet.
		{"no nodes", func(p *Pool) { p.Fleet.Nodes = nil; p.Policy.CanaryGPUs = nil },
			`fleet.nodes: must list at least one node`},
		{"node name", func(p *Pool) { p.Fleet.Nodes[1].Name = "-b"; p.Policy.CanaryGPUs = nil },
			`fleet.nodes[1].name: ` + subdomainRule + ` (got "-b")`},
		{"duplicate node", func(p *Pool) { p.Fleet.Nodes[1].Name = "gpu-node-a"; p.Policy.CanaryGPUs = nil },
			`fleet.nodes[1].name: duplicate name "gpu-node-a" (first at fleet.nodes[0].name)`},
		{"label key", func(p *Pool) { p.Fleet.Nodes[0].Labels = map[string]string{"Bad Key": "x"} },
			`fleet.nodes[0].labels["Bad Key"]: invalid label key "Bad Key": want [prefix/]name, the name at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`},
		{"label value", func(p *Pool) { p.Fleet.Nodes[0].Labels = map[string]string{"zone": "a b"} },
			`fleet.nodes[0].labels.zone: invalid label value "a b": at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`},
		{"no GPU groups", func(p *Pool) { p.Fleet.Nodes[0].GPUs = nil },
			`fleet.nodes[0].gpus: must list at least one GPU group`},
		{"unknown board", func(p *Pool) { p.Fleet.Nodes[0].GPUs[0].Board = "H100X" },
			`fleet.nodes[0].gpus[0].board: unknown board "H100X" (valid: A100-SXM4-80GB, H100-SXM5-80GB, L40S-48GB)`},
		{"board alias is fine", func(p *Pool) { p.Fleet.Nodes[0].GPUs[0].Board = "H100" }, ``},
		{"board required", func(p *Pool) { p.Fleet.Nodes[0].GPUs[0].Board = "" }, `fleet.nodes[0].gpus[0].board: required`},
		{"count 0", func(p *Pool) { p.Fleet.Nodes[1].GPUs[0].Count = 0; p.Policy.CanaryGPUs = nil },
			`fleet.nodes[1].gpus[0].count: must be between 1 and 64 (got 0)`},
		{"too many GPUs on a node", func(p *Pool) {
			p.Fleet.Nodes[0].GPUs = append(p.Fleet.Nodes[0].GPUs, GPUGroup{Board: "A100", Count: 60})
		}, `fleet.nodes[0].gpus: node has 68 GPUs or more, more than the 64 a node may have`}, // 8 + 60

		// Policy.
		{"canary unknown node", func(p *Pool) { p.Policy.CanaryGPUs = []GPURef{{"gpu-node-z", 0}} },
			`policy.canaryGPUs[0]: unknown node "gpu-node-z"`},
		{"canary index out of range", func(p *Pool) { p.Policy.CanaryGPUs = []GPURef{{"gpu-node-b", 4}} },
			`policy.canaryGPUs[0]: node "gpu-node-b" has 4 GPUs (indices 0–3), got index 4`},
		{"canary duplicate", func(p *Pool) { p.Policy.CanaryGPUs = []GPURef{{"gpu-node-b", 3}, {"gpu-node-b", 3}} },
			`policy.canaryGPUs[1]: duplicate GPU "gpu-node-b/3" (first at policy.canaryGPUs[0])`},
		{"all canaries", func(p *Pool) {
			p.Fleet.Nodes = p.Fleet.Nodes[1:]
			p.Policy.CanaryGPUs = []GPURef{{"gpu-node-b", 0}, {"gpu-node-b", 1}, {"gpu-node-b", 2}, {"gpu-node-b", 3}}
		}, `policy.canaryGPUs: all 4 GPUs of the fleet are canaries, which leaves none for the pool`},
		{"burst 51", func(p *Pool) { p.Policy.BurstPoolPercent = ptr(51) }, `policy.burstPoolPercent: must be between 0 and 50 (got 51)`},
		{"burst -1", func(p *Pool) { p.Policy.BurstPoolPercent = ptr(-1) }, `policy.burstPoolPercent: must be between 0 and 50 (got -1)`},
		{"burst 0 is fine", func(p *Pool) { p.Policy.BurstPoolPercent = ptr(0) }, ``},
		{"modes empty", func(p *Pool) { p.Policy.AllowedModes = []Mode{} },
			`policy.allowedModes: must list at least one mode (leave it out to allow all)`},
		{"mode unknown", func(p *Pool) { p.Policy.AllowedModes = []Mode{"mig", "vgpu"} },
			`policy.allowedModes[1]: unknown value "vgpu" (valid: exclusive, mig, mps, timeslice)`},
		{"mode duplicate", func(p *Pool) { p.Policy.AllowedModes = []Mode{"mig", "mig"} },
			`policy.allowedModes[1]: duplicate mode "mig" (first at policy.allowedModes[0])`},
		{"maxUnavailable 0", func(p *Pool) { p.Policy.MaxUnavailable = &IntOrPercent{Value: 0} },
			`policy.maxUnavailable: must be between 1 and 1000000 or a percentage (got 0)`},
		{"maxUnavailable 0%", func(p *Pool) { p.Policy.MaxUnavailable = &IntOrPercent{Value: 0, Percent: true} },
			`policy.maxUnavailable: must be between 1% and 100% (got "0%")`},
		{"maxUnavailable 101%", func(p *Pool) { p.Policy.MaxUnavailable = &IntOrPercent{Value: 101, Percent: true} },
			`policy.maxUnavailable: must be between 1% and 100% (got "101%")`},
		{"cooldown negative", func(p *Pool) { p.Policy.ReconfigCooldown = ptr(Duration(-3600e9)) },
			`policy.reconfigCooldown: must be between 0s and 8760h (got "-1h")`},
		{"cooldown 0 is fine", func(p *Pool) { p.Policy.ReconfigCooldown = ptr(Duration(0)) }, ``},
		{"hard tenant without exclusive or mig", func(p *Pool) { p.Policy.AllowedModes = []Mode{"mps", "timeslice"} },
			`tenants[0].isolation: "hard" needs one of the modes exclusive, mig, but policy.allowedModes allows only mps, timeslice`},
		{"soft tenants with timeslice only", func(p *Pool) {
			p.Policy.AllowedModes = []Mode{"timeslice"}
			p.Tenants = p.Tenants[1:3]
		}, `tenants[0].isolation: "soft" needs one of the modes exclusive, mig, mps, but policy.allowedModes allows only timeslice` + "\n" +
			`tenants[1].isolation: "soft" needs one of the modes exclusive, mig, mps, but policy.allowedModes allows only timeslice`},

		// Tenant identity and hierarchy.
		{"tenant name required", func(p *Pool) { p.Tenants[2].Name = "" }, `tenants[2].name: required`},
		{"tenant name is a label", func(p *Pool) { p.Tenants[2].Name = "sum.marizer" },
			`tenants[2].name: ` + labelRule + ` (got "sum.marizer")`},
		{"duplicate tenant", func(p *Pool) { p.Tenants[3].Name = "chat" },
			`tenants[3].name: duplicate name "chat" (first at tenants[0].name)`},
		{"path syntax", func(p *Pool) { p.Tenants[1].Path = "acme//devtools" },
			`tenants[1].path: must be slash-separated DNS-1123 labels, like "org/team" (got "acme//devtools")`},
		{"path through a tenant", func(p *Pool) { p.Tenants[1].Path = "acme/assistant/chat" },
			`tenants[1].path: "acme/assistant/chat" is the tenant at tenants[0], so it cannot also be a group`},
		{"weight 0", func(p *Pool) { p.Tenants[0].Weight = ptr(0.0) }, `tenants[0].weight: must be between 1e-06 and 1e+06 (got 0)`},
		{"weight -1", func(p *Pool) { p.Tenants[0].Weight = ptr(-1.0) }, `tenants[0].weight: must be between 1e-06 and 1e+06 (got -1)`},
		{"weight NaN", func(p *Pool) { p.Tenants[0].Weight = ptr(math.NaN()) }, `tenants[0].weight: must be between 1e-06 and 1e+06 (got NaN)`},
		{"weight Inf", func(p *Pool) { p.Tenants[0].Weight = ptr(math.Inf(1)) }, `tenants[0].weight: must be between 1e-06 and 1e+06 (got +Inf)`},
		{"isolation", func(p *Pool) { p.Tenants[0].Isolation = "strict" },
			`tenants[0].isolation: unknown value "strict" (valid: hard, soft, shared)`},

		// Model.
		{"model neither", func(p *Pool) { p.Tenants[4].Model = Model{} }, `tenants[4].model: set exactly one of name or dir (got neither)`},
		{"model both", func(p *Pool) { p.Tenants[4].Model.Dir = "/models/m" }, `tenants[4].model: set exactly one of name or dir (got both)`},
		{"model unknown", func(p *Pool) { p.Tenants[4].Model.Name = "gpt-5" },
			`tenants[4].model.name: unknown model "gpt-5" (valid: llama-3.1-70b, llama-3.1-8b, mistral-7b-v0.3, qwen2.5-14b)`},
		// A tenant sized from a measured profile may name a model the catalog does not know.
		{"model unknown with a measured profile", func(p *Pool) {
			p.Tenants[4].Model.Name = "resnet50"
			p.Tenants[4].Profile = "profiles/resnet50.csv"
		}, ``},
		{"quantization alias not normalised", func(p *Pool) { p.Tenants[4].Model.Quantization = "awq" },
			`tenants[4].model.quantization: "awq" is an alias of "int4-awq": Default or Decode stores the canonical name`},
		{"quantization", func(p *Pool) { p.Tenants[4].Model.Quantization = "nf4" },
			`tenants[4].model.quantization: unknown value "nf4" (valid: bf16, fp16, fp8, int8, int4-awq, int4-gptq)`},
		{"adapter from a repo", func(p *Pool) {
			p.Tenants[4].Model.Adapter = &Adapter{Name: "acme-sql.v2", Repo: "acme/llama-sql-lora", Rank: 16}
		}, ``},
		{"adapter from a folder without rank", func(p *Pool) { p.Tenants[4].Model.Adapter = &Adapter{Name: "a", Dir: "adapters/a"} }, ``},
		{"adapter everything wrong", func(p *Pool) {
			p.Tenants[4].Model.Adapter = &Adapter{Name: "-x y", Dir: "d", Repo: "no slash", Rank: 1024}
		}, `tenants[4].model.adapter: set at most one of dir or repo (got both)
tenants[4].model.adapter.name: must be 1-128 letters, digits, '-', '_' or '.', starting with a letter or digit (got "-x y")
tenants[4].model.adapter.rank: must be between 1 and 512 (got 1024)
tenants[4].model.adapter.repo: must be a Hugging Face repository id, "owner/name" (got "no slash")`},
		{"adapter without source or name", func(p *Pool) { p.Tenants[4].Model.Adapter = &Adapter{} },
			`tenants[4].model.adapter: set one of dir, repo or volume (got none)
tenants[4].model.adapter.name: required`},
		{"adapter repo needs rank", func(p *Pool) { p.Tenants[4].Model.Adapter = &Adapter{Name: "a", Repo: "o/a"} },
			`tenants[4].model.adapter.rank: required with repo or a volume without dir (the rank sizes the engine's adapter slots)`},
		{"adapter on a volume", func(p *Pool) {
			p.Tenants[4].Model.Adapter = &Adapter{Name: "a", Volume: &AdapterVolume{ClaimName: "lora-adapters", SubPath: "acme/a"}, Rank: 16}
		}, ``},
		{"adapter folder mounted from a volume", func(p *Pool) {
			p.Tenants[4].Model.Adapter = &Adapter{Name: "a", Dir: "/srv/peft/a", Volume: &AdapterVolume{ClaimName: "lora-adapters"}}
		}, ``},
		{"adapter volume wrong", func(p *Pool) {
			p.Tenants[4].Model.Adapter = &Adapter{Name: "a", Repo: "o/a", Rank: 8, Volume: &AdapterVolume{ClaimName: "Adapters", SubPath: "x/../../etc"}}
		}, `tenants[4].model.adapter.volume: not with repo: vLLM downloads a repo itself (give the volume with dir, or alone with rank)
tenants[4].model.adapter.volume.claimName: must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit, at most 253 characters (got "Adapters")
tenants[4].model.adapter.volume.subPath: must not contain a ".." element (got "x/../../etc")`},
		{"adapter volume needs a claim, a relative subPath and a rank", func(p *Pool) {
			p.Tenants[4].Model.Adapter = &Adapter{Name: "a", Volume: &AdapterVolume{SubPath: "/abs"}}
		}, `tenants[4].model.adapter.rank: required with repo or a volume without dir (the rank sizes the engine's adapter slots)
tenants[4].model.adapter.volume.claimName: required
tenants[4].model.adapter.volume.subPath: must be relative to the claim's root (got "/abs")`},
		{"adapter names unique", func(p *Pool) {
			p.Tenants[3].Model.Adapter = &Adapter{Name: "a", Repo: "o/a", Rank: 8}
			p.Tenants[4].Model.Adapter = &Adapter{Name: "a", Repo: "o/b", Rank: 8}
		}, `tenants[4].model.adapter.name: duplicate adapter name "a" (first at tenants[3].model.adapter.name)`},
		{"kvCacheDtype", func(p *Pool) { p.Tenants[4].Model.KVCacheDtype = "int8" },
			`tenants[4].model.kvCacheDtype: unknown value "int8" (valid: auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2)`},

		// Load.
		{"maxContext negative", func(p *Pool) { p.Tenants[1].MaxContext = -1 }, `tenants[1].maxContext: must be between 0 and 10000000 (got -1)`},
		{"maxContext above the model", func(p *Pool) { p.Tenants[4].MaxContext = 65536 }, // mistral-7b-v0.3: 32768
			`tenants[4].maxContext: 65536 tokens is more than the model's maximum of 32768`},
		{"concurrency", func(p *Pool) { p.Tenants[1].Concurrency = -2 }, `tenants[1].concurrency: must be between 0 and 100000 (got -2)`},
		{"rps", func(p *Pool) { p.Tenants[1].Traffic.RPS = -0.5 }, `tenants[1].traffic.rps: must be between 0 and 1000000 (got -0.5)`},
		{"tokens", func(p *Pool) { p.Tenants[1].Traffic.InputTokens = -1; p.Tenants[1].Traffic.OutputTokens = -1 },
			`tenants[1].traffic.inputTokens: must be between 0 and 10000000 (got -1)` + "\n" + `tenants[1].traffic.outputTokens: must be between 0 and 10000000 (got -1)`},
		{"pattern", func(p *Pool) { p.Tenants[1].Traffic.Pattern = "spiky" },
			`tenants[1].traffic.pattern: unknown value "spiky" (valid: poisson, constant, bursty, diurnal)`},
		{"lengths", func(p *Pool) { p.Tenants[1].Traffic.Lengths = "normal" },
			`tenants[1].traffic.lengths: unknown value "normal" (valid: fixed, uniform, exponential)`},
		{"tokens above maxContext", func(p *Pool) { p.Tenants[2].Traffic.InputTokens = 8000 }, // 8000 + 400 > 8192
			`tenants[2].traffic: inputTokens + outputTokens = 8400 is more than maxContext 8192`},
		{"tokens above the model", func(p *Pool) { p.Tenants[4].Traffic.InputTokens = 32000 }, // 32000 + 800 > 32768
			`tenants[4].traffic: inputTokens + outputTokens = 32800 is more than the model's maximum context 32768`},

		// SLO.
		{"ttft zero", func(p *Pool) { p.Tenants[2].SLO.TTFTP99 = ptr(Duration(0)) }, `tenants[2].slo.ttftP99: must be > 0 (got "0s")`},
		{"tpot negative", func(p *Pool) { p.Tenants[1].SLO.TPOTP99 = ptr(Duration(-1e6)) }, `tenants[1].slo.tpotP99: must be > 0 (got "-1ms")`},
		{"e2e below ttft", func(p *Pool) { p.Tenants[0].SLO.E2EP99 = ptr(Duration(500e6)) }, // 500ms < 800ms
			`tenants[0].slo.e2eP99: must be ≥ ttftP99 "800ms" (got "500ms")`},

		// Counts.
		{"reservation negative", func(p *Pool) { p.Tenants[1].Reservation = -1 }, `tenants[1].reservation: must be between 0 and 100000 (got -1)`},
		{"cap zero", func(p *Pool) { p.Tenants[1].Cap = ptr(0); p.Tenants[1].Reservation = 0 }, `tenants[1].cap: must be between 1 and 100000 (got 0)`},
		{"cap below reservation", func(p *Pool) { p.Tenants[0].Cap = ptr(1) }, `tenants[0].cap: must be ≥ reservation 2 (got 1)`},
		{"replicas zero", func(p *Pool) { p.Tenants[3].Replicas = ptr(0) }, `tenants[3].replicas: must be between 1 and 100000 (got 0)`},
		{"replicas below reservation", func(p *Pool) { p.Tenants[0].Replicas = ptr(1) }, `tenants[0].replicas: must be ≥ reservation 2 (got 1)`},
		{"replicas above cap", func(p *Pool) { p.Tenants[0].Replicas = ptr(7) }, `tenants[0].replicas: must be ≤ cap 6 (got 7)`},
		{"minReplicas zero", func(p *Pool) { p.Tenants[1].MinReplicas = ptr(0) }, `tenants[1].minReplicas: must be ≥ 1 (got 0)`},
		{"maxReplicas below minReplicas", func(p *Pool) { p.Tenants[1].MinReplicas, p.Tenants[1].MaxReplicas = ptr(3), ptr(2) },
			`tenants[1].maxReplicas: must be ≥ minReplicas 3 (got 2)`},
		{"minReplicas with replicas", func(p *Pool) { p.Tenants[3].Replicas, p.Tenants[3].MinReplicas = ptr(2), ptr(1) },
			`tenants[3].minReplicas: must not be set with replicas (got 1)`},

		// Rest.
		{"energyClass", func(p *Pool) { p.Tenants[1].EnergyClass = "turbo" },
			`tenants[1].energyClass: unknown value "turbo" (valid: performance, balanced, efficiency)`},
		{"profile blank", func(p *Pool) { p.Tenants[3].Profile = "  " }, `tenants[3].profile: must be a path, not blank`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadValidPool(t)
			tt.mutate(p)
			got := ""
			if err := testValidator.Pool(p); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("errors =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestValidateNilPool(t *testing.T) {
	if err := Validate(nil); err == nil {
		t.Error("Validate(nil): no error")
	}
}
