package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// OLMWebhookCertDir is where OLM mounts the serving certificate it makes
// for the Deployment a webhook definition names (controller-runtime's
// default). config/webhook mounts the service CA's certificate there too, so
// that one Deployment serves both ways.
const OLMWebhookCertDir = "/tmp/k8s-webhook-server/serving-certs"

// ServingCertAnnotation on a Service has the OpenShift service CA write its
// serving certificate into the secret it names.
const ServingCertAnnotation = "service.beta.openshift.io/serving-cert-secret-name"

// BundleOptions are what a bundle is made of.
type BundleOptions struct {
	// Objects are config/overlays/<cloud> as kustomize renders it, with the
	// image pinned by digest: what the bundle installs.
	Objects []*unstructured.Unstructured
	// CSV is config/olm/<cloud> rendered: the ClusterServiceVersion's
	// description, without the install.
	CSV *unstructured.Unstructured
	// Icon is the path of the package's icon (SVG).
	Icon string
	// Package and Channel of the bundle; Version is vX.Y.Z.
	Package, Channel, Version string
	// OpenShiftVersions is com.redhat.openshift.versions (v4.16: 4.16 and
	// later).
	OpenShiftVersions string
	// Created is the CSV's createdAt: the release's source date.
	Created time.Time
}

// Bundle is a registry+v1 bundle: manifests/ (the CSV and the other
// objects) and metadata/annotations.yaml.
type Bundle struct {
	CSVName     string
	Manifests   map[string][]byte
	Annotations map[string]string
	// Left are the overlay's objects the bundle cannot hold, and why
	// (notInBundle); the install docs say how to add them.
	Left []string
}

// BundleKinds are the kinds a registry+v1 bundle may hold besides the CSV
// and CRDs (OLM's supported kinds). NetworkPolicy came with
// operator-registry v1.55 (OpenShift 4.20, whose machine-api-operator
// denies ingress by default, and backported to the 4.12-4.19 z-streams of
// autumn 2025): the overlays' policies let the API server reach the
// webhooks and Prometheus the deployer there.
var BundleKinds = []string{
	"ClusterRole", "ClusterRoleBinding", "ConfigMap", "ConsoleCLIDownload", "ConsoleLink",
	"ConsolePlugin", "ConsoleQuickStart", "ConsoleYAMLSample", "NetworkPolicy", "PodDisruptionBudget", "PriorityClass",
	"PrometheusRule", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "ServiceMonitor",
	"VerticalPodAutoscaler",
}

