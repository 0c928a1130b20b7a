package demo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The service accounts of the cluster-autoscaler-operator's manifests: the
// operator's and the cluster-autoscaler's. The API server audits their
// requests, so that a test can see any the RBAC of those manifests refuses.
var autoscalingServiceAccounts = []string{"cluster-autoscaler-operator", "cluster-autoscaler"}

func serviceAccountUser(sa string) string { return "system:serviceaccount:" + Namespace + ":" + sa }

// auditPolicy records who did what to which resource, without bodies, for
// the autoscaling service accounts; and who deleted each Node, which the
// tests' ownership audit holds to the deleters it accepts (test/ownaudit).
func auditPolicy() string {
	users := make([]string, 0, len(autoscalingServiceAccounts))
	for _, sa := range autoscalingServiceAccounts {
		users = append(users, fmt.Sprintf("%q", serviceAccountUser(sa)))
	}
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: [` + strings.Join(users, ", ") + `]
- level: Metadata
  verbs: ["delete", "deletecollection"]
  resources: [{group: "", resources: ["nodes"]}]
- level: None
`
}

// AuditLog is the API server's audit log ("" when the environment has no
// directory to keep one in).
func (e *Env) AuditLog() string {
	if e.Options.Dir == "" {
		return ""
	}
	return filepath.Join(e.Options.Dir, "audit.log")
}

// ProviderUserAgent is the user agent of the provider's manager in the
// environment: the program name the binary's client sends, so that the
// API server's audit log tells its requests (the machine controller's
// Node deletes) from the test's, which run in the same process.
const ProviderUserAgent = "machine-api-provider"

// auditArgs configure the API server to write the audit log into dir.
func auditArgs(dir string) (map[string][]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy()), 0o644); err != nil {
		return nil, err
	}
	return map[string][]string{
		"audit-policy-file": {policy},
		"audit-log-path":    {filepath.Join(dir, "audit.log")},
	}, nil
}

// RefusedRequests are the requests of the cluster-autoscaler-operator and
// the cluster-autoscaler that the API server refused (403), distinct, as
// "<service account>: <verb> <group>/<resource> in <namespace>"; and how
// many requests they made in all.
func (e *Env) RefusedRequests() (refused []string, total int, err error) {
	data, err := os.ReadFile(e.AuditLog())
	if err != nil {
		return nil, 0, err
	}
	for line := range strings.Lines(string(data)) {
		var ev struct {
			Verb      string `json:"verb"`
			User      struct{ Username string }
			ObjectRef *struct {
				APIGroup, Resource, Subresource, Namespace, Name string
			} `json:"objectRef"`
			RequestURI     string              `json:"requestURI"`
			ResponseStatus *struct{ Code int } `json:"responseStatus"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return nil, 0, fmt.Errorf("audit log: %w", err)
		}
		sa, ok := strings.CutPrefix(ev.User.Username, "system:serviceaccount:"+Namespace+":")
		if !ok || !slices.Contains(autoscalingServiceAccounts, sa) || ev.ResponseStatus == nil {
			continue
		}
		total++
		if ev.ResponseStatus.Code != 403 {
			continue
		}
		what := ev.RequestURI
		if r := ev.ObjectRef; r != nil {
			res := r.Resource
			if r.Subresource != "" {
				res += "/" + r.Subresource
			}
			what = fmt.Sprintf("%s %s/%s", ev.Verb, r.APIGroup, res)
			if r.Name != "" {
				what += " " + r.Name
			}
			if r.Namespace != "" {
				what += " in " + r.Namespace
			}
		}
		if s := sa + ": " + what; !slices.Contains(refused, s) {
			refused = append(refused, s)
		}
	}
	return refused, total, nil
}
