package demo

// Autoscaling configured the OpenShift way: a ClusterAutoscaler and a
// MachineAutoscaler per MachineSet, reconciled by the real
// cluster-autoscaler-operator. The operator runs from its own install
// manifests (cvo.go), as its Deployment's pod under its service account
// and RBAC, on a control-plane Node this machine plays the kubelet of
// (kubelet.go); it renders the cluster-autoscaler's Deployment from the
// ClusterAutoscaler, whose pod runs the same way, with bin/cluster-autoscaler
// in place of its image and nothing else changed; and it writes each
// MachineAutoscaler's bounds onto its MachineSet as the min/max
// annotations the autoscaler reads.
//
// Each pod has a network of its own (the pod runner's, run as root): the
// operator listens on :8443 (webhooks) and 127.0.0.1:9191 (metrics), the
// autoscaler on :8085, and two environments with autoscaling run at once
// on one machine, beside anything else that uses those ports. Run by
// another user than root, the pods share this machine's network, and those
// ports must be free.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

// The operator's names, from its manifests and code.
const (
	// OperatorDeployment is the operator's own Deployment (install/).
	OperatorDeployment = "cluster-autoscaler-operator"
	// ClusterAutoscalerName is the one ClusterAutoscaler the operator
	// takes (it refuses others).
	ClusterAutoscalerName = "default"
	// AutoscalerDeployment is the Deployment the operator renders from it:
	// cluster-autoscaler-<ClusterAutoscaler>.
	AutoscalerDeployment = "cluster-autoscaler-" + ClusterAutoscalerName
	// operatorWebhooks is the operator's ValidatingWebhookConfiguration,
	// served through its Service.
	operatorWebhooks = "autoscaling.openshift.io"
	operatorService  = "cluster-autoscaler-operator"
)

// The MachineSet annotations a MachineAutoscaler's bounds become (the
// prefix is the Machine API group the autoscaler's CAPI_GROUP names).
const (
	MinSizeAnnotation = "machine.openshift.io/cluster-api-autoscaler-node-group-min-size"
	MaxSizeAnnotation = "machine.openshift.io/cluster-api-autoscaler-node-group-max-size"
	// MachineAutoscalerOwnerAnnotation names the MachineAutoscaler that
	// wrote them (<namespace>/<name>).
	MachineAutoscalerOwnerAnnotation = "autoscaling.openshift.io/machineautoscaler"
)

// ControlPlaneNode is the Node this machine registers for the operator's
// and the autoscaler's pods (both select control-plane nodes). It is no
// worker: State does not count it.
const ControlPlaneNode = "master-0"

// ClusterAutoscaler is the ClusterAutoscaler the demo and the e2e test
// apply (docs/install.md shows it; a test keeps the two the same), with a
// bound of 24 nodes in all. Of the flags the demo once gave the
// cluster-autoscaler by hand, it says every one the operator can render:
// the scale-down delays (o's, and none after a delete, 10 s after a
// failure), the provisioning bound, the least-waste expander, scale-down of
// nodes with emptyDir pods, and the log level. The rest the operator
// renders its own way: the in-cluster config for --kubeconfig, leader
// election (on, with OpenShift's durations; a new cluster has no lease to
// wait for), discovery of every MachineSet with the min/max annotations for
// --node-group-auto-discovery (only the MachineAutoscalers' have them), the
// default 10 s --scan-interval (ScaleDownWithin counts it) and the default
// --skip-nodes-with-system-pods=true (no kube-system pod runs on a worker
// here).
func ClusterAutoscaler(o Options) *unstructured.Unstructured {
	o = o.withDefaults()
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.openshift.io/v1",
		"kind":       "ClusterAutoscaler",
		"metadata":   map[string]any{"name": ClusterAutoscalerName},
		"spec": map[string]any{
			"resourceLimits": map[string]any{"maxNodesTotal": int64(24)},
			"scaleDown": map[string]any{
				"enabled":           true,
				"delayAfterAdd":     o.ScaleDownDelayAfterAdd.String(),
				"delayAfterDelete":  "0s",
				"delayAfterFailure": "10s",
				"unneededTime":      o.ScaleDownUnneeded.String(),
			},
			"maxNodeProvisionTime":      "5m",
			"skipNodesWithLocalStorage": false,
			"expanders":                 []any{"LeastWaste"},
			"logVerbosity":              int64(2),
		},
	}}
}

// MachineAutoscaler is the MachineAutoscaler of the worker MachineSet:
// the autoscaler keeps it between min and max Machines.
func (e *Env) MachineAutoscaler(min, max int) *unstructured.Unstructured {
	return MachineAutoscaler(e.MachineSetName, min, max)
}

// MachineAutoscaler is a MachineAutoscaler of a MachineSet, named after it.
func MachineAutoscaler(machineSet string, min, max int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.openshift.io/v1beta1",
		"kind":       "MachineAutoscaler",
		"metadata":   map[string]any{"name": machineSet, "namespace": Namespace},
		"spec": map[string]any{
			"minReplicas": int64(min),
			"maxReplicas": int64(max),
			"scaleTargetRef": map[string]any{
				"apiVersion": "machine.openshift.io/v1beta1",
				"kind":       "MachineSet",
				"name":       machineSet,
			},
		},
	}}
}

