// Package manifests tests config/: the kustomizations render with the
// pinned kustomize (bin/kustomize), every object they render is accepted by
// a real kube-apiserver (server-side apply, dry run), the CRDs are the
// openshift/api module's, and the RBAC is least privilege — statically
// (no "*", no Secrets cluster-wide, every kubebuilder RBAC marker covered)
// and in practice: rbac_test.go runs the deployer and the controllers as
// their service accounts. webhook_test.go ties config/webhook to
// docs/webhook.md and to the Deployment the deployer builds.
package manifests_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/installmanifests"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// Namespace is where both kustomizations put everything namespaced.
const Namespace = "openshift-machine-api"

// DeployerSA is the deployer's service account, the same in every
// kustomization. The controllers' is per cloud: controllersSA reads it from
// the deployer's --service-account.
const DeployerSA = "machine-api-provider-deployer"

// bootImagesNamespace holds the ConfigMap coreos-bootimages, which the boot
// image controller's Role there may read.
const bootImagesNamespace = "openshift-machine-config-operator"

// openShiftNamespaces are the namespaces an OpenShift cluster has that the
// overlays install into: the Machine API's, openshift-config-managed,
// where the console reads dashboards, and the machine-config-operator's,
// where the boot image controller reads the release's images.
func openShiftNamespaces() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, name := range []string{Namespace, "openshift-config-managed", bootImagesNamespace} {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(name)
		out = append(out, ns)
	}
	return out
}

// The Deployments the kustomizations hold: the deployer's everywhere, the
// webhooks' in the OpenShift overlays.
const (
	DeployerDeployment = "machine-api-provider-deployer"
	WebhookDeployment  = "machine-api-provider-webhook"
)

// fieldOwner is the field manager of the test's applies.
const fieldOwner = "machine-api-provider-manifests-test"

// kustomizations are those meant to be applied (make manifests renders them).
var kustomizations = []string{"default", "overlays/cloudscale", "overlays/exoscale"}

// repoRoot is two levels above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// render runs the pinned kustomize on config/<dir> and returns its objects.
func render(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	return renderWith(t, "kustomize", dir)
}

// renderWith runs bin/<tool> (kustomize or kustomize-oc) on config/<dir>.
func renderWith(t testing.TB, tool, dir string) []*unstructured.Unstructured {
	t.Helper()
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	kustomize := filepath.Join(bin, tool)
	if _, err := os.Stat(kustomize); err != nil {
		t.Fatalf("%s not found (%v): run `make %s` (or `make tools`)", kustomize, err, tool)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kustomize, "build", filepath.Join(repoRoot(t), "config", dir))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build config/%s: %v\n%s", dir, err, stderr.String())
	}
	objs, err := installmanifests.Decode(stdout.Bytes())
	if err != nil {
		t.Fatalf("config/%s: %v", dir, err)
	}
	if len(objs) == 0 {
		t.Fatalf("config/%s renders nothing", dir)
	}
	return objs
}

// deploymentIn returns the Deployment name of objs, a rendering, or nil.
func deploymentIn(objs []*unstructured.Unstructured, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == "Deployment" && u.GetName() == name {
			return u
		}
	}
	return nil
}

// flagsOf returns the flags of the first container of Deployment name in
// objs, by name without the dashes.
func flagsOf(t testing.TB, objs []*unstructured.Unstructured, name string) map[string]string {
	t.Helper()
	d := deploymentIn(objs, name)
	if d == nil {
		t.Fatalf("the rendering has no Deployment %s", name)
	}
	flags := map[string]string{}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	for _, a := range args {
		flag, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if _, dup := flags[flag]; dup {
			t.Fatalf("%s: the flag --%s is given twice (%v)", name, flag, args)
		}
		flags[flag] = value
	}
	return flags
}

// deployerFlags returns the flags of the deployer's container in objs, the
// rendering of a kustomization, by name without the dashes.
func deployerFlags(t testing.TB, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	return flagsOf(t, objs, DeployerDeployment)
}

// controllersSA is the service account the deployer in objs runs the
// controllers as: its --service-account.
func controllersSA(t testing.TB, objs []*unstructured.Unstructured) string {
	t.Helper()
	sa := deployerFlags(t, objs)["service-account"]
	if sa == "" {
		t.Fatal("the deployer has no --service-account: it would run the controllers as the operator's machine-api-controllers")
	}
	return sa
}

