package cloudscale

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

const imageURL = "https://mirror.example/rhcos-9.6.20260101-0-openstack.x86_64.qcow2"

var imageFile = imagefetch.FakeQCOW2(8<<30, "rhcos-9.6.20260101-0")

func imageSource(name string) cloud.BootImageSource {
	return cloud.BootImageSource{Name: name, RHCOS: "9.6.20260101-0", Release: "4.22.1", Stream: "rhel-9", Arch: "amd64",
		URL: imageURL, SHA256: fmt.Sprintf("%x", sha256.Sum256(imageFile))}
}

// TestBootImagesOnlyTheClustersCustomImages: a custom image is a
// cluster's by the provider's cluster tag, as a server is (the same tag
// the spec's checks and the tests' ownership audit read). The boot image
// controller's list and prune (ListBootImages, DeleteBootImage) leave
// alone another cluster's import, an image a person imported with the
// import's RHCOS tags but without the cluster tag, and the cluster's own
// import once its tags name another cluster (read again before the
// delete); a spec naming another cluster's import is refused before any
// write.
func TestBootImagesOnlyTheClustersCustomImages(t *testing.T) {
	poll := ImportPoll
	ImportPoll = 10 * time.Millisecond
	t.Cleanup(func() { ImportPoll = poll })
	v := newEnv(t, emucs.Config{ImageClient: &http.Client{Transport: imagefetch.Mirror{imageURL: imageFile}}})
	const other = "c-other-9f3k"
	zones := []string{"rma1"}

	theirs, err := v.client.ImportBootImage(v.ctx, other, imageSource("rhcos-theirs"), zones)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := v.client.ImportBootImage(v.ctx, testCluster, imageSource("rhcos-ours"), zones)
	if err != nil {
		t.Fatal(err)
	}
	// by hand, with the import's tags but the cluster's
	imp, err := v.sdk.CustomImageImports.Create(v.ctx, &sdk.CustomImageImportRequest{
		TaggedResourceRequest: sdk.TaggedResourceRequest{Tags: &sdk.TagMap{TagBootImageRHCOS: "9.6.20260101-0", TagBootImageStream: "rhel-9"}},
		URL:                   imageURL, Name: "rhcos-by-hand", Slug: "rhcos-by-hand", SourceFormat: "qcow2", Zones: zones,
	})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); imp.Status == "in_progress"; {
		if time.Now().After(deadline) {
			t.Fatal("the import by hand did not end in 30s")
		}
		time.Sleep(10 * time.Millisecond)
		if imp, err = v.sdk.CustomImageImports.Get(v.ctx, imp.UUID); err != nil {
			t.Fatal(err)
		}
	}
	if imp.Status != "success" {
		t.Fatalf("the import by hand: %s", imp.Status)
	}
	byHand := imp.CustomImage.UUID

	l, err := v.client.ListBootImages(v.ctx, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 1 || l[0].ID != ours[0].ID {
		t.Errorf("the cluster's boot images: %+v, want only %s", l, ours[0].ID)
	}
	for _, id := range []string{theirs[0].ID, byHand} {
		if err := v.client.DeleteBootImage(v.ctx, testCluster, cloud.BootImage{ID: id}); !errors.Is(err, cloud.ErrNotOurImage) {
			t.Errorf("delete of custom image %s: %v, want ErrNotOurImage", id, err)
		}
	}

	// A spec naming the other cluster's import: refused, naming the field.
	spec := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Image = "custom:rhcos-theirs" })
	if _, _, err := v.client.CreateServer(v.ctx, ref("worker-refused"), spec, nil); !isForeign(err, "image", other) {
		t.Errorf("a spec naming cluster %s's image: %v, want a ForeignResourceError of the field image", other, err)
	}
	if n := len(v.servers()); n != 0 {
		t.Errorf("%d servers made", n)
	}

	// Its own import, tagged as another cluster's since: left alone.
	tags := sdk.TagMap{v1beta1.TagClusterID: other, TagBootImageRHCOS: "9.6.20260101-0"}
	if err := v.sdk.CustomImages.Update(v.ctx, ours[0].ID, &sdk.CustomImageRequest{TaggedResourceRequest: sdk.TaggedResourceRequest{Tags: &tags}}); err != nil {
		t.Fatal(err)
	}
	if err := v.client.DeleteBootImage(v.ctx, testCluster, ours[0]); !errors.Is(err, cloud.ErrNotOurImage) {
		t.Errorf("delete of the import tagged as %s's: %v, want ErrNotOurImage", other, err)
	}
	for _, slug := range []string{"rhcos-theirs", "rhcos-ours", "rhcos-by-hand"} {
		if !slices.Contains(v.emu.CustomImageSlugs(), slug) {
			t.Errorf("custom image %s was deleted", slug)
		}
	}

	// Its own, unchanged: deleted.
	mine, err := v.client.ImportBootImage(v.ctx, testCluster, imageSource("rhcos-mine"), zones)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.client.DeleteBootImage(v.ctx, testCluster, mine[0]); err != nil {
		t.Fatalf("delete of the cluster's own image: %v", err)
	}
	if slices.Contains(v.emu.CustomImageSlugs(), "rhcos-mine") {
		t.Error("the cluster's own image is still there")
	}
}

// isForeign says whether err is a *cloud.ForeignResourceError of field
// naming cluster.
func isForeign(err error, field, cluster string) bool {
	var fe *cloud.ForeignResourceError
	return errors.As(err, &fe) && fe.Field == field && fe.Cluster == cluster && fe.Want == testCluster
}
