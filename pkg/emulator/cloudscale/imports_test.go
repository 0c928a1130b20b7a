package cloudscale_test

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

// newMirror serves files from the test, counting the downloads.
func newMirror(t *testing.T, files map[string][]byte) *imagefetch.Server {
	m := imagefetch.NewServer("", files)
	t.Cleanup(m.Close)
	return m
}

// waitImport follows an import with the SDK to status, at most a minute
// (the download runs in real time).
func (v *env) waitImport(id, status string) *cloudscale.CustomImageImport {
	v.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		imp, err := v.client.CustomImageImports.Get(v.ctx, id)
		if err != nil {
			v.t.Fatal(err)
		}
		if imp.Status == status {
			return imp
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("import %s is %s after a minute, want %s", id, imp.Status, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hexSum(b []byte) (string, string) {
	m, s := md5.Sum(b), sha256.Sum256(b)
	return hex.EncodeToString(m[:]), hex.EncodeToString(s[:])
}

// An import downloads the file: in_progress (and no image listed) until the
// download and the processing time are done, then success, the image with
// the file's checksums and the size its qcow2 header names, bootable in its
// zones.
func TestImportDownloadsTheImage(t *testing.T) {
	t.Parallel()
	image := imagefetch.FakeQCOW2(17<<30+1, "rhcos 9.6.20250523-0")
	m := newMirror(t, map[string][]byte{"/rhcos.qcow2": image})
	v := newEnv(t, emu.Config{BootTime: 10 * time.Second, CustomImages: []emu.CustomImageSeed{}})
	c := v.client
	req := &cloudscale.CustomImageImportRequest{
		URL: m.URL + "/rhcos.qcow2", Name: "RHCOS 9.6", Slug: "rhcos-9-6", UserDataHandling: "pass-through",
		FirmwareType: "uefi", SourceFormat: "qcow2", Zones: []string{"rma1", "lpg1"},
		TaggedResourceRequest: tagged("machine.appuio.io/boot-image", "managed"),
	}
	imp, err := c.CustomImageImports.Create(v.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Status != "in_progress" || imp.CustomImage.UUID != imp.UUID || imp.CustomImage.Name != "RHCOS 9.6" || imp.URL != req.URL {
		t.Fatalf("import answered %+v", imp)
	}
	// The slug is taken while the import runs.
	_, err = c.CustomImageImports.Create(v.ctx, req)
	fieldError(t, err, "slug")
	// Downloaded, but the processing time has not passed: still in progress,
	// and the image is not listed, nor can a server use it.
	waitFetched(t, m, 1)
	if got, _ := c.CustomImageImports.Get(v.ctx, imp.UUID); got.Status != "in_progress" {
		t.Fatalf("before the processing time: %+v", got)
	}
	if l, _ := c.CustomImages.List(v.ctx); len(l) != 0 {
		t.Fatalf("images listed during the import: %+v", l)
	}
	_, err = c.CustomImages.Get(v.ctx, imp.UUID)
	apiError(t, err, http.StatusNotFound)
	sreq := serverReq("early")
	sreq.Image = "custom:rhcos-9-6"
	_, err = c.Servers.Create(v.ctx, sreq)
	fieldError(t, err, "image")

	v.clock.Advance(10 * time.Second)
	done := v.waitImport(imp.UUID, "success")
	if done.ErrorMessage != "" || done.Tags["machine.appuio.io/boot-image"] != "managed" {
		t.Fatalf("done import %+v", done)
	}
	img, err := c.CustomImages.Get(v.ctx, imp.UUID)
	if err != nil {
		t.Fatal(err)
	}
	md5sum, sha := hexSum(image)
	if img.Checksums["md5"] != md5sum || img.Checksums["sha256"] != sha || img.SizeGB != 18 || img.FirmwareType != "uefi" ||
		img.Slug != "rhcos-9-6" || len(img.Zones) != 2 || img.Tags["machine.appuio.io/boot-image"] != "managed" {
		t.Fatalf("imported image %+v", img)
	}
	sreq.VolumeSizeGB = 18
	v.createServer(sreq)
	// Deleting the image: gone from the list, the slug free again.
	if err := c.CustomImages.Delete(v.ctx, img.UUID); err != nil {
		t.Fatal(err)
	}
	if l, _ := c.CustomImages.List(v.ctx); len(l) != 0 {
		t.Fatalf("after delete: %+v", l)
	}
	if _, err := c.CustomImageImports.Create(v.ctx, req); err != nil {
		t.Fatalf("the slug of a deleted image: %v", err)
	}
}

func waitFetched(t *testing.T, m *imagefetch.Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for m.Gets() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d downloads, want %d", m.Gets(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// What the cloud cannot import fails the import with its reason, and
// leaves no image; what it cannot accept is refused before anything starts.
func TestImportFailures(t *testing.T) {
	t.Parallel()
	m := newMirror(t, map[string][]byte{"/raw.img": []byte("not a qcow2 at all"), "/rhcos.qcow2": imagefetch.FakeQCOW2(1<<30, "x")})
	v := newEnv(t, emu.Config{})
	c := v.client
	for name, tc := range map[string]struct{ path, format, message string }{
		"missing file":      {"/gone.qcow2", "qcow2", "Expected HTTP 200, got HTTP 404"},
		"not qcow2":         {"/raw.img", "qcow2", "not in the qcow2 format"},
		"qcow2 said raw":    {"/rhcos.qcow2", "raw", "not in the raw format"},
		"nothing listening": {"", "qcow2", "connect"},
	} {
		u := m.URL + tc.path
		if tc.path == "" {
			u = "http://127.0.0.1:1/rhcos.qcow2"
		}
		imp, err := c.CustomImageImports.Create(v.ctx, &cloudscale.CustomImageImportRequest{URL: u, Name: name, SourceFormat: tc.format, Zones: []string{"rma1"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := v.waitImport(imp.UUID, "failed")
		if !strings.Contains(got.ErrorMessage, tc.message) {
			t.Errorf("%s: error_message %q, want %q", name, got.ErrorMessage, tc.message)
		}
	}
	if l, _ := c.CustomImages.List(v.ctx); len(l) != 1 || l[0].Slug != "rhcos-4.19" {
		t.Fatalf("failed imports left images: %+v", l)
	}
	for field, req := range map[string]cloudscale.CustomImageImportRequest{
		"url":           {URL: "ftp://mirror.example/x.qcow2", Name: "x"},
		"name":          {URL: m.URL + "/rhcos.qcow2"},
		"zones":         {URL: m.URL + "/rhcos.qcow2", Name: "x", Zones: []string{"mars1"}},
		"source_format": {URL: m.URL + "/rhcos.qcow2", Name: "x", SourceFormat: "vmdk"},
		"firmware_type": {URL: m.URL + "/rhcos.qcow2", Name: "x", FirmwareType: "coreboot"},
		"slug":          {URL: m.URL + "/rhcos.qcow2", Name: "x", Slug: "rhcos-4.19"},
	} {
		_, err := c.CustomImageImports.Create(v.ctx, &req)
		fieldError(t, err, field)
	}
}