// cloudOf is the cloud the deployer in objs deploys the controllers for:
// its --cloud, by default cloudscale (the manager's default).
func cloudOf(t testing.TB, objs []*unstructured.Unstructured) string {
	t.Helper()
	if c := deployerFlags(t, objs)["cloud"]; c != "" {
		return c
	}
	return "cloudscale"
}

func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", u.GetKind(), ns, u.GetName())
	}
	return fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
}

// applyOrder puts what others depend on first: namespaces, then CRDs, then
// the rest in rendering order.
func applyOrder(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := func(u *unstructured.Unstructured) int {
		switch u.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	return out
}

// apply applies u server-side as fieldOwner, for real or as a dry run.
func apply(ctx context.Context, c client.Client, u *unstructured.Unstructured, dryRun bool) error {
	opts := []client.ApplyOption{client.FieldOwner(fieldOwner), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), opts...)
}

// served reports whether the API server serves u's kind.
func served(c client.Client, u *unstructured.Unstructured) (bool, error) {
	_, err := c.RESTMapper().RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// TestServerSideDryRun applies every object of each kustomization with
// server-side apply as a dry run against a real kube-apiserver: the API
// server's validation, defaulting and (for RBAC) escalation checks all run,
// nothing is stored. The namespace exists, as it would on the cluster.
// Kinds the control plane does not serve (the ServiceMonitor and the
// PrometheusRule: their CRDs come with the Prometheus operator) are checked
// by TestServiceMonitor and TestAlertRules instead.
func TestServerSideDryRun(t *testing.T) {
	_, c := testenv.Start(t)
	ctx := context.Background()
	for _, ns := range openShiftNamespaces() {
		if err := apply(ctx, c, ns, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range kustomizations {
		t.Run(strings.ReplaceAll(k, "/", "-"), func(t *testing.T) {
			objs := render(t, k)
			applied := 0
			for _, u := range applyOrder(objs) {
				ok, err := served(c, u)
				if err != nil {
					t.Fatalf("%s: %v", describe(u), err)
				}
				if !ok {
					if u.GroupVersionKind().Group != "monitoring.coreos.com" {
						t.Errorf("%s: kind %s is not served by a plain kube-apiserver", describe(u), u.GroupVersionKind())
					}
					continue
				}
				if err := apply(ctx, c, u, true); err != nil {
					t.Errorf("%s refused: %v", describe(u), err)
					continue
				}
				applied++
			}
			t.Logf("config/%s: %d of %d objects accepted (dry run)", k, applied, len(objs))
		})
	}
}

// TestKustomizeOfOC renders every kustomization with the kustomize that
// `oc apply -k` embeds (bin/kustomize-oc, v5.0.1: OpenShift 4.14's oc) as
// well: it must accept them, and render the very objects the pinned
// kustomize does, or an admin's `oc apply -k` would install something else
// than the tests check.
func TestKustomizeOfOC(t *testing.T) {
	for _, k := range kustomizations {
		want, err := json.Marshal(objectsByName(render(t, k)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(objectsByName(renderWith(t, "kustomize-oc", k)))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("config/%s: kustomize-oc renders\n%s\nthe pinned kustomize\n%s", k, got, want)
		}
	}
}

// TestNamespaces: every namespaced object lands in the Machine API's
// namespace, and the kustomizations hold exactly what they should.
func TestNamespaces(t *testing.T) {
	for _, k := range kustomizations {
		objs := render(t, k)
		kinds := map[string]int{}
		for _, u := range objs {
			kinds[u.GetKind()]++
			switch u.GetKind() {
			case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
				"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
				if u.GetNamespace() != "" {
					t.Errorf("config/%s: %s has a namespace", k, describe(u))
				}
			default:
				want := Namespace
				if u.GetKind() == "ConfigMap" && u.GetName() == "machine-api-provider-dashboard" {
					want = "openshift-config-managed" // where the console reads dashboards
				}
				if (u.GetKind() == "Role" || u.GetKind() == "RoleBinding") && strings.HasSuffix(u.GetName(), "-boot-images") {
					want = bootImagesNamespace // the release's images, read there
				}
				if u.GetNamespace() != want {
					t.Errorf("config/%s: %s is not in %s", k, describe(u), want)
				}
			}
		}
		switch k {
		case "default":
			// A plain cluster: CRDs and namespaces (the Machine API's, the
			// machine-config-operator's for the release's boot images); no
			// ServiceMonitor and no webhooks (no Prometheus operator, no
			// service CA).
			if kinds["CustomResourceDefinition"] != 3 || kinds["Namespace"] != 2 || kinds["ServiceMonitor"] != 0 ||
				kinds["PrometheusRule"]+kinds["NetworkPolicy"] != 0 ||
				kinds["MutatingWebhookConfiguration"]+kinds["ValidatingWebhookConfiguration"] != 0 {
				t.Errorf("config/default: kinds %v, want 3 CRDs, the two Namespaces, no ServiceMonitor, no webhooks", kinds)
			}
		default:
			// OpenShift: it has the CRDs and the namespace, and a service
			// CA for the webhooks.
			if kinds["CustomResourceDefinition"] != 0 || kinds["Namespace"] != 0 || kinds["ServiceMonitor"] != 1 ||
				kinds["PrometheusRule"] != 1 || kinds["NetworkPolicy"] != 2 ||
				kinds["MutatingWebhookConfiguration"] != 1 || kinds["ValidatingWebhookConfiguration"] != 1 {
				t.Errorf("config/%s: kinds %v, want no CRD, no Namespace, one ServiceMonitor and PrometheusRule, two NetworkPolicies (the deployer's metrics, the webhooks), the webhook configurations", k, kinds)
			}
		}
	}
}

// TestDeployerDeployment: config/deployer has the image placeholder, which
// the kustomizations set through `images:` (`kustomize edit set image
// machine-api-provider=...`), and PROVIDER_IMAGE follows it; the pod runs
// as non-root without privileges; probes and resources are there.
func TestDeployerDeployment(t *testing.T) {
	for _, u := range render(t, "deployer") {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if image := c.(map[string]any)["image"]; image != "machine-api-provider:latest" {
				t.Errorf("config/deployer: image %v, want the placeholder machine-api-provider:latest", image)
			}
		}
	}
	for _, k := range kustomizations {
		objs := render(t, k)
		d := deploymentIn(objs, DeployerDeployment)
		if d == nil {
			t.Fatalf("config/%s: no Deployment %s", k, DeployerDeployment)
		}
		// Every Deployment runs the one provider image, as set in
		// config/image (the webhooks' too).
		deployerImage := imagesOf(d)[0]
		for _, u := range objs {
			if u.GetKind() != "Deployment" {
				continue
			}
			if u.GetName() != DeployerDeployment && u.GetName() != WebhookDeployment {
				t.Errorf("config/%s: an unexpected Deployment %s", k, u.GetName())
			}
			for _, image := range imagesOf(u) {
				if image != deployerImage {
					t.Errorf("config/%s: %s runs image %s, the deployer %s", k, u.GetName(), image, deployerImage)
				}
			}
		}
		str := func(fields ...string) string {
			s, _, _ := unstructured.NestedString(d.Object, fields...)
			return s
		}
		spec := []string{"spec", "template", "spec"}
		if sa := str(append(spec, "serviceAccountName")...); sa != DeployerSA {
			t.Errorf("config/%s: serviceAccountName %q, want %s", k, sa, DeployerSA)
		}
		if v, _, _ := unstructured.NestedBool(d.Object, append(spec, "securityContext", "runAsNonRoot")...); !v {
			t.Errorf("config/%s: pod securityContext.runAsNonRoot is not true", k)
		}
		containers, _, _ := unstructured.NestedSlice(d.Object, append(spec, "containers")...)
		if len(containers) != 1 {
			t.Fatalf("config/%s: %d containers, want 1", k, len(containers))
		}
		ctr := containers[0].(map[string]any)
		image, _, _ := unstructured.NestedString(ctr, "image")
		if image == "" {
			t.Errorf("config/%s: no image", k)
		}
		env, _, _ := unstructured.NestedSlice(ctr, "env")
		providerImage := ""
		for _, e := range env {
			if e.(map[string]any)["name"] == "PROVIDER_IMAGE" {
				providerImage, _ = e.(map[string]any)["value"].(string)
			}
		}
		if providerImage != image {
			t.Errorf("config/%s: PROVIDER_IMAGE %q differs from the image %q", k, providerImage, image)
		}
		for _, f := range [][]string{
			{"securityContext", "allowPrivilegeEscalation"},
			{"securityContext", "readOnlyRootFilesystem"},
		} {
			v, found, _ := unstructured.NestedBool(ctr, f...)
			want := f[1] == "readOnlyRootFilesystem"
			if !found || v != want {
				t.Errorf("config/%s: container %s = %v (set: %v), want %v", k, strings.Join(f, "."), v, found, want)
			}
		}
		if drop, _, _ := unstructured.NestedStringSlice(ctr, "securityContext", "capabilities", "drop"); !slices.Equal(drop, []string{"ALL"}) {
			t.Errorf("config/%s: capabilities.drop %v, want [ALL]", k, drop)
		}
		for _, f := range []string{"livenessProbe", "readinessProbe"} {
			if _, found, _ := unstructured.NestedMap(ctr, f); !found {
				t.Errorf("config/%s: no %s", k, f)
			}
		}
		if _, found, _ := unstructured.NestedMap(ctr, "resources", "requests"); !found {
			t.Errorf("config/%s: no resource requests", k)
		}
		if _, found, _ := unstructured.NestedString(ctr, "resources", "limits", "memory"); !found {
			t.Errorf("config/%s: no memory limit", k)
		}
	}
}

// imagesOf returns the images of d's containers.
func imagesOf(d *unstructured.Unstructured) []string {
	var images []string
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		image, _, _ := unstructured.NestedString(c.(map[string]any), "image")
		images = append(images, image)
	}
	return images
}

// TestServiceMonitor checks what the dry run cannot (no Prometheus operator
// CRD in the test's control plane): the ServiceMonitor selects the metrics
// Service and scrapes a port it has.
func TestServiceMonitor(t *testing.T) {
	objs := render(t, "overlays/cloudscale")
	var sm *unstructured.Unstructured
	var services []*unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "ServiceMonitor":
			sm = u
		case "Service":
			services = append(services, u)
		}
	}
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion %s", sm.GetAPIVersion())
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(sel) == 0 || len(endpoints) == 0 {
		t.Fatalf("ServiceMonitor selects %v, endpoints %v", sel, endpoints)
	}
	matched := 0
	for _, svc := range services {
		labels := svc.GetLabels()
		all := true
		for k, v := range sel {
			all = all && labels[k] == v
		}
		if !all {
			continue
		}
		matched++
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		for _, ep := range endpoints {
			name := ep.(map[string]any)["port"]
			if !slices.ContainsFunc(ports, func(p any) bool { return p.(map[string]any)["name"] == name }) {
				t.Errorf("ServiceMonitor endpoint port %v: Service %s has no such port", name, svc.GetName())
			}
		}
	}
	if matched != 1 {
		t.Errorf("ServiceMonitor selects %d Services, want 1", matched)
	}
}