// BuildBundle turns an overlay's rendering into a bundle:
//
//   - the Deployments become the CSV's install strategy;
//   - RBAC that binds Roles and ClusterRoles of the rendering to service
//     accounts of the namespace becomes its permissions and
//     clusterPermissions (OLM makes the service accounts, roles and
//     bindings); RBAC it cannot say so (an aggregated ClusterRole) stays as
//     it is, as do service accounts no rule names;
//   - the webhook configurations become its webhook definitions, served by
//     the Deployment whose pods their Service selects: OLM makes the Service
//     and the certificate, so the Service and the service CA's secret volume
//     are left out;
//   - the rest (Services, the ServiceMonitor, the PodDisruptionBudget) goes
//     into the bundle as it is, without a namespace: OLM installs into the
//     namespace of the OperatorGroup.
//
// It fails on anything a bundle cannot carry, or that would install other
// than the overlay does.
func BuildBundle(o BundleOptions) (*Bundle, error) {
	v, err := semver.Parse(strings.TrimPrefix(o.Version, "v"))
	if err != nil || !strings.HasPrefix(o.Version, "v") {
		return nil, fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE]", o.Version)
	}
	if o.Package == "" || o.Channel == "" {
		return nil, errors.New("no package or channel")
	}
	var csv v1alpha1.ClusterServiceVersion
	if o.CSV == nil || o.CSV.GetKind() != "ClusterServiceVersion" {
		return nil, errors.New("no ClusterServiceVersion to start from")
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.CSV.Object, &csv); err != nil {
		return nil, fmt.Errorf("the ClusterServiceVersion: %w", err)
	}
	if len(csv.Spec.CustomResourceDefinitions.Owned)+len(csv.Spec.CustomResourceDefinitions.Required) > 0 {
		return nil, errors.New("the ClusterServiceVersion owns or requires CRDs: the provider owns none, and the Machine API's are native APIs (OLM would look for an operator providing them)")
	}
	namespace := csv.Annotations["operatorframework.io/suggested-namespace"]
	if namespace == "" {
		return nil, errors.New("the ClusterServiceVersion suggests no namespace")
	}

	in, err := sortObjects(o.Objects, namespace)
	if err != nil {
		return nil, err
	}
	hooks, err := webhookDefinitions(in)
	if err != nil {
		return nil, err
	}
	deployments, images, err := deploymentSpecs(in, hooks)
	if err != nil {
		return nil, err
	}
	perms, err := permissions(in, namespace)
	if err != nil {
		return nil, err
	}
	// A Deployment's service account that no rule names gets a permission
	// without rules: OLM makes only the service accounts its permissions
	// name, and a bundle must not carry one a Deployment of its CSV runs as.
	for _, d := range in.deployments {
		sa := d.Spec.Template.Spec.ServiceAccountName
		named := func(p v1alpha1.StrategyDeploymentPermissions) bool { return p.ServiceAccountName == sa }
		if sa == "" || slices.ContainsFunc(perms.namespaced, named) || slices.ContainsFunc(perms.cluster, named) {
			continue
		}
		u := in.serviceAccounts[sa]
		if u == nil {
			return nil, fmt.Errorf("the Deployment %s runs as service account %s, which the rendering does not have", d.Name, sa)
		}
		perms.namespaced = append(perms.namespaced, v1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: []rbacv1.PolicyRule{}})
		perms.consumed[u] = true
	}

	csv.Name = fmt.Sprintf("%s.v%s", o.Package, v)
	csv.Spec.Version.Version = v
	if csv.Annotations == nil {
		csv.Annotations = map[string]string{}
	}
	csv.Annotations["containerImage"] = images[0].Image
	csv.Annotations["createdAt"] = o.Created.UTC().Format(time.RFC3339)
	// Every earlier release upgrades to this one directly: the catalog
	// needs to hold only the newest bundle (docs/upgrading.md).
	csv.Annotations["olm.skipRange"] = "<" + v.String()
	csv.Spec.InstallStrategy = v1alpha1.NamedInstallStrategy{
		StrategyName: v1alpha1.InstallStrategyNameDeployment,
		StrategySpec: v1alpha1.StrategyDetailsDeployment{
			DeploymentSpecs:    deployments,
			Permissions:        perms.namespaced,
			ClusterPermissions: perms.cluster,
		},
	}
	csv.Spec.WebhookDefinitions = hooks.definitions
	csv.Spec.RelatedImages = images
	if o.Icon != "" {
		icon, err := os.ReadFile(o.Icon)
		if err != nil {
			return nil, err
		}
		csv.Spec.Icon = []v1alpha1.Icon{{Data: base64.StdEncoding.EncodeToString(icon), MediaType: "image/svg+xml"}}
	}

	b := &Bundle{
		CSVName:   csv.Name,
		Left:      in.left,
		Manifests: map[string][]byte{},
		Annotations: map[string]string{
			"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
			"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
			"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
			"operators.operatorframework.io.bundle.package.v1":         o.Package,
			"operators.operatorframework.io.bundle.channels.v1":        o.Channel,
			"operators.operatorframework.io.bundle.channel.default.v1": o.Channel,
		},
	}
	if o.OpenShiftVersions != "" {
		b.Annotations["com.redhat.openshift.versions"] = o.OpenShiftVersions
	}
	data, err := manifestYAML(&csv, true)
	if err != nil {
		return nil, err
	}
	b.Manifests[o.Package+".clusterserviceversion.yaml"] = data

	consumed := perms.consumed
	for _, s := range hooks.services {
		consumed[s] = true
	}
	for _, u := range in.all {
		if consumed[u] || u.GetKind() == "Deployment" || strings.HasSuffix(u.GetKind(), "WebhookConfiguration") {
			continue
		}
		if !slices.Contains(BundleKinds, u.GetKind()) {
			return nil, fmt.Errorf("%s: a registry+v1 bundle cannot hold a %s", describe(u), u.GetKind())
		}
		u = u.DeepCopy()
		u.SetNamespace("")
		data, err := manifestYAML(u.Object, false)
		if err != nil {
			return nil, err
		}
		gv := strings.ReplaceAll(u.GetAPIVersion(), "/", "_")
		b.Manifests[fmt.Sprintf("%s_%s_%s.yaml", u.GetName(), gv, strings.ToLower(u.GetKind()))] = data
	}
	return b, nil
}

