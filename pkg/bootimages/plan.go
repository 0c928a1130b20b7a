package bootimages

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// FollowLabel on a MachineSet (value "true") lets the provider move it to
// the release's boot image once that is imported and usable. The manager's
// --boot-images-follow-all does so for every MachineSet instead.
const FollowLabel = "machine.appuio.io/follow-boot-image"

// clusterLabel names a MachineSet's cluster, as the installer labels it.
const clusterLabel = "machine.openshift.io/cluster-api-cluster"

// Options say for whom and from where the images are imported.
type Options struct {
	// ClusterID is the cluster's identity: only its MachineSets are
	// considered, and its marks make an image the provider's.
	ClusterID string
	// Cloud is the cluster's cloud; it must be a cloud.ImageCloud.
	Cloud cloud.Cloud
	// Mirror is the base URL of the operator's mirror, holding the files
	// cloud.ImageCloud.BootImageMirrorFile names.
	Mirror string
	// FollowAll moves every MachineSet (but those with an owner reference)
	// to the release's image, not only those labelled FollowLabel=true.
	FollowAll bool
}

// imageCloud is o.Cloud as an ImageCloud.
func (o Options) imageCloud() (cloud.ImageCloud, error) {
	ic, ok := o.Cloud.(cloud.ImageCloud)
	if !ok {
		return nil, fmt.Errorf("cloud %s cannot name boot images in a provider spec", o.Cloud.Name())
	}
	return ic, nil
}

// MachineSet is one MachineSet as the boot images see it.
type MachineSet struct {
	MS *machinev1.MachineSet
	// Ours: the provider's cloud and the cluster's MachineSet.
	Ours bool
	// Secret is the credentials secret its spec names ("": the manager's
	// default credentials); the images are imported with them.
	Secret string
	// Stream, Arch and Zone place its servers; Ref is the image its spec
	// names (custom:<slug>, a template name, or an ID).
	Stream, Arch, Zone, Ref string
	// Want is the release's image for it; nil with Problem saying why.
	Want    *Image
	Problem string
	// Follow: it may be moved to Want (WhyNot says why not).
	Follow bool
	WhyNot string
}

// Key names the MachineSet in messages.
func (m *MachineSet) Key() string { return m.MS.Namespace + "/" + m.MS.Name }

// Survey reads what each MachineSet boots and should boot under rel.
func Survey(rel *Release, sets []machinev1.MachineSet, o Options) ([]*MachineSet, error) {
	ic, err := o.imageCloud()
	if err != nil {
		return nil, err
	}
	var out []*MachineSet
	for i := range sets {
		ms := &sets[i]
		m := &MachineSet{MS: ms}
		out = append(out, m)
		m.Ref, m.Zone, err = ic.SpecImageRef(ms.Spec.Template.Spec.ProviderSpec)
		if ms.Labels[clusterLabel] != o.ClusterID || err != nil || !o.specKindIs(ms.Spec.Template.Spec.ProviderSpec) {
			m.Problem = "not this provider's: another cluster's or another cloud's MachineSet"
			continue
		}
		spec, errs := o.Cloud.ParseSpec(ms.Spec.Template.Spec.ProviderSpec, field.NewPath("spec", "template", "spec", "providerSpec", "value"))
		if len(errs) > 0 {
			m.Problem = "invalid provider spec: " + errs.ToAggregate().Error()
			continue
		}
		m.Ours, m.Secret, m.Zone = true, spec.CredentialsSecretName(), spec.Zone()
		m.Stream, m.Arch = StreamOf(ms), ArchOf(ms)
		m.Want, err = rel.Image(m.Stream, m.Arch)
		if err != nil {
			m.Problem = err.Error()
			continue
		}
		switch {
		case len(ms.OwnerReferences) > 0:
			ref := ms.OwnerReferences[0]
			m.WhyNot = fmt.Sprintf("it has an owner (%s %s), which decides its spec", ref.Kind, ref.Name)
		case ms.Labels[FollowLabel] == "true" || (o.FollowAll && ms.Labels[FollowLabel] != "false"):
			m.Follow = true
		default:
			m.WhyNot = fmt.Sprintf("it does not follow the release (label %s=true, or the manager's --boot-images-follow-all, makes it)", FollowLabel)
		}
	}
	return out, nil
}

func (o Options) specKindIs(ps machinev1.ProviderSpec) bool {
	if ps.Value == nil {
		return false
	}
	var meta struct {
		Kind string `json:"kind"`
	}
	return json.Unmarshal(ps.Value.Raw, &meta) == nil && (meta.Kind == "" || meta.Kind == o.Cloud.SpecKind())
}

// StreamOf is a MachineSet's OS stream: its label, rhel-9 without.
func StreamOf(ms *machinev1.MachineSet) string {
	if s := ms.Labels[LabelOSStream]; s != "" {
		return s
	}
	return DefaultStream
}

