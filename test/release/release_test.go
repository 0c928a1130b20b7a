// Package release tests `make release` end to end, on a copy of the
// repository: the release names the image it built by digest everywhere
// (the image's own tarball, config/image at the release's tag,
// install-<cloud>.yaml, the OLM bundles and catalog, the SBOM), `oc apply -k`
// of an overlay at the tag (with the kustomize oc embeds, from a git URL)
// renders the release's install-<cloud>.yaml, the image built again at the
// tag has the same digest, and (install_test.go) a release installs on a
// control plane from its install-<cloud>.yaml alone, its deployer coming up
// as its service account.
package release_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// Version is the release the tests make.
const Version = "v0.0.0-dev"

// ImageRepo is the repository the release names its image in (the
// Makefile's IMAGE_REPO).
const ImageRepo = "ghcr.io/appuio/machine-api-provider"

var clouds = []string{"cloudscale", "exoscale"}

// built is the release the tests share: `make release` takes a minute or
// two, once.
var built struct {
	once sync.Once
	r    *release
	err  error
	tmp  string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.tmp != "" {
		_ = os.RemoveAll(built.tmp)
	}
	os.Exit(code)
}

// release is a release made by `make release` in a copy of the repository.
type release struct {
	// repo is the copy, a git repository whose HEAD is the release's tag.
	repo string
	// dir is its _output/release/<Version>.
	dir string
	// digest is the image's manifest digest, as make release recorded it.
	digest string
	// took is how long make release took.
	took time.Duration
}

func (r *release) image() string { return ImageRepo + "@" + r.digest }

// makeRelease copies the repository (what git has and would add: the
// working tree without ignored files) into a new git repository, commits it,
// runs `make release VERSION=<Version>` there with the repository's bin/,
// then commits the pin as a release does and tags it.
func makeRelease(t *testing.T) *release {
	t.Helper()
	if testing.Short() {
		t.Skip("make release builds the image: not in -short")
	}
	built.once.Do(func() { built.r, built.err = doMakeRelease() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.r
}

func doMakeRelease() (*release, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	bin, err := testenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "release-test-")
	if err != nil {
		return nil, err
	}
	// The repository stays for the other tests of the package; TestMain
	// removes it.
	built.tmp = tmp
	repo := filepath.Join(tmp, "repo")
	files, err := run(root, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	for name := range strings.SplitSeq(strings.TrimRight(files, "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, name), filepath.Join(repo, name)); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink(bin, filepath.Join(repo, "bin")); err != nil {
		return nil, err
	}
	env := []string{
		"GIT_AUTHOR_NAME=release test", "GIT_AUTHOR_EMAIL=release-test@example.com",
		"GIT_COMMITTER_NAME=release test", "GIT_COMMITTER_EMAIL=release-test@example.com",
		"GIT_AUTHOR_DATE=2025-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2025-01-02T03:04:05Z",
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"commit", "-q", "-m", "the source of the release"},
	} {
		if _, err := run(repo, env, "git", args...); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	// This machine's tool only: each other platform compiles the module
	// once more, and make cross (CI, beside the tests that wait) builds and
	// checks those.
	platform := "RELEASE_PLATFORMS=" + runtime.GOOS + "/" + runtime.GOARCH
	if out, err := run(repo, nil, "make", "--no-print-directory", "release", "VERSION="+Version, "IMAGE_REPO="+ImageRepo, platform); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, tail(out, 40))
	}
	r := &release{repo: repo, dir: filepath.Join(repo, "_output", "release", Version), took: time.Since(start)}
	d, err := os.ReadFile(filepath.Join(r.dir, "machine-api-provider.oci.tar.digest"))
	if err != nil {
		return nil, err
	}
	r.digest = strings.TrimSpace(string(d))
	// The release commit: the pin alone, tagged.
	env[4], env[5] = "GIT_AUTHOR_DATE=2025-01-02T04:00:00Z", "GIT_COMMITTER_DATE=2025-01-02T04:00:00Z"
	for _, args := range [][]string{
		{"add", "config/image/kustomization.yaml"},
		{"commit", "-q", "-m", "Release " + Version},
		{"tag", Version},
	} {
		if _, err := run(repo, env, "git", args...); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// run runs name in dir and returns its combined output.
func run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s in %s: %w", name, strings.Join(args, " "), dir, err)
	}
	return out.String(), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// copyFile copies src to dst with its mode and times: make then sees the
// copy's tool pins as old as the tools in bin/ and builds none of them
// again.
func copyFile(src, dst string) error {
	st, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted in the working tree
	} else if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
		return err
	}
	return os.Chtimes(dst, st.ModTime(), st.ModTime())
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// images returns every image objs name: the containers' of each
// Deployment, and the deployer's PROVIDER_IMAGE.
func images(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c := c.(map[string]any)
			out = append(out, c["image"].(string))
			env, _, _ := unstructured.NestedSlice(c, "env")
			for _, e := range env {
				if e := e.(map[string]any); e["name"] == "PROVIDER_IMAGE" {
					out = append(out, e["value"].(string))
				}
			}
		}
	}
	return out
}