// objects is a rendering sorted by kind.
type objects struct {
	all                                        []*unstructured.Unstructured
	deployments                                []*appsv1.Deployment
	services                                   map[string]*unstructured.Unstructured
	serviceAccounts                            map[string]*unstructured.Unstructured
	roles, clusterRoles                        map[string]*unstructured.Unstructured
	roleBindings, clusterRoleBindings          []*unstructured.Unstructured
	mutatingWebhooks, validatingWebhookConfigs []*unstructured.Unstructured
	// left are the objects of the rendering the bundle leaves out, and why
	// (notInBundle).
	left []string
}

// notInBundle are the objects of the overlays that a bundle cannot hold,
// and why; docs/install.md says how to add them to an OLM install. Any other
// object outside the bundle's namespace is an error.
var notInBundle = map[string]string{
	"Role openshift-machine-config-operator/machine-api-controllers-cloudscale-boot-images":        bootImagesRBAC,
	"RoleBinding openshift-machine-config-operator/machine-api-controllers-cloudscale-boot-images": bootImagesRBAC,
	"Role openshift-machine-config-operator/machine-api-controllers-exoscale-boot-images":          bootImagesRBAC,
	"RoleBinding openshift-machine-config-operator/machine-api-controllers-exoscale-boot-images":   bootImagesRBAC,

	"ConfigMap openshift-config-managed/machine-api-provider-dashboard": "OLM installs only into the operator's namespace; " +
		"the console dashboard lives in openshift-config-managed (oc apply -f config/prometheus/dashboard.yaml of the release's tag)",
}

// bootImagesRBAC says why the boot image controller's Role is not in the
// bundle, and how to grant it.
const bootImagesRBAC = "OLM installs only into the operator's namespace; the boot image controller (off by default) reads " +
	"the ConfigMap coreos-bootimages of openshift-machine-config-operator through a Role there " +
	"(oc apply -f of the Role and RoleBinding in config/rbac/controllers.yaml of the release's tag, docs/boot-images.md)"

func sortObjects(objs []*unstructured.Unstructured, namespace string) (*objects, error) {
	in := &objects{
		all:             objs,
		services:        map[string]*unstructured.Unstructured{},
		serviceAccounts: map[string]*unstructured.Unstructured{},
		roles:           map[string]*unstructured.Unstructured{},
		clusterRoles:    map[string]*unstructured.Unstructured{},
	}
	for _, u := range objs {
		if why, ok := notInBundle[describe(u)]; ok {
			in.left = append(in.left, describe(u)+": "+why)
			continue
		}
		switch u.GetKind() {
		case "Namespace", "CustomResourceDefinition":
			return nil, fmt.Errorf("%s: the OpenShift overlays hold no %s (OpenShift has them), and neither does the bundle", describe(u), u.GetKind())
		case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "PriorityClass", "ConsoleCLIDownload", "ConsoleLink", "ConsolePlugin", "ConsoleQuickStart", "ConsoleYAMLSample":
		default:
			if ns := u.GetNamespace(); ns != namespace {
				return nil, fmt.Errorf("%s: in namespace %q, not %s, where the bundle is installed", describe(u), ns, namespace)
			}
		}
		switch u.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				return nil, fmt.Errorf("%s: %w", describe(u), err)
			}
			in.deployments = append(in.deployments, &d)
		case "Service":
			in.services[u.GetName()] = u
		case "ServiceAccount":
			in.serviceAccounts[u.GetName()] = u
		case "Role":
			in.roles[u.GetName()] = u
		case "ClusterRole":
			in.clusterRoles[u.GetName()] = u
		case "RoleBinding":
			in.roleBindings = append(in.roleBindings, u)
		case "ClusterRoleBinding":
			in.clusterRoleBindings = append(in.clusterRoleBindings, u)
		case "MutatingWebhookConfiguration":
			in.mutatingWebhooks = append(in.mutatingWebhooks, u)
		case "ValidatingWebhookConfiguration":
			in.validatingWebhookConfigs = append(in.validatingWebhookConfigs, u)
		}
	}
	if len(in.deployments) == 0 {
		return nil, errors.New("the rendering has no Deployment")
	}
	return in, nil
}

// hooks are the webhook definitions of a rendering, the Services they call
// (which OLM replaces with its own) and the secrets the service CA would
// write those Services' certificates into (which OLM replaces with its own).
type hooks struct {
	definitions []v1alpha1.WebhookDescription
	services    []*unstructured.Unstructured
	certSecrets map[string]string // secret -> the Deployment that mounts it
}

