package k8s

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

//go:generate bash ../../scripts/gen-crds.sh

// crds/ is generated from the types' markers by controller-gen (scripts/gen-crds.sh); the drift
// test TestCRDsMatchGenerator requires it to be current.
//
//go:embed crds/*.yaml
var crdFiles embed.FS

// CRDs returns gpupool's CustomResourceDefinitions, decoded strictly from crds/.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(crdFiles, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		b, err := crdFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("decode crd %s: %w", n, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// InstallCRDs creates or updates gpupool's CRDs and waits until the API server serves them
// (condition Established).
func InstallCRDs(ctx context.Context, c client.Client) error {
	crds, err := CRDs()
	if err != nil {
		return err
	}
	for _, want := range crds {
		got := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: want.Name}, got)
		switch {
		case apierrors.IsNotFound(err):
			if err := c.Create(ctx, want); err != nil {
				return fmt.Errorf("create crd %s: %w", want.Name, err)
			}
		case err != nil:
			return fmt.Errorf("get crd %s: %w", want.Name, err)
		default:
			want.ResourceVersion = got.ResourceVersion
			if err := c.Update(ctx, want); err != nil {
				return fmt.Errorf("update crd %s: %w", want.Name, err)
			}
		}
	}
	for _, want := range crds {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: want.Name}, got); err != nil {
				return false, nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("wait for crd %s to be established: %w", want.Name, err)
		}
	}
	return nil
}
