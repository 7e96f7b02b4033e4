package perf

import (
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
)

// Board facts from NVIDIA's data sheets and the MIG user guide's profile tables (SMs per
// profile as `nvidia-smi mig -lgip` prints them). The tests use the catalog's boards when it has
// them and these literals otherwise; TestFixturesMatchCatalog checks that the two agree.
func a100Literal() *gpu.Board {
	return &gpu.Board{
		Name: "A100-SXM4-80GB", Arch: "ampere", MemoryMiB: 81920, SMs: 108, SMsInMIG: 98,
		BandwidthGBs: 2039, TDPWatts: 400, BF16TFLOPS: 312, MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Profiles: []gpu.Profile{
			{Name: "1g.10gb", ComputeSlices: 1, MemorySlices: 1, MemoryMiB: 9984, SMs: 14, MaxCount: 7},
			{Name: "1g.20gb", ComputeSlices: 1, MemorySlices: 2, MemoryMiB: 19968, SMs: 14, MaxCount: 4},
			{Name: "2g.20gb", ComputeSlices: 2, MemorySlices: 2, MemoryMiB: 19968, SMs: 28, MaxCount: 3},
			{Name: "3g.40gb", ComputeSlices: 3, MemorySlices: 4, MemoryMiB: 40192, SMs: 42, MaxCount: 2},
			{Name: "4g.40gb", ComputeSlices: 4, MemorySlices: 4, MemoryMiB: 40192, SMs: 56, MaxCount: 1},
			{Name: "7g.80gb", ComputeSlices: 7, MemorySlices: 8, MemoryMiB: 80384, SMs: 98, MaxCount: 1},
		},
	}
}

func h100Literal() *gpu.Board {
	return &gpu.Board{
		Name: "H100-SXM5-80GB", Arch: "hopper", MemoryMiB: 81559, SMs: 132, SMsInMIG: 132,
		BandwidthGBs: 3350, TDPWatts: 700, BF16TFLOPS: 989.5, FP8TFLOPS: 1979, MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Profiles: []gpu.Profile{
			{Name: "1g.10gb", ComputeSlices: 1, MemorySlices: 1, MemoryMiB: 9984, SMs: 16, MaxCount: 7},
			{Name: "1g.20gb", ComputeSlices: 1, MemorySlices: 2, MemoryMiB: 20096, SMs: 26, MaxCount: 4},
			{Name: "2g.20gb", ComputeSlices: 2, MemorySlices: 2, MemoryMiB: 20096, SMs: 32, MaxCount: 3},
			{Name: "3g.40gb", ComputeSlices: 3, MemorySlices: 4, MemoryMiB: 40448, SMs: 60, MaxCount: 2},
			{Name: "4g.40gb", ComputeSlices: 4, MemorySlices: 4, MemoryMiB: 40448, SMs: 64, MaxCount: 1},
			{Name: "7g.80gb", ComputeSlices: 7, MemorySlices: 8, MemoryMiB: 81152, SMs: 132, MaxCount: 1},
		},
	}
}

// testBoard prefers the catalog's board and falls back to the literal.
func testBoard(t testing.TB, catalogName string, literal func() *gpu.Board) *gpu.Board {
	t.Helper()
	if b, err := gpu.Lookup(catalogName); err == nil && b != nil && b.SMs > 0 {
		return b
	}
	return literal()
}

func a100(t testing.TB) *gpu.Board { return testBoard(t, "A100-SXM4-80GB", a100Literal) }
func h100(t testing.TB) *gpu.Board { return testBoard(t, "H100-SXM5-80GB", h100Literal) }

func profile(t testing.TB, b *gpu.Board, name string) *gpu.Profile {
	t.Helper()
	for i := range b.Profiles {
		if b.Profiles[i].Name == name {
			return &b.Profiles[i]
		}
	}
	t.Fatalf("board %s has no profile %s", b.Name, name)
	return nil
}

// LLaMA (v1) shapes from the paper's Table 2 and the Hugging Face conversions' config.json.
func llamaArch(name string, layers, hidden, heads, inter int) llm.Arch {
	return llm.Arch{Name: name, Family: "llama", Layers: layers, Hidden: hidden, Heads: heads, KVHeads: heads,
		Intermediate: inter, Vocab: 32000, MaxPositions: 2048, TorchDtype: "float16"}
}

var (
	llama7B  = llamaArch("llama-7b", 32, 4096, 32, 11008)
	llama13B = llamaArch("llama-13b", 40, 5120, 40, 13824)
	llama30B = llamaArch("llama-30b", 60, 6656, 52, 17920)
	llama65B = llamaArch("llama-65b", 80, 8192, 64, 22016)
	// Qwen2.5-7B from its config.json (28 layers, hidden 3584, 28 heads, 4 KV heads, 18944, 152064).
	qwen7B = llm.Arch{Name: "qwen2.5-7b", Family: "qwen2", Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4,
		Intermediate: 18944, Vocab: 152064, MaxPositions: 131072, QKVBias: true, TorchDtype: "bfloat16"}
)

func mustModel(t testing.TB, a llm.Arch) *Model {
	t.Helper()
	m, err := New(a, llm.QuantBF16, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustEngine(t testing.TB, m *Model, s Slice) *Engine {
	t.Helper()
	e, err := m.Place(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestFixturesMatchCatalog keeps the literals honest against the board and model catalogs.
func TestFixturesMatchCatalog(t *testing.T) {
	for _, lit := range []*gpu.Board{a100Literal(), h100Literal()} {
		b, err := gpu.Lookup(lit.Name)
		if err != nil {
			t.Fatalf("catalog: %v", err)
		}
		if b.SMs != lit.SMs || b.SMsInMIG != lit.SMsInMIG || b.BandwidthGBs != lit.BandwidthGBs || b.TDPWatts != lit.TDPWatts ||
			b.BF16TFLOPS != lit.BF16TFLOPS || b.MemoryMiB != lit.MemoryMiB || b.MemorySlices != lit.MemorySlices {
			t.Errorf("%s: catalog facts differ from the literal", lit.Name)
		}
		for _, p := range lit.Profiles {
			q, err := b.Profile(p.Name)
			if err != nil {
				t.Fatal(err)
			}
			if q.SMs != p.SMs || q.MemorySlices != p.MemorySlices || q.ComputeSlices != p.ComputeSlices || q.MemoryMiB != p.MemoryMiB {
				t.Errorf("%s %s: catalog %+v differs from literal %+v", lit.Name, p.Name, *q, p)
			}
		}
	}
	for _, c := range []struct {
		lit  llm.Arch
		slug string
	}{{llama7B, "llama-2-7b"}, {llama13B, "llama-2-13b"}, {qwen7B, "qwen2.5-7b"}} {
		a, err := llm.Lookup(c.slug)
		if err != nil {
			t.Fatal(err)
		}
		lt, la := c.lit.Params()
		ct, ca := a.Params()
		if lt != ct || la != ca || c.lit.KVBytesPerToken(2) != a.KVBytesPerToken(2) {
			t.Errorf("%s: literal params %d/%d, catalog %s %d/%d", c.lit.Name, lt, la, c.slug, ct, ca)
		}
	}
}