// bundleFailurePolicy is a webhook's failure policy in the bundle. OLM's
// webhook definitions have no matchConditions (operator-framework/api
// v0.38.0's WebhookDescription): a webhook whose conditions keep the
// Machine API's own writes from waiting on it would, without them, be
// called for every update, and failing closed it would hold those writes
// while its pods are down. Such a webhook fails open in the bundle; the
// actuator refuses what it would have.
func bundleFailurePolicy(p *admissionv1.FailurePolicyType, conds []admissionv1.MatchCondition) *admissionv1.FailurePolicyType {
	if len(conds) == 0 {
		return p
	}
	ignore := admissionv1.Ignore
	return &ignore
}

func webhookDefinitions(in *objects) (hooks, error) {
	h := hooks{certSecrets: map[string]string{}}
	type webhook struct {
		name         string
		clientConfig admissionv1.WebhookClientConfig
		nsSelector   *metav1.LabelSelector
		d            v1alpha1.WebhookDescription
	}
	var all []webhook
	for _, u := range in.mutatingWebhooks {
		var c admissionv1.MutatingWebhookConfiguration
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
			return h, fmt.Errorf("%s: %w", describe(u), err)
		}
		for _, w := range c.Webhooks {
			all = append(all, webhook{name: w.Name, clientConfig: w.ClientConfig, nsSelector: w.NamespaceSelector, d: v1alpha1.WebhookDescription{
				GenerateName: w.Name, Type: v1alpha1.MutatingAdmissionWebhook, Rules: w.Rules, FailurePolicy: bundleFailurePolicy(w.FailurePolicy, w.MatchConditions),
				MatchPolicy: w.MatchPolicy, ObjectSelector: w.ObjectSelector, SideEffects: w.SideEffects, TimeoutSeconds: w.TimeoutSeconds,
				AdmissionReviewVersions: w.AdmissionReviewVersions, ReinvocationPolicy: w.ReinvocationPolicy,
			}})
		}
	}
	for _, u := range in.validatingWebhookConfigs {
		var c admissionv1.ValidatingWebhookConfiguration
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
			return h, fmt.Errorf("%s: %w", describe(u), err)
		}
		for _, w := range c.Webhooks {
			all = append(all, webhook{name: w.Name, clientConfig: w.ClientConfig, nsSelector: w.NamespaceSelector, d: v1alpha1.WebhookDescription{
				GenerateName: w.Name, Type: v1alpha1.ValidatingAdmissionWebhook, Rules: w.Rules, FailurePolicy: bundleFailurePolicy(w.FailurePolicy, w.MatchConditions),
				MatchPolicy: w.MatchPolicy, ObjectSelector: w.ObjectSelector, SideEffects: w.SideEffects, TimeoutSeconds: w.TimeoutSeconds,
				AdmissionReviewVersions: w.AdmissionReviewVersions,
			}})
		}
	}
	seen := map[*unstructured.Unstructured]bool{}
	for _, w := range all {
		ref := w.clientConfig.Service
		if ref == nil || w.clientConfig.URL != nil {
			return h, fmt.Errorf("webhook %s calls a URL: OLM wires webhooks only to a Deployment of the bundle, through a Service", w.name)
		}
		// OLM selects the namespaces of the OperatorGroup (OwnNamespace: the
		// install namespace) in place of the webhook's own selector: it
		// must select that namespace and no other, or the bundle would
		// admit other than the overlay does.
		if w.nsSelector == nil || len(w.nsSelector.MatchExpressions) > 0 || len(w.nsSelector.MatchLabels) != 1 || w.nsSelector.MatchLabels["kubernetes.io/metadata.name"] != ref.Namespace {
			return h, fmt.Errorf("webhook %s: its namespaceSelector must select its Service's namespace %s by kubernetes.io/metadata.name alone, as OLM's does", w.name, ref.Namespace)
		}
		svc := in.services[ref.Name]
		if svc == nil {
			return h, fmt.Errorf("webhook %s calls Service %s, which the rendering does not have", w.name, ref.Name)
		}
		var s corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(svc.Object, &s); err != nil {
			return h, err
		}
		var port *corev1.ServicePort
		for i, p := range s.Spec.Ports {
			if ref.Port == nil || p.Port == *ref.Port {
				port = &s.Spec.Ports[i]
				break
			}
		}
		if port == nil {
			return h, fmt.Errorf("webhook %s calls port %v of Service %s, which has no such port", w.name, ref.Port, s.Name)
		}
		var deployment string
		for _, d := range in.deployments {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				if deployment != "" {
					return h, fmt.Errorf("the Service %s selects the pods of Deployments %s and %s: OLM wires a webhook to one", s.Name, deployment, d.Name)
				}
				deployment = d.Name
			}
		}
		if deployment == "" {
			return h, fmt.Errorf("the Service %s selects the pods of no Deployment", s.Name)
		}
		d := w.d
		d.DeploymentName = deployment
		d.ContainerPort = port.Port
		target := port.TargetPort
		d.TargetPort = &target
		d.WebhookPath = ref.Path
		h.definitions = append(h.definitions, d)
		if !seen[svc] {
			seen[svc] = true
			h.services = append(h.services, svc)
		}
		if secret := s.Annotations[ServingCertAnnotation]; secret != "" {
			h.certSecrets[secret] = deployment
		}
	}
	return h, nil
}

