package exoscale

import (
	"fmt"
	"regexp"
	"slices"
)

// IAMService is the IAM service of every operation the provider calls:
// instances, templates, groups, networks, SSH keys, instance types, deploy
// targets and the zone list are all "compute" to Exoscale's IAM (the zone
// list too: a role without it is refused "Forbidden by role policy for
// compute").
const IAMService = "compute"

// iamOperations maps each call of the client (its op name in metrics and
// messages) to the IAM operation an API key's role must allow for it: the
// operationId of its route in Exoscale's API description. It is the one
// table of the permissions the provider needs; the role policy in
// docs/exoscale.md allows exactly these (a test holds them together).
var iamOperations = map[string]string{
	"zone.list":                "list-zones",
	"instance.list":            "list-instances",
	"instance.get":             "get-instance",
	"instance.create":          "create-instance",
	"instance.update":          "update-instance",
	"instance.delete":          "delete-instance",
	"instancetype.list":        "list-instance-types",
	"template.list":            "list-templates",
	"antiaffinitygroup.list":   "list-anti-affinity-groups",
	"antiaffinitygroup.get":    "get-anti-affinity-group",
	"antiaffinitygroup.create": "create-anti-affinity-group",
	"antiaffinitygroup.delete": "delete-anti-affinity-group",
	"securitygroup.list":       "list-security-groups",
	"securitygroup.attach":     "attach-instance-to-security-group",
	"privatenetwork.list":      "list-private-networks",
	"privatenetwork.get":       "get-private-network",
	"privatenetwork.attach":    "attach-instance-to-private-network",
	"sshkey.list":              "list-ssh-keys",
	"deploytarget.list":        "list-deploy-targets",
}

// adoptIAMOperations are the calls only `machine-api-provider adopt` makes,
// beside the provider's: an instance pool's members are replaced (the pools
// listed and read, a member evicted, the last one with its pool deleted) and
// the eviction's operation followed. docs/exoscale.md documents them as
// adopt's addition to the role (a test holds the two together).
var adoptIAMOperations = map[string]string{
	"instancepool.list":   "list-instance-pools",
	"instancepool.get":    "get-instance-pool",
	"instancepool.evict":  "evict-instance-pool-members",
	"instancepool.delete": "delete-instance-pool",
	"operation.get":       "get-operation",
}

// bootImageIAMOperations are the calls only the boot image controller and
// `machine-api-provider images` make (images.go), beside the provider's:
// a template registered, read, copied to the other zones and deleted, each
// change an operation followed to its end. Both are off unless asked for,
// so the provider's role leaves them out; docs/exoscale.md documents them
// as the addition for boot images (a test holds the two together).
var bootImageIAMOperations = map[string]string{
	"template.register": "register-template",
	"template.get":      "get-template",
	"template.copy":     "copy-template",
	"template.delete":   "delete-template",
	"operation.get":     "get-operation",
}

// IAMOperations are the IAM operations the provider needs, sorted.
func IAMOperations() []string { return sortedValues(iamOperations) }

// AdoptIAMOperations are the IAM operations adopt needs beside the
// provider's, sorted.
func AdoptIAMOperations() []string { return sortedValues(adoptIAMOperations) }

// BootImageIAMOperations are the IAM operations managed boot images need
// beside the provider's, sorted.
func BootImageIAMOperations() []string { return sortedValues(bootImageIAMOperations) }

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, op := range m {
		out = append(out, op)
	}
	slices.Sort(out)
	return out
}

// IAMOperation is the IAM operation of a call of the client, "" for a call
// the tables do not know.
func IAMOperation(op string) string {
	for _, table := range []map[string]string{iamOperations, adoptIAMOperations, bootImageIAMOperations} {
		if name, ok := table[op]; ok {
			return name
		}
	}
	return ""
}

// permission says what to grant for a refused call, in IAM's terms: the
// operation, and how to grant it.
func permission(op string) (name, grant string) {
	if name = IAMOperation(op); name != "" {
		return name, fmt.Sprintf("the IAM operation %q (service %s) in the role of their API key", name, IAMService)
	}
	return "", ""
}

// identityPattern is what the API says when it refuses the key itself
// rather than an operation to it: "Invalid request signature" (a wrong
// secret; the real API's words), an unknown or malformed key, a missing or
// expired signature. Whatever the status it comes with, it refuses the key
// (cloud.Classify). A refusal by the role
// ("Forbidden by role policy for compute") or the organization's policy
// refuses the operation only.
var (
	identityPattern = regexp.MustCompile(`(?i)signature|api key|authorization header|request has expired|unknown key|credential`)
	policyPattern   = regexp.MustCompile(`(?i)polic`)
)

// identityRefused reports whether a 403's message refuses the key itself.
func identityRefused(msg string) bool {
	return identityPattern.MatchString(msg) && !policyPattern.MatchString(msg)
}
