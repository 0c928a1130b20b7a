package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Credentials are what a client of one account authenticates with.
type Credentials struct {
	// Values by key, the keys being the cloud's CredentialKeys.
	Values map[string]string
	// Source says where they come from, for messages, never what they are:
	// `secret "openshift-machine-api/x" (keys "token")` or
	// "$CLOUDSCALE_API_TOKEN (the manager's default)".
	Source string
	// Secret names the secret they were read from ("namespace/name"), ""
	// for the manager's default credentials.
	Secret string
}

// Fingerprint identifies the account without revealing the credentials: the
// first 16 hex digits of a SHA-256 over the sorted key=value pairs. It is
// safe in maps, logs and metrics.
func (c Credentials) Fingerprint() string {
	keys := make([]string, 0, len(c.Values))
	for k := range c.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(c.Values[k]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Secrets lists the credential values, to scrub them from messages.
func (c Credentials) Secrets() []string {
	out := make([]string, 0, len(c.Values))
	for _, v := range c.Values {
		out = append(out, v)
	}
	return out
}

// CredentialsError says why a Machine's credentials cannot be used. It names
// the secret, the key and the spec field to fix; it never quotes a value.
type CredentialsError struct {
	// Secret is "namespace/name"; "" for the manager's default credentials.
	Secret string
	// Key is the secret's key at fault, "" when the whole secret is.
	Key string
	// Field is the spec field naming the secret, as a path.
	Field string
	// Problem says what is wrong.
	Problem string
	// Missing is true when the secret does not exist (yet): it may still be
	// created, so the Machine is retried rather than failed.
	Missing bool
}

func (e *CredentialsError) Error() string {
	switch {
	case e.Secret == "":
		return e.Problem
	case e.Key == "":
		return fmt.Sprintf("secret %s (%s): %s", e.Secret, e.Field, e.Problem)
	default:
		return fmt.Sprintf("secret %s (%s), key %q: %s", e.Secret, e.Field, e.Key, e.Problem)
	}
}

// DefaultSecretField names the manager's default credentials secret in
// messages, as the flag that names it.
const DefaultSecretField = "the manager's default credentials, --default-credentials-secret"

// ReadCredentials returns the credentials a spec names: the secret
// secretName in namespace, read through r (give it an uncached reader: the
// provider reads only the secrets Machines name, and keeps no informer on
// Secrets), or the cloud's default credentials when the spec names none:
// the manager's default secret (read here, every time, so that a replaced
// secret counts for the next call) or else its environment.
// A named secret that is missing, lacks a key or holds an unusable value is
// an error naming it, never a reason to use the default instead. field is
// the spec field that names the secret, for messages.
func ReadCredentials(ctx context.Context, r client.Reader, c Cloud, namespace, secretName, field string) (Credentials, error) {
	if secretName == "" {
		if ref := c.DefaultCredentialsSecret(); ref.Name != "" {
			return readSecret(ctx, r, c, ref.Namespace, ref.Name, DefaultSecretField)
		}
		if d := c.DefaultCredentials(); d != nil {
			return *d, nil
		}
		return Credentials{}, &CredentialsError{Field: field, Problem: fmt.Sprintf(
			"the provider spec names no %s and the manager was started without default %s credentials: name a secret in %s", field, c.Name(), field)}
	}
	return readSecret(ctx, r, c, namespace, secretName, field)
}

// readSecret reads the cloud's credentials from a secret.
func readSecret(ctx context.Context, r client.Reader, c Cloud, namespace, secretName, field string) (Credentials, error) {
	ref := namespace + "/" + secretName
	var s corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: secretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return Credentials{}, &CredentialsError{Secret: ref, Field: field, Missing: true, Problem: "does not exist; retrying until it does"}
		}
		return Credentials{}, fmt.Errorf("reading secret %s (%s): %w", ref, field, err)
	}
	creds := Credentials{Values: map[string]string{}, Secret: ref}
	var quoted []string
	for _, k := range c.CredentialKeys() {
		quoted = append(quoted, fmt.Sprintf("%q", k))
		v, ok := s.Data[k]
		if !ok {
			return Credentials{}, &CredentialsError{Secret: ref, Key: k, Field: field, Problem: fmt.Sprintf("the secret has no such key (it has %s)", keysOf(s.Data))}
		}
		if problem := CheckCredentialValue(string(v)); problem != "" {
			return Credentials{}, &CredentialsError{Secret: ref, Key: k, Field: field, Problem: problem}
		}
		creds.Values[k] = string(v)
	}
	creds.Source = fmt.Sprintf("secret %s (keys %s)", ref, strings.Join(quoted, ", "))
	return creds, nil
}

// CheckCredentialValue says what makes a credential value unusable, ""
// when nothing does. API tokens, keys and secrets never contain whitespace
// or control characters; a value with them is a copy-and-paste accident
// (most often the trailing newline of `echo` or a file), which would make
// every call fail with a confusing 401, or worse, be trimmed into
// something else.
func CheckCredentialValue(v string) string {
	switch {
	case v == "":
		return "the value is empty"
	case strings.TrimSpace(v) == "":
		return "the value is blank (only whitespace)"
	case strings.HasSuffix(v, "\n"):
		return "the value ends with a newline: store it without (e.g. kubectl create secret generic --from-literal=KEY=VALUE, or echo -n)"
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "the value contains whitespace or control characters"
		}
	}
	return ""
}

func keysOf(data map[string][]byte) string {
	if len(data) == 0 {
		return "no keys"
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	sort.Strings(keys)
	return "keys " + strings.Join(keys, ", ")
}
