package exoscale_test

import (
	"net/http"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// testPublicKey and its fingerprint, as `ssh-keygen -l -E md5` prints it.
const (
	testPublicKey   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE24vb5lOw6UH+utLRZvFRB3zvV+F3tQrELjlDWaavxp test@emulator"
	testFingerprint = "d4:18:38:9a:ad:d9:be:a6:7e:26:22:77:29:ce:1d:f2"
)

func TestSSHKeys(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	c := v.client
	op := v.op(c.RegisterSSHKey(v.ctx, v3.RegisterSSHKeyRequest{Name: "ops.key-1", PublicKey: testPublicKey}))
	if op.Reference.ID != "" || op.Reference.Link != v.srv.URL+"/v2/ssh-key/ops.key-1" {
		t.Fatalf("reference %+v: SSH keys are referenced by link, having no UUID", op.Reference)
	}
	k, err := c.GetSSHKey(v.ctx, "ops.key-1")
	if err != nil || k.Fingerprint != testFingerprint {
		t.Fatalf("GetSSHKey: %+v, %v; want fingerprint %s", k, err, testFingerprint)
	}
	l, err := c.ListSSHKeys(v.ctx)
	if err != nil || len(l.SSHKeys) != 1 || l.SSHKeys[0].Name != "ops.key-1" {
		t.Fatalf("ListSSHKeys: %+v, %v", l, err)
	}

	_, err = c.RegisterSSHKey(v.ctx, v3.RegisterSSHKeyRequest{Name: "ops.key-1", PublicKey: testPublicKey})
	wantContains(t, apiError(t, err, v3.ErrConflict), "already exists")
	for _, bad := range []v3.RegisterSSHKeyRequest{
		{Name: "-leading-dash", PublicKey: testPublicKey},
		{Name: "with space", PublicKey: testPublicKey},
		{Name: "ok", PublicKey: "ssh-ed25519 not-base64"},
		{Name: "ok", PublicKey: "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIE24vb5lOw6UH+utLRZvFRB3zvV+F3tQrELjlDWaavxp"},
		{Name: "ok", PublicKey: "-----BEGIN OPENSSH PRIVATE KEY-----"},
	} {
		_, err := c.RegisterSSHKey(v.ctx, bad)
		wantContains(t, apiError(t, err, v3.ErrBadRequest), "Invalid value in")
	}

	// An instance keeps a key deleted after its creation.
	req := instanceReq("keyed")
	req.SSHKey = &v3.SSHKey{Name: "ops.key-1"}
	_, id := v.create(c, req)
	v.op(c.DeleteSSHKey(v.ctx, "ops.key-1"))
	_, err = c.GetSSHKey(v.ctx, "ops.key-1")
	apiError(t, err, v3.ErrNotFound)
	_, err = c.DeleteSSHKey(v.ctx, "ops.key-1")
	apiError(t, err, v3.ErrNotFound)
	if inst := v.getInstance(c, id); inst.SSHKey == nil || inst.SSHKey.Name != "ops.key-1" {
		t.Fatalf("instance ssh-key %+v", inst.SSHKey)
	}
	resp, body := v.raw("GET", "/v2/ssh-key/a:b", nil, true)
	wantStatus(t, resp, body, http.StatusNotFound)
}
