package k8s

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"gpupool.dev/gpupool/internal/render"
)

// TestDRAClaimsAccepted creates NVIDIA's DRA DeviceClasses (as the driver's chart defines them)
// and every ResourceClaim and ResourceClaimTemplate the renderer's golden outputs hold (the
// render package's golden test keeps them equal to what it renders) on the real API server:
// resource.k8s.io/v1 validation, CEL selector compilation and the opaque config's size and
// driver name are checked there.
func TestDRAClaimsAccepted(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	for name, typ := range map[string]string{render.DeviceClassGPU: "gpu", render.DeviceClassMIG: "mig"} {
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '" + typ + "'"}}}}}
		if err := c.Create(ctx, dc); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob("../render/testdata/golden/*/dra/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rendered DRA files: %v", err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		ns := newNamespace(t, c, "dra")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			u.SetNamespace(ns)
			if err := c.Create(ctx, u); err != nil {
				t.Errorf("%s: %s %s: %v", f, u.GetKind(), u.GetName(), err)
				continue
			}
			kinds[u.GetKind()]++
		}
	}
	if kinds["ResourceClaim"] == 0 || kinds["ResourceClaimTemplate"] == 0 {
		t.Errorf("created %v, want both kinds", kinds)
	}
	// The API server does check: a selector that does not compile is refused.
	bad := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: newNamespace(t, c, "dra")},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: render.DeviceClassMIG, Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].profile =="}}}}}}}}}
	if err := c.Create(ctx, bad); !apierrors.IsInvalid(err) {
		t.Errorf("a claim with a broken selector: %v, want invalid", err)
	}
	t.Logf("created %v from %d files", kinds, len(files))
}
