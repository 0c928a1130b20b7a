package release_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// ociImage is the one image of an OCI image layout tarball, read with the
// standard library alone (not with the builder's go-containerregistry):
// its manifest's digest, checked against the blob's content, and the files
// of its layers.
type ociImage struct {
	digest string
	config struct {
		Config struct {
			User       string
			Entrypoint []string
			Env        []string
		}
	}
	files map[string][]byte
}

func readOCI(t *testing.T, path string) ociImage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = data
	}
	blob := func(digest string) []byte {
		t.Helper()
		hexDigest, ok := strings.CutPrefix(digest, "sha256:")
		data, found := entries["blobs/sha256/"+hexDigest]
		if !ok || !found {
			t.Fatalf("%s: no blob %s", path, digest)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
			t.Fatalf("%s: blob %s has digest sha256:%x", path, digest, sum)
		}
		return data
	}
	type descriptor struct {
		MediaType, Digest string
	}
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(entries["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("%s: index.json: %v, %d manifests", path, err, len(index.Manifests))
	}
	img := ociImage{digest: index.Manifests[0].Digest, files: map[string][]byte{}}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(blob(img.digest), &manifest); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &img.config); err != nil {
		t.Fatal(err)
	}
	for _, l := range manifest.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(blob(l.Digest)))
		if err != nil {
			t.Fatal(err)
		}
		lr := tar.NewReader(zr)
		for {
			h, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				data, err := io.ReadAll(lr)
				if err != nil {
					t.Fatal(err)
				}
				img.files[h.Name] = data
			}
		}
	}
	return img
}