// rbac is the RBAC of one rendering.
type rbac struct {
	roles, clusterRoles               map[string]rbacv1.Role // ClusterRoles as Roles: only the rules matter
	roleBindings, clusterRoleBindings []rbacv1.RoleBinding
}

func rbacOf(t testing.TB, objs []*unstructured.Unstructured) rbac {
	t.Helper()
	r := rbac{roles: map[string]rbacv1.Role{}, clusterRoles: map[string]rbacv1.Role{}}
	for _, u := range objs {
		if u.GroupVersionKind().Group != rbacv1.GroupName {
			continue
		}
		switch u.GetKind() {
		case "Role", "ClusterRole":
			var role rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				t.Fatalf("%s: %v", describe(u), err)
			}
			if u.GetKind() == "Role" {
				r.roles[u.GetName()] = role
			} else {
				r.clusterRoles[u.GetName()] = role
			}
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
				t.Fatalf("%s: %v", describe(u), err)
			}
			if u.GetKind() == "RoleBinding" {
				r.roleBindings = append(r.roleBindings, b)
			} else {
				r.clusterRoleBindings = append(r.clusterRoleBindings, b)
			}
		}
	}
	return r
}

// rulesOf returns the rules bound to service account sa, each with where it
// applies: the namespace, or "" for cluster-wide.
func (r rbac) rulesOf(sa string) map[string][]rbacv1.PolicyRule {
	out := map[string][]rbacv1.PolicyRule{}
	bound := func(b rbacv1.RoleBinding) bool {
		return slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == Namespace
		})
	}
	for _, b := range r.roleBindings {
		if !bound(b) {
			continue
		}
		roles := r.roles
		if b.RoleRef.Kind == "ClusterRole" {
			roles = r.clusterRoles
		}
		out[b.Namespace] = append(out[b.Namespace], roles[b.RoleRef.Name].Rules...)
	}
	for _, b := range r.clusterRoleBindings {
		if bound(b) {
			out[""] = append(out[""], r.clusterRoles[b.RoleRef.Name].Rules...)
		}
	}
	return out
}

