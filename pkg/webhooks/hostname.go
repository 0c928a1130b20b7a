package webhooks

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// A Machine's name is its server's hostname and so its Node's name, on every
// cloud: it must be one DNS label (at most 63 characters), and the server's
// full name (with a cloud's base domain, if its spec has one) a DNS name of
// at most 253 characters.
const maxDNSName = validation.DNS1123SubdomainMaxLength

// generatedName is a name the API server makes from generateName: the
// prefix, cut to 58 characters, and 5 random letters and digits.
func generatedName(generateName string) string {
	const random = 5
	prefix := generateName
	if maxPrefix := validation.DNS1123LabelMaxLength - random; len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	return prefix + "x7k2p"
}

// serverNamer is a parsed spec that says what a Machine's server is called
// (the cloud.Spec of clouds that have a base domain).
type serverNamer interface {
	ServerName(machine string) string
}

// hostnameErrors says why obj's Machines cannot be named as they are.
func hostnameErrors(obj object, spec cloud.Spec) field.ErrorList {
	if obj.namePath == nil || obj.machineName == "" {
		// The API server refuses an object without a name.
		return nil
	}
	shown := obj.name
	if len(shown) > 100 {
		shown = shown[:100] + "..."
	}
	if msgs := validation.IsDNS1123Label(obj.machineName); len(msgs) > 0 {
		what := "a Machine's name is its server's hostname"
		if obj.machineName != obj.name {
			what = fmt.Sprintf("the Machines named from it (e.g. %q) get their names as their servers' hostnames", obj.machineName)
		}
		return field.ErrorList{field.Invalid(obj.namePath, shown, what+", which must be one DNS label: "+strings.Join(msgs, "; "))}
	}
	if n, ok := spec.(serverNamer); ok {
		if full := n.ServerName(obj.machineName); len(full) > maxDNSName {
			return field.ErrorList{field.Invalid(obj.namePath, shown, fmt.Sprintf("the server's name %.80s... would be %d characters, more than the %d a DNS name may have: shorten the name or the base domain", full, len(full), maxDNSName))}
		}
	}
	return nil
}
