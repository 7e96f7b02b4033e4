package v1

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeFairScenario(t *testing.T) {
	sc, err := DecodeFairScenario([]byte("apiVersion: gpupool.dev/v1\nkind: FairScenario\ncapacity: {cpu: 4, yes: 2}\n" +
		"tenants: [{name: yes, task: {cpu: 1}, demand: 1e3}, {name: '007', task: {cpu: 1}}, {name: 007, task: {cpu: 1}}, {name: y, task: {cpu: 1}}]\n" +
		"steps: [{at: 1s, demand: {007: 2, no: 1}, remove: [y, on]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tc := range sc.Tenants {
		names = append(names, tc.Name)
	}
	if got := strings.Join(names, ","); got != "yes,007,007,y" {
		t.Errorf("names %q, want them as written", got)
	}
	if sc.Tenants[0].Demand != 1000 || sc.Capacity["yes"] != 2 || sc.Steps[0].Demand["007"] != 2 ||
		sc.Steps[0].Demand["no"] != 1 || strings.Join(sc.Steps[0].Remove, ",") != "y,on" {
		t.Errorf("decoded %+v", sc)
	}
	if err := ValidateFairScenario(sc); err != nil {
		t.Errorf("valid scenario: %v", err)
	}
}

func TestDecodeFairScenarioErrors(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"unknown and wrong types", "capacity: {cpu: 1}\ntenants: [{name: a, demand: many, colour: red, task: [1]}]\nsteps: [{at: 1s, demnd: 3}]\n",
			"steps[0].demnd: unknown field\ntenants[0].colour: unknown field\ntenants[0].demand: expected a whole number, got \"many\"\ntenants[0].task: expected a mapping, got a list"},
		{"duplicate keys", "capacity: {cpu: 1}\ntenants: [{name: a, task: {cpu: 1, cpu: 2}}]\n", "tenants[0].task.cpu: duplicate key"},
		{"two documents", "capacity: {cpu: 1}\n---\ncapacity: {cpu: 2}\n", "a second YAML document"},
		{"json unknown and types", `{"capacity": {"cpu": 1}, "tenants": [{"name": "a", "demand": "x", "colour": 1}]}`,
			"tenants[0].colour: unknown field\ntenants[0].demand: expected a whole number, got \"x\""},
		{"json duplicate key", `{"capacity": {"cpu": 1, "cpu": 2}}`, "capacity.cpu: duplicate key"},
		{"empty", "# nothing\n", "empty document"},
		{"alias", "a: &x {cpu: 1}\ncapacity: *x\n", "unknown field"},
	}
	for _, c := range cases {
		_, err := DecodeFairScenario([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	big := make([]byte, MaxDocumentBytes+1)
	if _, err := DecodeFairScenario(big); err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Errorf("oversized input: %v", err)
	}
}

func TestValidateFairScenario(t *testing.T) {
	sc, err := DecodeFairScenario([]byte("apiVersion: v2\nkind: Pool\nstart: noon\ncapacity: {cpu: .inf, 'a b': 1}\nslices: {X/y: -1}\n" +
		"burstPoolPercent: .nan\nleaseDuration: soon\nmaxMinRuntime: -1s\nhistoryHalfLife: 1 day\nlimits: {maxTenants: -1}\n" +
		"groups: [{path: '', weight: 1}, {path: g, weight: 5e-324, maxMinRuntime: x, deserved: 2, limit: -1}]\n" +
		"tenants: [{name: 'a/b', path: 'x//y', weight: .nan, task: {cpu: 1}, slice: S/k, demand: -1, reservation: 1e16, cap: 2, minRuntime: 1 hour}, {name: c, task: {cpu: 1}, classes: [{name: '', replicas: 0}]}]\n" +
		"steps: [{at: 2s, demand: {c: -2}, add: [{name: '', task: {cpu: 1e300}}], remove: ['']}, {at: 1s}, {at: later}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = ValidateFairScenario(sc)
	fe, ok := err.(FieldErrors)
	if !ok {
		t.Fatalf("error %T %v, want FieldErrors", err, err)
	}
	var paths []string
	for _, e := range fe {
		paths = append(paths, e.Path)
	}
	want := "apiVersion burstPoolPercent capacity[\"a b\"] capacity.cpu groups[0].path groups[1].deserved groups[1].limit groups[1].maxMinRuntime groups[1].weight historyHalfLife kind " +
		"leaseDuration limits.maxTenants maxMinRuntime slices[\"X/y\"] start steps[0].add[0].name steps[0].add[0].task.cpu " +
		"steps[0].demand.c steps[0].remove[0] steps[1].at steps[2].at tenants[0] tenants[0].demand tenants[0].minRuntime tenants[0].name " +
		"tenants[0].path tenants[0].reservation tenants[0].weight tenants[1].classes[0].name tenants[1].classes[0].replicas"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("paths\n%s\nwant\n%s\n%v", got, want, err)
	}
}

// FuzzDecodeFairScenario: any input gives a scenario or FieldErrors, never a panic; a scenario
// that decodes and validates survives a JSON round trip unchanged.
func FuzzDecodeFairScenario(f *testing.F) {
	f.Add([]byte("capacity: {cpu: 9, mem: 18}\ntenants: [{name: A, task: {cpu: 1, mem: 4}, demand: 5}]\nsteps: [{at: 1s, demand: {A: 1}}]\n"))
	f.Add([]byte("slices: {H100-SXM5-80GB/1g.10gb: 7}\ngroups: [{path: o, weight: 2, maxMinRuntime: 1m}]\ntenants: [{name: yes, path: o, slice: H100-SXM5-80GB/1g.10gb, demand: 3}]\n"))
	f.Add([]byte(`{"capacity": {"gpu": 4}, "limits": {"maxDemand": 10}, "tenants": [{"name": "007", "task": {"gpu": 1}, "demand": 2}]}`))
	f.Add([]byte("tenants: [{name: a, weight: .nan, demand: 1e13}]\n"))
	f.Add([]byte("capacity: {cpu: 2}\nhistoryHalfLife: 1h\ntenants: [{name: a, task: {cpu: 1}, demand: 2}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := DecodeFairScenario(data)
		if err != nil {
			if _, ok := err.(FieldErrors); !ok {
				t.Fatalf("error %T, want FieldErrors: %v", err, err)
			}
			return
		}
		if ValidateFairScenario(sc) != nil {
			return
		}
		raw, err := json.Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeFairScenario(raw)
		if err != nil {
			t.Fatalf("round trip: %v\n%s", err, raw)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(raw) {
			t.Fatalf("round trip changed the scenario:\n%s\n%s", raw, again)
		}
	})
}

// A JSON key that is a field's name in other letter case is an unknown field, as in YAML:
// encoding/json matched it to the field, so `"Capacity"` beside `"capacity"` silently replaced
// it and the same scenario read as YAML was refused. Map keys that look like field names
// (a resource or tenant named "Name") are no fields and stay accepted.
func TestDecodeFairScenarioJSONLetterCase(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`{"capacity": {"cpu": 9}, "Capacity": {"cpu": 1}, "tenants": [{"name": "A", "task": {"cpu": 1}, "demand": 1}]}`, "Capacity: unknown field"},
		{`{"capacity": {"cpu": 9}, "tenants": [{"name": "A", "Name": "B", "task": {"cpu": 1}, "demand": 1}]}`, "tenants[0].Name: unknown field"},
		{`{"capacity": {"cpu": 9}, "tenants": [{"name": "A", "task": {"cpu": 1}, "DEMAND": 1}]}`, "tenants[0].DEMAND: unknown field"},
	}
	for _, c := range cases {
		_, err := DecodeFairScenario([]byte(c.doc))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.doc, err, c.want)
		}
		// The same document read as YAML says the same.
		_, yerr := DecodeFairScenario([]byte("# YAML\n" + c.doc))
		if yerr == nil || yerr.Error() != c.want {
			t.Errorf("%s as YAML: error %v, want %q", c.doc, yerr, c.want)
		}
	}
	sc, err := DecodeFairScenario([]byte(`{"capacity": {"Name": 9, "Demand": 2}, "tenants": [{"name": "Name", "task": {"Name": 1}, "demand": 1}], "steps": [{"at": "1s", "demand": {"Name": 2}}]}`))
	if err != nil || sc.Capacity["Name"] != 9 || sc.Steps[0].Demand["Name"] != 2 {
		t.Errorf("map keys named like fields: %+v, %v", sc, err)
	}
}
