package exoscale_test

import (
	"crypto/md5"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

func TestPublicTemplates(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	c := v.client
	l, err := c.ListTemplates(v.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Templates) < 5 {
		t.Fatalf("%d public templates", len(l.Templates))
	}
	tpl, err := l.FindTemplate("Linux Ubuntu 24.04 LTS 64-bit")
	if err != nil || tpl.ID != ubuntu || tpl.Visibility != v3.TemplateVisibilityPublic || tpl.DefaultUser != "ubuntu" || tpl.Size != 10<<30 {
		t.Fatalf("Ubuntu 24.04: %+v, %v", tpl, err)
	}
	debian, err := c.ListTemplates(v.ctx, v3.ListTemplatesWithFamily("debian"))
	if err != nil || len(debian.Templates) != 2 {
		t.Fatalf("debian family: %+v, %v", debian, err)
	}
	// Public templates are in every zone, and cannot be changed.
	fra := v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "de-fra-1")
	if _, err := fra.GetTemplate(v.ctx, ubuntu); err != nil {
		t.Fatalf("Ubuntu from de-fra-1: %v", err)
	}
	_, err = c.DeleteTemplate(v.ctx, ubuntu)
	apiError(t, err, v3.ErrForbidden)
	_, err = c.UpdateTemplate(v.ctx, ubuntu, v3.UpdateTemplateRequest{Name: "mine"})
	apiError(t, err, v3.ErrForbidden)
	_, err = c.CopyTemplate(v.ctx, ubuntu, v3.CopyTemplateRequest{TargetZone: &v3.Zone{Name: "de-fra-1"}})
	apiError(t, err, v3.ErrForbidden)
}

func TestSeededRHCOSTemplate(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	id := v.emu.TemplateID(emu.DefaultAccountName, "ch-gva-2", "rhcos-4.19")
	if id == "" {
		t.Fatal("no rhcos-4.19 in ch-gva-2")
	}
	// Stable across emulators, distinct per zone.
	if again := mustEmulator().TemplateID(emu.DefaultAccountName, "ch-gva-2", "rhcos-4.19"); again != id {
		t.Fatalf("seeded template ID %s, then %s", id, again)
	}
	if other := v.emu.TemplateID(emu.DefaultAccountName, "de-fra-1", "rhcos-4.19"); other == "" || other == id {
		t.Fatalf("de-fra-1's rhcos-4.19 is %q", other)
	}
	private, err := v.client.ListTemplates(v.ctx, v3.ListTemplatesWithVisibility(v3.ListTemplatesVisibilityPrivate))
	if err != nil || len(private.Templates) != 1 {
		t.Fatalf("private templates of ch-gva-2: %+v, %v", private, err)
	}
	tpl := private.Templates[0]
	if string(tpl.ID) != id || tpl.Name != "rhcos-4.19" || tpl.BootMode != v3.TemplateBootModeUefi || tpl.DefaultUser != "core" || tpl.Size != 16<<30 {
		t.Fatalf("rhcos template %+v", tpl)
	}
	req := instanceReq("worker")
	req.Template = &v3.Template{ID: tpl.ID}
	_, inst := v.create(v.client, req)
	if info, _ := v.emu.Instance(string(inst)); info.TemplateName != "rhcos-4.19" {
		t.Fatalf("instance template %q", info.TemplateName)
	}
	// An empty seed list seeds nothing.
	none := newEnv(t, emu.Config{Templates: []emu.TemplateSeed{}})
	if ts := none.emu.Templates(); len(ts) != 0 {
		t.Fatalf("templates without seeds: %+v", ts)
	}
}

// mirrored is a client downloading the files of m, without a network.
func mirrored(m imagefetch.Mirror) *http.Client { return &http.Client{Transport: m} }

func md5hex(b []byte) string { return fmt.Sprintf("%x", md5.Sum(b)) }