// TestReleaseNamesItsImageByDigest: the digest make release recorded is the
// digest of the image manifest in the release's image tarball, and every
// image the release's manifests name is that image by digest: config/image
// at the tag, install-<cloud>.yaml, the bundles' CSVs and the catalogs
// (which name the bundle images by the digests of their tarballs). The
// release notes name it and come from CHANGELOG.md; SHA256SUMS holds.
func TestReleaseNamesItsImageByDigest(t *testing.T) {
	r := makeRelease(t)
	t.Logf("make release took %s", r.took.Round(time.Second))
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(r.digest) {
		t.Fatalf("the recorded digest %q is none", r.digest)
	}
	img := readOCI(t, filepath.Join(r.dir, "machine-api-provider.oci.tar"))
	if img.digest != r.digest {
		t.Errorf("the image tarball's manifest is %s; make release recorded %s", img.digest, r.digest)
	}

	pin, err := run(r.repo, nil, "git", "show", Version+":config/image/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pin, "newName: "+ImageRepo+"\n  digest: "+r.digest+"\n") {
		t.Errorf("config/image at %s does not pin %s:\n%s", Version, r.image(), pin)
	}
	for _, cloud := range clouds {
		objs := readObjects(t, filepath.Join(r.dir, "install-"+cloud+".yaml"))
		named := images(objs)
		if len(named) < 3 {
			t.Errorf("install-%s.yaml names %d images: %v", cloud, len(named), named)
		}
		for _, image := range named {
			if image != r.image() {
				t.Errorf("install-%s.yaml names %s, want %s", cloud, image, r.image())
			}
		}

		csv, err := os.ReadFile(filepath.Join(r.dir, "bundle", cloud, "manifests", "machine-api-provider-"+cloud+".clusterserviceversion.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		refs := regexp.MustCompile(`[a-z0-9./-]+(?::[a-z0-9.-]+)?@sha256:[0-9a-f]{64}|image: \S+`).FindAllString(string(csv), -1)
		if len(refs) < 4 {
			t.Errorf("the %s CSV names %d images", cloud, len(refs))
		}
		for _, ref := range refs {
			if strings.TrimPrefix(ref, "image: ") != r.image() {
				t.Errorf("the %s CSV names %s, want %s", cloud, ref, r.image())
			}
		}
		// Every alert links the runbook of the release's tag, a page the tag
		// has: an on-call engineer on a release reads its runbooks, not main's.
		runbooks := 0
		for _, m := range regexp.MustCompile(`runbook_url: (\S+)`).FindAllStringSubmatch(string(mustRead(t, filepath.Join(r.dir, "install-"+cloud+".yaml"))), -1) {
			page, ok := strings.CutPrefix(m[1], "https://github.com/appuio/machine-api-provider/blob/"+Version+"/")
			if !ok {
				t.Errorf("install-%s.yaml links the runbook %s, not one of %s", cloud, m[1], Version)
				continue
			}
			if _, err := run(r.repo, nil, "git", "cat-file", "-e", Version+":"+page); err != nil {
				t.Errorf("install-%s.yaml links %s, which the tag %s does not have", cloud, page, Version)
			}
			runbooks++
		}
		if runbooks < 10 {
			t.Errorf("install-%s.yaml links %d runbooks", cloud, runbooks)
		}
		bundle := readOCI(t, filepath.Join(r.dir, "bundle", "machine-api-provider-"+cloud+"-bundle.oci.tar"))
		catalog, err := os.ReadFile(filepath.Join(r.dir, "catalog", "machine-api-provider-"+cloud, "catalog.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("image: %s-%s-bundle@%s\n", ImageRepo, cloud, bundle.digest)
		if !strings.Contains(string(catalog), want) {
			t.Errorf("the %s catalog does not name its bundle image %q:\n%s", cloud, want, catalog)
		}
		if !strings.Contains(string(catalog), "image: "+r.image()+"\n") {
			t.Errorf("the %s catalog does not relate the provider's image", cloud)
		}
		if string(bundle.files["manifests/machine-api-provider-"+cloud+".clusterserviceversion.yaml"]) != string(csv) {
			t.Errorf("the %s bundle image does not hold the bundle's CSV", cloud)
		}
	}

	notes, err := os.ReadFile(filepath.Join(r.dir, "RELEASE_NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	changelog, err := os.ReadFile(filepath.Join(r.repo, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The first entry of [Unreleased], or (right after a release) the
	// words for none.
	unreleased, _, _ := strings.Cut(strings.SplitN(string(changelog), "## [Unreleased]", 2)[1], "\n## [")
	first := regexp.MustCompile(`(?m)^- .*$`).FindString(unreleased)
	if first == "" {
		first = "No change since the last release."
	}
	for _, s := range []string{"# machine-api-provider " + Version, r.image(), first,
		"oc apply -k 'https://github.com/appuio/machine-api-provider//config/overlays/exoscale?ref=" + Version + "'"} {
		if !strings.Contains(string(notes), s) {
			t.Errorf("RELEASE_NOTES.md lacks %q", s)
		}
	}

	sums, err := os.ReadFile(filepath.Join(r.dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(sums)) {
		sum, name, ok := strings.Cut(strings.TrimSpace(line), "  ")
		data, err := os.ReadFile(filepath.Join(r.dir, name))
		if !ok || err != nil {
			t.Errorf("SHA256SUMS: %q: %v", line, err)
			continue
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
			t.Errorf("SHA256SUMS: %s does not match", name)
		}
		n++
	}
	names := []string{"install-cloudscale.yaml", "install-exoscale.yaml", "machine-api-provider.oci.tar", "machine-api-provider.cdx.json", "RELEASE_NOTES.md"}
	for _, p := range platforms {
		names = append(names, "machine-api-provider-"+p.os+"-"+p.arch)
	}
	for _, name := range names {
		if !strings.Contains(string(sums), "./"+name+"\n") {
			t.Errorf("SHA256SUMS lacks %s", name)
		}
	}
	t.Logf("%d files in the release, image %s", n, r.image())
}

// TestSBOMIsTheImages: the SBOM is CycloneDX for the release's version, and
// describes the very binary in the image: the SHA-256 it records is the one
// of /machine-api-provider in the image's layers, whose modules it lists.
func TestSBOMIsTheImages(t *testing.T) {
	r := makeRelease(t)
	data, err := os.ReadFile(filepath.Join(r.dir, "machine-api-provider.cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sbom struct {
		BOMFormat, SpecVersion string
		Metadata               struct {
			Component struct {
				Name, Version string
			}
			Properties []struct{ Name, Value string }
		}
		Components []struct{ Name, Version string }
	}
	if err := json.Unmarshal(data, &sbom); err != nil {
		t.Fatal(err)
	}
	if sbom.BOMFormat != "CycloneDX" || sbom.Metadata.Component.Name != "github.com/appuio/machine-api-provider" || sbom.Metadata.Component.Version != Version {
		t.Errorf("SBOM %s %s of %s %s", sbom.BOMFormat, sbom.SpecVersion, sbom.Metadata.Component.Name, sbom.Metadata.Component.Version)
	}
	binary := readOCI(t, filepath.Join(r.dir, "machine-api-provider.oci.tar")).files["machine-api-provider"]
	if len(binary) == 0 {
		t.Fatal("the image has no /machine-api-provider")
	}
	sum := sha256.Sum256(binary)
	i := slices.IndexFunc(sbom.Metadata.Properties, func(p struct{ Name, Value string }) bool { return p.Name == "cdx:gomod:binary:hash:SHA-256" })
	if i < 0 || sbom.Metadata.Properties[i].Value != hex.EncodeToString(sum[:]) {
		t.Errorf("the SBOM's binary hash is not the image's binary's (%x)", sum)
	}
	for _, module := range []string{"github.com/cloudscale-ch/cloudscale-go-sdk/v8", "github.com/exoscale/egoscale/v3", "sigs.k8s.io/controller-runtime"} {
		if !slices.ContainsFunc(sbom.Components, func(c struct{ Name, Version string }) bool { return c.Name == module && c.Version != "" }) {
			t.Errorf("the SBOM does not list %s", module)
		}
	}
}

// TestOcApplyKOfTheTag renders each overlay the way `oc apply -k
// 'https://<repo>//config/overlays/<cloud>?ref=<tag>'` does, with the
// kustomize of OpenShift 4.14's oc (bin/kustomize-oc) cloning the release's
// tag from a git URL: it must work (nothing reaches outside the
// repository) and give the objects of the release's install-<cloud>.yaml.
func TestOcApplyKOfTheTag(t *testing.T) {
	r := makeRelease(t)
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, cloud := range clouds {
		url := fmt.Sprintf("file://%s//config/overlays/%s?ref=%s", r.repo, cloud, Version)
		// In a directory that is not the repository, as an admin's.
		out, err := run(t.TempDir(), nil, filepath.Join(bin, "kustomize-oc"), "build", url)
		if err != nil {
			t.Fatalf("%v\n%s", err, tail(out, 20))
		}
		got := decode(t, []byte(out))
		want := readObjects(t, filepath.Join(r.dir, "install-"+cloud+".yaml"))
		g, _ := json.Marshal(byName(got))
		w, _ := json.Marshal(byName(want))
		if string(g) != string(w) {
			t.Errorf("%s at %s renders other objects than install-%s.yaml:\n%s\nwant\n%s", url, Version, cloud, g, w)
		}
	}
}

func byName(objs []*unstructured.Unstructured) map[string]map[string]any {
	m := map[string]map[string]any{}
	for _, u := range objs {
		m[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = u.Object
	}
	return m
}

// TestImageAtTheTagIsTheReleased: `make image` at the release's tag, whose
// commit changed only the pin, builds the image the pin names, byte for
// byte: anyone can rebuild a release and check its digest.
func TestImageAtTheTagIsTheReleased(t *testing.T) {
	r := makeRelease(t)
	if head, err := run(r.repo, nil, "git", "describe", "--tags", "--exact-match"); err != nil || strings.TrimSpace(head) != Version {
		t.Fatalf("HEAD is not %s: %q %v", Version, head, err)
	}
	if out, err := run(r.repo, nil, "make", "--no-print-directory", "image", "IMAGE="+ImageRepo+":"+Version); err != nil {
		t.Fatalf("%v\n%s", err, tail(out, 20))
	}
	d, err := os.ReadFile(filepath.Join(r.repo, "_output", "machine-api-provider.oci.tar.digest"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(d)); got != r.digest {
		t.Errorf("make image at %s builds %s; the release pins %s", Version, got, r.digest)
	}
}

// TestReleaseRefusesADirtyTree: the image is built from the commit, so
// make release refuses uncommitted changes (before it builds anything).
func TestReleaseRefusesADirtyTree(t *testing.T) {
	r := makeRelease(t)
	stray := filepath.Join(r.repo, "pkg", "stray.go")
	if err := os.WriteFile(stray, []byte("package pkg\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(stray)
	out, err := run(r.repo, nil, "make", "--no-print-directory", "release", "VERSION=v0.0.1")
	if err == nil || !strings.Contains(out, "commit them first") || !strings.Contains(out, "pkg/stray.go") {
		t.Errorf("make release on a dirty tree: %v\n%s", err, tail(out, 10))
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
