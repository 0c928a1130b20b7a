// Command image builds the machine-api-provider container image without a
// container engine or registry: it puts a statically linked binary on an
// empty base, together with what distroless/static:nonroot would provide (a
// nonroot user 65532, CA certificates, /tmp), and writes the image as an OCI
// image layout tarball (`oci-layout`, `index.json`, `blobs/sha256/...`).
//
// The output is reproducible: every timestamp (config, history, file mtimes,
// the tarball's own entries) is --source-date-epoch, owners and modes are
// fixed, entries are sorted, and the CA bundle comes from the pinned
// golang.org/x/crypto/x509roots/fallback module rather than from the build
// host. Same binary and epoch in, same digest out.
//
// Load the result with `docker load -i` (Docker 25+), `podman load -i`,
// `skopeo copy oci-archive:<file> docker://<registry>/<name>:<tag>` or
// `kind load image-archive <file>`.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

const (
	// BinaryPath is where the binary sits in the image, and the entrypoint.
	BinaryPath = "/machine-api-provider"
	// NonRoot is the uid and gid the image runs as (distroless's nonroot).
	NonRoot = 65532
	// CABundle holds the image's CA certificates (Mozilla's, as on
	// Debian and distroless).
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// TrustBundle is where OpenShift's machine-api Deployments mount the
	// cluster's trust bundle (proxy CAs included), the RHEL path. The
	// image points SSL_CERT_FILE at it: Go reads that file when it is
	// there and, either way, every file in /etc/ssl/certs, so the pod
	// trusts the union. (Without the variable Go would stop at CABundle,
	// the first of its default files, and never read the mounted bundle.)
	TrustBundle = "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"
)

// Options describe the image.
type Options struct {
	// Binary is the path of the statically linked binary on this machine.
	Binary string
	// Arch is the GOARCH the binary was built for.
	Arch string
	// Created is the time of every timestamp in the image.
	Created time.Time
	// RefName names the image in index.json, e.g. machine-api-provider:latest.
	RefName string
	// Revision and Source go into the OCI labels when set.
	Revision, Source string
	// Bundle, when set, is an OLM bundle directory to build the bundle
	// image of (BuildBundle) instead of the provider's image.
	Bundle string
}

func main() {
	var (
		o      Options
		d      DemoOptions
		tools  string
		out    string
		epoch  string
		digest string
	)
	flag.StringVar(&o.Binary, "binary", "", "statically linked binary to put at "+BinaryPath)
	flag.StringVar(&o.Arch, "arch", "amd64", "GOARCH the binary was built for")
	flag.StringVar(&epoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of every timestamp in the image (default $SOURCE_DATE_EPOCH)")
	flag.StringVar(&o.RefName, "name", "machine-api-provider:latest", "image name and tag recorded in index.json")
	flag.StringVar(&o.Revision, "revision", "", "VCS revision for the org.opencontainers.image.revision label")
	flag.StringVar(&o.Source, "source", "https://github.com/appuio/machine-api-provider", "source URL for the org.opencontainers.image.source label")
	flag.StringVar(&out, "output", "", "OCI layout tarball to write")
	flag.StringVar(&digest, "digest-file", "", "also write the manifest digest to this file")
	flag.StringVar(&o.Bundle, "bundle", "", "build the OLM bundle image of this bundle directory (manifests/, metadata/) instead of the provider's image")
	flag.StringVar(&d.ToolsDir, "demo-tools", "", "build the demo image (make demo in a container) with the tools of this directory, the static --binary as its entrypoint")
	flag.StringVar(&tools, "demo-tool", "", "comma-separated: the files and directories of --demo-tools the demo image takes")
	flag.StringVar(&d.OpenShiftAPI, "openshift-api", "", "the openshift/api module's directory, whose CRDs the demo image takes")
	flag.Parse()
	if tools != "" {
		d.Tools = strings.Split(tools, ",")
	}
	if err := run(o, d, epoch, out, digest); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o Options, d DemoOptions, epoch, out, digestFile string) error {
	if (o.Binary == "") == (o.Bundle == "") || out == "" {
		return errors.New("--output and one of --binary and --bundle are required")
	}
	if d.ToolsDir != "" && (len(d.Tools) == 0 || d.OpenShiftAPI == "" || o.Binary == "") {
		return errDemoFlags
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("--source-date-epoch %q: want Unix seconds (e.g. git log -1 --format=%%ct): %v", epoch, err)
	}
	o.Created = time.Unix(secs, 0).UTC()

	var img v1.Image
	switch {
	case o.Bundle != "":
		img, err = BuildBundle(o.Bundle, o.Created, o.Arch)
	case d.ToolsDir != "":
		d.Binary, d.Arch = o.Binary, o.Arch
		scratch, err := os.MkdirTemp("", "demo-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(scratch)
		img, err = BuildDemo(o, d, scratch)
		if err != nil {
			return err
		}
	default:
		img, err = Build(o)
	}
	if err != nil {
		return err
	}
	idx := Index(img, o.RefName)
	if err := WriteOCITarball(idx, out, o.Created); err != nil {
		return err
	}
	dg, err := img.Digest()
	if err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	if digestFile != "" {
		if err := os.WriteFile(digestFile, []byte(dg.String()+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %s (%s, OCI image layout tarball, %d bytes)\n  manifest digest %s\n", out, o.RefName, st.Size(), dg)
	return nil
}

// Build returns the image: a base layer (users, CA certificates, /tmp) and
// a layer with the binary.
func Build(o Options) (v1.Image, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	base, err := baseLayer(o.Created)
	if err != nil {
		return nil, err
	}
	app, err := layer(o.Created, []entry{{name: BinaryPath[1:], mode: 0o755, data: bin}})
	if err != nil {
		return nil, err
	}

	return assemble(o.Arch, o.Created, []layerOf{
		{base, baseCreatedBy, "base"},
		{app, "machine-api-provider hack/image: " + BinaryPath, "binary"},
	}, v1.Config{
		User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
		Entrypoint: []string{BinaryPath},
		WorkingDir: "/",
		Env: []string{
			"PATH=" + defaultPath,
			"SSL_CERT_FILE=" + TrustBundle,
		},
		Labels: o.labels("machine-api-provider"),
	})
}

// defaultPath is the images' PATH.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// labels are the OCI labels of an image titled title.
func (o Options) labels(title string) map[string]string {
	labels := map[string]string{
		"org.opencontainers.image.title":   title,
		"org.opencontainers.image.created": o.Created.Format(time.RFC3339),
	}
	if o.Source != "" {
		labels["org.opencontainers.image.source"] = o.Source
	}
	if o.Revision != "" {
		labels["org.opencontainers.image.revision"] = o.Revision
	}
	return labels
}

// layerOf is a layer of an image and its history.
type layerOf struct {
	layer              v1.Layer
	createdBy, comment string
}

// assemble is an OCI image of layers for linux/arch, every timestamp
// created, with the config cfg.
func assemble(arch string, created time.Time, layers []layerOf, cfg v1.Config) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	t := v1.Time{Time: created}
	var adds []mutate.Addendum
	for _, l := range layers {
		adds = append(adds, mutate.Addendum{Layer: l.layer, MediaType: types.OCILayer, History: v1.History{Created: t, CreatedBy: l.createdBy, Comment: l.comment}})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = arch
	cf.OS = "linux"
	cf.Created = t
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// baseCreatedBy is the base layer's history.
const baseCreatedBy = "machine-api-provider hack/image: /etc/passwd, /etc/group, CA certificates (x509roots/fallback), /tmp"

// baseLayer is what distroless/static:nonroot would provide: users, CA
// certificates, /tmp.
func baseLayer(created time.Time) (v1.Layer, error) {
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	return layer(created, []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: CABundle[1:], mode: 0o644, data: certs},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: NonRoot},
		{name: "tmp/", mode: 0o1777},
	})
}

// Index wraps img in an OCI image index naming it refName the way BuildKit's
// OCI exporter does: the fully qualified name for containerd (docker load,
// ctr import, kind load image-archive), the tag alone as the OCI ref.name
// (skopeo's oci-archive:<file>:<tag>).
func Index(img v1.Image, refName string) v1.ImageIndex {
	full, tag := normalize(refName)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, mutate.IndexAddendum{
		Add: img,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			"io.containerd.image.name":          full,
			"org.opencontainers.image.ref.name": tag,
		}},
	})
}

