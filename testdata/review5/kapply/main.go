// Command kapply creates every Kubernetes object of the given YAML files on a scratch
// kube-apiserver (envtest, the binaries scripts/build-k8s-test-binaries.sh builds) with strict
// field validation, and prints each object's outcome. Objects of each output directory (a
// file's first path element) go into a namespace of their own. Exit 1 when any object is refused.
//
//	go run ./testdata/review5/kapply OUT/k8s/*.yaml OUT/dra/*.yaml OUT/*/configmap.yaml
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

func main() {
	dir := os.Getenv("GPUPOOL_K8S_TEST_BINS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "gpupool", "k8s-v1.37.2")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	a := env.ControlPlane.GetAPIServer().Configure()
	a.Set("advertise-address", "127.0.0.1")
	a.Set("endpoint-reconciler-type", "none")
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer env.Stop()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	// each output directory (the first path element of a file) gets its own namespace
	nss := map[string]string{}
	bad := 0
	for _, f := range os.Args[1:] {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fmt.Println("FAIL", f, err)
				bad++
				break
			}
			var m map[string]any
			if err := yaml.Unmarshal(doc, &m); err != nil || len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			top := strings.SplitN(filepath.ToSlash(f), "/", 2)[0]
			ns, ok := nss[top]
			if !ok {
				ns = fmt.Sprintf("out-%d", len(nss))
				nss[top] = ns
				_ = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			}
			if u.GetNamespace() == "" && u.GetKind() != "DeviceClass" {
				u.SetNamespace(ns)
			}
			err = c.Create(ctx, u, client.FieldValidation("Strict"))
			if err != nil {
				bad++
				fmt.Printf("FAIL %s %s/%s: %v\n", f, u.GetKind(), u.GetName(), err)
			} else {
				fmt.Printf("ok   %s %s/%s\n", f, u.GetKind(), u.GetName())
			}
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}
