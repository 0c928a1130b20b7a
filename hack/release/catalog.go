package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The file-based catalog's schemas (operator-registry's declcfg), written
// here rather than imported: operator-registry's module brings a container
// runtime and gRPC along, for three small documents.
type (
	// FBCPackage is an olm.package.
	FBCPackage struct {
		Schema         string   `json:"schema"`
		Name           string   `json:"name"`
		DefaultChannel string   `json:"defaultChannel"`
		Icon           *FBCIcon `json:"icon,omitempty"`
		Description    string   `json:"description,omitempty"`
	}
	// FBCIcon is a package's icon.
	FBCIcon struct {
		Data      []byte `json:"base64data"`
		MediaType string `json:"mediatype"`
	}
	// FBCChannel is an olm.channel.
	FBCChannel struct {
		Schema  string            `json:"schema"`
		Name    string            `json:"name"`
		Package string            `json:"package"`
		Entries []FBCChannelEntry `json:"entries"`
	}
	// FBCChannelEntry is a bundle in a channel and what it upgrades from.
	FBCChannelEntry struct {
		Name      string   `json:"name"`
		Replaces  string   `json:"replaces,omitempty"`
		Skips     []string `json:"skips,omitempty"`
		SkipRange string   `json:"skipRange,omitempty"`
	}
	// FBCBundle is an olm.bundle.
	FBCBundle struct {
		Schema        string            `json:"schema"`
		Name          string            `json:"name"`
		Package       string            `json:"package"`
		Image         string            `json:"image"`
		Properties    []FBCProperty     `json:"properties"`
		RelatedImages []FBCRelatedImage `json:"relatedImages,omitempty"`
	}
	// FBCProperty is a bundle's property (olm.package, olm.csv.metadata, ...).
	FBCProperty struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	}
	// FBCRelatedImage is an image a bundle needs, for mirroring.
	FBCRelatedImage struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
	// CSVMetadata is the value of olm.csv.metadata: what OperatorHub shows
	// of a bundle, as `opm render` (with its default migrations) writes it.
	CSVMetadata struct {
		Annotations               map[string]string                  `json:"annotations,omitempty"`
		APIServiceDefinitions     v1alpha1.APIServiceDefinitions     `json:"apiServiceDefinitions,omitempty"`
		CustomResourceDefinitions v1alpha1.CustomResourceDefinitions `json:"crdDescriptions,omitempty"`
		Description               string                             `json:"description,omitempty"`
		DisplayName               string                             `json:"displayName,omitempty"`
		InstallModes              []v1alpha1.InstallMode             `json:"installModes,omitempty"`
		Keywords                  []string                           `json:"keywords,omitempty"`
		Labels                    map[string]string                  `json:"labels,omitempty"`
		Links                     []v1alpha1.AppLink                 `json:"links,omitempty"`
		Maintainers               []v1alpha1.Maintainer              `json:"maintainers,omitempty"`
		Maturity                  string                             `json:"maturity,omitempty"`
		MinKubeVersion            string                             `json:"minKubeVersion,omitempty"`
		NativeAPIs                []metav1.GroupVersionKind          `json:"nativeAPIs,omitempty"`
		Provider                  v1alpha1.AppLink                   `json:"provider,omitempty"`
	}
)

// LoadBundle reads a bundle directory's CSV and annotations.
func LoadBundle(dir string) (*v1alpha1.ClusterServiceVersion, map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return nil, nil, err
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(raw, &meta); err != nil {
		return nil, nil, fmt.Errorf("%s: metadata/annotations.yaml: %w", dir, err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
	if err != nil {
		return nil, nil, err
	}
	if len(files) != 1 {
		return nil, nil, fmt.Errorf("%s: %d ClusterServiceVersions, want one", dir, len(files))
	}
	objs, err := readObjects(files[0])
	if err != nil {
		return nil, nil, err
	}
	var csv v1alpha1.ClusterServiceVersion
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &csv); err != nil {
		return nil, nil, err
	}
	return &csv, meta.Annotations, nil
}

// Catalog is the file-based catalog of the bundle in dir, whose image (by
// digest) is image: its package, its channel with the bundle alone (its
// skipRange lets every earlier release upgrade to it), and the bundle with
// the properties OLM resolves and OperatorHub shows it by.
func Catalog(dir, image string) ([]byte, error) {
	if _, _, err := SplitDigestRef(image); err != nil {
		return nil, fmt.Errorf("the bundle's %w", err)
	}
	csv, ann, err := LoadBundle(dir)
	if err != nil {
		return nil, err
	}
	pkg := ann["operators.operatorframework.io.bundle.package.v1"]
	channel := ann["operators.operatorframework.io.bundle.channel.default.v1"]
	if pkg == "" || channel == "" || strings.Contains(ann["operators.operatorframework.io.bundle.channels.v1"], ",") {
		return nil, fmt.Errorf("%s: want a package and one default channel, have %v", dir, ann)
	}
	p := FBCPackage{Schema: "olm.package", Name: pkg, DefaultChannel: channel, Description: csv.Spec.Description}
	if len(csv.Spec.Icon) > 0 {
		data, err := decodeBase64(csv.Spec.Icon[0].Data)
		if err != nil {
			return nil, fmt.Errorf("the CSV's icon: %w", err)
		}
		p.Icon = &FBCIcon{Data: data, MediaType: csv.Spec.Icon[0].MediaType}
	}
	ch := FBCChannel{Schema: "olm.channel", Name: channel, Package: pkg, Entries: []FBCChannelEntry{{
		Name: csv.Name, Replaces: csv.Spec.Replaces, Skips: csv.Spec.Skips, SkipRange: csv.Annotations["olm.skipRange"],
	}}}
	pkgProp, err := json.Marshal(map[string]string{"packageName": pkg, "version": csv.Spec.Version.String()})
	if err != nil {
		return nil, err
	}
	metaProp, err := json.Marshal(CSVMetadata{
		Annotations: csv.Annotations, APIServiceDefinitions: csv.Spec.APIServiceDefinitions,
		CustomResourceDefinitions: csv.Spec.CustomResourceDefinitions, Description: csv.Spec.Description,
		DisplayName: csv.Spec.DisplayName, InstallModes: csv.Spec.InstallModes, Keywords: csv.Spec.Keywords,
		Labels: csv.Labels, Links: csv.Spec.Links, Maintainers: csv.Spec.Maintainers, Maturity: csv.Spec.Maturity,
		MinKubeVersion: csv.Spec.MinKubeVersion, NativeAPIs: csv.Spec.NativeAPIs, Provider: csv.Spec.Provider,
	})
	if err != nil {
		return nil, err
	}
	b := FBCBundle{
		Schema: "olm.bundle", Name: csv.Name, Package: pkg, Image: image,
		Properties: []FBCProperty{
			{Type: "olm.package", Value: pkgProp},
			{Type: "olm.csv.metadata", Value: metaProp},
		},
		// As `opm render` lists them: the bundle image, unnamed, then the
		// CSV's.
		RelatedImages: []FBCRelatedImage{{Name: "", Image: image}},
	}
	for _, r := range csv.Spec.RelatedImages {
		b.RelatedImages = append(b.RelatedImages, FBCRelatedImage{Name: r.Name, Image: r.Image})
	}
	var out bytes.Buffer
	for i, doc := range []any{p, ch, b} {
		data, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(data)
	}
	return out.Bytes(), nil
}

func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
