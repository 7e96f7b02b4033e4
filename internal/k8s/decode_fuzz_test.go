package k8s

import (
	"testing"
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
