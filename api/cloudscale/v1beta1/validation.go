package v1beta1

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/api/internal/specutil"
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

// Bounds of the provider spec. Every string and list is bounded, so that a
// spec cannot make the provider send the cloud (or write into a status or an
// event) more than either takes.
const (
	// MaxRootVolumeSizeGB bounds rootVolumeSizeGB. cloudscale.ch publishes
	// no maximum for an SSD volume that we could find; 10 TB is far beyond
	// any root disk and catches a stray digit or a size given in MB.
	MaxRootVolumeSizeGB = 10000
	// MaxUserDataBytes bounds the rendered user data. cloudscale.ch hands
	// user data to OpenStack Nova, whose API takes at most 65535 base64
	// characters of it: 49149 bytes.
	MaxUserDataBytes = 65535 / 4 * 3

	maxZoneLength      = 16
	maxFlavorLength    = 64
	maxImageLength     = 255
	maxAPIVersion      = 253
	maxSSHKeyLength    = 16 << 10
	maxSSHKeys         = 100
	maxTags            = 64
	maxInterfaces      = 16
	maxAddresses       = 16
	maxServerGroups    = 16
	maxHostnameLength  = 253
	maxIPAddressLength = 64
)

// Validate reports everything wrong with a defaulted spec, each error naming
// its field under path (SpecPath for a Machine).
func (s *CloudscaleMachineProviderSpec) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, specutil.APIVersion(path.Child("apiVersion"), s.APIVersion, APIVersion, maxAPIVersion)...)
	if s.Kind != "" && s.Kind != SpecKind {
		errs = append(errs, field.Invalid(path.Child("kind"), specutil.Truncate(s.Kind), "must be "+SpecKind))
	}
	switch {
	case s.Zone == "":
		errs = append(errs, field.Required(path.Child("zone"), "the zone to run the server in, e.g. rma1 or lpg1"))
	case len(s.Zone) > maxZoneLength:
		errs = append(errs, field.TooLong(path.Child("zone"), "", maxZoneLength))
	case !zonePattern.MatchString(s.Zone):
		errs = append(errs, field.Invalid(path.Child("zone"), specutil.Truncate(s.Zone), "must be a zone slug such as rma1 or lpg1"))
	}
	errs = append(errs, validateSlug(path.Child("flavor"), s.Flavor, maxFlavorLength, "the server flavor, e.g. flex-16-4")...)
	errs = append(errs, validateSlug(path.Child("image"), s.Image, maxImageLength, "a public image slug, custom:<slug> or a custom image UUID")...)
	switch {
	case s.RootVolumeSizeGB < minRootVolumeSizeGB:
		errs = append(errs, field.Invalid(path.Child("rootVolumeSizeGB"), s.RootVolumeSizeGB, fmt.Sprintf("must be at least %d", minRootVolumeSizeGB)))
	case s.RootVolumeSizeGB > MaxRootVolumeSizeGB:
		errs = append(errs, field.Invalid(path.Child("rootVolumeSizeGB"), s.RootVolumeSizeGB, fmt.Sprintf("must be at most %d", MaxRootVolumeSizeGB)))
	}
	errs = append(errs, validateTags(path.Child("tags"), s.Tags)...)
	errs = append(errs, validateTags(path.Child("rootVolumeTags"), s.RootVolumeTags)...)
	keys := s.SSHKeys
	if len(keys) > maxSSHKeys {
		errs = append(errs, field.TooMany(path.Child("sshKeys"), len(keys), maxSSHKeys))
		keys = nil
	}
	for i, k := range keys {
		p := path.Child("sshKeys").Index(i)
		switch {
		case k == "":
			errs = append(errs, field.Invalid(p, k, "must be a public key, not empty"))
		case len(k) > maxSSHKeyLength:
			errs = append(errs, field.TooLong(p, "", maxSSHKeyLength))
		case !specutil.Printable(k):
			// A line break would add a line to authorized_keys.
			errs = append(errs, field.Invalid(p, "(withheld)", "must be one line of printable characters"))
		case !publicKey(k):
			errs = append(errs, field.Invalid(p, "(withheld)", "must be an OpenSSH public key, as in authorized_keys (\"ssh-ed25519 AAAA... comment\"): the API refuses the server otherwise"))
		}
	}
	if len(s.Interfaces) == 0 {
		errs = append(errs, field.Required(path.Child("interfaces"), "name the cluster's private network ({type: Private, networkUUID: <UUID>}); "+
			"without interfaces a server gets a public interface only, and cloudscale.ch has no security groups: kubelet and every NodePort would face the internet "+
			"(list {type: Public} as well to have one)"))
	}
	if len(s.Interfaces) > maxInterfaces {
		errs = append(errs, field.TooMany(path.Child("interfaces"), len(s.Interfaces), maxInterfaces))
	}
	for i := range s.Interfaces {
		errs = append(errs, s.Interfaces[i].validate(path.Child("interfaces").Index(i))...)
	}
	if len(s.ServerGroups) > maxServerGroups {
		errs = append(errs, field.TooMany(path.Child("serverGroups"), len(s.ServerGroups), maxServerGroups))
	}
	for i, g := range s.ServerGroups {
		if !uuidPattern.MatchString(g) {
			errs = append(errs, field.Invalid(path.Child("serverGroups").Index(i), specutil.Truncate(g), "must be a server group UUID"))
		}
	}
	if s.AntiAffinityKey != "" {
		for _, msg := range validation.IsDNS1123Label(s.AntiAffinityKey) {
			errs = append(errs, field.Invalid(path.Child("antiAffinityKey"), specutil.Truncate(s.AntiAffinityKey), msg))
		}
	}
	if s.BaseDomain != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.BaseDomain) {
			errs = append(errs, field.Invalid(path.Child("baseDomain"), specutil.Truncate(s.BaseDomain), msg))
		}
	}
	if s.UserDataSecret != nil {
		errs = append(errs, specutil.SecretName(path.Child("userDataSecret", "name"), s.UserDataSecret.Name, "the name of the secret holding the user data")...)
	}
	if s.TokenSecret != nil {
		errs = append(errs, specutil.SecretName(path.Child("tokenSecret", "name"), s.TokenSecret.Name, "the name of the secret holding the API token")...)
	}
	if s.UserDataSecretSelector != nil {
		errs = append(errs, specutil.LabelSelector(path.Child("userDataSecretSelector"), s.UserDataSecretSelector)...)
		if s.UserDataSecret == nil {
			errs = append(errs, field.Forbidden(path.Child("userDataSecretSelector"), "picks secrets for the user data template, and there is none: set userDataSecret"))
		}
	}
	errs = append(errs, specutil.EmptyMetadata(path.Child("metadata"), s.Metadata)...)
	return errs
}

