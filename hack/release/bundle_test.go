package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	validationerrors "github.com/operator-framework/api/pkg/validation/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// testImage is a made-up image by digest: the tests pin config/image to it.
const testImage = "ghcr.io/appuio/machine-api-provider@sha256:4d3ea7dbde82459a227f06f211883b3d2571890a6678daaee441d124d127b46c"

var clouds = []string{"cloudscale", "exoscale"}

// repoRoot is two levels above this module.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// pinnedConfig is a copy of the repository's config/ with config/image
// pinned to image, as make bundle and make release make it.
func pinnedConfig(t testing.TB, image string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "config"), os.DirFS(filepath.Join(repoRoot(t), "config"))); err != nil {
		t.Fatal(err)
	}
	if err := Pin(filepath.Join(dir, "config", "image", "kustomization.yaml"), image); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kustomize renders root/config/<dir> with the pinned kustomize.
func kustomize(t testing.TB, root, dir string) []byte {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot(t), "bin", "kustomize")); err != nil {
		t.Fatalf("%v (make kustomize)", err)
	}
	out, err := kustomizeErr(root, dir)
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	return out
}

// kustomizeErr renders root/config/<dir>, or says why it cannot.
func kustomizeErr(root, dir string) ([]byte, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(wd, "..", "..", "bin", "kustomize"), "build", filepath.Join(root, "config", dir))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return stdout.Bytes(), nil
}

