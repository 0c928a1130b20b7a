package exoscale

import (
	"crypto/md5"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

const imageURL = "https://mirror.example/rhcos-9.6.20260101-0-exoscale.x86_64.qcow2"

var imageFile = imagefetch.FakeQCOW2(8<<30, "rhcos-9.6.20260101-0")

// imageEnv is newEnv with a mirror the emulator registers templates from.
func imageEnv(t *testing.T) *env {
	poll := OperationPoll
	OperationPoll = 10 * time.Millisecond // the emulator's operations end at once
	t.Cleanup(func() { OperationPoll = poll })
	return newEnv(t, emu.Config{
		ImageClient: &http.Client{Transport: imagefetch.Mirror{imageURL: imageFile}},
		Accounts: []emu.Account{{Name: "test", Key: testKey, Secret: testSecret, Quotas: map[string]int64{"template": 20},
			DeployTargets: []emu.DeployTargetSeed{{Zone: "ch-gva-2", Name: "dedicated-1"}}}},
	})
}

func imageSource(name string) cloud.BootImageSource {
	return cloud.BootImageSource{Name: name, RHCOS: "9.6.20260101-0", Release: "4.22.1", Stream: "rhel-9", Arch: "amd64",
		URL: imageURL, MD5: fmt.Sprintf("%x", md5.Sum(imageFile))}
}

// register registers a template in ch-gva-2 as a person (or another tool)
// would, with the fields given.
func (x *env) register(req v3.RegisterTemplateRequest) v3.UUID {
	x.t.Helper()
	req.URL, req.Checksum, req.BootMode = imageURL, imageSource("").MD5, v3.RegisterTemplateRequestBootModeUefi
	req.SSHKeyEnabled, req.PasswordEnabled = v3.Bool(true), v3.Bool(false)
	return x.wait(x.raw.RegisterTemplate(x.ctx, req)).Reference.ID
}

// TestBootImagesOnlyTheClustersTemplates: whose an Exoscale template is,
// is the provider's mark in its description, read by the one reader every
// judge uses (DescribedClusterID). The boot image controller's list and
// prune (ListBootImages, DeleteBootImage) leave alone another cluster's
// import, a template a person registered with the import's maintainer,
// version and build but without the mark (fails before the mark: the
// maintainer alone made it the cluster's, and prune deleted it), and the
// cluster's own import once its description names another cluster; a spec
// naming another cluster's import is refused before any write (fails
// before the mark: the import's description named no cluster's identity,
// so a copied MachineSet booted another cluster's image).
func TestBootImagesOnlyTheClustersTemplates(t *testing.T) {
	x := imageEnv(t)
	const other = otherCluster
	zones := []string{"ch-gva-2"}

	theirs, err := x.c.ImportBootImage(x.ctx, other, imageSource("rhcos-theirs"), zones)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := x.c.ImportBootImage(x.ctx, clusterID, imageSource("rhcos-ours"), zones)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := x.raw.GetTemplate(x.ctx, v3.UUID(ours[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	if got := DescribedClusterID(tpl.Description); got != clusterID {
		t.Errorf("the import's description %q marks cluster %q, want %q", tpl.Description, got, clusterID)
	}
	byHand := x.register(v3.RegisterTemplateRequest{Name: "rhcos-by-hand", Description: "RHCOS for the workers, imported by hand",
		Maintainer: bootImageMaintainer(clusterID), Version: "9.6.20260101-0", Build: "rhel-9/amd64/4.22.1"})
	plain := x.register(v3.RegisterTemplateRequest{Name: "rhcos-plain"})

	l, err := x.c.ListBootImages(x.ctx, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 1 || l[0].ID != ours[0].ID {
		t.Errorf("the cluster's boot images: %+v, want only %s", l, ours[0].ID)
	}
	for _, id := range []string{theirs[0].ID, string(byHand), string(plain)} {
		err := x.c.DeleteBootImage(x.ctx, clusterID, cloud.BootImage{ID: id, Zones: zones})
		if !errors.Is(err, cloud.ErrNotOurImage) {
			t.Errorf("delete of template %s: %v, want ErrNotOurImage", id, err)
		}
	}

	// A spec naming the other cluster's import: refused before any
	// write, naming the field.
	x.emu.Harness().ResetRequests()
	_, _, err = x.c.CreateServer(x.ctx, ref("worker-refused"), x.spec(specJSON(map[string]any{"template": map[string]string{"name": "rhcos-theirs"}})), nil)
	wantForeign(t, "a spec naming another cluster's boot image", "template", err)
	if n := x.writes(); n != 0 {
		t.Errorf("%d writes before the refusal: %v", n, x.emu.Harness().Requests())
	}

	// Its own import, marked as another cluster's since: read again
	// before the delete, and left alone.
	desc := "machine-api-provider cluster=" + other + " taken over"
	x.wait(x.raw.UpdateTemplate(x.ctx, tpl.ID, v3.UpdateTemplateRequest{Description: desc}))
	if err := x.c.DeleteBootImage(x.ctx, clusterID, ours[0]); !errors.Is(err, cloud.ErrNotOurImage) {
		t.Errorf("delete of the import marked as %s's: %v, want ErrNotOurImage", other, err)
	}
	left := map[string]bool{}
	for _, z := range zones {
		for _, name := range []string{"rhcos-theirs", "rhcos-ours", "rhcos-by-hand", "rhcos-plain"} {
			left[name] = x.emu.TemplateID("test", z, name) != ""
		}
	}
	for name, there := range left {
		if !there {
			t.Errorf("template %s was deleted", name)
		}
	}

	// Its own, unchanged: deleted.
	mine, err := x.c.ImportBootImage(x.ctx, clusterID, imageSource("rhcos-mine"), zones)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.c.DeleteBootImage(x.ctx, clusterID, mine[0]); err != nil {
		t.Fatalf("delete of the cluster's own template: %v", err)
	}
	if x.emu.TemplateID("test", "ch-gva-2", "rhcos-mine") != "" {
		t.Error("the cluster's own template is still there")
	}
	if slices.ContainsFunc(l, func(b cloud.BootImage) bool { return b.Name == "rhcos-by-hand" }) {
		t.Error("the template registered by hand is listed as the cluster's")
	}
}
