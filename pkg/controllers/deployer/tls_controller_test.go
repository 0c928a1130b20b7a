package deployer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestTLSFlagsFollowTheAPIServer runs the deployer on an API server that
// serves the APIServer of a TechPreviewNoUpgrade 4.22 cluster (with
// spec.tlsAdherence): a 4.21 cluster's controllers get no TLS flags (the
// sidecars the fixed list); a 4.22 cluster's machineset-controller and
// sidecars get the profile's flags as the operator renders them, which
// follow every change of the APIServer: the profile alone changes nothing
// while tlsAdherence leaves it to legacy components, StrictAllComponents
// brings it in, a profile that cannot be rendered is reported and leaves
// the Deployment as it was, and a fixed one is rendered again.
func TestTLSFlagsFollowTheAPIServer(t *testing.T) {
	cfg, cc := startOpenShift(t, testenv.ClusterVersionCRD(t), apiServerCRDWithAdherence(t))
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: deployer.ClusterVersionName}}
	cv.Spec.ClusterID = "0b4a2f5e-7d1c-4a3e-9c55-0e1f2a3b4c5d"
	if err := cc.Create(t.Context(), cv); err != nil {
		t.Fatal(err)
	}
	setClusterVersion(t, cc, "4.21.3", configv1.UpdateHistory{Version: "4.21.3", State: configv1.CompletedUpdate})
	apiServer := &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: deployer.APIServerName}}
	apiServer.Spec.TLSSecurityProfile = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileIntermediateType, Intermediate: &configv1.IntermediateTLSProfile{}}
	if err := cc.Create(t.Context(), apiServer); err != nil {
		t.Fatal(err)
	}

	e := start(t, cfg)
	e.createImages(maoImg1, proxyImg1)
	d := e.waitDeployment(func(d *appsv1.Deployment) bool { return d.Annotations[deployer.ReleaseAnnotation] == "4.21" })
	if got := tlsArgsOf(d, deployer.MachineSetContainer); len(got) != 0 {
		t.Errorf("4.21: the machineset-controller gets %v, flags its binary does not define", got)
	}
	for _, c := range proxies(d) {
		if got := tlsArgsOf(d, c); len(got) != 1 || !strings.HasPrefix(got[0], "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,") {
			t.Errorf("4.21: %s gets %v, want the operator's fixed cipher list of 4.21", c, got)
		}
	}

	intermediate, _ := deployer.TLSProfile{}.Args()
	setClusterVersion(t, cc, "4.22.1", configv1.UpdateHistory{Version: "4.22.1", State: configv1.CompletedUpdate})
	d = e.waitDeployment(func(d *appsv1.Deployment) bool { return d.Annotations[deployer.ReleaseAnnotation] == "4.22" })
	e.checkTLS(d, intermediate)
	// the status says where the TLS flags come from (written after the
	// apply: awaited)
	c := e.waitConditionOf(deployer.ConditionDeployed, metav1.ConditionTrue, deployer.ReasonApplied, "TLS profile Intermediate (tlsAdherence unset)")
	if !strings.Contains(c.Message, "for OpenShift 4.22") {
		t.Errorf("Deployed condition %q does not name 4.22", c.Message)
	}

	// Modern while tlsAdherence is unset: the operator keeps Intermediate
	// for its controllers, so does the deployer
	before := e.reconciles()
	setAPIServer(t, cc, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}, "")
	e.poll("a reconcile of the APIServer change", func() (bool, string) { return e.reconciles() > before, "" })
	e.checkTLS(e.getDeployment(), intermediate)

	// StrictAllComponents: the profile counts; the pods roll with it
	strict := []string{"--tls-min-version=VersionTLS13"}
	setAPIServer(t, cc, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}, deployer.TLSAdherenceStrict)
	d = e.waitDeployment(func(d *appsv1.Deployment) bool {
		return slices.Equal(tlsArgsOf(d, deployer.MachineSetContainer), strict)
	})
	e.checkTLS(d, strict)

	// a Custom profile without its settings cannot be rendered: said so,
	// and the Deployment stays as it was
	setAPIServer(t, cc, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType}, deployer.TLSAdherenceStrict)
	c = e.waitCondition(metav1.ConditionFalse, deployer.ReasonTLSProfileInvalid)
	for _, says := range []string{"4.22", "Custom without custom settings", "oc edit apiserver cluster"} {
		if !strings.Contains(c.Message, says) {
			t.Errorf("condition %q does not say %q", c.Message, says)
		}
	}
	e.waitEvent(corev1.EventTypeWarning, deployer.ReasonTLSProfileInvalid, "Custom without custom settings")
	e.checkTLS(e.getDeployment(), strict)

	// fixed: a custom profile, by OpenSSL names, rendered by IANA names
	setAPIServer(t, cc, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{
		TLSProfileSpec: configv1.TLSProfileSpec{Ciphers: []string{"ECDHE-RSA-AES128-GCM-SHA256"}, MinTLSVersion: configv1.VersionTLS12},
	}}, deployer.TLSAdherenceStrict)
	custom := []string{"--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "--tls-min-version=VersionTLS12"}
	d = e.waitDeployment(func(d *appsv1.Deployment) bool {
		return slices.Equal(tlsArgsOf(d, deployer.MachineSetContainer), custom)
	})
	e.checkTLS(d, custom)
	e.waitConditionOf(deployer.ConditionDeployed, metav1.ConditionTrue, deployer.ReasonApplied, "TLS profile Custom (tlsAdherence StrictAllComponents)")
}

