package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const basicH100 = "1g.10gb,2g.20gb,3g.40gb,4g.40gb,7g.80gb"

func TestLayoutsJSON(t *testing.T) {
	out, stderr, code := runCmd(t, "layouts", "H100", "--profiles", basicH100, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Board    string   `json:"board"`
		Profiles []string `json:"profiles"`
		Layouts  [][]struct {
			Profile string `json:"profile"`
			Start   int    `json:"start"`
		} `json:"layouts"`
		Count              int `json:"count"`
		DistinctMultisets  int `json:"distinctMultisets"`
		FullCompute        int `json:"fullCompute"`
		FullComputeLayouts int `json:"fullComputeLayouts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	// NVIDIA's 19 combinations, 14 multisets, 11 of them use all 7 compute slices.
	if doc.Board != "H100-SXM5-80GB" || doc.Count != 19 || len(doc.Layouts) != 19 || doc.DistinctMultisets != 14 ||
		doc.FullCompute != 11 || doc.FullComputeLayouts != 16 || len(doc.Profiles) != 5 {
		t.Errorf("doc %+v", doc)
	}
	first, last := doc.Layouts[0], doc.Layouts[18]
	if len(first) != 7 || first[6].Profile != "1g.10gb" || first[6].Start != 6 || len(last) != 1 || last[0].Profile != "7g.80gb" {
		t.Errorf("first %v, last %v", first, last)
	}
}

func TestLayoutsTable(t *testing.T) {
	out, _, code := runCmd(t, "layouts", "H100-SXM5-80GB", "--profiles", basicH100)
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"#     0    1    2    3    4    5    6    7    INSTANCES",
		"9   [2g.20gb ][1g ][1g ][3g.40gb           ]  2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4",
		"15  [3g.40gb           ][3g.40gb           ]  3g.40gb@0 3g.40gb@4",
		"[1g ][1g ][1g ][1g ][1g ][1g ][1g ]  .    1g.10gb@0",
		"19 layouts, 14 distinct multisets; 11 multisets (16 layouts) use all 7 compute slices",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "unverified") {
		t.Error("H100 starts are verified; no footnote expected")
	}
}

func TestLayoutsFourSliceMarksUnverifiedStarts(t *testing.T) {
	out, _, code := runCmd(t, "layouts", "A30", "--profiles", "1g.6gb,2g.12gb,4g.24gb")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"[2g.12gb ][1g ][1g ]", "5 layouts, 4 distinct multisets",
		"? starts of 1g.6gb, 2g.12gb on A30-24GB are unverified"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runCmd(t, "layouts", "A30", "-o", "yaml")
	if !strings.Contains(out, "unverifiedStarts:\n- 1g.6gb\n") || !strings.Contains(out, "board: A30-24GB") {
		t.Errorf("yaml:\n%s", out)
	}
}

func TestLayoutsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"layouts"}, "accepts 1 arg"},
		{[]string{"layouts", "H300"}, `lookup board "H300"`},
		{[]string{"layouts", "H100", "--profiles", "1g.10gb,4g.20gb"},
			`enumerate layouts on H100-SXM5-80GB: profile "4g.20gb" does not exist on H100-SXM5-80GB (valid: 1g.10gb,`},
		{[]string{"layouts", "H100", "-o", "csv"}, `unknown output format "csv"`},
	} {
		_, stderr, code := runCmd(t, tc.args...)
		if code != exitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
	// An unknown profile given twice (here the empty one) is reported once.
	_, stderr, code := runCmd(t, "layouts", "H100", "--profiles", "1g.10gb,,")
	if n := strings.Count(stderr, `profile "" does not exist`); code != exitInvalid || n != 1 {
		t.Errorf("--profiles 1g.10gb,,: exit %d, the error %d times in %q; want exit 1 and once", code, n, stderr)
	}
}