func decode(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := decodeObjects(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// bundleOf builds and writes the bundle of cloud from a pinned copy of
// config/, and returns its directory and the overlay's objects.
func bundleOf(t testing.TB, cloud string) (string, []*unstructured.Unstructured) {
	t.Helper()
	root := pinnedConfig(t, testImage)
	objs := decode(t, kustomize(t, root, "overlays/"+cloud))
	csv := decode(t, kustomize(t, root, "olm/"+cloud))
	b, err := BuildBundle(BundleOptions{
		Objects: objs, CSV: csv[0], Icon: filepath.Join(root, "config", "olm", "base", "icon.svg"),
		Package: "machine-api-provider-" + cloud, Channel: "stable", Version: "v1.2.3-rc.1",
		OpenShiftVersions: "v4.16", Created: time.Unix(1700000000, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := b.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir, objs
}

// acceptedWarnings are the validators' warnings the bundle may draw, each
// (a part of its message) with why it stays; any other warning fails the
// test. None today.
var acceptedWarnings = map[string]string{}

// TestBundleValidates builds each cloud's bundle from config/ and runs
// operator-framework/api's validators on it, as `operator-sdk bundle
// validate --select-optional suite=operatorframework` would: the default
// bundle validators, OperatorHub's, the standard capabilities and
// categories, good practices, the objects, and the APIs removed by the
// Kubernetes of OpenShift 4.21. An error fails; so does a warning not in
// acceptedWarnings.
func TestBundleValidates(t *testing.T) {
	for _, cloud := range clouds {
		t.Run(cloud, func(t *testing.T) {
			dir, _ := bundleOf(t, cloud)
			b, err := manifests.GetBundleFromDir(dir)
			if err != nil {
				t.Fatalf("loading the bundle: %v", err)
			}
			if b.Package != "machine-api-provider-"+cloud || b.DefaultChannel != "stable" {
				t.Errorf("package %q, default channel %q", b.Package, b.DefaultChannel)
			}
			objs := append(b.ObjectsToValidate(), map[string]string{"k8s-version": "1.34"})
			validators := validation.DefaultBundleValidators.WithValidators(
				validation.OperatorHubV2Validator,
				validation.StandardCapabilitiesValidator,
				validation.StandardCategoriesValidator,
				validation.GoodPracticesValidator,
				validation.ObjectValidator,
				validation.AlphaDeprecatedAPIsValidator,
			)
			results := validators.Validate(objs...)
			if len(results) == 0 {
				t.Fatal("the validators returned nothing")
			}
			for _, r := range results {
				for _, e := range r.Errors {
					if e.Level == validationerrors.LevelError {
						t.Errorf("%s: %s", r.Name, e)
						continue
					}
					accepted := false
					for w := range acceptedWarnings {
						accepted = accepted || strings.Contains(e.Error(), w)
					}
					if !accepted {
						t.Errorf("%s: an unexpected warning: %s", r.Name, e)
					} else {
						t.Logf("%s: an accepted warning: %s", r.Name, e)
					}
				}
			}
		})
	}
}

// TestBundleInstallsWhatTheOverlayDoes: the bundle grants every service
// account exactly the rules the overlay grants it, runs the overlay's
// Deployments (the webhooks' without the service CA's certificate, where
// OLM mounts its own), defines the overlay's webhooks on the Deployment
// whose pods the overlay's Service selects, and holds every other object of
// the overlay; it owns and requires no CRDs and needs the Machine API as
// native APIs; it names the pinned image, and nothing else.
func TestBundleInstallsWhatTheOverlayDoes(t *testing.T) {
	for _, cloud := range clouds {
		t.Run(cloud, func(t *testing.T) {
			dir, objs := bundleOf(t, cloud)
			csv, ann, err := LoadBundle(dir)
			if err != nil {
				t.Fatal(err)
			}
			if csv.Name != "machine-api-provider-"+cloud+".v1.2.3-rc.1" || csv.Spec.Version.String() != "1.2.3-rc.1" {
				t.Errorf("CSV %s, version %s", csv.Name, csv.Spec.Version)
			}
			if ann["operators.operatorframework.io.bundle.mediatype.v1"] != "registry+v1" {
				t.Errorf("annotations %v", ann)
			}
			if csv.Annotations["olm.skipRange"] != "<1.2.3-rc.1" || csv.Annotations["containerImage"] != testImage ||
				csv.Annotations["createdAt"] != "2023-11-14T22:13:20Z" {
				t.Errorf("annotations %v", csv.Annotations)
			}
			if n := len(csv.Spec.CustomResourceDefinitions.Owned) + len(csv.Spec.CustomResourceDefinitions.Required); n != 0 {
				t.Errorf("%d owned or required CRDs, want none", n)
			}
			var native []string
			for _, gvk := range csv.Spec.NativeAPIs {
				native = append(native, gvk.Group+"/"+gvk.Version+"/"+gvk.Kind)
			}
			if want := []string{"machine.openshift.io/v1beta1/Machine", "machine.openshift.io/v1beta1/MachineSet", "machine.openshift.io/v1beta1/MachineHealthCheck"}; !slices.Equal(native, want) {
				t.Errorf("native APIs %v, want %v", native, want)
			}
			if got := csv.Spec.RelatedImages; len(got) != 1 || got[0].Image != testImage {
				t.Errorf("related images %v", got)
			}
			if modes := csv.Spec.InstallModes; !slices.ContainsFunc(modes, func(m v1alpha1.InstallMode) bool {
				return m.Type == v1alpha1.InstallModeTypeOwnNamespace && m.Supported
			}) || slices.ContainsFunc(modes, func(m v1alpha1.InstallMode) bool {
				return m.Type != v1alpha1.InstallModeTypeOwnNamespace && m.Supported
			}) {
				t.Errorf("install modes %v, want OwnNamespace alone", modes)
			}
			if len(csv.Spec.Icon) != 1 || csv.Spec.Icon[0].MediaType != "image/svg+xml" {
				t.Errorf("icon %v", csv.Spec.Icon)
			}

			bundled := bundleObjects(t, dir)
			// RBAC, per service account.
			want, got := grantsOf(t, objs), grantsOf(t, bundled)
			for _, p := range csv.Spec.InstallStrategy.StrategySpec.Permissions {
				if len(p.Rules) > 0 {
					got[p.ServiceAccountName+" in the namespace"] = append(got[p.ServiceAccountName+" in the namespace"], ruleStrings(p.Rules)...)
				}
			}
			for _, p := range csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
				got[p.ServiceAccountName+" cluster-wide"] = append(got[p.ServiceAccountName+" cluster-wide"], ruleStrings(p.Rules)...)
			}
			for _, m := range []map[string][]string{want, got} {
				for k := range m {
					sort.Strings(m[k])
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the bundle grants\n%v\nthe overlay\n%v", got, want)
			}
			for _, p := range append(csv.Spec.InstallStrategy.StrategySpec.Permissions, csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions...) {
				if !slices.ContainsFunc(objs, func(u *unstructured.Unstructured) bool {
					return u.GetKind() == "ServiceAccount" && u.GetName() == p.ServiceAccountName
				}) {
					t.Errorf("permissions for %s, a service account the overlay does not have", p.ServiceAccountName)
				}
			}

			// Deployments.
			deployments := map[string]appsv1.DeploymentSpec{}
			for _, d := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
				deployments[d.Name] = d.Spec
			}
			var webhookDeployment string
			for _, u := range objs {
				if u.GetKind() != "Deployment" {
					continue
				}
				var d appsv1.Deployment
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
					t.Fatal(err)
				}
				spec, ok := deployments[d.Name]
				if !ok {
					t.Errorf("Deployment %s is not in the CSV", d.Name)
					continue
				}
				delete(deployments, d.Name)
				// The service CA's certificate gives way to OLM's.
				wantSpec := d.Spec.DeepCopy()
				ps := &wantSpec.Template.Spec
				if i := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool {
					return v.Secret != nil && v.Secret.SecretName == "machine-api-provider-webhook-cert"
				}); i >= 0 {
					webhookDeployment = d.Name
					name := ps.Volumes[i].Name
					ps.Volumes = slices.Delete(ps.Volumes, i, i+1)
					for ci := range ps.Containers {
						ps.Containers[ci].VolumeMounts = slices.DeleteFunc(ps.Containers[ci].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name })
					}
				}
				// As JSON: an emptied list and no list are the same.
				g, _ := json.MarshalIndent(spec, "", " ")
				w, _ := json.MarshalIndent(wantSpec, "", " ")
				if string(g) != string(w) {
					t.Errorf("Deployment %s in the CSV:\n%s\nthe overlay's:\n%s", d.Name, g, w)
				}
			}
			if len(deployments) > 0 {
				t.Errorf("the CSV has Deployments the overlay does not: %v", deployments)
			}
			if webhookDeployment != "machine-api-provider-webhook" {
				t.Errorf("the Deployment that mounts the webhook certificate is %q", webhookDeployment)
			}

			// Webhooks: the overlay's, by name and path, on that Deployment.
			wantHooks := map[string]string{}
			for _, u := range objs {
				if strings.HasSuffix(u.GetKind(), "WebhookConfiguration") {
					hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
					for _, h := range hooks {
						path, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "path")
						policy, _, _ := unstructured.NestedString(h.(map[string]any), "failurePolicy")
						if conds, _, _ := unstructured.NestedSlice(h.(map[string]any), "matchConditions"); len(conds) > 0 {
							// OLM cannot carry them: fail open (bundleFailurePolicy)
							policy = "Ignore"
						}
						wantHooks[h.(map[string]any)["name"].(string)] = strings.TrimSuffix(u.GetKind(), "Configuration") + " " + path + " " + policy
					}
				}
			}
			gotHooks := map[string]string{}
			for _, h := range csv.Spec.WebhookDefinitions {
				typ := map[v1alpha1.WebhookAdmissionType]string{v1alpha1.MutatingAdmissionWebhook: "MutatingWebhook", v1alpha1.ValidatingAdmissionWebhook: "ValidatingWebhook"}[h.Type]
				gotHooks[h.GenerateName] = typ + " " + *h.WebhookPath + " " + string(*h.FailurePolicy)
				if h.DeploymentName != webhookDeployment || h.ContainerPort != 443 || h.TargetPort == nil || h.TargetPort.IntValue() != 9443 {
					t.Errorf("webhook %s: on %s port %d -> %v", h.GenerateName, h.DeploymentName, h.ContainerPort, h.TargetPort)
				}
			}
			if len(wantHooks) != 4 || !reflect.DeepEqual(gotHooks, wantHooks) {
				t.Errorf("webhook definitions %v, the overlay's %v", gotHooks, wantHooks)
			}

			// Everything else, as it is but for its namespace.
			for _, u := range objs {
				switch u.GetKind() {
				case "Deployment", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
					continue // compared above
				case "ServiceAccount":
					if slices.ContainsFunc(append(csv.Spec.InstallStrategy.StrategySpec.Permissions, csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions...),
						func(p v1alpha1.StrategyDeploymentPermissions) bool { return p.ServiceAccountName == u.GetName() }) {
						continue // OLM makes it
					}
				case "Service":
					if u.GetName() == "machine-api-provider-webhook" {
						continue // OLM makes its own
					}
				}
				want := u.DeepCopy()
				want.SetNamespace("")
				i := slices.IndexFunc(bundled, func(b *unstructured.Unstructured) bool {
					return b.GetKind() == u.GetKind() && b.GetName() == u.GetName()
				})
				if i < 0 {
					t.Errorf("%s %s is not in the bundle", u.GetKind(), u.GetName())
				} else if !reflect.DeepEqual(bundled[i].Object, want.Object) {
					t.Errorf("%s %s in the bundle:\n%v\nin the overlay\n%v", u.GetKind(), u.GetName(), bundled[i].Object, want.Object)
				}
			}
		})
	}
}

