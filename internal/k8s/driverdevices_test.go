package k8s

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"gpupool.dev/gpupool/internal/render"
)

// driverDevices reads each (node, pool)'s newest generation only, says which pools' newest
// generation is not whole yet, keys devices as render.DRADeviceKey, takes a MIG device's GPU from
// its parentUUID, and ignores other drivers and devices without a type. The gate's verification
// and the admission's capacity both read the ResourceSlices through it.
func TestDriverDevices(t *testing.T) {
	str := func(v string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &v} }
	dev := func(name string, attrs map[string]string) resourcev1.Device {
		d := resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}}
		for k, v := range attrs {
			d.Attributes[resourcev1.QualifiedName(k)] = str(v)
		}
		return d
	}
	slice := func(driver, node, pool string, gen, count int64, devs ...resourcev1.Device) resourcev1.ResourceSlice {
		return resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count}, Devices: devs}}
	}
	gpu0 := dev("gpu-0", map[string]string{"type": "gpu", "uuid": "GPU-0"})
	mig := dev("gpu-1-mig-3g40gb-9-0", map[string]string{"type": "mig", "profile": "3g.40gb", "uuid": "MIG-1", "parentUUID": "GPU-1"})
	rss := []resourcev1.ResourceSlice{
		slice(render.DRADriver, "a", "a", 1, 1, gpu0, gpu0), // an old generation: not read
		slice(render.DRADriver, "a", "a", 2, 1, gpu0, mig, dev("x", map[string]string{"uuid": "none"})),
		slice("other.example.com", "a", "a", 5, 1, gpu0),
		slice(render.DRADriver, "b", "b", 3, 2, mig), // one of two slices so far
	}
	byNode, partial := driverDevices(rss, render.DRADriver)
	a := byNode["a"]
	if len(a) != 2 || a[0].Key != "gpu" || a[0].GPU != "GPU-0" || a[1].Key != "mig-3g.40gb" || !a[1].MIG || a[1].GPU != "GPU-1" || a[1].Pool != "a" {
		t.Fatalf("node a: %+v; want gpu-0 and one 3g.40gb device of GPU-1 from generation 2", a)
	}
	if len(partial["a"]) != 0 || len(partial["b"]) != 1 || partial["b"][0] != "pool b has 1 of 2 ResourceSlices of generation 3" {
		t.Fatalf("partial %v; want pool b only", partial)
	}
	if len(byNode["b"]) != 1 {
		t.Fatalf("node b: %+v", byNode["b"])
	}
}