// deploymentSpecs are the Deployments as the install strategy holds them,
// without the service CA's certificate where OLM mounts its own, and the
// images they run (the provider's first).
func deploymentSpecs(in *objects, h hooks) ([]v1alpha1.StrategyDeploymentSpec, []v1alpha1.RelatedImage, error) {
	var specs []v1alpha1.StrategyDeploymentSpec
	var images []v1alpha1.RelatedImage
	for _, d := range in.deployments {
		spec := *d.Spec.DeepCopy()
		ps := &spec.Template.Spec
		for secret, deployment := range h.certSecrets {
			if deployment != d.Name {
				continue
			}
			i := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == secret })
			if i < 0 {
				return nil, nil, fmt.Errorf("the Deployment %s serves webhooks but does not mount the secret %s with their certificate", d.Name, secret)
			}
			volume := ps.Volumes[i].Name
			ps.Volumes = slices.Delete(ps.Volumes, i, i+1)
			mounted := false
			for ci := range ps.Containers {
				c := &ps.Containers[ci]
				c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					if m.Name != volume {
						return false
					}
					if m.MountPath != OLMWebhookCertDir {
						return false // refused below
					}
					mounted = true
					return true
				})
				if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume }) {
					return nil, nil, fmt.Errorf("the Deployment %s mounts the webhook certificate elsewhere than %s, where OLM mounts its own", d.Name, OLMWebhookCertDir)
				}
			}
			if !mounted {
				return nil, nil, fmt.Errorf("the Deployment %s does not mount the webhook certificate at %s", d.Name, OLMWebhookCertDir)
			}
		}
		for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
			if _, _, err := SplitDigestRef(c.Image); err != nil {
				return nil, nil, fmt.Errorf("the Deployment %s, container %s: %w (the bundle names its images by digest: pin config/image first)", d.Name, c.Name, err)
			}
			if !slices.ContainsFunc(images, func(r v1alpha1.RelatedImage) bool { return r.Image == c.Image }) {
				images = append(images, v1alpha1.RelatedImage{Name: ImageName, Image: c.Image})
			}
		}
		specs = append(specs, v1alpha1.StrategyDeploymentSpec{Name: d.Name, Spec: spec, Label: d.Labels})
	}
	if len(images) != 1 {
		return nil, nil, fmt.Errorf("the Deployments run %d images, want the provider's alone: %v", len(images), images)
	}
	return specs, images, nil
}

// perms are the permissions and clusterPermissions of a rendering, and the
// objects they stand for.
type perms struct {
	namespaced, cluster []v1alpha1.StrategyDeploymentPermissions
	consumed            map[*unstructured.Unstructured]bool
}