// bundleObjects are the objects of the bundle in dir but the CSV.
func bundleObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if strings.HasSuffix(f, ".clusterserviceversion.yaml") {
			continue
		}
		o, err := readObjects(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(o) != 1 {
			t.Fatalf("%s: %d objects", f, len(o))
		}
		if o[0].GetNamespace() != "" {
			t.Errorf("%s: namespace %s: OLM installs into the OperatorGroup's", f, o[0].GetNamespace())
		}
		objs = append(objs, o...)
	}
	return objs
}

// grantsOf maps "<service account> in the namespace" and "<service
// account> cluster-wide" to the rules objs bind to it, one string each.
func grantsOf(t *testing.T, objs []*unstructured.Unstructured) map[string][]string {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{}
	aggregated := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "Role" || u.GetKind() == "ClusterRole" {
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				t.Fatal(err)
			}
			rules[u.GetKind()+"/"+u.GetName()] = r.Rules
			aggregated[u.GetKind()+"/"+u.GetName()] = r.AggregationRule != nil
		}
	}
	out := map[string][]string{}
	for _, u := range objs {
		if u.GetKind() != "RoleBinding" && u.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
			t.Fatal(err)
		}
		where := " in the namespace"
		if u.GetKind() == "ClusterRoleBinding" {
			where = " cluster-wide"
		}
		role := b.RoleRef.Kind + "/" + b.RoleRef.Name
		for _, s := range b.Subjects {
			if aggregated[role] {
				out[s.Name+where] = append(out[s.Name+where], "aggregated "+role)
				continue
			}
			out[s.Name+where] = append(out[s.Name+where], ruleStrings(rules[role])...)
		}
	}
	return out
}

