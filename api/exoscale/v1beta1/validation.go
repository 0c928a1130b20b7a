package v1beta1

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/api/internal/specutil"
)

// SpecPath is where the provider spec sits in a Machine; in a MachineSet it
// is under spec.template.
var SpecPath = field.NewPath("spec", "providerSpec", "value")

var (
	// Exoscale zones are <country>-<city>-<n>: ch-gva-2, de-fra-1.
	zonePattern = regexp.MustCompile(`^[a-z]{2}-[a-z]+-[0-9]+$`)
	uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	// family.size, as the API lists instance types: standard.extra-large.
	instanceTypePattern = regexp.MustCompile(`^[a-z0-9]+\.[a-z0-9-]+$`)
)

// Bounds of the provider spec. Every string and list is bounded, so that a
// spec cannot make the provider send the cloud (or write into a status or an
// event) more than either takes. The numbers are the API's where it has one.
const (
	// MinDiskSize and MaxDiskSize are the API's bounds of disk-size (GiB).
	MinDiskSize = 10
	MaxDiskSize = 51200
	// MaxUserDataBase64 is the most user-data the API takes: 32768
	// characters of base64.
	MaxUserDataBase64 = 32768
	// MaxUserDataBytes is the most rendered user data that is, once
	// base64-encoded, at most MaxUserDataBase64 characters: 24576 bytes.
	MaxUserDataBytes = MaxUserDataBase64 / 4 * 3

	// maxNameLength is the API's bound of every name (templates, groups,
	// networks, SSH keys) and of label keys and values.
	maxNameLength      = 255
	maxLabels          = 64
	maxZoneLength      = 32
	maxTypeLength      = 64
	maxAPIVersion      = 253
	maxSSHKeys         = 16
	maxSecurityGroups  = 16
	maxAAGroups        = 8
	maxPrivateNetworks = 8
	maxIPAddressLength = 64
)

