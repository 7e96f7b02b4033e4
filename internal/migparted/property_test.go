package migparted

import (
	"reflect"
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
	"pgregory.net/rapid"
)

// genConfig draws a Config that passes Check: awkward names, filters in both id spellings,
// indices in any order, profile names from the grammar.
func genConfig() *rapid.Generator[*Config] {
	name := rapid.OneOf(
		rapid.StringMatching(`[a-z][a-z0-9.-]{0,12}`),
		rapid.SampledFrom([]string{"on", "off", "yes", "No", "null", "~", "1", "0x10", "a: b", "#c", `q"`, "é", "\t", "\u2028", "😀"}),
		rapid.StringN(1, 6, -1),
	)
	id := rapid.StringMatching(`0[xX][0-9A-Fa-f]{8}(:0x[0-9A-F]{8})?`)
	profile := rapid.StringMatching(`([1-7]c\.)?[1-8]g\.[0-9]{1,3}gb(\+me|-me|\+me\.all|\+gfx)?`)
	entry := rapid.Custom(func(t *rapid.T) Entry {
		var e Entry
		if rapid.Bool().Draw(t, "filtered") {
			e.DeviceFilter = rapid.SliceOfNDistinct(id, 1, 3, normID).Draw(t, "filter")
		}
		if rapid.Bool().Draw(t, "all") {
			e.Devices = AllDevices()
		} else {
			e.Devices.Indices = rapid.SliceOfNDistinct(rapid.IntRange(0, 15), 1, 4, rapid.ID[int]).Draw(t, "indices")
		}
		e.MigEnabled = rapid.Bool().Draw(t, "enabled")
		if e.MigEnabled {
			e.MigDevices = rapid.MapOfN(profile, rapid.IntRange(1, 8), 0, 4).Draw(t, "devices")
		}
		return e
	})
	return rapid.Custom(func(t *rapid.T) *Config {
		names := rapid.SliceOfNDistinct(name, 1, 5, rapid.ID[string]).Draw(t, "names")
		c := &Config{}
		for _, n := range names {
			c.Configs = append(c.Configs, NamedConfig{Name: n, Entries: rapid.SliceOfN(entry, 1, 3).Draw(t, "entries")})
		}
		return c
	})
}

func TestEncodeDecodeRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genConfig().Draw(t, "config")
		out, err := Encode(c)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		back, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode(Encode(c)): %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip changed the config:\n%s\n got %#v\nwant %#v", out, back, c)
		}
	})
}

// TestValidateAgreesWithPlace: on a real board, a check passes exactly when the board can place
// the counts, and a passing check's layout holds exactly the requested instances and is legal.
func TestValidateAgreesWithPlace(t *testing.T) {
	var boards []*gpu.Board
	for _, b := range gpu.Boards() {
		if migCapable(b) {
			boards = append(boards, b)
		}
	}
	if len(boards) == 0 {
		t.Fatal("the catalog has no MIG board")
	}
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SampledFrom(boards).Draw(t, "board")
		counts := rapid.MapOfN(rapid.SampledFrom(b.ProfileNames()), rapid.IntRange(1, 4), 1, 3).Draw(t, "counts")
		cfg := &Config{Configs: []NamedConfig{{Name: "c", Entries: []Entry{{Devices: AllDevices(), MigEnabled: true, MigDevices: counts}}}}}
		r := Validate(cfg, Options{Board: b})
		if len(r.Configs) != 1 || len(r.Configs[0].Checks) != 1 {
			t.Fatalf("report %+v, want one check", r)
		}
		ch := r.Configs[0].Checks[0]
		_, placeErr := b.Place(counts)
		if ch.OK() != (placeErr == nil) {
			t.Fatalf("check OK = %v (%v), Place error = %v", ch.OK(), ch.Findings, placeErr)
		}
		if !ch.OK() {
			return
		}
		got := map[string]int{}
		for _, in := range ch.Layout {
			got[in.Profile]++
		}
		if !reflect.DeepEqual(got, counts) {
			t.Fatalf("layout %s holds %v, want %v", FormatLayout(ch.Layout), got, counts)
		}
		if err := b.Validate(ch.Layout); err != nil {
			t.Fatalf("layout %s is illegal on %s: %v", FormatLayout(ch.Layout), b.Name, err)
		}
	})
}