// validateSlug checks a required name of something the cloud has (a flavor,
// an image): present, bounded, and one line of printable characters.
func validateSlug(path *field.Path, v string, maxLen int, what string) field.ErrorList {
	switch {
	case v == "":
		return field.ErrorList{field.Required(path, what)}
	case len(v) > maxLen:
		return field.ErrorList{field.TooLong(path, "", maxLen)}
	case !specutil.Printable(v) || strings.ContainsRune(v, ' '):
		return field.ErrorList{field.Invalid(path, specutil.Truncate(v), "must be a slug or UUID, without spaces or control characters")}
	}
	return nil
}

func validateTags(path *field.Path, tags map[string]string) field.ErrorList {
	var errs field.ErrorList
	if len(tags) > maxTags {
		return field.ErrorList{field.TooMany(path, len(tags), maxTags)}
	}
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
			errs = append(errs, field.Invalid(path.Key(specutil.Truncate(k)), specutil.Truncate(k), fmt.Sprintf("tag keys must be 1 to %d characters", maxTagKeyLength)))
		case !specutil.Printable(k):
			// Quoted, so that the path stays on one line.
			errs = append(errs, field.Invalid(path.Key(strconv.Quote(k)), k, "tag keys must not hold control characters"))
		case len(tags[k]) > maxTagValueLength:
			errs = append(errs, field.TooLong(path.Key(k), "", maxTagValueLength))
		case !specutil.Printable(tags[k]):
			errs = append(errs, field.Invalid(path.Key(k), specutil.Truncate(tags[k]), "tag values must not hold control characters"))
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
		return append(errs, field.NotSupported(path.Child("type"), InterfaceType(specutil.Truncate(string(in.Type))), []InterfaceType{InterfaceTypePublic, InterfaceTypePrivate}))
	}
	if in.NetworkUUID == "" && len(in.Addresses) == 0 {
		errs = append(errs, field.Required(path.Child("networkUUID"), "a Private interface needs a networkUUID or addresses with a subnetUUID"))
	}
	if in.NetworkUUID != "" && !uuidPattern.MatchString(in.NetworkUUID) {
		errs = append(errs, field.Invalid(path.Child("networkUUID"), specutil.Truncate(in.NetworkUUID), "must be a network UUID"))
	}
	if len(in.Addresses) > maxAddresses {
		return append(errs, field.TooMany(path.Child("addresses"), len(in.Addresses), maxAddresses))
	}
	for i, a := range in.Addresses {
		p := path.Child("addresses").Index(i)
		if a.SubnetUUID == "" {
			errs = append(errs, field.Required(p.Child("subnetUUID"), "the subnet the address belongs to"))
		} else if !uuidPattern.MatchString(a.SubnetUUID) {
			errs = append(errs, field.Invalid(p.Child("subnetUUID"), specutil.Truncate(a.SubnetUUID), "must be a subnet UUID"))
		}
		if a.Address != "" {
			if _, err := netip.ParseAddr(a.Address); err != nil || len(a.Address) > maxIPAddressLength {
				errs = append(errs, field.Invalid(p.Child("address"), specutil.Truncate(a.Address), "must be an IP address"))
			}
		}
	}
	return errs
}

// ValidateUserDataSize refuses rendered user data larger than cloudscale.ch
// takes, so the Machine fails with a clear message before the cloud is asked.
func ValidateUserDataSize(userData []byte) error {
	if len(userData) > MaxUserDataBytes {
		return fmt.Errorf("the user data is %d bytes, more than the %d cloudscale.ch takes", len(userData), MaxUserDataBytes)
	}
	return nil
}

// publicKey says whether k is one OpenSSH public key, as a line of
// authorized_keys has it (options before it are refused too: the API takes
// keys, not lines).
func publicKey(k string) bool {
	key, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(k))
	return err == nil && key != nil && len(options) == 0 && len(rest) == 0
}
