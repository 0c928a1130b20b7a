package matrix

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// auditPolicy records who did what to which resource, and the webhook
// annotations, without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// auditEvent is the part of an API server audit event the checks read.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		APIGroup    string `json:"apiGroup"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// user is who made the request: the impersonated user if any.
func (e auditEvent) user() string {
	if e.ImpersonatedUser != nil {
		return e.ImpersonatedUser.Username
	}
	return e.User.Username
}

// resource is "group/resource[/subresource]" ("/nodes" for the core group).
func (e auditEvent) resource() string {
	r := e.ObjectRef.APIGroup + "/" + e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return r
}

// readAudit reads the audit log's events that name a resource and have an
// answer.
func readAudit(path string) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		if ev.ObjectRef == nil || ev.ResponseStatus == nil {
			continue
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}

// saPrefix is how the API server names a service account of the Machine
// API's namespace.
const saPrefix = "system:serviceaccount:" + namespace + ":"

// refused lists, per service account of the namespace, its distinct
// requests the API server refused with 403, with counts.
func refused(events []auditEvent) map[string][]string {
	counts := map[string]map[string]int{}
	for _, ev := range events {
		sa, ok := strings.CutPrefix(ev.user(), saPrefix)
		if !ok || ev.ResponseStatus.Code != 403 {
			continue
		}
		if counts[sa] == nil {
			counts[sa] = map[string]int{}
		}
		where := "cluster-wide"
		if ev.ObjectRef.Namespace != "" {
			where = "in " + ev.ObjectRef.Namespace
		}
		counts[sa][fmt.Sprintf("%s %s %s", ev.Verb, ev.resource(), where)]++
	}
	out := map[string][]string{}
	for sa, reqs := range counts {
		for r, n := range reqs {
			out[sa] = append(out[sa], fmt.Sprintf("%s (%d×)", r, n))
		}
		sort.Strings(out[sa])
	}
	return out
}

// requestCount is how many requests each service account of the namespace
// made.
func requestCount(events []auditEvent) map[string]int {
	out := map[string]int{}
	for _, ev := range events {
		if sa, ok := strings.CutPrefix(ev.user(), saPrefix); ok {
			out[sa]++
		}
	}
	return out
}

// webhookCalls reads what the audit log says of the admission webhooks
// on Machine and MachineSet writes: the mutating webhook configurations
// that answered (by name), and the calls to webhooks that failed open
// (failurePolicy Ignore: the write went on without them).
func webhookCalls(events []auditEvent) (answered map[string]int, failedOpen []string) {
	answered = map[string]int{}
	for _, ev := range events {
		if ev.ObjectRef.APIGroup != "machine.openshift.io" || ev.ObjectRef.Subresource != "" ||
			(ev.ObjectRef.Resource != "machines" && ev.ObjectRef.Resource != "machinesets") {
			continue
		}
		for k, v := range ev.Annotations {
			switch {
			case strings.HasPrefix(k, "mutation.webhook.admission.k8s.io/"):
				var a struct{ Configuration string }
				if json.Unmarshal([]byte(v), &a) == nil {
					answered[a.Configuration]++
				}
			case strings.HasPrefix(k, "failed-open."):
				failedOpen = append(failedOpen, fmt.Sprintf("%s %s/%s: %s", ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Name, v))
			}
		}
	}
	return answered, failedOpen
}

// unusedGrants lists the verbs the rendering's RBAC grants service account
// sa that its requests in events never used ("verb group/resource").
func unusedGrants(objs []*unstructured.Unstructured, sa string, events []auditEvent) []string {
	used := map[string]bool{}
	for _, ev := range events {
		if ev.user() == saPrefix+sa {
			used[ev.Verb+" "+ev.resource()] = true
		}
	}
	var unused []string
	for _, rule := range rulesOf(objs, sa) {
		for _, g := range rule.groups {
			for _, r := range rule.resources {
				for _, v := range rule.verbs {
					if !used[v+" "+g+"/"+r] {
						unused = append(unused, v+" "+g+"/"+r)
					}
				}
			}
		}
	}
	sort.Strings(unused)
	return slices.Compact(unused)
}

type rule struct{ groups, resources, verbs []string }

// rulesOf is every rule of the Roles and ClusterRoles bound to service
// account sa (of the namespace) in objs.
func rulesOf(objs []*unstructured.Unstructured, sa string) []rule {
	roles := map[string][]rule{}
	for _, u := range objs {
		if u.GetKind() != "Role" && u.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
		for _, r := range rules {
			m, _ := r.(map[string]any)
			str := func(k string) []string { s, _, _ := unstructured.NestedStringSlice(m, k); return s }
			roles[u.GetKind()+"/"+u.GetName()] = append(roles[u.GetKind()+"/"+u.GetName()], rule{str("apiGroups"), str("resources"), str("verbs")})
		}
	}
	var out []rule
	for _, u := range objs {
		if u.GetKind() != "RoleBinding" && u.GetKind() != "ClusterRoleBinding" {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
		bound := false
		for _, s := range subjects {
			m, _ := s.(map[string]any)
			if m["kind"] == "ServiceAccount" && m["name"] == sa {
				bound = true
			}
		}
		if bound {
			kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind")
			name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
			out = append(out, roles[kind+"/"+name]...)
		}
	}
	return out
}
