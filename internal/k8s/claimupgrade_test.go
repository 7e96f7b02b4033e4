package k8s

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPinnedClaimReplacesUnpinnedOnce pins down what an upgrade from a rendering without
// placement pins does to a claim whose allocation did not change (docs/kubernetes.md, "Claims
// rendered before placements were pinned"): the pinned spec is another spec, so the claim gets
// another content name and its Deployments roll to it once; the same rendering applied again
// keeps the name, so nothing rolls after that. The claim is the golden MPS 3g.40gb claim whose
// start the GPU's counts force to 4; its unpinned form is the one rendered before pinning (the
// profile selector alone).
func TestPinnedClaimReplacesUnpinnedOnce(t *testing.T) {
	pinned := renderedClaim(t, "n3-gpu0-3g-40gb-4-mps")
	unpinned := pinned.DeepCopy()
	reqs, _, err := unstructured.NestedSlice(unpinned.Object, "spec", "devices", "requests")
	if err != nil || len(reqs) != 1 {
		t.Fatalf("requests %v: %v", reqs, err)
	}
	sels, _, _ := unstructured.NestedSlice(reqs[0].(map[string]any), "exactly", "selectors")
	if len(sels) != 2 {
		t.Fatalf("selectors %v, want the profile and the placement pin", sels)
	}
	if err := unstructured.SetNestedSlice(reqs[0].(map[string]any), sels[:1], "exactly", "selectors"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(unpinned.Object, reqs, "spec", "devices", "requests"); err != nil {
		t.Fatal(err)
	}
	name := func(u *unstructured.Unstructured) string {
		t.Helper()
		u = u.DeepCopy()
		if err := newApplyState("p").prepare(u); err != nil {
			t.Fatal(err)
		}
		return u.GetName()
	}
	before, after, again := name(unpinned), name(pinned), name(pinned)
	if before == after {
		t.Errorf("the unpinned and the pinned claim are both %s: the pin would have to change an immutable spec in place", before)
	}
	if after != again {
		t.Errorf("the same pinned claim is named %s, then %s: it would roll at every apply", after, again)
	}
}
