package cloudscale_test

import (
	"testing"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

// A server is never made with what is not an OpenSSH public key, as by the
// real API: the refusal names ssh_keys and nothing is made.
func TestMalformedSSHKeyIsRefused(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	const good = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g user@host"
	for _, bad := range []string{"ssh-ed25519 AAAA admin@example", "not a key", "no-pty " + good, good + "\n" + good} {
		req := serverReq("worker-bad")
		req.SSHKeys = []string{good, bad}
		_, err := v.client.Servers.Create(v.ctx, req)
		fieldError(t, err, "ssh_keys")
	}
	if n := len(v.listServers()); n != 0 {
		t.Fatalf("%d servers after refused creates", n)
	}
	req := serverReq("worker-good")
	req.SSHKeys = []string{good}
	v.createServer(req)
}