func TestRegisterTemplate(t *testing.T) {
	t.Parallel()
	image := imagefetch.FakeQCOW2(16<<30, "rhcos-4.20")
	files := imagefetch.Mirror{"https://mirror.example/rhcos-4.20-exoscale.qcow2": image}
	v := newEnv(t, emu.Config{OperationTime: 2 * time.Second, Templates: []emu.TemplateSeed{}, ImageClient: mirrored(files)})
	c := v.client
	req := v3.RegisterTemplateRequest{
		Name:            "rhcos-4.20",
		URL:             "https://mirror.example/rhcos-4.20-exoscale.qcow2",
		Checksum:        md5hex(image),
		SSHKeyEnabled:   ptr(true),
		PasswordEnabled: ptr(false),
		BootMode:        v3.RegisterTemplateRequestBootModeUefi,
		DefaultUser:     "core",
		Description:     "RHCOS 4.20",
		Size:            20 << 30,
	}
	op := v.op(c.RegisterTemplate(v.ctx, req))
	if op.State != v3.OperationStatePending || op.Reference.Command != "register-template" {
		t.Fatalf("register answered %+v", op)
	}
	id := op.Reference.ID
	tpl, err := c.GetTemplate(v.ctx, id)
	if err != nil || tpl.Name != "rhcos-4.20" || tpl.Checksum != req.Checksum || tpl.URL != req.URL || tpl.Visibility != v3.TemplateVisibilityPrivate {
		t.Fatalf("registered template %+v, %v", tpl, err)
	}
	v.clock.Advance(2 * time.Second)
	v.waitOp(c, op, v3.OperationStateSuccess)

	// Disks must fit it: 20 GiB.
	inst := instanceReq("too-small")
	inst.Template = &v3.Template{ID: id}
	inst.DiskSize = 19
	_, err = c.CreateInstance(v.ctx, inst)
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "at least 20 GiB")

	for name, bad := range map[string]func(*v3.RegisterTemplateRequest){
		"no url":       func(r *v3.RegisterTemplateRequest) { r.URL = "" },
		"ftp url":      func(r *v3.RegisterTemplateRequest) { r.URL = "ftp://mirror.example/x.qcow2" },
		"bad checksum": func(r *v3.RegisterTemplateRequest) { r.Checksum = "sha256:abc" },
		"no ssh flag":  func(r *v3.RegisterTemplateRequest) { r.SSHKeyEnabled = nil },
		"no name":      func(r *v3.RegisterTemplateRequest) { r.Name = "" },
	} {
		r := req
		bad(&r)
		_, err := c.RegisterTemplate(v.ctx, r)
		if msg := apiError(t, err, v3.ErrBadRequest); !strings.Contains(msg, "Invalid value in") {
			t.Errorf("%s: message %q", name, msg)
		}
	}

	// Update, copy to another zone, delete.
	v.op(c.UpdateTemplate(v.ctx, id, v3.UpdateTemplateRequest{Name: "rhcos-4.20-renamed", Description: "renamed"}))
	if tpl, _ := c.GetTemplate(v.ctx, id); tpl.Name != "rhcos-4.20-renamed" || tpl.Description != "renamed" {
		t.Fatalf("after update: %+v", tpl)
	}
	cp := v.op(c.CopyTemplate(v.ctx, id, v3.CopyTemplateRequest{TargetZone: &v3.Zone{Name: "at-vie-1"}}))
	copyID := cp.Reference.ID
	if copyID == id || cp.Reference.Link != v.srv.URL+"/at-vie-1/v2/template/"+string(copyID) {
		t.Fatalf("copy reference %+v", cp.Reference)
	}
	vie := v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "at-vie-1")
	if tpl, err := vie.GetTemplate(v.ctx, copyID); err != nil || tpl.Name != "rhcos-4.20-renamed" {
		t.Fatalf("the copy in at-vie-1: %+v, %v", tpl, err)
	}
	_, err = c.GetTemplate(v.ctx, copyID)
	apiError(t, err, v3.ErrNotFound)
	_, err = c.CopyTemplate(v.ctx, id, v3.CopyTemplateRequest{TargetZone: &v3.Zone{Name: "ch-gva-2"}})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "target-zone")
	_, err = c.CopyTemplate(v.ctx, id, v3.CopyTemplateRequest{TargetZone: &v3.Zone{Name: "mars-1"}})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "target-zone")

	v.op(c.DeleteTemplate(v.ctx, id))
	_, err = c.GetTemplate(v.ctx, id)
	apiError(t, err, v3.ErrNotFound)
	if _, err := vie.GetTemplate(v.ctx, copyID); err != nil {
		t.Fatalf("deleting the original deleted the copy: %v", err)
	}

	// A template quota.
	q := newEnv(t, emu.Config{Templates: []emu.TemplateSeed{}, ImageClient: mirrored(files), Accounts: []emu.Account{{Name: "q", Key: "k", Secret: "s", Quotas: map[string]int64{"template": 1}}}})
	q.op(q.client.RegisterTemplate(q.ctx, req))
	_, err = q.client.RegisterTemplate(q.ctx, req)
	wantContains(t, apiError(t, err, v3.ErrForbidden), "Quota exceeded for template")
}

