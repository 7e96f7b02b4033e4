package v1

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
)

// fakeCatalog is a small fixed catalog, so that tests and golden files do not change when the
// built-in catalogs grow. Board facts (usable MiB, starts, max counts) are the H100 SXM5 and
// A100 80GB values from NVIDIA's MIG User Guide and `nvidia-smi mig -lgip/-lgipp` output.
type fakeCatalog struct {
	boards []*gpu.Board
	models []llm.Arch
}

func (f fakeCatalog) Board(name string) (*gpu.Board, error) {
	for _, b := range f.boards {
		if b.Name == name || contains(b.Aliases, name) {
			return b, nil
		}
	}
	return nil, fmt.Errorf("unknown board %q", name)
}

func (f fakeCatalog) BoardNames() []string {
	var out []string
	for _, b := range f.boards {
		out = append(out, b.Name)
	}
	return out
}

func (f fakeCatalog) Model(name string) (llm.Arch, error) {
	for _, m := range f.models {
		if m.Name == name {
			return m, nil
		}
	}
	return llm.Arch{}, fmt.Errorf("unknown model %q", name)
}

func (f fakeCatalog) ModelNames() []string {
	var out []string
	for _, m := range f.models {
		out = append(out, m.Name)
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// prof builds an 8-memory-slice MIG profile.
func prof(name string, compute, mem int, mib int64, maxCount int, starts ...int) gpu.Profile {
	return gpu.Profile{Name: name, ComputeSlices: compute, MemorySlices: mem, MemoryMiB: mib,
		MaxCount: maxCount, Starts: starts}
}

func testCatalog() fakeCatalog {
	h100 := &gpu.Board{Name: "H100-SXM5-80GB", Aliases: []string{"H100"}, MemoryMiB: 81559, SMs: 132,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7, Profiles: []gpu.Profile{
			prof("1g.10gb", 1, 1, 9984, 7, 0, 1, 2, 3, 4, 5, 6),
			prof("1g.20gb", 1, 2, 20096, 4, 0, 2, 4, 6),
			prof("2g.20gb", 2, 2, 20096, 3, 0, 2, 4),
			prof("3g.40gb", 3, 4, 40448, 2, 0, 4),
			prof("4g.40gb", 4, 4, 40448, 1, 0),
			prof("7g.80gb", 7, 8, 81152, 1, 0),
		}}
	a100 := &gpu.Board{Name: "A100-SXM4-80GB", Aliases: []string{"A100"}, MemoryMiB: 81920, SMs: 108,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7, Profiles: []gpu.Profile{
			prof("1g.10gb", 1, 1, 9728, 7, 0, 1, 2, 3, 4, 5, 6),
			prof("2g.20gb", 2, 2, 19968, 3, 0, 2, 4),
			prof("3g.40gb", 3, 4, 40192, 2, 0, 4),
			prof("7g.80gb", 7, 8, 80384, 1, 0),
		}}
	l40s := &gpu.Board{Name: "L40S-48GB", MemoryMiB: 46068, SMs: 142}
	return fakeCatalog{
		boards: []*gpu.Board{a100, h100, l40s},
		models: []llm.Arch{
			{Name: "llama-3.1-70b", MaxPositions: 131072},
			{Name: "llama-3.1-8b", MaxPositions: 131072},
			{Name: "mistral-7b-v0.3", MaxPositions: 32768},
			{Name: "qwen2.5-14b", MaxPositions: 131072},
		},
	}
}

var testValidator = Validator{Catalog: testCatalog()}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadValidPool returns testdata/pool-valid.yaml decoded and defaulted.
func loadValidPool(t testing.TB) *Pool {
	t.Helper()
	p, err := DecodePool(readTestdata(t, "pool-valid.yaml"))
	if err != nil {
		t.Fatalf("decode pool-valid.yaml: %v", err)
	}
	Default(p)
	return p
}

// loadValidPlan returns testdata/plan-valid.yaml decoded.
func loadValidPlan(t testing.TB) *Plan {
	t.Helper()
	p, err := DecodePlan(readTestdata(t, "plan-valid.yaml"))
	if err != nil {
		t.Fatalf("decode plan-valid.yaml: %v", err)
	}
	return p
}
