package fair

import (
	"testing"
	"time"
)

// Split gives every claimant what it wants when they want no more than the capacity; when they
// want more, the weights split it, reservations first; without claimants it fails.
func TestSplit(t *testing.T) {
	now := time.Unix(0, 0)
	w := map[string]float64{"a": 1, "b": 1, "c": 2}
	got, err := Split("e", w, 100, map[string]int{"a": 10, "b": 20, "c": 30}, nil, now)
	if err != nil || got["a"] != 10 || got["b"] != 20 || got["c"] != 30 {
		t.Fatalf("under capacity: %v %v", got, err)
	}
	got, _ = Split("e", w, 100, map[string]int{"a": 100, "b": 100, "c": 100}, nil, now)
	if got["a"]+got["b"]+got["c"] != 100 || got["c"] < 2*got["a"]-1 || got["a"] != got["b"] {
		t.Fatalf("over capacity, by weight 1:1:2: %v", got)
	}
	got, _ = Split("e", w, 100, map[string]int{"a": 100, "b": 100, "c": 100}, map[string]int{"a": 60}, now)
	if got["a"] < 60 || got["a"]+got["b"]+got["c"] != 100 {
		t.Fatalf("a reserves 60: %v", got)
	}
	if _, err := Split("e", nil, 100, nil, nil, now); err == nil {
		t.Fatal("no claimants: no error")
	}
}
