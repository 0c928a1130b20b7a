// Package specutil holds what the provider specs of every cloud decode and
// validate the same way: JSON in a Machine's providerSpec, defaulted and
// validated into field errors that name what to fix without repeating much
// of what was wrong (errors end up in a Machine's status and events).
package specutil

import (
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Spec is a cloud's provider spec type (a pointer to it).
type Spec[T any] interface {
	*T
	// Default fills in what the user may leave out; it is idempotent.
	Default()
	// Validate reports everything wrong with a defaulted spec under path.
	Validate(path *field.Path) field.ErrorList
}

// Decode decodes, defaults and validates a Machine's provider spec of kind.
// Every problem comes back as a field error under path.
func Decode[T any, P Spec[T]](ps machinev1.ProviderSpec, path *field.Path, kind string) (P, field.ErrorList) {
	if ps.Value == nil || len(ps.Value.Raw) == 0 {
		return nil, field.ErrorList{field.Required(path, "the machine has no providerSpec value")}
	}
	spec := P(new(T))
	if err := json.Unmarshal(ps.Value.Raw, spec); err != nil {
		return nil, field.ErrorList{field.Invalid(path, "(raw JSON)", DescribeJSONError(err, kind))}
	}
	spec.Default()
	if errs := spec.Validate(path); len(errs) > 0 {
		return nil, errs
	}
	return spec, nil
}

// DescribeJSONError names the offending field of a type error, without
// repeating the input.
func DescribeJSONError(err error, kind string) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
		return fmt.Sprintf("cannot decode field %q: got JSON %s, want %s", Truncate(te.Field), te.Value, te.Type)
	}
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("not a valid %s: JSON syntax error at byte %d", kind, se.Offset)
	}
	return "not a valid " + kind + ": " + Truncate(err.Error())
}

// RawExtension encodes a spec or status for a Machine.
func RawExtension(v any) (*runtime.RawExtension, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &runtime.RawExtension{Raw: b}, nil
}

// DecodeStatus decodes a provider status into st; an empty one leaves st as
// it is.
func DecodeStatus(raw *runtime.RawExtension, st any) error {
	if raw == nil || len(raw.Raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw.Raw, st); err != nil {
		return fmt.Errorf("decoding providerStatus: %w", err)
	}
	return nil
}

// Printable says whether s is valid UTF-8 without control characters (line
// breaks, tabs, escapes, NUL) or line separators: what a tag, a label, a key
// or a name may hold.
func Printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

// MaxQuoted bounds how much of a rejected value an error repeats.
const MaxQuoted = 100

// Truncate shortens a rejected value for an error, on a rune boundary.
func Truncate(s string) string {
	if len(s) <= MaxQuoted {
		return s
	}
	cut := MaxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// APIVersion checks a defaulted spec's apiVersion: it must be the one
// this provider decodes. A spec of another version (a later one this
// provider does not know, another project's of the same kind) may mean
// something else by the same fields; taking it as ours would make another
// server than it asks for.
func APIVersion(path *field.Path, got, want string, maxLen int) field.ErrorList {
	switch {
	case len(got) > maxLen:
		return field.ErrorList{field.TooLong(path, "", maxLen)}
	case got != want:
		return field.ErrorList{field.NotSupported(path, Truncate(got), []string{want})}
	}
	return nil
}

// SecretName checks the name of a secret a spec refers to.
func SecretName(path *field.Path, name, what string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, what)}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, Truncate(name), msg))
	}
	return errs
}

// UserDataSize refuses rendered user data larger than a cloud takes, so the
// Machine fails with a clear message before the cloud is asked. what names
// the cloud's limit ("cloudscale.ch", "Exoscale (32768 characters of
// base64)").
func UserDataSize(userData []byte, max int, what string) error {
	if len(userData) > max {
		return fmt.Errorf("the user data is %d bytes, more than the %d %s takes", len(userData), max, what)
	}
	return nil
}

// Bounds of a label selector in a spec.
const (
	maxSelectorTerms  = 16
	maxSelectorValues = 16
)

// LabelSelector checks a label selector a spec holds: valid as the API
// server takes one, and bounded.
func LabelSelector(path *field.Path, sel *metav1.LabelSelector) field.ErrorList {
	if len(sel.MatchLabels) > maxSelectorTerms {
		return field.ErrorList{field.TooMany(path.Child("matchLabels"), len(sel.MatchLabels), maxSelectorTerms)}
	}
	if len(sel.MatchExpressions) > maxSelectorTerms {
		return field.ErrorList{field.TooMany(path.Child("matchExpressions"), len(sel.MatchExpressions), maxSelectorTerms)}
	}
	for i, e := range sel.MatchExpressions {
		if len(e.Values) > maxSelectorValues {
			return field.ErrorList{field.TooMany(path.Child("matchExpressions").Index(i).Child("values"), len(e.Values), maxSelectorValues)}
		}
	}
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)
	for i := range errs {
		// The API server's messages may repeat the value: bound it.
		if s, ok := errs[i].BadValue.(string); ok {
			errs[i].BadValue = Truncate(s)
		}
	}
	return errs
}

// EmptyMetadata refuses metadata in a provider spec unless it is empty
// (what encoding an embedded ObjectMeta writes): nothing reads it.
func EmptyMetadata(path *field.Path, m *metav1.ObjectMeta) field.ErrorList {
	if m == nil {
		return nil
	}
	if b, err := json.Marshal(m); err == nil && (string(b) == `{"creationTimestamp":null}` || string(b) == `{}`) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, "a provider spec has no metadata of its own and nothing reads it: remove it (an empty one is taken)")}
}