// apiServerCRDWithAdherence is the APIServer CRD of the openshift/api
// go.mod pins with spec.tlsAdherence added as release-4.22's
// TechPreviewNoUpgrade CRD has it (vendor/github.com/openshift/api/config/
// v1/zz_generated.crd-manifests/0000_10_config-operator_01_apiservers-
// TechPreviewNoUpgrade.crd.yaml: a string of two values). The Default
// feature set's has no such field: there the API server drops it.
func apiServerCRDWithAdherence(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(testenv.APIServerCRD(t))
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		err := unstructured.SetNestedMap(v.(map[string]any), map[string]any{
			"type": "string",
			"enum": []any{deployer.TLSAdherenceLegacy, deployer.TLSAdherenceStrict},
		}, "schema", "openAPIV3Schema", "properties", "spec", "properties", "tlsAdherence")
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(crd.Object)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "apiservers-TechPreviewNoUpgrade.crd.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// setAPIServer sets the APIServer's TLS profile and adherence policy ("":
// unset), as an admin does with oc edit apiserver cluster. A merge patch:
// the openshift/api go.mod pins has no tlsAdherence field.
func setAPIServer(t *testing.T, c client.Client, profile *configv1.TLSSecurityProfile, adherence string) {
	t.Helper()
	// one patch, so that no state in between is rendered: the profile's
	// settings of the other types removed
	raw, err := json.Marshal(profile)
	if err != nil {
		t.Fatal(err)
	}
	p := map[string]any{}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"old", "intermediate", "modern", "custom"} {
		if _, ok := p[k]; !ok {
			p[k] = nil
		}
	}
	spec := map[string]any{"tlsSecurityProfile": p, "tlsAdherence": nil}
	if adherence != "" {
		spec["tlsAdherence"] = adherence
	}
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(configv1.GroupVersion.WithKind("APIServer"))
	u.SetName(deployer.APIServerName)
	if err := c.Patch(t.Context(), u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// tlsArgsOf are the container's --tls-min-version and
// --tls-cipher-suites arguments.
func tlsArgsOf(d *appsv1.Deployment, container string) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--tls-min-version=") || strings.HasPrefix(a, "--tls-cipher-suites=") {
				out = append(out, a)
			}
		}
	}
	return out
}

// proxies are the names of the kube-rbac-proxy sidecars.
func proxies(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if strings.HasPrefix(c.Name, deployer.ProxyContainerPrefix) {
			out = append(out, c.Name)
		}
	}
	return out
}

// checkTLS checks that the machineset-controller and every sidecar have
// exactly the TLS arguments want.
func (e *env) checkTLS(d *appsv1.Deployment, want []string) {
	e.t.Helper()
	for _, c := range append(proxies(d), deployer.MachineSetContainer) {
		if got := tlsArgsOf(d, c); !slices.Equal(got, want) {
			e.t.Errorf("%s: TLS arguments %q, want %q", c, got, want)
		}
	}
	if len(proxies(d)) != 3 {
		e.t.Errorf("sidecars %v", proxies(d))
	}
}