// TestRBACLeastPrivilege: no wildcard anywhere, no Secrets in any
// ClusterRole (Secrets only through a Role, read-only), every role bound,
// every binding's role there.
func TestRBACLeastPrivilege(t *testing.T) {
	for _, k := range kustomizations {
		objs := render(t, k)
		r := rbacOf(t, objs)
		if len(r.roles) == 0 || len(r.clusterRoles) == 0 {
			t.Fatalf("config/%s: no Roles or ClusterRoles", k)
		}
		check := func(kind, name string, rules []rbacv1.PolicyRule) {
			for i, rule := range rules {
				where := fmt.Sprintf("config/%s: %s %s rule %d", k, kind, name, i)
				for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames} {
					for _, v := range list {
						if strings.Contains(v, "*") {
							t.Errorf("%s: wildcard %q", where, v)
						}
					}
				}
				if len(rule.NonResourceURLs) > 0 {
					t.Errorf("%s: non-resource URLs %v", where, rule.NonResourceURLs)
				}
				if len(rule.Verbs) == 0 || len(rule.Resources) == 0 {
					t.Errorf("%s: no verbs or resources", where)
				}
				for _, v := range rule.Verbs {
					switch v {
					case "escalate", "bind", "impersonate", "deletecollection":
						t.Errorf("%s: verb %q", where, v)
					}
				}
				if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "secrets") {
					if kind == "ClusterRole" {
						t.Errorf("%s: Secrets in a ClusterRole (cluster-wide)", where)
					}
					for _, v := range rule.Verbs {
						if !slices.Contains([]string{"get", "list", "watch"}, v) {
							t.Errorf("%s: Secrets verb %q: the controllers only read them", where, v)
						}
					}
				}
			}
		}
		for name, role := range r.roles {
			check("Role", name, role.Rules)
		}
		for name, role := range r.clusterRoles {
			check("ClusterRole", name, role.Rules)
		}
		for _, b := range r.roleBindings {
			if b.RoleRef.Kind != "Role" {
				t.Errorf("config/%s: RoleBinding %s binds a %s: bind Roles in the namespace", k, b.Name, b.RoleRef.Kind)
			} else if _, ok := r.roles[b.RoleRef.Name]; !ok {
				t.Errorf("config/%s: RoleBinding %s: no Role %s", k, b.Name, b.RoleRef.Name)
			}
		}
		for _, b := range r.clusterRoleBindings {
			if _, ok := r.clusterRoles[b.RoleRef.Name]; !ok {
				t.Errorf("config/%s: ClusterRoleBinding %s: no ClusterRole %s", k, b.Name, b.RoleRef.Name)
			}
		}
		// The deployer is confined to its namespace, but for reading four
		// cluster-wide objects: the Proxy named cluster, the
		// ClusterVersion named version, the Infrastructure named cluster
		// (the cluster's identity, clusterid.go) and the APIServer named
		// cluster.
		readable := map[string]string{"proxies": "cluster", "clusterversions": "version", "infrastructures": deployer.InfrastructureName, "apiservers": deployer.APIServerName}
		for _, rule := range r.rulesOf(DeployerSA)[""] {
			if !slices.Equal(rule.APIGroups, []string{"config.openshift.io"}) || len(rule.Resources) != 1 ||
				!slices.Equal(rule.ResourceNames, []string{readable[rule.Resources[0]]}) ||
				slices.ContainsFunc(rule.Verbs, func(v string) bool { return !slices.Contains([]string{"get", "list", "watch"}, v) }) {
				t.Errorf("config/%s: the deployer has the cluster-wide rule %+v; it may only read the Proxy, the ClusterVersion, the Infrastructure and the APIServer", k, rule)
			}
		}
		checkReleasePermissions(t, k, r, controllersSA(t, objs))
		for _, sa := range []string{DeployerSA, controllersSA(t, objs)} {
			if !slices.ContainsFunc(objs, func(u *unstructured.Unstructured) bool {
				return u.GetKind() == "ServiceAccount" && u.GetName() == sa
			}) {
				t.Errorf("config/%s: no ServiceAccount %s", k, sa)
			}
			if len(r.rulesOf(sa)[Namespace]) == 0 {
				t.Errorf("config/%s: %s has no rules in %s", k, sa, Namespace)
			}
		}
	}
}

