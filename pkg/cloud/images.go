package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
)

// The boot images the provider imports: a release's RHCOS, per OS stream
// and architecture, into the zones the cluster's MachineSets use, named and
// marked so that the provider knows them for its own (the cluster's ID, as
// on servers) and what they hold. pkg/bootimages decides what is needed;
// each cloud's ImageClient (pkg/cloud/<cloud>/images.go) imports, lists and
// deletes; ImageCloud reads and writes the image a provider spec names.

// BootImageSource is an image to import.
type BootImageSource struct {
	// Name is the image's name in the cloud (the cloudscale.ch slug, the
	// Exoscale template name): BootImageName.
	Name string
	// RHCOS is the RHCOS version (9.6.20250523-0), Release the OpenShift
	// release it came with, Stream the OS stream (rhel-9), Arch the
	// architecture as in kubernetes.io/arch.
	RHCOS, Release, Stream, Arch string
	// URL is where the cloud downloads it from: the operator's mirror.
	URL string
	// SHA256 is the checksum of the file at URL that cloudscale.ch's
	// import must report (the stream's uncompressed-sha256); MD5 the one
	// Exoscale checks at registration (of the prepared file).
	SHA256, MD5 string
}

// BootImage is an image the provider made, in the cloud.
type BootImage struct {
	// ID is the cloud's ID of the image (one template per zone on
	// Exoscale, one image for its zones on cloudscale.ch).
	ID   string
	Name string
	// Ref is how a provider spec names it (custom:<slug>, a template name).
	Ref   string
	Zones []string
	// RHCOS, Release, Stream and Arch say what it holds, from its marks.
	RHCOS, Release, Stream, Arch string
	// Ready is true once the cloud can boot servers from it.
	Ready     bool
	CreatedAt time.Time
}

// ImageClient imports, lists and deletes a cluster's boot images. The
// clouds' Clients implement it.
type ImageClient interface {
	// ListBootImages returns the images that carry the cluster's marks:
	// the provider's, and only those.
	ListBootImages(ctx context.Context, clusterID string) ([]BootImage, error)
	// ImportBootImage makes src available in zones, and follows the
	// import to its end: it finds what an earlier call left (an image of
	// the name, an import under way) instead of starting over, and returns
	// the images (one per zone on Exoscale) once they can boot servers. A
	// zone it could not reach is a *BootImageError naming it; an import
	// the cloud failed, or whose checksum is not src's, is one too, and
	// what it made of it is deleted again.
	ImportBootImage(ctx context.Context, clusterID string, src BootImageSource, zones []string) ([]BootImage, error)
	// DeleteBootImage deletes img after reading it again: an image that
	// does not carry the cluster's marks then is not deleted (an error).
	// An image already gone is no error.
	DeleteBootImage(ctx context.Context, clusterID string, img BootImage) error
}

// ImageCloud reads and sets the boot image of a provider spec.
type ImageCloud interface {
	// SpecImageRef returns how ps names its boot image (a custom image
	// "custom:<slug>", a template's name; "" when it names it by ID or
	// not at all), and the zone it places servers in.
	SpecImageRef(ps machinev1.ProviderSpec) (ref, zone string, err error)
	// WithSpecImageRef returns ps naming ref instead, every other field as
	// it was.
	WithSpecImageRef(ps machinev1.ProviderSpec, ref string) (machinev1.ProviderSpec, error)
	// BootImageMirrorFile is the file name the cloud's import downloads
	// from the mirror, given the stream's artifact file name without its
	// compression suffix (Exoscale needs the image prepared: pkg/bootimages).
	BootImageMirrorFile(openstackFile string) string
}

// BootImageError is an import that did not end with a usable image.
type BootImageError struct {
	// Reason is a CamelCase word for conditions and events:
	// ImportFailed, ChecksumMismatch, ZoneUnavailable.
	Reason string
	// Zone is the zone it concerns, "" for all.
	Zone string
	Err  error
}

// The reasons of BootImageError.
const (
	ReasonImportFailed     = "ImportFailed"
	ReasonChecksumMismatch = "ChecksumMismatch"
	ReasonZoneUnavailable  = "ZoneUnavailable"
)

func (e *BootImageError) Error() string {
	if e.Zone != "" {
		return fmt.Sprintf("%s in zone %s: %v", e.Reason, e.Zone, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Reason, e.Err)
}

func (e *BootImageError) Unwrap() error { return e.Err }

// ErrNotOurImage is DeleteBootImage's refusal of an image without the
// cluster's marks.
var ErrNotOurImage = errors.New("the image does not carry this cluster's marks: the provider did not make it, and leaves it alone")

// WithSpecField returns ps with its top-level field key set to v, every
// other field as it was (fields the provider does not know included).
func WithSpecField(ps machinev1.ProviderSpec, key string, v any) (machinev1.ProviderSpec, error) {
	if ps.Value == nil || len(ps.Value.Raw) == 0 {
		return ps, errors.New("the provider spec is empty")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(ps.Value.Raw, &m); err != nil {
		return ps, fmt.Errorf("the provider spec is not a JSON object: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ps, err
	}
	m[key] = b
	raw, err := json.Marshal(m)
	if err != nil {
		return ps, err
	}
	out := *ps.DeepCopy()
	out.Value.Raw = raw
	out.Value.Object = nil
	return out, nil
}

// CoversZones reports whether have holds every zone of want: an image in
// the zones have is usable wherever want asks for it.
func CoversZones(have, want []string) bool {
	for _, z := range want {
		if !slices.Contains(have, z) {
			return false
		}
	}
	return true
}