func ruleStrings(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.String())
	}
	return out
}

// TestBundleRefuses what a bundle cannot carry or would install otherwise:
// an image by tag, a CRD, a webhook that calls a URL, a webhook
// certificate mounted elsewhere than OLM mounts its own.
func TestBundleRefuses(t *testing.T) {
	root := pinnedConfig(t, testImage)
	overlay := string(kustomize(t, root, "overlays/cloudscale"))
	csv := decode(t, kustomize(t, root, "olm/cloudscale"))[0]
	for name, tc := range map[string]struct {
		old, new, want string
	}{
		"an image by tag":             {testImage, "ghcr.io/appuio/machine-api-provider:v1", "by digest"},
		"a webhook calling a URL":     {"    service:\n      name: machine-api-provider-webhook\n", "    url: https://example.com/\n    service:\n      name: machine-api-provider-webhook\n", ""},
		"the certificate elsewhere":   {"mountPath: /tmp/k8s-webhook-server/serving-certs", "mountPath: /etc/tls", "elsewhere"},
		"a webhook for any namespace": {"  namespaceSelector:\n    matchLabels:\n      kubernetes.io/metadata.name: openshift-machine-api\n", "  namespaceSelector: {}\n", "namespaceSelector"},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(overlay, tc.old) {
				t.Fatalf("the rendering has no %q", tc.old)
			}
			objs := decode(t, []byte(strings.ReplaceAll(overlay, tc.old, tc.new)))
			_, err := BuildBundle(BundleOptions{Objects: objs, CSV: csv, Package: "p", Channel: "stable", Version: "v1.0.0"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	crd := decode(t, []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: x.example.com\n"))
	if _, err := BuildBundle(BundleOptions{Objects: append(decode(t, []byte(overlay)), crd...), CSV: csv, Package: "p", Channel: "stable", Version: "v1.0.0"}); err == nil {
		t.Error("a bundle with a CRD was built")
	}
	if _, err := BuildBundle(BundleOptions{Objects: decode(t, []byte(overlay)), CSV: csv, Package: "p", Channel: "stable", Version: "1.0"}); err == nil {
		t.Error("a bundle with version 1.0 was built")
	}
}