// Validate reports everything wrong with a defaulted spec, each error naming
// its field under path (SpecPath for a Machine).
func (s *ExoscaleMachineProviderSpec) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, specutil.APIVersion(path.Child("apiVersion"), s.APIVersion, APIVersion, maxAPIVersion)...)
	if s.Kind != "" && s.Kind != SpecKind {
		errs = append(errs, field.Invalid(path.Child("kind"), specutil.Truncate(s.Kind), "must be "+SpecKind))
	}
	switch {
	case s.Zone == "":
		errs = append(errs, field.Required(path.Child("zone"), "the zone to run the instance in, e.g. ch-gva-2 or de-fra-1"))
	case len(s.Zone) > maxZoneLength:
		errs = append(errs, field.TooLong(path.Child("zone"), "", maxZoneLength))
	case !zonePattern.MatchString(s.Zone):
		errs = append(errs, field.Invalid(path.Child("zone"), specutil.Truncate(s.Zone), "must be a zone name such as ch-gva-2 or de-fra-1"))
	}
	switch t := s.InstanceType; {
	case t == "":
		errs = append(errs, field.Required(path.Child("instanceType"), "the instance type as family.size (e.g. standard.extra-large) or its ID"))
	case len(t) > maxTypeLength:
		errs = append(errs, field.TooLong(path.Child("instanceType"), "", maxTypeLength))
	case !instanceTypePattern.MatchString(t) && !uuidPattern.MatchString(t):
		errs = append(errs, field.Invalid(path.Child("instanceType"), specutil.Truncate(t), "must be family.size (e.g. standard.extra-large, gpu3.small) or an instance type ID"))
	}
	errs = append(errs, s.Template.validate(path.Child("template"))...)
	switch {
	case s.DiskSize < MinDiskSize:
		errs = append(errs, field.Invalid(path.Child("diskSize"), s.DiskSize, fmt.Sprintf("must be at least %d (GiB)", MinDiskSize)))
	case s.DiskSize > MaxDiskSize:
		errs = append(errs, field.Invalid(path.Child("diskSize"), s.DiskSize, fmt.Sprintf("must be at most %d (GiB)", MaxDiskSize)))
	}
	if len(s.SSHKeys) > maxSSHKeys {
		errs = append(errs, field.TooMany(path.Child("sshKeys"), len(s.SSHKeys), maxSSHKeys))
	} else {
		for i, k := range s.SSHKeys {
			errs = append(errs, validateName(path.Child("sshKeys").Index(i), k, "the name of an SSH key registered in the account")...)
		}
	}
	errs = append(errs, validateRefs(path.Child("securityGroups"), s.SecurityGroups, maxSecurityGroups)...)
	errs = append(errs, validateRefs(path.Child("antiAffinityGroups"), s.AntiAffinityGroups, maxAAGroups)...)
	if s.AntiAffinityKey != "" {
		// The key names the provider's groups (<cluster>-<key>-<n>).
		for _, msg := range validation.IsDNS1123Label(s.AntiAffinityKey) {
			errs = append(errs, field.Invalid(path.Child("antiAffinityKey"), specutil.Truncate(s.AntiAffinityKey), msg))
		}
	}
	if len(s.PrivateNetworks) > maxPrivateNetworks {
		errs = append(errs, field.TooMany(path.Child("privateNetworks"), len(s.PrivateNetworks), maxPrivateNetworks))
	} else {
		for i, n := range s.PrivateNetworks {
			p := path.Child("privateNetworks").Index(i)
			errs = append(errs, ResourceRef{ID: n.ID, Name: n.Name}.validate(p)...)
			if n.IP != "" {
				if a, err := netip.ParseAddr(n.IP); err != nil || !a.Is4() || len(n.IP) > maxIPAddressLength {
					errs = append(errs, field.Invalid(p.Child("ip"), specutil.Truncate(n.IP), "must be an IPv4 address"))
				}
			}
		}
	}
	switch s.PublicIPAssignment {
	case PublicIPInet4, PublicIPDual:
	case PublicIPNone:
		if len(s.PrivateNetworks) == 0 {
			errs = append(errs, field.Invalid(path.Child("publicIPAssignment"), string(s.PublicIPAssignment), "an instance without a public address needs a private network (privateNetworks)"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("publicIPAssignment"), PublicIPAssignment(specutil.Truncate(string(s.PublicIPAssignment))), []PublicIPAssignment{PublicIPInet4, PublicIPDual, PublicIPNone}))
	}
	if s.DeployTarget != nil {
		errs = append(errs, s.DeployTarget.validate(path.Child("deployTarget"))...)
	}
	errs = append(errs, validateLabels(path.Child("labels"), s.Labels)...)
	if s.UserDataSecret != nil {
		errs = append(errs, specutil.SecretName(path.Child("userDataSecret", "name"), s.UserDataSecret.Name, "the name of the secret holding the user data")...)
	}
	if s.CredentialsSecret != nil {
		errs = append(errs, specutil.SecretName(path.Child("credentialsSecret", "name"), s.CredentialsSecret.Name, "the name of the secret holding the API key and secret")...)
	}
	return errs
}

func (t TemplateRef) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case t.ID == "" && t.Name == "":
		return field.ErrorList{field.Required(path, "the template to boot: its id, or its name (with visibility private, the default, for the RHCOS template, or public)")}
	case t.ID != "" && t.Name != "":
		return field.ErrorList{field.Forbidden(path.Child("name"), "give the template's id or its name, not both")}
	case t.ID != "":
		if !uuidPattern.MatchString(t.ID) {
			errs = append(errs, field.Invalid(path.Child("id"), specutil.Truncate(t.ID), "must be a template ID (a UUID)"))
		}
		if t.Visibility != "" {
			errs = append(errs, field.Forbidden(path.Child("visibility"), "only a template given by name has a visibility"))
		}
		return errs
	}
	errs = append(errs, validateName(path.Child("name"), t.Name, "the template's name")...)
	switch t.Visibility {
	case TemplateVisibilityPrivate, TemplateVisibilityPublic:
	default:
		errs = append(errs, field.NotSupported(path.Child("visibility"), TemplateVisibility(specutil.Truncate(string(t.Visibility))), []TemplateVisibility{TemplateVisibilityPrivate, TemplateVisibilityPublic}))
	}
	return errs
}

