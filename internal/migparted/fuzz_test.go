package migparted

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// FuzzDecode checks that Decode never panics, that it gives the same bytes the same answer on every
// read, that whatever it accepts encodes and decodes back to the same Config (and the same
// bytes), and that validating it never panics.
func FuzzDecode(f *testing.F) {
	f.Add(readDefault(f))
	seeds := []string{
		"",
		"version: v1\n",
		"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n",
		"version: v1\nmig-configs:\n  a: [{devices: [0, 1], mig-enabled: true, mig-devices: {\"1g.10gb\": 2}}]\n",
		"version: v1\nmig-configs:\n  a: [{device-filter: \"0x20B710DE\", devices: all, mig-enabled: true, mig-devices: {\"1c.2g.12gb\": 1}}]\n",
		"version: v1\nmig-configs:\n  a: [{device-filter: 0x20B710DE, devices: all, mig-enabled: true}]\n",
		"version: v1\nmig-configs:\n  on: [{devices: all, mig-enabled: yes, mig-devices: {}}]\n  1: [{devices: all, mig-enabled: false}]\n",
		"version: v1\nmig-configs:\n  a: &x [{devices: all, mig-enabled: false}]\n  b: *x\n",
		"version: v1\nmig-configs:\n  \"\\x7f\\u00e9\": [{devices: all, mig-enabled: false, mig-devices: {}}]\n",
		"version: v1\nmig-configs:\n  a: [{devices: [-1, 99999999999999999999], mig-enabled: 1, mig-devices: null}]\n",
		"{version: v1, mig-configs: {a: [{devices: all, mig-enabled: false, x: 1}]}}",
		"- [\n",
		"version: v1\nmig-configs:\n  1: [{devices: all, mig-enabled: false}]\n  \"1\": [{devices: all, mig-enabled: true, mig-devices: {}}]\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	cat := newFakeCatalog()
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		for range 3 { // the same bytes, the same answer: map order must not show
			c2, err2 := Decode(data)
			if fmt.Sprint(err2) != fmt.Sprint(err) || !reflect.DeepEqual(c2, c) {
				t.Fatalf("two reads differ:\n%+v\n%v\n---\n%+v\n%v", c, err, c2, err2)
			}
		}
		if err != nil {
			if c != nil {
				t.Fatal("Decode returned a config with an error")
			}
			return
		}
		out, err := Encode(c)
		if err != nil {
			t.Fatalf("Encode(Decode(input)): %v", err)
		}
		back, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode(Encode(c)): %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip changed the config:\n%#v\n%#v", c, back)
		}
		again, err := Encode(back)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Encode not stable (err %v)", err)
		}
		r := validate(c, Options{}, cat)
		if r.Summary.Configs != len(c.Configs) {
			t.Fatalf("report has %d configs, want %d", r.Summary.Configs, len(c.Configs))
		}
		validate(c, Options{Board: cat.board("A30-24GB")}, cat)
	})
}
