package yamlkey

import (
	"math"
	"reflect"
	"testing"
)

func TestJSON(t *testing.T) {
	for _, tt := range []struct {
		k    any
		want string
		ok   bool
	}{
		{"a", "a", true}, {1, "1", true}, {int64(1 << 40), "1099511627776", true}, {1.0, "1", true},
		{1.5, "1.5", true}, {math.Inf(1), ".inf", true}, {math.Inf(-1), "-.inf", true}, {math.NaN(), ".nan", true},
		{true, "true", true}, {uint64(1), "", false}, {nil, "", false},
	} {
		if got, ok := JSON(tt.k); got != tt.want || ok != tt.ok {
			t.Errorf("JSON(%#v) = %q, %v; want %q, %v", tt.k, got, ok, tt.want, tt.ok)
		}
	}
}

// Groups come out in one order on every call, whatever the map's order.
func TestGroups(t *testing.T) {
	m := map[any]any{1: "x", "1": "y", 1.0: "z", "b": 0, true: 0, "true": 0, "a": 0, uint64(7): 0}
	want := []Group{{"1", []any{"1", 1.0, 1}}, {"a", []any{"a"}}, {"b", []any{"b"}}, {"true", []any{"true", true}}}
	for i := 0; i < 50; i++ {
		if got := Groups(m); !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: %#v, want %#v", i, got, want)
		}
	}
	if got, want := want[0].Message(), `duplicate key (the string "1" and the float 1 and the integer 1 are one key once read; quote keys as strings)`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}
