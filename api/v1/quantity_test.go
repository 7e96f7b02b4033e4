package v1

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		canon   string
		wantErr string
	}{
		{in: "500ms", want: 500 * time.Millisecond, canon: "500ms"},
		{in: "1.5s", want: 1500 * time.Millisecond, canon: "1.5s"},
		{in: "2m", want: 2 * time.Minute, canon: "2m"},      // Go prints 2m0s; the trailing 0s is dropped
		{in: "90s", want: 90 * time.Second, canon: "1m30s"}, // 90 s = 1 m 30 s
		{in: "1h", want: time.Hour, canon: "1h"},            // 1h0m0s → 1h
		{in: "1h0m5s", want: time.Hour + 5*time.Second, canon: "1h0m5s"},
		{in: "1h30m", want: 90 * time.Minute, canon: "1h30m"}, // 1h30m0s → 1h30m
		{in: "250us", want: 250 * time.Microsecond, canon: "250µs"},
		{in: "0s", want: 0, canon: "0s"},
		{in: "0", want: 0, canon: "0s"}, // Go accepts a bare 0 in a string
		{in: "-1s", want: -time.Second, canon: "-1s"},
		{in: "", wantErr: `invalid duration ""`},
		{in: "5", wantErr: `invalid duration "5"`},
		{in: "1 h", wantErr: `invalid duration "1 h"`},
		{in: " 1s", wantErr: `invalid duration " 1s"`},
		{in: "1d", wantErr: `invalid duration "1d"`},
		{in: "fast", wantErr: `invalid duration "fast": want a number with a unit`},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseDuration(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Std() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got.Std(), err, tt.want)
			continue
		}
		if got.String() != tt.canon {
			t.Errorf("Duration(%q).String() = %q, want %q", tt.in, got.String(), tt.canon)
		}
		again, err := ParseDuration(got.String())
		if err != nil || again != got {
			t.Errorf("canonical %q does not parse back to %v: %v, %v", got.String(), got, again, err)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	var d Duration
	for _, bad := range []string{`500`, `true`, `"x"`, `{}`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("unmarshal %s: no error", bad)
		}
	}
	if err := json.Unmarshal([]byte(`"2m"`), &d); err != nil || d.Std() != 2*time.Minute {
		t.Fatalf("unmarshal \"2m\" = %v, %v", d, err)
	}
	b, _ := json.Marshal(d)
	if string(b) != `"2m"` {
		t.Errorf("marshal 2m = %s", b)
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in      string
		want    Bytes
		canon   string
		wantErr string
	}{
		{in: "0", want: 0, canon: "0"},
		{in: "1536", want: 1536, canon: "1536"},               // 1.5Ki: not a whole Ki, not a whole KB
		{in: "1000", want: 1000, canon: "1KB"},                // "1KB" is shorter than "1000"
		{in: "1024", want: 1024, canon: "1Ki"},                // 1024 = 2^10
		{in: "512Mi", want: 512 << 20, canon: "512Mi"},        // 512 × 2^20 = 536870912
		{in: "40Gi", want: 40 << 30, canon: "40Gi"},           // 40 × 2^30 = 42949672960
		{in: "40GiB", want: 40 << 30, canon: "40Gi"},          // GiB is another spelling of Gi
		{in: "1.5Gi", want: 3 << 29, canon: "1536Mi"},         // 1.5 × 2^30 = 1610612736 = 1536 × 2^20
		{in: "80GB", want: 80e9, canon: "80GB"},               // 80 × 10^9 (also 78125000Ki, longer)
		{in: "80G", want: 80e9, canon: "80GB"},                // G and GB are the same unit
		{in: "2T", want: 2e12, canon: "2TB"},                  // 2 × 10^12
		{in: "1Ti", want: 1 << 40, canon: "1Ti"},              // 2^40
		{in: "8Pi", want: 8 << 50, canon: "8Pi"},              // 2^53
		{in: "1024Pi", want: 1 << 60, canon: "1024Pi"},        // 2^60 would be 1Ei; Ei is not a unit here
		{in: "2k", want: 2000, canon: "2KB"},                  // lower-case k is decimal, as in Kubernetes
		{in: "0.5Ki", want: 512, canon: "512"},                // 0.5 × 1024
		{in: "0.1Ki", wantErr: "not a whole number of bytes"}, // 102.4
		{in: "-1Gi", wantErr: "must not be negative"},
		{in: "1.5", wantErr: "not a whole number of bytes"},
		{in: "40 Gi", wantErr: "want a whole number of bytes or a number with a unit"},
		{in: "40gi", wantErr: `unknown unit "gi"`},
		{in: "40Xi", wantErr: `unknown unit "Xi"`},
		{in: "", wantErr: "want a whole number"},
		{in: "Gi", wantErr: "want a whole number"},
		{in: "1e9", wantErr: "want a whole number"},
		{in: "9Pi", want: 9 << 50, canon: "9Pi"},
		{in: "8192Pi", wantErr: "larger than 9223372036854775807 bytes"}, // 2^63
		{in: "9223372036854775807", want: 1<<63 - 1, canon: "9223372036854775807"},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseBytes(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			continue
		}
		if got.String() != tt.canon {
			t.Errorf("Bytes(%d).String() = %q, want %q", got, got.String(), tt.canon)
		}
		if again, err := ParseBytes(got.String()); err != nil || again != got {
			t.Errorf("canonical %q parses back to %d, %v; want %d", got.String(), again, err, got)
		}
	}
}

func TestBytesJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    Bytes
		wantErr bool
	}{
		{in: `"40Gi"`, want: 40 * GiB},
		{in: `1048576`, want: MiB},
		{in: `-5`, wantErr: true},
		{in: `1.5`, wantErr: true},
		{in: `true`, wantErr: true},
		{in: `null`, want: 7}, // null leaves the value alone
	}
	for _, tt := range tests {
		b := Bytes(7)
		err := json.Unmarshal([]byte(tt.in), &b)
		if (err != nil) != tt.wantErr || (!tt.wantErr && b != tt.want) {
			t.Errorf("unmarshal %s = %d, %v; want %d (error %v)", tt.in, b, err, tt.want, tt.wantErr)
		}
	}
	out, _ := json.Marshal(struct{ M Bytes }{80e9})
	if string(out) != `{"M":"80GB"}` {
		t.Errorf("marshal 80e9 = %s", out)
	}
}

func TestGPURef(t *testing.T) {
	tests := []struct {
		in      string
		want    GPURef
		wantErr string
	}{
		{in: "gpu-node-a/3", want: GPURef{"gpu-node-a", 3}},
		{in: "n.example.com/0", want: GPURef{"n.example.com", 0}},
		{in: "a/b/1", wantErr: `want "node/index"`},
		{in: "/1", wantErr: `want "node/index"`},
		{in: "node", wantErr: `want "node/index"`},
		{in: "node/", wantErr: `index "" is not a non-negative integer`},
		{in: "node/-1", wantErr: `index "-1" is not a non-negative integer`},
		{in: "node/01", wantErr: `index "01" is not a non-negative integer`},
		{in: "node/x", wantErr: `index "x" is not`},
		{in: "node/99999999", wantErr: `index "99999999" is out of range`},
	}
	for _, tt := range tests {
		got, err := ParseGPURef(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseGPURef(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.in {
			t.Errorf("ParseGPURef(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestInstanceRef(t *testing.T) {
	got, err := ParseInstanceRef("3g.40gb@4")
	if err != nil || got != (InstanceRef{"3g.40gb", 4}) || got.String() != "3g.40gb@4" {
		t.Errorf("ParseInstanceRef(3g.40gb@4) = %+v, %v", got, err)
	}
	got, err = ParseInstanceRef("1g.10gb+me@6")
	if err != nil || got != (InstanceRef{"1g.10gb+me", 6}) {
		t.Errorf("ParseInstanceRef(1g.10gb+me@6) = %+v, %v", got, err)
	}
	for _, bad := range []string{"3g.40gb", "@4", "3g@x", "a@b@1", "3g.40gb@"} {
		if _, err := ParseInstanceRef(bad); err == nil {
			t.Errorf("ParseInstanceRef(%q): no error", bad)
		}
	}
	if !(InstanceRef{}).IsZero() || (InstanceRef{Profile: "1g.10gb"}).IsZero() {
		t.Error("IsZero is wrong")
	}
}

func TestIntOrPercent(t *testing.T) {
	tests := []struct {
		in      string
		want    IntOrPercent
		out     string
		wantErr bool
	}{
		{in: `3`, want: IntOrPercent{Value: 3}, out: `3`},
		{in: `"25%"`, want: IntOrPercent{Value: 25, Percent: true}, out: `"25%"`},
		{in: `"0%"`, want: IntOrPercent{Value: 0, Percent: true}, out: `"0%"`}, // Validate rejects it
		{in: `"3"`, wantErr: true},
		{in: `"12.5%"`, wantErr: true},
		{in: `"+5%"`, wantErr: true},
		{in: `1.5`, wantErr: true},
		{in: `true`, wantErr: true},
	}
	for _, tt := range tests {
		var v IntOrPercent
		err := json.Unmarshal([]byte(tt.in), &v)
		if tt.wantErr {
			if err == nil {
				t.Errorf("unmarshal %s: no error", tt.in)
			}
			continue
		}
		if err != nil || v != tt.want {
			t.Errorf("unmarshal %s = %+v, %v; want %+v", tt.in, v, err, tt.want)
		}
		if b, _ := json.Marshal(v); string(b) != tt.out {
			t.Errorf("marshal %+v = %s, want %s", v, b, tt.out)
		}
	}
}

func TestIntOrPercentResolve(t *testing.T) {
	tests := []struct {
		v     IntOrPercent
		total int
		want  int
	}{
		{IntOrPercent{Value: 2}, 10, 2},
		{IntOrPercent{Value: 20}, 10, 10},               // capped at total
		{IntOrPercent{Value: 25, Percent: true}, 12, 3}, // 12 × 25 / 100 = 3
		{IntOrPercent{Value: 25, Percent: true}, 3, 1},  // 3 × 25 / 100 = 0.75 → 0 → at least 1
		{IntOrPercent{Value: 50, Percent: true}, 7, 3},  // 3.5 rounds down
		{IntOrPercent{Value: 100, Percent: true}, 7, 7},
	}
	for _, tt := range tests {
		if got := tt.v.Resolve(tt.total); got != tt.want {
			t.Errorf("%v.Resolve(%d) = %d, want %d", tt.v, tt.total, got, tt.want)
		}
	}
}
