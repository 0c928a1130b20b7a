package v1beta1

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/appuio/machine-api-provider/api/internal/specutil"
)

// A Machine's name is its server's hostname and, once the server boots, its
// Node's name: with a baseDomain the server is named <machine>.<baseDomain>.
// The name must therefore be one DNS label (the cloud and the Node's kubelet
// take the first label as the hostname, and a label has at most 63
// characters), and the name with the base domain at most 253 characters.

// HostnameError says why a Machine cannot be given a server of its name.
type HostnameError struct {
	// FQDNTooLong is set when the name is a fine label but together with
	// baseDomain too long; otherwise the Machine's name is no DNS label.
	FQDNTooLong bool
	msg         string
}

func (e *HostnameError) Error() string { return e.msg }

// ValidateHostname checks that a Machine called machineName can have a
// server named after it with baseDomain ("" for none).
func ValidateHostname(machineName, baseDomain string) error {
	if msgs := validation.IsDNS1123Label(machineName); len(msgs) > 0 {
		return &HostnameError{msg: fmt.Sprintf("the Machine's name %q cannot be its server's hostname: %s", specutil.Truncate(machineName), strings.Join(msgs, "; "))}
	}
	if baseDomain == "" {
		return nil
	}
	if n := len(machineName) + 1 + len(baseDomain); n > maxHostnameLength {
		return &HostnameError{FQDNTooLong: true, msg: fmt.Sprintf("the server's name %s.%s would be %d characters, more than the %d a DNS name may have: shorten the Machine's name or baseDomain", specutil.Truncate(machineName), specutil.Truncate(baseDomain), n, maxHostnameLength)}
	}
	return nil
}
