package manifests_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// The machine-api-operator's NetworkPolicies in openshift-machine-api, from
// OpenShift 4.20 on, as facts: which pods each selects and which ingress it
// admits. Read from github.com/openshift/machine-api-operator, branches
// release-4.20 and release-4.21, install/0000_90_machine-api-operator_05_
// networkpolicy-{default-deny,allow-all-egress,allow-ingress-cluster,
// allow-ingress-kubeapi,allow-ingress-metrics,allow-ingress-metal}.yaml.
// Both branches have the same rules, but for allow-ingress-metal, to which
// 4.21 adds port 9608 (ironic's exporter). None of the operator's ingress
// rules has a `from`: they admit any source.
var operatorApps = []string{
	"cluster-autoscaler", "cluster-autoscaler-operator", "cluster-baremetal-operator",
	"control-plane-machine-set-operator", "controller", "machine-api-operator",
}

var operatorPolicies = []policyFacts{
	// default-deny: every pod, ingress and egress, no rule. Every pod of
	// the namespace is isolated: only what a rule admits gets in.
	{name: "default-deny (4.20, 4.21)", everyPod: true},
	// allow-all-egress: every pod may connect anywhere (egress is not
	// checked here: it is all allowed).
	{name: "allow-ingress-cluster (4.20, 4.21)", k8sApps: operatorApps, ports: []portRange{{9440, 9442}}},
	{name: "allow-ingress-kubeapi (4.20, 4.21)", k8sApps: operatorApps, ports: []portRange{{9443, 9443}}},
	{name: "allow-ingress-metrics (4.20, 4.21)", k8sApps: operatorApps, ports: []portRange{{8085, 8085}, {8440, 8444}, {9191, 9192}}},
	{name: "allow-ingress-metal (4.20)", everyPod: true, ports: []portRange{{80, 80}, {443, 443}, {6180, 6180}, {6183, 6183}, {6385, 6385}, {6388, 6388}, {8084, 8084}, {9447, 9447}}},
	{name: "allow-ingress-metal (4.21)", everyPod: true, ports: []portRange{{80, 80}, {443, 443}, {6180, 6180}, {6183, 6183}, {6385, 6385}, {6388, 6388}, {8084, 8084}, {9447, 9447}, {9608, 9608}}},
}

// The operator's own Services and ServiceMonitor that reach the
// controllers' pods, from the same branches (install/0000_30_machine-api-
// operator_10_service.yaml, _08_webhook_service.yaml, 0000_90_machine-api-
// operator_03_servicemonitor.yaml): the platform Prometheus scrapes the
// Service machine-api-controllers (selector k8s-app=controller) on the
// target ports machine-mtrc, machineset-mtrc and mhc-mtrc; the API server
// calls the MachineSet webhook through machine-api-operator-webhook
// (selector k8s-app=controller, api=clusterapi) on the target port
// webhook-server.
var operatorServices = []struct {
	name     string
	selector map[string]string
	ports    []string
	from     source
}{
	{"machine-api-controllers", map[string]string{"k8s-app": "controller"}, []string{"machine-mtrc", "machineset-mtrc", "mhc-mtrc"}, monitoring},
	{"machine-api-operator-webhook", map[string]string{"k8s-app": "controller", "api": "clusterapi"}, []string{"webhook-server"}, apiServer},
}

// A source of traffic: the pods of a namespace with these labels, or the
// API server, which runs on the control plane's host network (only a rule
// without `from` admits it for certain; a namespaceSelector does not match
// host-network traffic).
type source struct {
	name        string
	namespace   map[string]string
	hostNetwork bool
}

var (
	monitoring = source{name: "the platform Prometheus (openshift-monitoring)", namespace: map[string]string{
		"kubernetes.io/metadata.name": "openshift-monitoring", "openshift.io/cluster-monitoring": "true", "network.openshift.io/policy-group": "monitoring",
	}}
	apiServer = source{name: "the API server (host network)", hostNetwork: true}
)

type portRange struct{ from, to int32 }

// policyFacts is one NetworkPolicy's ingress as far as the check needs it.
type policyFacts struct {
	name     string
	everyPod bool
	// k8sApps: the pods whose label k8s-app is one of these.
	k8sApps []string
	// selector: the pods matching it (our own policies).
	selector labels.Selector
	rules    []ruleFacts
	// ports: one rule admitting these ports from any source (the
	// operator's).
	ports []portRange
}

type ruleFacts struct {
	ports []networkingv1.NetworkPolicyPort
	from  []networkingv1.NetworkPolicyPeer
}

