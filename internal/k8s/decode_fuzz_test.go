package k8s

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDecodeObjects: any input either fails with an error or yields objects that each have
// content, and never panics.
func FuzzDecodeObjects(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Service\n"))
	f.Add([]byte(`{"apiVersion": "v1", "kind": "Pod"}`))
	f.Add([]byte("- a\n- b\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := DecodeObjects(data)
		if err != nil {
			return
		}
		for i, o := range objs {
			if len(o.Object) == 0 {
				t.Fatalf("object %d is empty", i)
			}
		}
	})
}

// TestDecodeObjects: documents in order, empty ones skipped, a broken one reported by number.
func TestDecodeObjects(t *testing.T) {
	objs, err := DecodeObjects([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n\n---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n"))
	if err != nil || len(objs) != 2 || objs[0].GetName() != "a" || objs[1].GetKind() != "Service" {
		t.Fatalf("got %d objects, %v", len(objs), err)
	}
	if _, err := DecodeObjects([]byte("apiVersion: v1\nkind: ConfigMap\n---\nkind: [\n")); err == nil || err.Error()[:10] != "document 2" {
		t.Errorf("broken second document: %v", err)
	}
}

// FuzzGateAnnotations: the gate's JSON annotations on a DRA node (the device expectation and the
// drain scope) never panic when read; an expectation read without error names its driver, and a
// scope read back from its own encoding encodes the same.
func FuzzGateAnnotations(f *testing.F) {
	f.Add(`{"driver":"gpu.nvidia.com","devices":{"gpu":1,"mig-1g.10gb":7}}`)
	f.Add(`{"devices":{"gpu":1}}`)
	f.Add(`{"smoke":["mig-2g.20gb"],"why":"x","dra":{"driver":"gpu.nvidia.com","keep":["n/gpu-0"]}}`)
	f.Add(`{"keep":["nvidia.com/gpu"]}`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, s string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{AnnotGateExpectDevices: s}}}
		if e, err := deviceExpectation(n); err == nil && (e == nil || e.Driver == "") {
			t.Fatalf("expectation %+v read from %q without error has no driver", e, s)
		}
		d := decodeScope(s)
		if again := decodeScope(d.encode()); again.encode() != d.encode() {
			t.Fatalf("scope %+v encodes to %s, which reads back as %+v", d, d.encode(), again)
		}
	})
}
