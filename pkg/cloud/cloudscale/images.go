package cloudscale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Boot images on cloudscale.ch are custom images imported from a URL
// (POST /v1/custom-images/import, source_format qcow2, firmware uefi,
// user data passed through to Ignition), in every zone the cluster needs at
// once. The import is followed to its end (in_progress, then success or
// failed); the image's sha256 checksum must then be the stream's
// uncompressed-sha256, else the image is deleted again. The tags mark the
// image as the cluster's (TagClusterID, as on servers) and say what it
// holds.
const (
	TagBootImageRHCOS   = "machine-api-provider-cloudscale_appuio_io_rhcos"
	TagBootImageStream  = "machine-api-provider-cloudscale_appuio_io_os_stream"
	TagBootImageArch    = "machine-api-provider-cloudscale_appuio_io_arch"
	TagBootImageRelease = "machine-api-provider-cloudscale_appuio_io_release"
)

// ImportPoll is how often an import under way is looked at (the vendor's
// Terraform provider polls every 10 s); tests make it shorter.
var ImportPoll = 5 * time.Second

func (c *Client) listCustomImages(ctx context.Context) (out []sdk.CustomImage, err error) {
	err = c.call(ctx, "customimage.list", func(ctx context.Context) (err error) {
		out, err = c.sdk.CustomImages.List(ctx)
		return err
	})
	return out, err
}

func ourImage(tags sdk.TagMap, clusterID string) bool {
	return tags[v1beta1.TagClusterID] == clusterID && tags[TagBootImageRHCOS] != ""
}

func bootImageOf(im sdk.CustomImage) cloud.BootImage {
	b := cloud.BootImage{
		ID: im.UUID, Name: im.Name, Ref: "custom:" + im.Slug, Ready: true, CreatedAt: im.CreatedAt,
		RHCOS: im.Tags[TagBootImageRHCOS], Stream: im.Tags[TagBootImageStream], Arch: im.Tags[TagBootImageArch], Release: im.Tags[TagBootImageRelease],
	}
	for _, z := range im.Zones {
		b.Zones = append(b.Zones, z.Slug)
	}
	return b
}

// ListBootImages lists the account's custom images carrying the cluster's
// marks (images being imported are not listed by the API).
func (c *Client) ListBootImages(ctx context.Context, clusterID string) ([]cloud.BootImage, error) {
	all, err := c.listCustomImages(ctx)
	if err != nil {
		return nil, err
	}
	var out []cloud.BootImage
	for _, im := range all {
		if ourImage(im.Tags, clusterID) {
			out = append(out, bootImageOf(im))
		}
	}
	return out, nil
}