// normalize returns the fully qualified form of an image reference, as a
// Pod's image: field resolves it (machine-api-provider:latest is
// docker.io/library/machine-api-provider:latest), and its tag.
func normalize(ref string) (full, tag string) {
	name, tag := ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, tag = ref[:i], ref[i+1:]
	}
	first, _, found := strings.Cut(name, "/")
	switch {
	case !found:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	}
	return name + ":" + tag, tag
}

// WriteOCITarball writes idx as an OCI image layout into a tarball at path,
// with every entry owned by root, dated mtime and sorted by name.
func WriteOCITarball(idx v1.ImageIndex, path string, mtime time.Time) error {
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := layout.Write(dir, idx); err != nil {
		return err
	}
	entries, err := dirEntries(dir, dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := writeTar(f, mtime, entries); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// dirEntries are the directories and regular files below root (and root
// itself unless it is base), named relative to base, directories 0755 and
// files 0644: owners, modes and times come from writeTar, not the disk.
func dirEntries(base, root string) ([]entry, error) {
	var entries []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == base {
			return err
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			entries = append(entries, entry{name: rel + "/", mode: 0o755})
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		entries = append(entries, entry{name: rel, mode: 0o644, src: p})
		return nil
	})
	return entries, err
}

// entry is a file (data, or read from src when written) or directory (name
// ending in /) in a tarball; uid is also its gid.
type entry struct {
	name string
	mode int64
	uid  int
	data []byte
	src  string
}

func layer(mtime time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	if err := writeTar(&buf, mtime, entries); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func writeTar(w io.Writer, mtime time.Time, entries []entry) error {
	sorted := append([]entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	tw := tar.NewWriter(w)
	for _, e := range sorted {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if e.src == "" {
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
			continue
		}
		if err := copyInto(tw, h, e.src); err != nil {
			return err
		}
	}
	return tw.Close()
}

// copyInto writes the file src as h (its size) into tw, streamed.
func copyInto(tw *tar.Writer, h *tar.Header, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err == nil && n != h.Size {
		err = fmt.Errorf("%s changed while it was read", src)
	}
	return err
}

// caBundle returns the Mozilla NSS roots of the pinned x509roots/fallback
// module as PEM. Roots with constraints a PEM file cannot express (NSS
// "distrust after" dates) are left out rather than trusted without them.
func caBundle() ([]byte, error) {
	var buf bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("x509roots/fallback: no roots")
	}
	return buf.Bytes(), nil
}