// waitOp follows an operation until it is no longer pending (a template's
// file downloads in real time), at most a minute, and asserts its state.
func (v *env) waitOp(c *v3.Client, op *v3.Operation, want v3.OperationState) *v3.Operation {
	v.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := c.GetOperation(v.ctx, op.ID)
		if err != nil {
			v.t.Fatal(err)
		}
		if got.State != v3.OperationStatePending || time.Now().After(deadline) {
			return v.opState(c, op, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A registration downloads the file: it stays pending until the download
// has ended; a file that is not there, or whose MD5 is not the checksum
// given, fails the registration with the reason, and no template is left.
// Without a size, a disk must fit the qcow2's virtual size.
func TestRegisterTemplateDownloads(t *testing.T) {
	t.Parallel()
	image := imagefetch.FakeQCOW2(24<<30, "rhcos-9.6")
	files := imagefetch.Mirror{"https://mirror.example/rhcos.qcow2": image}
	v := newEnv(t, emu.Config{Templates: []emu.TemplateSeed{}, ImageClient: mirrored(files)})
	c := v.client
	register := func(url, checksum string) *v3.Operation {
		return v.op(c.RegisterTemplate(v.ctx, v3.RegisterTemplateRequest{
			Name: "rhcos", URL: url, Checksum: checksum, SSHKeyEnabled: ptr(true), PasswordEnabled: ptr(false),
			BootMode: v3.RegisterTemplateRequestBootModeUefi, DefaultUser: "core",
		}))
	}
	ok := v.waitOp(c, register("https://mirror.example/rhcos.qcow2", strings.ToUpper(md5hex(image))), v3.OperationStateSuccess)
	tpl, err := c.GetTemplate(v.ctx, ok.Reference.ID)
	if err != nil || tpl.Size != 24<<30 || tpl.BootMode != v3.TemplateBootModeUefi || tpl.DefaultUser != "core" {
		t.Fatalf("registered %+v, %v", tpl, err)
	}
	for name, tc := range map[string]struct{ url, checksum, msg string }{
		"checksum mismatch": {"https://mirror.example/rhcos.qcow2", "0123456789abcdef0123456789abcdef", "checksum mismatch: the file at https://mirror.example/rhcos.qcow2 has MD5 " + md5hex(image) + ", not 0123456789abcdef0123456789abcdef"},
		"missing file":      {"https://mirror.example/gone.qcow2", md5hex(image), "Expected HTTP 200, got HTTP 404"},
	} {
		op := v.waitOp(c, register(tc.url, tc.checksum), v3.OperationStateFailure)
		if op.Reason != v3.OperationReasonIncorrect || !strings.Contains(op.Message, tc.msg) {
			t.Errorf("%s: reason %q, message %q", name, op.Reason, op.Message)
		}
		if _, err := c.GetTemplate(v.ctx, op.Reference.ID); !errors.Is(err, v3.ErrNotFound) {
			t.Errorf("%s: the failed template is there: %v", name, err)
		}
	}
	private, err := c.ListTemplates(v.ctx, v3.ListTemplatesWithVisibility(v3.ListTemplatesVisibilityPrivate))
	if err != nil || len(private.Templates) != 1 {
		t.Fatalf("private templates after the failures: %+v, %v", private, err)
	}
}