func permissions(in *objects, namespace string) (perms, error) {
	p := perms{consumed: map[*unstructured.Unstructured]bool{}}
	namespaced := map[string][]rbacv1.PolicyRule{}
	cluster := map[string][]rbacv1.PolicyRule{}
	var order []string
	roleUsed := map[*unstructured.Unstructured]bool{} // bound by a binding the CSV says
	roleKept := map[*unstructured.Unstructured]bool{} // bound by a binding that stays
	bind := func(u *unstructured.Unstructured, roles map[string]*unstructured.Unstructured, roleKind string, into map[string][]rbacv1.PolicyRule) error {
		subjects, roleRef, err := bindingOf(u)
		if err != nil {
			return err
		}
		role := roles[roleRef.Name]
		sas := serviceAccountsOf(subjects, namespace)
		if roleRef.Kind != roleKind || role == nil || sas == nil {
			// Not for the CSV: the binding stays as it is, and its role.
			if role != nil {
				roleKept[role] = true
			}
			return nil
		}
		if _, aggregated := role.Object["aggregationRule"]; aggregated {
			roleKept[role] = true
			return nil
		}
		var r rbacv1.ClusterRole // a Role has the same rules
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(role.Object, &r); err != nil {
			return fmt.Errorf("%s: %w", describe(role), err)
		}
		rules := r.Rules
		for _, sa := range sas {
			if !slices.Contains(order, sa) {
				order = append(order, sa)
			}
			into[sa] = append(into[sa], rules...)
		}
		roleUsed[role] = true
		p.consumed[u] = true
		return nil
	}
	for _, u := range in.roleBindings {
		if err := bind(u, in.roles, "Role", namespaced); err != nil {
			return p, err
		}
	}
	for _, u := range in.clusterRoleBindings {
		if err := bind(u, in.clusterRoles, "ClusterRole", cluster); err != nil {
			return p, err
		}
	}
	for _, roles := range []map[string]*unstructured.Unstructured{in.roles, in.clusterRoles} {
		for _, r := range roles {
			if roleUsed[r] && !roleKept[r] {
				p.consumed[r] = true
			}
		}
	}
	for _, sa := range order {
		if u := in.serviceAccounts[sa]; u != nil {
			// OLM makes the service accounts the permissions name.
			p.consumed[u] = true
		} else {
			return p, fmt.Errorf("RBAC binds service account %s, which the rendering does not have", sa)
		}
		if rules, ok := namespaced[sa]; ok {
			p.namespaced = append(p.namespaced, v1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: rules})
		}
		if rules, ok := cluster[sa]; ok {
			p.cluster = append(p.cluster, v1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: rules})
		}
	}
	return p, nil
}

func bindingOf(u *unstructured.Unstructured) ([]rbacv1.Subject, rbacv1.RoleRef, error) {
	var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
		return nil, rbacv1.RoleRef{}, fmt.Errorf("%s: %w", describe(u), err)
	}
	return b.Subjects, b.RoleRef, nil
}

// serviceAccountsOf returns the service accounts of namespace that are all
// of subjects, or nil if any subject is something else.
func serviceAccountsOf(subjects []rbacv1.Subject, namespace string) []string {
	var sas []string
	for _, s := range subjects {
		if s.Kind != rbacv1.ServiceAccountKind || s.Namespace != namespace {
			return nil
		}
		sas = append(sas, s.Name)
	}
	return sas
}

// Write writes b into dir, replacing what was there.
func (b *Bundle) Write(dir string) error {
	if dir == "" {
		return errors.New("no bundle directory")
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for name, data := range b.Manifests {
		if err := writeFile(filepath.Join(dir, "manifests", name), data); err != nil {
			return err
		}
	}
	meta, err := yaml.Marshal(map[string]any{"annotations": b.Annotations})
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "metadata", "annotations.yaml"), meta); err != nil {
		return err
	}
	// For those who build the bundle image with a container engine; `make
	// bundle` builds the same image without one (hack/image --bundle).
	var df strings.Builder
	df.WriteString("FROM scratch\n\n")
	for _, k := range slices.Sorted(maps.Keys(b.Annotations)) {
		fmt.Fprintf(&df, "LABEL %s=%s\n", k, b.Annotations[k])
	}
	df.WriteString("\nCOPY manifests /manifests/\nCOPY metadata /metadata/\n")
	return writeFile(filepath.Join(dir, "bundle.Dockerfile"), []byte(df.String()))
}

// manifestYAML marshals obj as YAML without the fields a typed object
// carries empty (creationTimestamp: null, status: {}).
func manifestYAML(obj any, dropStatus bool) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if dropStatus {
		delete(m, "status")
	}
	prune(m)
	return yaml.Marshal(m)
}

func prune(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "creationTimestamp" && e == nil {
				delete(v, k)
				continue
			}
			if k == "resources" {
				if m, ok := e.(map[string]any); ok && len(m) == 0 {
					delete(v, k)
					continue
				}
			}
			prune(e)
		}
	case []any:
		for _, e := range v {
			prune(e)
		}
	}
}

func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", u.GetKind(), ns, u.GetName())
	}
	return fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
}
