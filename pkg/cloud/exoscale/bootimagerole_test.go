package exoscale

import (
	"crypto/md5"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

// rolePolicy is a role allowing exactly ops of the compute service, as an
// admin writes it (docs/exoscale.md).
func rolePolicy(t *testing.T, ops []string) *emu.Policy {
	t.Helper()
	p, err := emu.ParsePolicy(fmt.Appendf(nil, `{"default-service-strategy": "deny", "services": {"compute": {"type": "rules",
		"rules": [{"action": "allow", "expression": "operation in ['%s']"}]}}}`, strings.Join(ops, "', '")))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBootImagesNeedTheirRoleAddition: with the provider's role alone, the
// boot image controller's first import is refused, and the error names the
// IAM operation to grant (before the boot-image calls were in a table it
// named none); with the provider's role and the boot-image addition
// (BootImageIAMOperations, the second rule docs/exoscale.md gives), a
// template is registered, copied to a second zone and deleted in both
// without one refusal. test/exoscale holds the documented role to the
// tables.
func TestBootImagesNeedTheirRoleAddition(t *testing.T) {
	poll := OperationPoll
	OperationPoll = 10 * time.Millisecond
	t.Cleanup(func() { OperationPoll = poll })
	file := imagefetch.FakeQCOW2(1<<30, "rhcos-role")
	const url = "https://mirror.example/rhcos/rhcos-role.qcow2"
	src := cloud.BootImageSource{Name: "rhcos-9.6.1-rhel-9-amd64-c1-x7k2p", RHCOS: "9.6.1", Release: "4.19.0", Stream: "rhel-9", Arch: "amd64",
		URL: url, MD5: fmt.Sprintf("%x", md5.Sum(file))}
	zones := []string{"ch-gva-2", "de-fra-1"}
	for _, c := range []struct {
		name    string
		ops     []string
		refused string
	}{
		{"provider's role alone", IAMOperations(), `"register-template"`},
		{"provider's role and the boot-image addition", append(IAMOperations(), BootImageIAMOperations()...), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newEnv(t, emu.Config{
				ImageClient: &http.Client{Transport: imagefetch.Mirror{url: file}},
				Templates:   []emu.TemplateSeed{},
			})
			if err := x.emu.SetPolicy("test", rolePolicy(t, c.ops)); err != nil {
				t.Fatal(err)
			}
			imgs, err := x.c.ImportBootImage(x.ctx, "c1-x7k2p", src, zones)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("import with the provider's role alone: %v, want a refusal naming %s", err, c.refused)
				}
				return
			}
			if err != nil || len(imgs) != len(zones) {
				t.Fatalf("import: %v, %d images, want one in each of %v", err, len(imgs), zones)
			}
			for _, img := range imgs {
				if err := x.c.DeleteBootImage(x.ctx, "c1-x7k2p", img); err != nil {
					t.Errorf("delete %s in %v: %v", img.ID, img.Zones, err)
				}
			}
			left, err := x.c.ListBootImages(x.ctx, "c1-x7k2p")
			if err != nil || len(left) != 0 {
				t.Errorf("after the deletes: %v, %d left", err, len(left))
			}
		})
	}
}
