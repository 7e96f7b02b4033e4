package perf

import (
	"testing"
	"time"
)

var sinkDuration time.Duration

func BenchmarkStepTimeDecode(b *testing.B) {
	e := mustEngine(b, mustModel(b, llama7B), Slice{Board: a100Literal()})
	batch := Batch{DecodeSeqs: 64, KVTokens: 64 * 1024}
	b.ReportAllocs()
	for b.Loop() {
		sinkDuration = e.StepTime(batch, Load{})
	}
}

func BenchmarkStepTimeMixedMPS(b *testing.B) {
	e := mustEngine(b, mustModel(b, llama7B), Slice{Board: h100Literal(), Mode: MPS, SMPercent: 50})
	batch := Batch{PrefillTokens: 1024, PrefillSeqs: 2, DecodeSeqs: 64, KVTokens: 64 * 1024}
	l := Load{Active: 2}
	b.ReportAllocs()
	for b.Loop() {
		sinkDuration = e.StepTime(batch, l)
	}
}

func BenchmarkStepTimeTimeSliceMIG(b *testing.B) {
	h := h100Literal()
	e := mustEngine(b, mustModel(b, llama7B), Slice{Board: h, Profile: &h.Profiles[3], Mode: TimeSlice})
	batch := Batch{DecodeSeqs: 16, KVTokens: 16 * 700}
	l := Load{Active: 3}
	b.ReportAllocs()
	for b.Loop() {
		sinkDuration = e.StepTime(batch, l)
	}
}

func BenchmarkEstimate(b *testing.B) {
	e := mustEngine(b, mustModel(b, llama7B), Slice{Board: h100Literal()})
	w := Workload{InputTokens: 512, OutputTokens: 256, Concurrency: 32}
	b.ReportAllocs()
	for b.Loop() {
		r, _ := e.Estimate(w, Load{})
		sinkDuration = r.TPOT
	}
}

func BenchmarkMaxRate(b *testing.B) {
	e := mustEngine(b, mustModel(b, llama7B), Slice{Board: h100Literal()})
	w := Workload{InputTokens: 512, OutputTokens: 256}
	slo := SLO{TTFT: 500 * time.Millisecond, TPOT: 50 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		r, _ := e.MaxRate(w, slo, Load{})
		sinkDuration = r.TPOT
	}
}

func BenchmarkMeasuredStep(b *testing.B) {
	m := readParva(b, "bert")
	a := a100Literal()
	e := mustEngine(b, mustModel(b, llama7B), Slice{Board: a, Profile: &a.Profiles[3]})
	me, err := e.WithMeasured(m)
	if err != nil {
		b.Fatal(err)
	}
	batch := Batch{DecodeSeqs: 12}
	b.ReportAllocs()
	for b.Loop() {
		sinkDuration = me.StepTime(batch, Load{})
	}
}