// checkReleasePermissions: the RBAC grants the union of what the release
// table says each known release needs (deployer.Releases:
// ControllerPermissions, DeployerPermissions: the status writes, the
// events API, the APIServer's TLS profile), and, for the kinds only some
// releases need, nothing beyond that union.
func checkReleasePermissions(t *testing.T, k string, r rbac, controllers string) {
	t.Helper()
	union := map[string][]string{} // "group/resource" -> verbs, of the kinds only some releases need
	needed := map[string]int{}
	for _, rel := range deployer.Releases {
		for _, who := range []struct {
			sa    string
			perms []deployer.Permission
		}{{controllers, rel.ControllerPermissions()}, {DeployerSA, rel.DeployerPermissions()}} {
			var rules []rbacv1.PolicyRule
			for _, rs := range r.rulesOf(who.sa) {
				rules = append(rules, rs...)
			}
			for _, p := range who.perms {
				if !grants(rules, p.Verb, p.Group, p.Resource, p.Name) {
					what := p.Resource
					if p.Name != "" {
						what += " named " + p.Name
					}
					t.Errorf("config/%s: %s may not %s %q %s, which OpenShift %s needs: %s", k, who.sa, p.Verb, p.Group, what, rel, p.Why)
				}
				key := who.sa + " " + p.Group + "/" + p.Resource
				if !slices.Contains(union[key], p.Verb) {
					union[key] = append(union[key], p.Verb)
				}
				needed[key+" "+p.Verb]++
			}
		}
	}
	// the kinds some releases need and others not, and that nothing else
	// of ours needs: granted only as the union says
	for key, verbs := range union {
		sa, gr, _ := strings.Cut(key, " ")
		group, resource, _ := strings.Cut(gr, "/")
		if group == "" || group == "machine.openshift.io" {
			continue // core events and the status writes: also the provider's manager's and leader election's
		}
		for _, rs := range r.rulesOf(sa) {
			for _, rule := range rs {
				if !slices.Contains(rule.APIGroups, group) || !slices.Contains(rule.Resources, resource) {
					continue
				}
				for _, v := range rule.Verbs {
					if !slices.Contains(verbs, v) {
						t.Errorf("config/%s: %s is granted %s %q %s, which no known release needs (%v)", k, sa, v, group, resource, verbs)
					}
				}
			}
		}
	}
	if needed[controllers+" events.k8s.io/events create"] == 0 || needed[DeployerSA+" config.openshift.io/apiservers watch"] == 0 {
		t.Errorf("the release table records no release needing events.k8s.io events or the APIServer: %v", needed)
	}
}

