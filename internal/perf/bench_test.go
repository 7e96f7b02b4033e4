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

var sinkJoules float64

// BenchmarkStepTimeEnergy is the simulator's per-step call: time and energy from one evaluation.
func BenchmarkStepTimeEnergy(b *testing.B) {
	e := mustEngine(b, mustModel(b, llama7B), Slice{Board: h100Literal(), Mode: MPS, SMPercent: 50})
	batch := Batch{PrefillTokens: 1024, PrefillSeqs: 2, DecodeSeqs: 64, KVTokens: 64 * 1024}
	l := Load{Active: 2}
	b.ReportAllocs()
	for b.Loop() {
		sinkDuration, sinkJoules = e.StepTimeEnergy(batch, l)
	}
}

// BenchmarkMeasuredEngineStep is a measured-only engine's step (ParvaGPU's tables in simulate).
func BenchmarkMeasuredEngineStep(b *testing.B) {
	a := a100Literal()
	e, err := NewMeasuredEngine(readParva(b, "resnet50"), Slice{Board: a, Profile: &a.Profiles[3], Mode: MPS, Replicas: 2}, DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	batch := Batch{PrefillTokens: 12, PrefillSeqs: 12}
	b.ReportAllocs()
	for b.Loop() {
		sinkDuration, sinkJoules = e.StepTimeEnergy(batch, Load{Active: 1})
	}
}

// BenchmarkEstimateTP is the closed loop of a tensor-parallel replica (the planner's TP rows).
func BenchmarkEstimateTP(b *testing.B) {
	e := mustEngine(b, mustModel(b, llama7B), Slice{Board: h100Literal(), TensorParallel: 4})
	w := Workload{InputTokens: 2048, OutputTokens: 256, Concurrency: 128}
	b.ReportAllocs()
	for b.Loop() {
		r, _ := e.Estimate(w, Load{})
		sinkDuration = r.TPOT
	}
}