func (p policyFacts) selects(pod map[string]string) bool {
	switch {
	case p.everyPod:
		return true
	case p.selector != nil:
		return p.selector.Matches(labels.Set(pod))
	default:
		return slices.Contains(p.k8sApps, pod["k8s-app"])
	}
}

// admits reports whether p lets src reach port (number and name) of a pod
// it selects.
func (p policyFacts) admits(port corev1.ContainerPort, src source) bool {
	for _, r := range p.ports {
		if port.ContainerPort >= r.from && port.ContainerPort <= r.to {
			return true
		}
	}
	for _, r := range p.rules {
		if !portAdmitted(r.ports, port) {
			continue
		}
		if len(r.from) == 0 {
			return true
		}
		for _, peer := range r.from {
			if src.hostNetwork || peer.IPBlock != nil || peer.NamespaceSelector == nil {
				continue // a peer of pods of this namespace, or of addresses: not checked as a match
			}
			sel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
			if err == nil && sel.Matches(labels.Set(src.namespace)) {
				return true
			}
		}
	}
	return false
}

func portAdmitted(ports []networkingv1.NetworkPolicyPort, port corev1.ContainerPort) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String:
			if p.Port.StrVal == port.Name {
				return true
			}
		case p.EndPort != nil:
			if port.ContainerPort >= p.Port.IntVal && port.ContainerPort <= *p.EndPort {
				return true
			}
		case p.Port.IntVal == port.ContainerPort:
			return true
		}
	}
	return false
}

// pod is a pod template of ours: the deployer's, or the controllers' that
// the deployer applies.
type pod struct {
	name   string
	labels map[string]string
	ports  []corev1.ContainerPort
}

// flow is traffic that must get through: src to a pod's port, for what.
type flow struct {
	what string
	pod  pod
	port corev1.ContainerPort
	src  source
}

// TestFitsTheOperatorsNetworkPolicy: under the machine-api-operator's
// default-deny NetworkPolicy of OpenShift 4.20 on, everything we run in
// openshift-machine-api is reachable where it must be: every port a
// ServiceMonitor of ours scrapes (from openshift-monitoring), every port a
// webhook of ours is called on (from the API server), and every port the
// operator's own Services and ServiceMonitor reach on the controllers'
// pods. Each is admitted by one of the operator's rules or by a
// NetworkPolicy we ship. Every Service we ship must be one of those flows,
// so that a new one cannot go unchecked. Probes need no rule: traffic from
// the pod's own node is always allowed (Kubernetes' NetworkPolicy
// documentation; OpenShift's: "network policies cannot block traffic from
// localhost or from their resident nodes").
func TestFitsTheOperatorsNetworkPolicy(t *testing.T) {
	for _, k := range kustomizations {
		if k == "default" {
			continue // a plain cluster: no operator, no default deny
		}
		t.Run(strings.ReplaceAll(k, "/", "-"), func(t *testing.T) { fitsTheOperatorsNetworkPolicy(t, k) })
	}
}