// grants reports whether rules allow verb on the object name of
// group/resource, minding resourceNames.
func grants(rules []rbacv1.PolicyRule, verb, group, resource, name string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name))
	})
}

// TestRBACNamesFollowTheCloud: the names that RBAC limits rules to are the
// cloud's (the deployer's --cloud): the controllers may take the leases of
// the manager (<cloud>-machine-api-provider, pkg/manager) and of the
// operator's three controllers, and the deployer may write and delete its
// Deployment (deployer.DeploymentName) and no other, the operator's least
// of all. The markers cannot say this (they name no objects); rbac_test.go
// runs it.
func TestRBACNamesFollowTheCloud(t *testing.T) {
	for _, k := range kustomizations {
		objs := render(t, k)
		r := rbacOf(t, objs)
		cloud := cloudOf(t, objs)
		var controllers []rbacv1.PolicyRule
		for _, rs := range r.rulesOf(controllersSA(t, objs)) {
			controllers = append(controllers, rs...)
		}
		for _, lease := range []string{cloud + "-machine-api-provider",
			"cluster-api-provider-machineset-leader", "cluster-api-provider-nodelink-leader", "cluster-api-provider-healthcheck-leader"} {
			for _, verb := range []string{"get", "update"} {
				if !grants(controllers, verb, "coordination.k8s.io", "leases", lease) {
					t.Errorf("config/%s: the controllers may not %s the lease %s: that controller never becomes leader", k, verb, lease)
				}
			}
		}
		var deployerRules []rbacv1.PolicyRule
		for _, rs := range r.rulesOf(DeployerSA) {
			deployerRules = append(deployerRules, rs...)
		}
		for _, verb := range []string{"create", "patch", "delete"} {
			if name := deployer.DeploymentName(cloud); !grants(deployerRules, verb, "apps", "deployments", name) {
				t.Errorf("config/%s: the deployer may not %s its Deployment %s", k, verb, name)
			}
			if grants(deployerRules, verb, "apps", "deployments", deployer.OperatorDeploymentName) {
				t.Errorf("config/%s: the deployer may %s the operator's Deployment %s: limit the rule to its own", k, verb, deployer.OperatorDeploymentName)
			}
		}
	}
}

