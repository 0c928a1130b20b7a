package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// flatten reads img's flattened file system: each path's header and
// contents.
func flatten(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	files := map[string]*tar.Header{}
	contents := map[string][]byte{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, contents
		} else if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		if contents[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBuildIsReproducibleAndComplete(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("#!not really a binary\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{Binary: bin, Arch: "arm64", Created: time.Unix(1700000000, 0).UTC(), RefName: "machine-api-provider:latest", Revision: "abc"}

	var digests []string
	var tarballs [][]byte
	for i := range 2 {
		img, err := Build(o)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "image.tar")
		if err := WriteOCITarball(Index(img, o.RefName), out, o.Created); err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
		tarballs = append(tarballs, data)
		if i == 0 {
			time.Sleep(1100 * time.Millisecond) // a clock-dependent build would differ now
		}
	}
	if digests[0] != digests[1] || !bytes.Equal(tarballs[0], tarballs[1]) {
		t.Fatalf("two builds differ: %v", digests)
	}

	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != BinaryPath {
		t.Errorf("user %q, entrypoint %v", cf.Config.User, cf.Config.Entrypoint)
	}
	if !slices.Contains(cf.Config.Env, "SSL_CERT_FILE="+TrustBundle) {
		t.Errorf("env %v: want SSL_CERT_FILE=%s", cf.Config.Env, TrustBundle)
	}
	if cf.Architecture != "arm64" || cf.OS != "linux" || !cf.Created.Time.Equal(o.Created) {
		t.Errorf("platform %s/%s, created %v", cf.OS, cf.Architecture, cf.Created)
	}

	// The flattened file system.
	files, contents := flatten(t, img)
	for _, h := range files {
		if !h.ModTime.Equal(o.Created) {
			t.Errorf("%s: mtime %v", h.Name, h.ModTime)
		}
	}
	for name, want := range map[string]struct {
		mode int64
		uid  int
	}{
		"machine-api-provider": {0o755, 0},
		"etc/passwd":           {0o644, 0},
		"etc/group":            {0o644, 0},
		CABundle[1:]:           {0o644, 0},
		"home/nonroot":         {0o700, NonRoot},
		"tmp":                  {0o1777, 0},
	} {
		h, ok := files[name]
		if !ok {
			t.Errorf("no %s in the image", name)
			continue
		}
		if h.Mode != want.mode || h.Uid != want.uid || h.Gid != want.uid {
			t.Errorf("%s: mode %o uid %d gid %d, want %o %d", name, h.Mode, h.Uid, h.Gid, want.mode, want.uid)
		}
	}
	if !bytes.Contains(contents["etc/passwd"], []byte("nonroot:x:65532:65532:")) {
		t.Errorf("/etc/passwd: %s", contents["etc/passwd"])
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := contents[CABundle[1:]]; ; n++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		pool.AddCert(c)
	}
	if n < 100 {
		t.Errorf("%d CA certificates, want the NSS roots (>100)", n)
	}

	// The tarball is an OCI layout that go-containerregistry reads back.
	ldir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(tarballs[0]))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(ldir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lp, err := layout.FromPath(ldir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != digests[0] {
		t.Fatalf("index: %+v", im.Manifests)
	}
	if got := im.Manifests[0].Annotations["io.containerd.image.name"]; got != "docker.io/library/machine-api-provider:latest" {
		t.Errorf("io.containerd.image.name %q", got)
	}
	back, err := lp.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if layers, err := back.Layers(); err != nil || len(layers) != 2 {
		t.Errorf("layers: %d, %v", len(layers), err)
	}

	// Pushed as it is to a registry of one's own (docs/install.md: one
	// `skopeo copy --preserve-digests oci-archive:…`), the image keeps the
	// digest the release's manifests pin: go-containerregistry's registry
	// serves the same manifest under that digest.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://")+"/appuio/machine-api-provider:v0.1.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, back); err != nil {
		t.Fatalf("pushing the archive's image: %v", err)
	}
	pushed, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	if pushed.Digest.String() != digests[0] {
		t.Errorf("the registry holds the pushed image as %s, want the archive's %s", pushed.Digest, digests[0])
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string][2]string{
		"machine-api-provider:latest":                {"docker.io/library/machine-api-provider:latest", "latest"},
		"machine-api-provider":                       {"docker.io/library/machine-api-provider:latest", "latest"},
		"appuio/machine-api-provider:v1":             {"docker.io/appuio/machine-api-provider:v1", "v1"},
		"ghcr.io/appuio/machine-api-provider:v0.1.0": {"ghcr.io/appuio/machine-api-provider:v0.1.0", "v0.1.0"},
		"localhost:5000/machine-api-provider":        {"localhost:5000/machine-api-provider:latest", "latest"},
		"localhost/machine-api-provider:dev":         {"localhost/machine-api-provider:dev", "dev"},
	} {
		full, tag := normalize(in)
		if full != want[0] || tag != want[1] {
			t.Errorf("normalize(%q) = %q, %q; want %q, %q", in, full, tag, want[0], want[1])
		}
	}
}
