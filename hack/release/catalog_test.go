package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"
)

const testBundleImage = "ghcr.io/appuio/machine-api-provider-bundle-cloudscale@sha256:1111111111111111111111111111111111111111111111111111111111111111"

// TestCatalog checks the file-based catalog of each cloud's bundle as
// `opm validate` would (operator-registry's model): one olm.package whose
// default channel exists, one olm.channel whose entries are bundles of the
// catalog, with a valid skipRange, and one olm.bundle of that package named
// as its CSV, with the olm.package property (the CSV's version) and the
// olm.csv.metadata OperatorHub shows; the bundle image by digest among its
// related images, and the provider's.
func TestCatalog(t *testing.T) {
	for _, cloud := range clouds {
		t.Run(cloud, func(t *testing.T) {
			dir, _ := bundleOf(t, cloud)
			data, err := Catalog(dir, testBundleImage)
			if err != nil {
				t.Fatal(err)
			}
			csv, _, err := LoadBundle(dir)
			if err != nil {
				t.Fatal(err)
			}
			var pkgs []FBCPackage
			var channels []FBCChannel
			var bundles []FBCBundle
			for _, doc := range strings.Split(string(data), "\n---\n") {
				var schema struct{ Schema string }
				if err := yaml.Unmarshal([]byte(doc), &schema); err != nil {
					t.Fatal(err)
				}
				var err error
				switch schema.Schema {
				case "olm.package":
					var p FBCPackage
					err = yaml.UnmarshalStrict([]byte(doc), &p)
					pkgs = append(pkgs, p)
				case "olm.channel":
					var c FBCChannel
					err = yaml.UnmarshalStrict([]byte(doc), &c)
					channels = append(channels, c)
				case "olm.bundle":
					var b FBCBundle
					err = yaml.UnmarshalStrict([]byte(doc), &b)
					bundles = append(bundles, b)
				default:
					t.Fatalf("a document of schema %q:\n%s", schema.Schema, doc)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(pkgs) != 1 || len(channels) != 1 || len(bundles) != 1 {
				t.Fatalf("%d packages, %d channels, %d bundles", len(pkgs), len(channels), len(bundles))
			}
			p, c, b := pkgs[0], channels[0], bundles[0]
			pkg := "machine-api-provider-" + cloud
			if p.Name != pkg || p.DefaultChannel != c.Name || c.Package != pkg || b.Package != pkg {
				t.Errorf("package %+v, channel %s of %s, bundle of %s", p, c.Name, c.Package, b.Package)
			}
			if p.Icon == nil || !strings.Contains(string(p.Icon.Data), "<svg") || p.Description == "" {
				t.Errorf("the package has no icon or description")
			}
			if len(c.Entries) != 1 || c.Entries[0].Name != b.Name || b.Name != csv.Name {
				t.Errorf("channel entries %v, bundle %s, CSV %s", c.Entries, b.Name, csv.Name)
			}
			if r, err := semver.ParseRange(c.Entries[0].SkipRange); err != nil || !r(semver.MustParse("1.2.2")) || r(csv.Spec.Version.Version) {
				t.Errorf("skipRange %q (%v): want every earlier version, not this one", c.Entries[0].SkipRange, err)
			}
			if b.Image != testBundleImage {
				t.Errorf("bundle image %s", b.Image)
			}
			props := map[string]json.RawMessage{}
			for _, prop := range b.Properties {
				if _, dup := props[prop.Type]; dup {
					t.Errorf("property %s twice", prop.Type)
				}
				props[prop.Type] = prop.Value
			}
			var pp struct{ PackageName, Version string }
			if err := json.Unmarshal(props["olm.package"], &pp); err != nil || pp.PackageName != pkg || pp.Version != csv.Spec.Version.String() {
				t.Errorf("olm.package %s (%v)", props["olm.package"], err)
			}
			var meta CSVMetadata
			if err := json.Unmarshal(props["olm.csv.metadata"], &meta); err != nil || meta.DisplayName != csv.Spec.DisplayName || len(meta.NativeAPIs) != 3 || len(meta.InstallModes) != 4 {
				t.Errorf("olm.csv.metadata %s (%v)", props["olm.csv.metadata"], err)
			}
			images := map[string]string{}
			for _, r := range b.RelatedImages {
				images[r.Image] = r.Name
			}
			if name, ok := images[testBundleImage]; !ok || name != "" || images[testImage] != ImageName {
				t.Errorf("related images %v", b.RelatedImages)
			}
			if _, err := Catalog(dir, "ghcr.io/appuio/bundle:v1"); err == nil {
				t.Error("a catalog of a bundle image by tag")
			}
		})
	}
}