// The operator's wait for the feature gates, its leader election and the
// first reconcile take seconds; a loaded machine gets minutes.
const operatorStartTimeout = 3 * time.Minute

// startAutoscaling installs and starts the cluster-autoscaler-operator,
// applies the ClusterAutoscaler through its webhook, and returns once the
// cluster-autoscaler's pod runs.
func (e *Env) startAutoscaling(ctx context.Context, m *operatorManifests) error {
	ip, err := localcluster.HostIP()
	if err != nil {
		return err
	}
	if err := localcluster.RunNode(ctx, e.Cluster.Config, localcluster.NodeOptions{
		Name: ControlPlaneNode, IP: ip,
		Labels: map[string]string{
			"node-role.kubernetes.io/master":        "",
			"node-role.kubernetes.io/control-plane": "",
			// The autoscaler's Deployment still selects the beta label.
			"beta.kubernetes.io/os": "linux",
		},
		Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule}},
	}); err != nil {
		return err
	}
	ca, err := localcluster.NewServiceCA("demo")
	if err != nil {
		return err
	}
	log := e.Options.Log
	e.run(ctx, func(ctx context.Context) error {
		runServiceCA(ctx, ca, e.Client, Namespace, time.Second, log.WithName("service-ca"))
		return nil
	})
	e.kubelet = newKubelet(e.Cluster.Config, e.Client, ControlPlaneNode, localcluster.PodOptions{
		Images: m.runnerImages(), Dir: e.PodsDir(), HostIP: ip, Log: log.WithName("kubelet"),
	})
	e.run(ctx, e.kubelet.run)
	if err := m.apply(ctx, e.Client); err != nil {
		return err
	}

	wait, cancel := context.WithTimeout(ctx, operatorStartTimeout)
	defer cancel()
	if err := e.waitOperatorWebhook(wait, ca); err != nil {
		return err
	}
	if err := e.Client.Create(wait, ClusterAutoscaler(e.Options)); err != nil {
		return fmt.Errorf("the ClusterAutoscaler: %w", err)
	}
	if _, err := e.kubelet.waitPod(wait, AutoscalerDeployment); err != nil {
		return fmt.Errorf("the cluster-autoscaler's pod: %w (%s)", err, e.kubelet.describe())
	}
	return nil
}

// waitOperatorWebhook waits until the API server can call the operator's
// webhooks: the configuration it writes at start carries the service CA's
// bundle, and its Service has a ready endpoint (its pod, run here).
func (e *Env) waitOperatorWebhook(ctx context.Context, ca *localcluster.ServiceCA) error {
	for {
		var hooks admissionregistrationv1.ValidatingWebhookConfiguration
		err := e.Client.Get(ctx, client.ObjectKey{Name: operatorWebhooks}, &hooks)
		ready := err == nil && len(hooks.Webhooks) > 0
		for _, h := range hooks.Webhooks {
			ready = ready && string(h.ClientConfig.CABundle) == string(ca.CertPEM)
		}
		if ready {
			var slices discoveryv1.EndpointSliceList
			if err := e.Client.List(ctx, &slices, client.InNamespace(Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: operatorService}); err == nil {
				ready = false
				for _, s := range slices.Items {
					for _, ep := range s.Endpoints {
						ready = ready || ep.Conditions.Ready == nil || *ep.Conditions.Ready
					}
				}
			}
		}
		if ready {
			return nil
		}
		if err := e.kubelet.failed(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster-autoscaler-operator's webhooks were not served within %s (%s)", operatorStartTimeout, e.kubelet.describe())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// AutoscalerDeploymentObject is the cluster-autoscaler's Deployment as the
// operator rendered it.
func (e *Env) AutoscalerDeploymentObject(ctx context.Context) (*appsv1.Deployment, error) {
	var d appsv1.Deployment
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: AutoscalerDeployment}, &d)
	return &d, err
}

// AutoscalerPod is the cluster-autoscaler's pod as this machine runs it.
func (e *Env) AutoscalerPod() (*localcluster.Pod, error) {
	if e.kubelet == nil {
		return nil, errors.New("the environment runs no autoscaler")
	}
	return e.kubelet.pod(AutoscalerDeployment)
}

// PodsDir holds the pods' containers' roots and logs
// (<dir>/<pod>/<container>.log).
func (e *Env) PodsDir() string { return filepath.Join(e.Options.Dir, "pods") }

// Pods says how each pod this machine runs is doing.
func (e *Env) Pods() string {
	if e.kubelet == nil {
		return ""
	}
	return e.kubelet.describe()
}

// runnerImages maps each image to what the pod runner needs: the directory
// whose <command[0]> is the image's binary (the containers' commands are
// the binaries' names).
func (m *operatorManifests) runnerImages() map[string]string {
	out := map[string]string{}
	for image, bin := range m.Images {
		out[image] = filepath.Dir(bin)
	}
	return out
}
