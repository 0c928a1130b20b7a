// Package installmanifests writes the files an admin drops into the
// OpenShift installer's openshift/ directory, so that a new cluster's
// workers come from MachineSets while it bootstraps: the provider's
// install overlay (RBAC, the deployer, the webhooks; config/overlays/<cloud>,
// rendered from the binary's own copy of config/), the credentials secret,
// and worker and infra MachineSets on the installer's worker-user-data
// secret.
//
// The installer creates every file of openshift/ in no order, retrying
// what fails (a namespace or a CRD not there yet) until it succeeds. So
// nothing may depend on order, and nothing may block what comes later:
// the validating webhooks are rendered with failurePolicy Ignore, since
// their backend (the webhook Deployment, on the control plane, with the
// service CA's certificate) runs only once the cluster is far enough
// along, and a webhook that fails closed would refuse the MachineSets until
// then; the actuator validates every spec itself. The ServiceMonitor and
// the PrometheusRule are left out: their CRDs come with the monitoring
// stack, after bootstrap; apply the overlay once the cluster runs to get
// them (and the webhooks failing closed).
package installmanifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/appuio/machine-api-provider/config"
)

// Overlay renders config/overlays/<cloud> from the embedded config/ with
// the provider's image, as `kustomize build config/overlays/<cloud>` does
// with config/image naming that image. The binary embeds no config/image
// (config/embed.go says why); this writes the component in its place.
func Overlay(cloud, image string) ([]*unstructured.Unstructured, error) {
	component, err := imageComponent(image)
	if err != nil {
		return nil, err
	}
	return render(config.FS, path.Join("overlays", cloud), map[string][]byte{"image/kustomization.yaml": component})
}

// ImageName is the name the manifests in config/ give the provider's image.
const ImageName = "machine-api-provider"

// imageComponent is config/image for image: a reference by tag
// (registry/name:tag) or by digest (registry/name@sha256:...).
func imageComponent(image string) ([]byte, error) {
	name, tag, digest := image, "", ""
	if i := strings.Index(image, "@"); i >= 0 {
		name, digest = image[:i], image[i+1:]
	} else if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		name, tag = image[:i], image[i+1:]
	}
	if name == "" || strings.ContainsAny(image, " \t\n\"'") || digest != "" && !strings.HasPrefix(digest, "sha256:") {
		return nil, fmt.Errorf("%q is not an image reference (registry/name:tag or registry/name@sha256:...)", image)
	}
	entry := "- name: " + ImageName + "\n  newName: " + name + "\n"
	switch {
	case digest != "":
		entry += "  digest: " + digest + "\n"
	case tag != "":
		entry += "  newTag: " + tag + "\n"
	}
	return []byte("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nimages:\n" + entry), nil
}

// render builds dir of src, with extra files written over src's.
func render(src fs.FS, dir string, extra map[string][]byte) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/config", p), b)
	})
	if err != nil {
		return nil, err
	}
	for p, b := range extra {
		if err := mem.WriteFile(path.Join("/config", p), b); err != nil {
			return nil, err
		}
	}
	if !mem.Exists(path.Join("/config", dir, "kustomization.yaml")) {
		return nil, fmt.Errorf("config/%s: no such kustomization", dir)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(mem, path.Join("/config", dir))
	if err != nil {
		return nil, fmt.Errorf("rendering config/%s: %w", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	return Decode(out)
}

// Decode splits a YAML stream into objects.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// fileName is the name of an object's file in openshift/: the installer
// creates them all, in no order that matters.
func fileName(i int, o *unstructured.Unstructured) string {
	return fmt.Sprintf("99_machine-api-provider_%02d_%s_%s.yaml", i, strings.ToLower(o.GetKind()), o.GetName())
}
