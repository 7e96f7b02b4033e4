package llm

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func BenchmarkEstimate(b *testing.B) {
	m := FromArch(mustLookup(b, "deepseek-v3"))
	o := Options{Context: 32768, Concurrency: 16, KVCacheDType: "fp8"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Estimate(m, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWeightBytes is the weights' bytes the planner asks for on every slice it tries for
// every tenant: the groups are listed into a buffer on the stack, so no allocation.
func BenchmarkWeightBytes(b *testing.B) {
	for _, name := range []string{"llama-3.1-8b", "deepseek-v3"} {
		a := mustLookup(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var n int64
			for b.Loop() {
				n += a.WeightBytes(QuantFP8)
			}
			if n <= 0 {
				b.Fatal("no weight bytes")
			}
		})
	}
}

func BenchmarkFitBoard(b *testing.B) {
	m := FromArch(mustLookup(b, "llama-3.1-8b"))
	board := h100()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FitBoard(m, Options{Concurrency: 8}, board, 20*GiB, 40*GiB); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadHeader reads a header shaped like Llama-3.1-8B's (291 tensors); only the header
// bytes are held in memory, the data section is a size.
func BenchmarkReadHeader(b *testing.B) {
	file := mustEncode(b, llamaTensors(tinyArch(), "BF16"), nil)
	a := mustLookup(b, "llama-3.1-8b")
	big, err := EncodeHeader(llamaTensors(Arch{Layers: a.Layers, Hidden: 8, Heads: 1, KVHeads: 1, Intermediate: 8, Vocab: 8}, "BF16"), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"tiny", file}, {"llama-3.1-8b-tensors", big}} {
		b.Run(c.name, func(b *testing.B) {
			r := bytes.NewReader(c.data)
			b.SetBytes(8 + int64(binary.LittleEndian.Uint64(c.data))) // header bytes read
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ReadHeader(r, int64(len(c.data))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseConfig(b *testing.B) {
	data := readConfig(b, "deepseek-v3.json")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseConfig(data); err != nil {
			b.Fatal(err)
		}
	}
}
