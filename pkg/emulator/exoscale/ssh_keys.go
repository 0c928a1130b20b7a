package exoscale

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// SSH keys are global to an account and known by name. The API registers
// public keys only (it never makes key pairs) and answers their MD5
// fingerprint.

var sshKeyName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,254}$`)

var sshKeyFields = map[string]fieldDoc{
	"name":       {"SSH key name", "a String matching ^[a-zA-Z0-9]{1}[a-zA-Z0-9._-]{0,254}$"},
	"public-key": {"Public key value", "an OpenSSH public key (\"ssh-ed25519 AAAA...\")"},
}

var sshKeyTypes = []string{"ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-dss"}

// fingerprint parses an OpenSSH public key line and returns the MD5
// fingerprint of its key ("aa:bb:..."), "" when it is not a public key.
func fingerprint(line string) string {
	fields := strings.Fields(line)
	if len(fields) < 2 || !slices.Contains(sshKeyTypes, fields[0]) {
		return ""
	}
	blob, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil || len(blob) < 4 {
		return ""
	}
	// The blob starts with its type, length-prefixed, as the line does.
	n := binary.BigEndian.Uint32(blob)
	if uint64(len(blob)) < 4+uint64(n) || string(blob[4:4+n]) != fields[0] {
		return ""
	}
	sum := md5.Sum(blob)
	hex := make([]string, len(sum))
	for i, b := range sum {
		hex[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(hex, ":")
}

func (e *Emulator) registerSSHKey(c *call) reply {
	var req struct {
		Name      *string `json:"name"`
		PublicKey *string `json:"public-key"`
	}
	if r := c.decode(&req, sshKeyFields); r != nil {
		return *r
	}
	if req.Name == nil || !sshKeyName.MatchString(*req.Name) {
		return sshKeyFields["name"].invalid("name")
	}
	if req.PublicKey == nil {
		return sshKeyFields["public-key"].invalid("public-key")
	}
	fp := fingerprint(*req.PublicKey)
	if fp == "" {
		return sshKeyFields["public-key"].invalid("public-key")
	}
	if c.acct.SSHKeys[*req.Name] != nil {
		return conflict("An SSH key named %q already exists", *req.Name)
	}
	k := &sshKey{meta: e.newMeta(), Name: *req.Name, PublicKey: strings.TrimSpace(*req.PublicKey), Fingerprint: fp}
	c.acct.SSHKeys[k.Name] = k
	return c.opReply(c.operation("register-ssh-key", "ssh-key", k.Name, c.now))
}

func (e *Emulator) getSSHKey(c *call) reply {
	k := c.acct.SSHKeys[c.params["name"]]
	if k == nil {
		return notFound("SSH key", c.params["name"])
	}
	return ok(map[string]string{"name": k.Name, "fingerprint": k.Fingerprint})
}

func (e *Emulator) listSSHKeys(c *call) reply {
	out := []any{}
	for _, k := range sorted(c.acct.SSHKeys) {
		out = append(out, map[string]string{"name": k.Name, "fingerprint": k.Fingerprint})
	}
	return ok(map[string]any{"ssh-keys": out})
}

// deleteSSHKey removes a key; instances that were created with it keep it
// (it is in their authorized keys already).
func (e *Emulator) deleteSSHKey(c *call) reply {
	k := c.acct.SSHKeys[c.params["name"]]
	if k == nil {
		return notFound("SSH key", c.params["name"])
	}
	delete(c.acct.SSHKeys, k.Name)
	return c.opReply(c.operation("delete-ssh-key", "ssh-key", k.Name, c.now))
}
