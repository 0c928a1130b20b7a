package v1beta1

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SpecPath is where the provider spec sits in a Machine; in a MachineSet it
// is under spec.template.
var SpecPath = field.NewPath("spec", "providerSpec", "value")

var (
	zonePattern = regexp.MustCompile(`^[a-z]+[0-9]+$`)
	uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

const (
	minRootVolumeSizeGB = 10
	maxTagKeyLength     = 64
	maxTagValueLength   = 255
)

// Validate reports everything wrong with a defaulted spec, each error naming
// its field under path (SpecPath for a Machine).
func (s *CloudscaleMachineProviderSpec) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Kind != "" && s.Kind != SpecKind {
		errs = append(errs, field.Invalid(path.Child("kind"), s.Kind, "must be "+SpecKind))
	}
	switch {
	case s.Zone == "":
		errs = append(errs, field.Required(path.Child("zone"), "the zone to run the server in, e.g. rma1 or lpg1"))
	case !zonePattern.MatchString(s.Zone):
		errs = append(errs, field.Invalid(path.Child("zone"), s.Zone, "must be a zone slug such as rma1 or lpg1"))
	}
	if s.Flavor == "" {
		errs = append(errs, field.Required(path.Child("flavor"), "the server flavor, e.g. flex-16-4"))
	}
	if s.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), "a public image slug, custom:<slug> or a custom image UUID"))
	}
	if s.RootVolumeSizeGB < minRootVolumeSizeGB {
		errs = append(errs, field.Invalid(path.Child("rootVolumeSizeGB"), s.RootVolumeSizeGB, fmt.Sprintf("must be at least %d", minRootVolumeSizeGB)))
	}
	errs = append(errs, validateTags(path.Child("tags"), s.Tags)...)
	errs = append(errs, validateTags(path.Child("rootVolumeTags"), s.RootVolumeTags)...)
	for i, k := range s.SSHKeys {
		if k == "" {
			errs = append(errs, field.Invalid(path.Child("sshKeys").Index(i), k, "must be a public key, not empty"))
		}
	}
	for i := range s.Interfaces {
		errs = append(errs, s.Interfaces[i].validate(path.Child("interfaces").Index(i))...)
	}
	for i, g := range s.ServerGroups {
		if !uuidPattern.MatchString(g) {
			errs = append(errs, field.Invalid(path.Child("serverGroups").Index(i), g, "must be a server group UUID"))
		}
	}
	if s.AntiAffinityKey != "" {
		for _, msg := range validation.IsDNS1123Label(s.AntiAffinityKey) {
			errs = append(errs, field.Invalid(path.Child("antiAffinityKey"), s.AntiAffinityKey, msg))
		}
	}
	if s.BaseDomain != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.BaseDomain) {
			errs = append(errs, field.Invalid(path.Child("baseDomain"), s.BaseDomain, msg))
		}
	}
	if s.UserDataSecret != nil && s.UserDataSecret.Name == "" {
		errs = append(errs, field.Required(path.Child("userDataSecret", "name"), "the name of the secret holding the user data"))
	}
	if s.TokenSecret != nil && s.TokenSecret.Name == "" {
		errs = append(errs, field.Required(path.Child("tokenSecret", "name"), "the name of the secret holding the API token"))
	}
	return errs
}

func validateTags(path *field.Path, tags map[string]string) field.ErrorList {
	var errs field.ErrorList
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch {
		case slices.Contains(ReservedTags, k):
			errs = append(errs, field.Forbidden(path.Key(k), "this tag identifies the provider's servers and is set by the provider"))
		case k == "" || len(k) > maxTagKeyLength:
			errs = append(errs, field.Invalid(path.Key(k), k, fmt.Sprintf("tag keys must be 1 to %d characters", maxTagKeyLength)))
		case len(tags[k]) > maxTagValueLength:
			errs = append(errs, field.TooLong(path.Key(k), tags[k], maxTagValueLength))
		}
	}
	return errs
}

func (in *Interface) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch in.Type {
	case InterfaceTypePublic:
		if in.NetworkUUID != "" {
			errs = append(errs, field.Forbidden(path.Child("networkUUID"), "only Private interfaces connect to a network"))
		}
		if len(in.Addresses) > 0 {
			errs = append(errs, field.Forbidden(path.Child("addresses"), "public addresses are assigned by the cloud"))
		}
		return errs
	case InterfaceTypePrivate:
	case "":
		return append(errs, field.Required(path.Child("type"), "Public or Private"))
	default:
		return append(errs, field.NotSupported(path.Child("type"), in.Type, []InterfaceType{InterfaceTypePublic, InterfaceTypePrivate}))
	}
	if in.NetworkUUID == "" && len(in.Addresses) == 0 {
		errs = append(errs, field.Required(path.Child("networkUUID"), "a Private interface needs a networkUUID or addresses with a subnetUUID"))
	}
	if in.NetworkUUID != "" && !uuidPattern.MatchString(in.NetworkUUID) {
		errs = append(errs, field.Invalid(path.Child("networkUUID"), in.NetworkUUID, "must be a network UUID"))
	}
	for i, a := range in.Addresses {
		p := path.Child("addresses").Index(i)
		if a.SubnetUUID == "" {
			errs = append(errs, field.Required(p.Child("subnetUUID"), "the subnet the address belongs to"))
		} else if !uuidPattern.MatchString(a.SubnetUUID) {
			errs = append(errs, field.Invalid(p.Child("subnetUUID"), a.SubnetUUID, "must be a subnet UUID"))
		}
		if a.Address != "" {
			if _, err := netip.ParseAddr(a.Address); err != nil {
				errs = append(errs, field.Invalid(p.Child("address"), a.Address, "must be an IP address"))
			}
		}
	}
	return errs
}