func fitsTheOperatorsNetworkPolicy(t *testing.T, dir string) {
	objs := render(t, dir)
	policies := slices.Clone(operatorPolicies)
	var (
		pods      []pod
		services  []corev1.Service
		monitors  []*unstructured.Unstructured
		hookCalls []map[string]any
	)
	for _, u := range objs {
		switch u.GetKind() {
		case "NetworkPolicy":
			var np networkingv1.NetworkPolicy
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np))
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			must(t, err)
			p := policyFacts{name: "ours: " + np.Name, selector: sel}
			for _, r := range np.Spec.Ingress {
				p.rules = append(p.rules, ruleFacts{ports: r.Ports, from: r.From})
			}
			policies = append(policies, p)
		case "Deployment":
			var d corev1.PodTemplateSpec
			tmpl, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &d))
			pods = append(pods, podOf(u.GetName(), d))
		case "Service":
			var s corev1.Service
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s))
			services = append(services, s)
		case "ServiceMonitor":
			monitors = append(monitors, u)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for _, h := range hooks {
				s, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
				hookCalls = append(hookCalls, s)
			}
		}
	}
	// the controllers, as the overlay's deployer applies them
	d := deployer.Deployment(deployer.Spec{
		Namespace:     Namespace,
		Images:        deployer.Images{MachineAPIOperator: "mao:test", KubeRBACProxy: "krp:test"},
		ProviderImage: "machine-api-provider:latest",
		TokenSecret:   "credentials",
		Cloud:         deployerFlags(t, objs)["cloud"],
	})
	pods = append(pods, podOf(d.Name, d.Spec.Template))

	var flows []flow
	used := map[string]bool{}
	// through a Service of ours, by its port's name or number
	viaService := func(what, svcName string, match func(corev1.ServicePort) bool, src source) {
		i := slices.IndexFunc(services, func(s corev1.Service) bool { return s.Name == svcName })
		if i < 0 {
			t.Errorf("%s: no Service %s in config/%s", what, svcName, dir)
			return
		}
		svc := services[i]
		used[svc.Name] = true
		found := false
		for _, sp := range svc.Spec.Ports {
			if match(sp) {
				found = true
				flows = append(flows, targets(t, fmt.Sprintf("%s, Service %s port %d", what, svc.Name, sp.Port), svc.Spec.Selector, sp.TargetPort, pods, src)...)
			}
		}
		if !found {
			t.Errorf("%s: Service %s has no such port: %v", what, svc.Name, svc.Spec.Ports)
		}
	}
	for _, m := range monitors {
		sel, _, _ := unstructured.NestedStringMap(m.Object, "spec", "selector", "matchLabels")
		endpoints, _, _ := unstructured.NestedSlice(m.Object, "spec", "endpoints")
		for _, s := range services {
			if !labels.SelectorFromSet(sel).Matches(labels.Set(s.Labels)) {
				continue
			}
			for _, ep := range endpoints {
				name, _ := ep.(map[string]any)["port"].(string)
				viaService("ServiceMonitor "+m.GetName(), s.Name, func(sp corev1.ServicePort) bool { return sp.Name == name }, monitoring)
			}
		}
	}
	for _, h := range hookCalls {
		name, _ := h["name"].(string)
		port := int64(443)
		if p, ok := h["port"].(int64); ok {
			port = p
		}
		viaService("webhook", name, func(sp corev1.ServicePort) bool { return int64(sp.Port) == port }, apiServer)
	}
	for _, s := range operatorServices {
		for _, p := range s.ports {
			flows = append(flows, targets(t, "the operator's Service "+s.name+" port "+p, s.selector, intstr.FromString(p), pods, s.from)...)
		}
	}
	for _, s := range services {
		if !used[s.Name] {
			t.Errorf("Service %s: neither a ServiceMonitor nor a webhook of config/%s uses it, so this test does not know who must reach it: add that here", s.Name, dir)
		}
	}
	if len(flows) == 0 {
		t.Fatal("no flows found to check")
	}
	seen := map[string]bool{}
	for _, f := range flows {
		if key := fmt.Sprint(f.what, f.pod.name, f.port.ContainerPort, f.src.name); seen[key] {
			continue // the four webhooks call one Service
		} else {
			seen[key] = true
		}
		var by []string
		isolated := false
		for _, p := range policies {
			if !p.selects(f.pod.labels) {
				continue
			}
			isolated = true
			if p.admits(f.port, f.src) {
				by = append(by, p.name)
			}
		}
		switch {
		case !isolated:
			t.Errorf("%s: pod %s is selected by no policy, not even the operator's default-deny", f.what, f.pod.name)
		case len(by) == 0:
			t.Errorf("%s: %s cannot reach pod %s (labels %v) on port %d (%s): no rule of the operator's NetworkPolicies admits it, and no NetworkPolicy of ours does",
				f.what, f.src.name, f.pod.name, f.pod.labels, f.port.ContainerPort, f.port.Name)
		default:
			t.Logf("%s: %s reaches pod %s port %d (%s), by %s", f.what, f.src.name, f.pod.name, f.port.ContainerPort, f.port.Name, strings.Join(by, ", "))
		}
	}
}

// targets resolves a Service's target port on the pods its selector
// selects; each must have the port.
func targets(t *testing.T, what string, selector map[string]string, target intstr.IntOrString, pods []pod, src source) []flow {
	t.Helper()
	var out []flow
	for _, p := range pods {
		if len(selector) == 0 || !labels.SelectorFromSet(selector).Matches(labels.Set(p.labels)) {
			continue
		}
		i := slices.IndexFunc(p.ports, func(cp corev1.ContainerPort) bool {
			if target.Type == intstr.String {
				return cp.Name == target.StrVal
			}
			return cp.ContainerPort == target.IntVal
		})
		if i < 0 {
			t.Errorf("%s: pod %s has no port %s", what, p.name, target.String())
			continue
		}
		out = append(out, flow{what: what, pod: p, port: p.ports[i], src: src})
	}
	if len(out) == 0 {
		t.Errorf("%s: the selector %v selects none of our pods", what, selector)
	}
	return out
}

func podOf(name string, tmpl corev1.PodTemplateSpec) pod {
	p := pod{name: name, labels: tmpl.Labels}
	for _, c := range tmpl.Spec.Containers {
		p.ports = append(p.ports, c.Ports...)
	}
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