func validateRefs(path *field.Path, refs []ResourceRef, maxRefs int) field.ErrorList {
	if len(refs) > maxRefs {
		return field.ErrorList{field.TooMany(path, len(refs), maxRefs)}
	}
	var errs field.ErrorList
	for i, r := range refs {
		errs = append(errs, r.validate(path.Index(i))...)
	}
	return errs
}

// validate checks that a reference has exactly one of ID and name.
func (r ResourceRef) validate(path *field.Path) field.ErrorList {
	switch {
	case r.ID == "" && r.Name == "":
		return field.ErrorList{field.Required(path, "an id or a name")}
	case r.ID != "" && r.Name != "":
		return field.ErrorList{field.Forbidden(path.Child("name"), "give the id or the name, not both")}
	case r.ID != "":
		if !uuidPattern.MatchString(r.ID) {
			return field.ErrorList{field.Invalid(path.Child("id"), specutil.Truncate(r.ID), "must be an ID (a UUID)")}
		}
		return nil
	}
	return validateName(path.Child("name"), r.Name, "a name")
}

// validateName checks a required name of something in the account: present,
// at most as long as the API takes, one line of printable characters.
func validateName(path *field.Path, v, what string) field.ErrorList {
	switch {
	case v == "":
		return field.ErrorList{field.Required(path, what)}
	case len(v) > maxNameLength:
		return field.ErrorList{field.TooLong(path, "", maxNameLength)}
	case !specutil.Printable(v):
		return field.ErrorList{field.Invalid(path, specutil.Truncate(strconv.Quote(v)), "must not hold control characters")}
	case strings.TrimSpace(v) != v:
		return field.ErrorList{field.Invalid(path, specutil.Truncate(strconv.Quote(v)), "must not begin or end with spaces")}
	}
	return nil
}

// validateLabels bounds the instance's labels as the API does (keys of 1 to
// 255 characters, values of at most 255) and refuses control characters,
// which would break a log line or the list filter, and the provider's own
// keys.
func validateLabels(path *field.Path, labels map[string]string) field.ErrorList {
	if len(labels) > maxLabels {
		return field.ErrorList{field.TooMany(path, len(labels), maxLabels)}
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var errs field.ErrorList
	for _, k := range keys {
		v := labels[k]
		switch {
		case slices.Contains(ReservedLabels, k):
			errs = append(errs, field.Forbidden(path.Key(k), "this label identifies the provider's instances and is set by the provider"))
		case k == "" || len(k) > maxNameLength:
			errs = append(errs, field.Invalid(path.Key(specutil.Truncate(k)), specutil.Truncate(k), fmt.Sprintf("label keys must be 1 to %d characters", maxNameLength)))
		case !specutil.Printable(k) || strings.ContainsAny(k, " ="):
			// Quoted, so that the path stays on one line.
			errs = append(errs, field.Invalid(path.Key(specutil.Truncate(strconv.Quote(k))), specutil.Truncate(strconv.Quote(k)), "label keys must not hold control characters, spaces or \"=\""))
		case len(v) > maxNameLength:
			errs = append(errs, field.TooLong(path.Key(k), "", maxNameLength))
		case !specutil.Printable(v):
			errs = append(errs, field.Invalid(path.Key(k), specutil.Truncate(strconv.Quote(v)), "label values must not hold control characters"))
		}
	}
	return errs
}

// ValidateUserDataSize refuses rendered user data larger than Exoscale
// takes once base64-encoded, so the Machine fails with a clear message
// before the cloud is asked.
func ValidateUserDataSize(userData []byte) error {
	if len(userData) > MaxUserDataBytes {
		return fmt.Errorf("the user data is %d bytes, more than the %d Exoscale takes (%d characters of base64)", len(userData), MaxUserDataBytes, MaxUserDataBase64)
	}
	return nil
}

// IsID says whether s is a resource ID (a UUID) rather than a name.
func IsID(s string) bool { return uuidPattern.MatchString(s) }