// ImportBootImage imports src into zones, or finds it there.
func (c *Client) ImportBootImage(ctx context.Context, clusterID string, src cloud.BootImageSource, zones []string) ([]cloud.BootImage, error) {
	all, err := c.listCustomImages(ctx)
	if err != nil {
		return nil, err
	}
	slugs := map[string]bool{}
	for _, im := range all {
		slugs[im.Slug] = true
		if ourImage(im.Tags, clusterID) && im.Tags[TagBootImageRHCOS] == src.RHCOS && im.Tags[TagBootImageStream] == src.Stream &&
			im.Tags[TagBootImageArch] == src.Arch && cloud.CoversZones(bootImageOf(im).Zones, zones) {
			return []cloud.BootImage{bootImageOf(im)}, nil
		}
	}
	// An import of ours under way (a restart during one) is followed, not
	// started again.
	var imp *sdk.CustomImageImport
	err = c.call(ctx, "customimage.import.list", func(ctx context.Context) error {
		l, err := c.sdk.CustomImageImports.List(ctx)
		for i := range l {
			if l[i].Status == "in_progress" && ourImage(l[i].Tags, clusterID) && l[i].Tags[TagBootImageRHCOS] == src.RHCOS &&
				l[i].Tags[TagBootImageStream] == src.Stream && l[i].Tags[TagBootImageArch] == src.Arch && l[i].URL == src.URL {
				imp = &l[i]
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if imp == nil {
		// An image of the name that misses a zone (a MachineSet in a new
		// zone) stays for the MachineSets using it; the new one covers
		// every zone under the next free slug.
		slug := src.Name
		for n := 2; slugs[slug]; n++ {
			slug = fmt.Sprintf("%s-%d", src.Name, n)
		}
		req := &sdk.CustomImageImportRequest{
			URL: src.URL, Name: src.Name, Slug: slug, UserDataHandling: string(sdk.UserDataHandlingPassThrough),
			FirmwareType: "uefi", SourceFormat: "qcow2", Zones: slices.Clone(zones),
		}
		req.Tags = &sdk.TagMap{
			v1beta1.TagClusterID: clusterID, TagBootImageRHCOS: src.RHCOS, TagBootImageStream: src.Stream,
			TagBootImageArch: src.Arch, TagBootImageRelease: src.Release,
		}
		err = c.call(ctx, "customimage.import", func(ctx context.Context) (err error) {
			imp, err = c.sdk.CustomImageImports.Create(ctx, req)
			return err
		})
		var inv *cloud.InvalidConfigError
		if errors.As(err, &inv) && inv.Field == "zones" {
			return nil, &cloud.BootImageError{Reason: cloud.ReasonZoneUnavailable, Err: err}
		}
		if err != nil {
			return nil, err
		}
	}
	for imp.Status == "in_progress" {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(ImportPoll):
		}
		id := imp.UUID
		err = c.call(ctx, "customimage.import.get", func(ctx context.Context) (err error) {
			imp, err = c.sdk.CustomImageImports.Get(ctx, id)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if imp.Status != "success" {
		return nil, &cloud.BootImageError{Reason: cloud.ReasonImportFailed, Err: fmt.Errorf("the import of %s from %s ended %s: %s", src.Name, src.URL, imp.Status, scrubMessage(imp.ErrorMessage))}
	}
	var im *sdk.CustomImage
	err = c.call(ctx, "customimage.get", func(ctx context.Context) (err error) {
		im, err = c.sdk.CustomImages.Get(ctx, imp.CustomImage.UUID)
		return err
	})
	if err != nil {
		return nil, err
	}
	if got := im.Checksums["sha256"]; !strings.EqualFold(got, src.SHA256) {
		// ours, made a moment ago: it goes again, as no MachineSet may boot it
		derr := c.deleteCustomImage(ctx, im.UUID)
		return nil, &cloud.BootImageError{Reason: cloud.ReasonChecksumMismatch, Err: errors.Join(
			fmt.Errorf("custom image %s imported from %s has sha256 %s, the release's stream says %s: deleted again", im.Slug, src.URL, got, src.SHA256), derr)}
	}
	b := bootImageOf(*im)
	if !cloud.CoversZones(b.Zones, zones) {
		return nil, &cloud.BootImageError{Reason: cloud.ReasonZoneUnavailable, Err: fmt.Errorf("custom image %s is in zones %v, not all of %v", im.Slug, b.Zones, zones)}
	}
	return []cloud.BootImage{b}, nil
}

// scrubMessage bounds a message of the cloud for conditions and events.
func scrubMessage(s string) string {
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	return s
}

func (c *Client) deleteCustomImage(ctx context.Context, id string) error {
	err := c.call(ctx, "customimage.delete", func(ctx context.Context) error {
		return c.sdk.CustomImages.Delete(ctx, id)
	})
	if cloud.IsNotFound(err) || isStatus(err, http.StatusNotFound) {
		return nil
	}
	return err
}

// DeleteBootImage deletes a custom image that carries the cluster's marks
// when read again.
func (c *Client) DeleteBootImage(ctx context.Context, clusterID string, img cloud.BootImage) error {
	var im *sdk.CustomImage
	err := c.call(ctx, "customimage.get", func(ctx context.Context) (err error) {
		im, err = c.sdk.CustomImages.Get(ctx, img.ID)
		return err
	})
	if cloud.IsNotFound(err) || isStatus(err, http.StatusNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ourImage(im.Tags, clusterID) {
		return fmt.Errorf("custom image %s (%s): %w", im.Slug, im.UUID, cloud.ErrNotOurImage)
	}
	return c.deleteCustomImage(ctx, im.UUID)
}

func isStatus(err error, status int) bool {
	var er *sdk.ErrorResponse
	return errors.As(err, &er) && er.StatusCode == status
}

var (
	_ cloud.ImageClient = (*Client)(nil)
	_ cloud.ImageCloud  = (*Cloud)(nil)
)

// SpecImageRef reads the image and zone of a cloudscale.ch spec.
func (c *Cloud) SpecImageRef(ps machinev1.ProviderSpec) (string, string, error) {
	if ps.Value == nil {
		return "", "", errors.New("the provider spec is empty")
	}
	var p struct {
		Image string `json:"image"`
		Zone  string `json:"zone"`
	}
	if err := json.Unmarshal(ps.Value.Raw, &p); err != nil {
		return "", "", err
	}
	if !strings.HasPrefix(p.Image, "custom:") {
		return "", p.Zone, nil
	}
	return p.Image, p.Zone, nil
}

// WithSpecImageRef names the custom image ref (custom:<slug>) in ps.
func (c *Cloud) WithSpecImageRef(ps machinev1.ProviderSpec, ref string) (machinev1.ProviderSpec, error) {
	return cloud.WithSpecField(ps, "image", ref)
}

// BootImageMirrorFile: cloudscale.ch imports the decompressed OpenStack
// qcow2 as it is.
func (c *Cloud) BootImageMirrorFile(openstackFile string) string { return openstackFile }