// marker is one kubebuilder RBAC marker.
type marker struct {
	file                     string
	groups, resources, verbs []string
}

// rbacMarkers returns the `+kubebuilder:rbac` markers of the non-test Go
// files under dir.
func rbacMarkers(t testing.TB, dir string) []marker {
	t.Helper()
	var out []marker
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(data)) {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "// +kubebuilder:rbac:")
			if !ok {
				continue
			}
			m := marker{file: p}
			for kv := range strings.SplitSeq(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				vals := strings.Split(v, ";")
				for i := range vals {
					vals[i] = strings.Trim(vals[i], `"`)
					if vals[i] == "core" {
						vals[i] = ""
					}
				}
				switch k {
				case "groups":
					m.groups = vals
				case "resources":
					m.resources = vals
				case "verbs":
					m.verbs = vals
				}
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unneeded lists what markers ask for beyond what the code does, keyed by
// "group/resource verb", with the reason it is not granted. The tests in
// rbac_test.go run the code without it.
var unneeded = map[string]string{
	// controller-runtime's leader election (client-go's LeaseLock) only
	// gets, creates and updates its Lease; kubebuilder's scaffolded marker
	// asks for more.
	"coordination.k8s.io/leases list":   "leader election only gets, creates and updates its lease",
	"coordination.k8s.io/leases watch":  "leader election only gets, creates and updates its lease",
	"coordination.k8s.io/leases patch":  "leader election only gets, creates and updates its lease",
	"coordination.k8s.io/leases delete": "leader election only gets, creates and updates its lease",
}

// TestRBACCoversMarkers: every permission a kubebuilder RBAC marker in this
// repository's code asks for is granted to the service account that runs
// the code: pkg/controllers/deployer runs as the deployer, everything else
// in pkg/ (actuator, capacity publisher, webhooks, ...) in the provider's
// manager as the controllers' service account. A rule limited by
// resourceNames counts (markers cannot name objects; rbac_test.go checks
// those in practice). Permissions in unneeded are not granted on purpose.
func TestRBACCoversMarkers(t *testing.T) {
	root := repoRoot(t)
	markers := rbacMarkers(t, filepath.Join(root, "pkg"))
	if len(markers) == 0 {
		t.Fatal("no kubebuilder RBAC markers found under pkg/")
	}
	for _, k := range kustomizations {
		objs := render(t, k)
		r := rbacOf(t, objs)
		for _, m := range markers {
			sa := controllersSA(t, objs)
			if strings.HasPrefix(m.file, filepath.Join(root, "pkg", "controllers", "deployer")+string(filepath.Separator)) {
				sa = DeployerSA
			}
			var rules []rbacv1.PolicyRule
			for _, rs := range r.rulesOf(sa) {
				rules = append(rules, rs...)
			}
			for _, g := range m.groups {
				for _, res := range m.resources {
					for _, v := range m.verbs {
						if _, skip := unneeded[g+"/"+res+" "+v]; skip {
							continue
						}
						if !slices.ContainsFunc(rules, func(rule rbacv1.PolicyRule) bool {
							return slices.Contains(rule.APIGroups, g) && slices.Contains(rule.Resources, res) && slices.Contains(rule.Verbs, v)
						}) {
							rel, _ := filepath.Rel(root, m.file)
							t.Errorf("config/%s: %s asks for %s %q %s, which %s is not granted: add it to config/rbac (and its README)", k, rel, v, g, res, sa)
						}
					}
				}
			}
		}
	}
}

// TestNoSecretAccessClusterWide asks the API server itself: with the RBAC
// of each kustomization in place, neither service account may read Secrets
// outside the namespace, and only the controllers' may read them in it: by
// name, or listed (a cloudscale.ch spec's userDataSecretSelector picks
// secrets by label; get already reads any of the namespace by its name),
// but not watched, so no informer caches every Secret of the namespace.
// The kustomizations are installed one after the other on one control
// plane; each one's service accounts are asked right after its install.
func TestNoSecretAccessClusterWide(t *testing.T) {
	_, c := testenv.Start(t)
	ctx := context.Background()
	for _, k := range kustomizations {
		objs := render(t, k)
		install(t, c, objs)
		controllers := controllersSA(t, objs)
		for _, tc := range []struct {
			sa, namespace, verb string
			allowed             bool
		}{
			{controllers, Namespace, "get", true},
			{controllers, Namespace, "list", true},
			{controllers, Namespace, "watch", false},
			{controllers, Namespace, "create", false},
			{controllers, Namespace, "delete", false},
			{controllers, "kube-system", "get", false},
			{controllers, "", "list", false},
			{DeployerSA, Namespace, "get", false},
			{DeployerSA, "", "list", false},
		} {
			allowed, err := can(ctx, c, tc.sa, tc.verb, "", "secrets", tc.namespace)
			if err != nil {
				t.Fatal(err)
			}
			if allowed != tc.allowed {
				t.Errorf("config/%s: %s may %s secrets in %q: %v, want %v", k, tc.sa, tc.verb, tc.namespace, allowed, tc.allowed)
			}
		}
	}
}

// install applies objs, the rendering of a kustomization, for real, as on
// a cluster. What an OpenShift overlay finds there comes first when objs
// lack it: the namespace and the Machine API CRDs (config/crd). Left out is
// what nothing in a test could serve: kinds the API server does not serve
// (the ServiceMonitor, TestServiceMonitor checks it) and the webhook
// configurations (no service CA issues their certificate and no pod serves
// them, so a validating webhook with failurePolicy Fail would refuse every
// write of a Machine; TestServerSideDryRun checks they are accepted).
func install(t testing.TB, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	has := func(kind string) bool {
		return slices.ContainsFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == kind })
	}
	var all []*unstructured.Unstructured
	if !has("Namespace") {
		// OpenShift's, where the overlays install
		all = append(all, openShiftNamespaces()...)
	}
	if !has("CustomResourceDefinition") {
		all = append(all, render(t, "crd")...)
	}
	for _, u := range applyOrder(append(all, objs...)) {
		if strings.HasSuffix(u.GetKind(), "WebhookConfiguration") {
			continue
		}
		ok, err := served(c, u)
		if err != nil {
			t.Fatalf("%s: %v", describe(u), err)
		}
		if !ok {
			continue
		}
		if err := apply(ctx, c, u, false); err != nil {
			t.Fatalf("%s: %v", describe(u), err)
		}
	}
}

// can asks the API server whether service account sa (in Namespace) may do
// verb on resource of group in namespace ("" for all namespaces).
func can(ctx context.Context, c client.Client, sa, verb, group, resource, namespace string) (bool, error) {
	sar := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authorization.k8s.io/v1",
		"kind":       "SubjectAccessReview",
		"spec": map[string]any{
			"user":   "system:serviceaccount:" + Namespace + ":" + sa,
			"groups": []any{"system:serviceaccounts", "system:serviceaccounts:" + Namespace, "system:authenticated"},
			"resourceAttributes": map[string]any{
				"verb": verb, "group": group, "resource": resource, "namespace": namespace,
			},
		},
	}}
	if err := c.Create(ctx, sar); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("SubjectAccessReview not served: %w", err)
		}
		return false, err
	}
	allowed, _, _ := unstructured.NestedBool(sar.Object, "status", "allowed")
	return allowed, nil
}