// ArchOf is a MachineSet's architecture from its capacity labels
// ("kubernetes.io/arch=arm64,..."), amd64 without.
func ArchOf(ms *machinev1.MachineSet) string {
	for _, kv := range strings.Split(ms.Annotations[CapacityLabelsAnnotation], ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k == "kubernetes.io/arch" && v != "" {
			return v
		}
	}
	return DefaultArch
}

// Need is an image the release needs in an account, and the zones.
type Need struct {
	Image *Image
	Zones []string
	// MachineSets are those that should boot it.
	MachineSets []*MachineSet
}

// Key identifies the image of a need.
func (n *Need) Key() string { return n.Image.RHCOS + "/" + n.Image.Stream + "/" + n.Image.Arch }

// Needs groups the images the cluster's MachineSets should boot by the
// credentials they are imported with (the secret; "" the default).
func Needs(sets []*MachineSet) map[string][]*Need {
	by := map[string]map[string]*Need{}
	for _, m := range sets {
		if !m.Ours || m.Want == nil {
			continue
		}
		if by[m.Secret] == nil {
			by[m.Secret] = map[string]*Need{}
		}
		n := &Need{Image: m.Want}
		if have := by[m.Secret][n.Key()]; have != nil {
			n = have
		}
		by[m.Secret][n.Key()] = n
		if !slices.Contains(n.Zones, m.Zone) {
			n.Zones = append(n.Zones, m.Zone)
		}
		n.MachineSets = append(n.MachineSets, m)
	}
	out := map[string][]*Need{}
	for secret, needs := range by {
		for _, k := range slices.Sorted(maps.Keys(needs)) {
			n := needs[k]
			slices.Sort(n.Zones)
			out[secret] = append(out[secret], n)
		}
	}
	return out
}

// Source is what the cloud imports for img: the mirror's file, checked
// against the stream's uncompressed-sha256 (and md5, the checksum of the
// mirror's file where the cloud needs one).
func (o Options) Source(img *Image, md5 string) (cloud.BootImageSource, error) {
	ic, err := o.imageCloud()
	if err != nil {
		return cloud.BootImageSource{}, err
	}
	return cloud.BootImageSource{
		Name: img.Name(o.ClusterID), RHCOS: img.RHCOS, Release: img.Release, Stream: img.Stream, Arch: img.Arch,
		URL: o.MirrorURL(ic.BootImageMirrorFile(img.File)), SHA256: img.UncompressedSHA256, MD5: md5,
	}, nil
}

// MirrorURL is the URL of a file of the mirror.
func (o Options) MirrorURL(file string) string {
	return strings.TrimSuffix(o.Mirror, "/") + "/" + file
}

// Target is the image of images that m should boot: the provider's image
// of the release's RHCOS, stream and architecture, in m's zone and ready.
func Target(images []cloud.BootImage, m *MachineSet) *cloud.BootImage {
	if m.Want == nil {
		return nil
	}
	var found *cloud.BootImage
	for i := range images {
		im := &images[i]
		if im.Ready && im.RHCOS == m.Want.RHCOS && im.Stream == m.Want.Stream && im.Arch == m.Want.Arch && slices.Contains(im.Zones, m.Zone) {
			if m.Ref == im.Ref || m.Ref == im.ID {
				return im // the one it boots: no move between equals
			}
			if found == nil {
				found = im
			}
		}
	}
	return found
}

// Boots is the provider's image that ref in zone names, nil for another.
func Boots(images []cloud.BootImage, ref, zone string) *cloud.BootImage {
	for i := range images {
		im := &images[i]
		if (ref == im.Ref || ref == im.ID) && (zone == "" || slices.Contains(im.Zones, zone)) {
			return im
		}
	}
	return nil
}

// Reference is an image a MachineSet or Machine spec names, in its zone.
type Reference struct{ Ref, Zone string }

// Unreferenced are the images no reference names and no MachineSet of
// sets should boot (the release's images stay, followed or not).
func Unreferenced(images []cloud.BootImage, refs []Reference, sets []*MachineSet) []cloud.BootImage {
	var out []cloud.BootImage
	for _, im := range images {
		used := slices.ContainsFunc(refs, func(r Reference) bool {
			return (r.Ref == im.Ref || r.Ref == im.ID) && (r.Zone == "" || slices.Contains(im.Zones, r.Zone))
		})
		wanted := slices.ContainsFunc(sets, func(m *MachineSet) bool {
			return m.Want != nil && m.Want.RHCOS == im.RHCOS && m.Want.Stream == im.Stream && m.Want.Arch == im.Arch
		})
		if !used && !wanted {
			out = append(out, im)
		}
	}
	return out
}
