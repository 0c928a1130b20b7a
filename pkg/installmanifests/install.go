package installmanifests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/appuio/machine-api-provider/pkg/adopt"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Namespace is where the Machine API lives.
const Namespace = "openshift-machine-api"

// UserDataSecret is the secret the installer makes with the worker
// Ignition pointer (openshift/99_openshift-cluster-api_worker-user-data-secret.yaml).
const UserDataSecret = "worker-user-data"

// Options say what to write.
type Options struct {
	// Cloud is the provider's cloud; the overlay config/overlays/<name>.
	Cloud cloud.Cloud
	// Image is the provider's image (the deployer's, which it hands to the
	// machine-controller).
	Image string
	// ClusterID is the cluster's infrastructure name.
	ClusterID string
	// Credentials, when set, become the secret the deployer names
	// (cloudscale-token, exoscale-credentials); nil leaves it out (the
	// admin makes it).
	Credentials map[string]string
	// Workers and Infra are the MachineSets' replicas; each has its spec.
	Workers, Infra        int
	WorkerSpec, InfraSpec map[string]any
	Zone                  string
}

// File is one file of openshift/.
type File struct {
	Name string
	Data []byte
	// Secret files are written readable by their owner only.
	Secret bool
}

// credentialsSecret is the secret the overlay's deployer names, per cloud.
var credentialsSecret = map[string]string{"cloudscale": "cloudscale-token", "exoscale": "exoscale-credentials"}

// Render returns the files, in the order they are numbered.
func Render(o Options) ([]File, error) {
	name := o.Cloud.Name()
	if o.Image == "" {
		return nil, fmt.Errorf("the provider's image is required")
	}
	if o.ClusterID == "" {
		return nil, fmt.Errorf("the cluster's infrastructure name is required")
	}
	objs, err := Overlay(name, o.Image)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ServiceMonitor", "PrometheusRule":
			// Their CRDs come with the monitoring stack, after bootstrap.
			continue
		case "ValidatingWebhookConfiguration":
			if err := failOpen(obj); err != nil {
				return nil, err
			}
		}
		out = append(out, obj)
	}
	if o.Credentials != nil {
		s := &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: credentialsSecret[name], Namespace: Namespace},
			Type:       corev1.SecretTypeOpaque,
			StringData: o.Credentials,
		}
		u, err := toUnstructured(s)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	for _, ms := range []struct {
		role     string
		replicas int
		spec     map[string]any
	}{{"worker", o.Workers, o.WorkerSpec}, {"infra", o.Infra, o.InfraSpec}} {
		if ms.spec == nil || ms.replicas < 0 || ms.replicas == 0 && ms.role == "infra" {
			continue
		}
		set, err := machineSet(o, ms.role, ms.replicas, ms.spec)
		if err != nil {
			return nil, fmt.Errorf("the %s MachineSet: %w", ms.role, err)
		}
		u, err := toUnstructured(set)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	files := make([]File, 0, len(out))
	for i, obj := range out {
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: fileName(i, obj), Data: b, Secret: obj.GetKind() == "Secret"})
	}
	return files, nil
}

// Write writes the files into dir (the installer's openshift/).
func Write(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.Name), f.Data, f.Secret); err != nil {
			return err
		}
	}
	return nil
}

// writeFile is os.WriteFile, 0644 (less the umask), or 0600 for a secret;
// a secret's file that exists already is made its owner's before the data
// goes in (os.WriteFile keeps an existing file's mode).
func writeFile(name string, data []byte, secret bool) error {
	mode := os.FileMode(0o644)
	if secret {
		mode = 0o600
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if secret {
		if err := f.Chmod(mode); err != nil {
			f.Close()
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// failOpen sets every webhook of a configuration to failurePolicy Ignore:
// at install time the backend runs last.
func failOpen(obj *unstructured.Unstructured) error {
	hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
	if err != nil {
		return err
	}
	for _, h := range hooks {
		if m, ok := h.(map[string]any); ok {
			m["failurePolicy"] = "Ignore"
		}
	}
	return unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
}

// machineSet is a MachineSet of role on the installer's worker user data.
func machineSet(o Options, role string, replicas int, spec map[string]any) (*machinev1beta1.MachineSet, error) {
	s := map[string]any{}
	for k, v := range spec {
		s[k] = v
	}
	s["userDataSecret"] = map[string]any{"name": UserDataSecret}
	if _, ok := s["antiAffinityKey"]; !ok {
		s["antiAffinityKey"] = role
	}
	raw, err := adopt.CanonicalSpec(o.Cloud, s)
	if err != nil {
		return nil, err
	}
	zone, _ := s["zone"].(string)
	name := fmt.Sprintf("%s-%s-%s", o.ClusterID, role, zoneSuffix(zone))
	n := int32(replicas)
	labels := map[string]string{
		"machine.openshift.io/cluster-api-cluster":      o.ClusterID,
		"machine.openshift.io/cluster-api-machineset":   name,
		"machine.openshift.io/cluster-api-machine-role": role,
		"machine.openshift.io/cluster-api-machine-type": role,
	}
	nodeLabels := map[string]string{"node-role.kubernetes.io/" + role: ""}
	return &machinev1beta1.MachineSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: machinev1beta1.GroupVersion.String(), Kind: "MachineSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": o.ClusterID}},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: &n,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{
				"machine.openshift.io/cluster-api-cluster":    o.ClusterID,
				"machine.openshift.io/cluster-api-machineset": name,
			}},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{
					ObjectMeta:   machinev1beta1.ObjectMeta{Labels: nodeLabels},
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}},
				},
			},
		},
	}, nil
}

func zoneSuffix(zone string) string {
	parts := strings.Split(zone, "-")
	if len(parts) == 3 {
		return parts[1] + parts[2]
	}
	return zone
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	// No status and no creationTimestamp: the installer creates them.
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if t, ok := m["spec"].(map[string]any); ok {
		if tpl, ok := t["template"].(map[string]any); ok {
			if md, ok := tpl["metadata"].(map[string]any); ok {
				delete(md, "creationTimestamp")
			}
		}
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// InfrastructureName reads the cluster's infrastructure name from the
// installer's manifests (manifests/cluster-infrastructure-02-config.yml,
// which `openshift-install create manifests` writes).
func InfrastructureName(installDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(installDir, "manifests", "cluster-infrastructure-02-config.yml"))
	if err != nil {
		return "", fmt.Errorf("reading the infrastructure name (or give --cluster-id): %w", err)
	}
	var infra struct {
		Status struct {
			InfrastructureName string `json:"infrastructureName"`
		} `json:"status"`
	}
	if err := yaml.Unmarshal(b, &infra); err != nil {
		return "", err
	}
	if infra.Status.InfrastructureName == "" {
		return "", fmt.Errorf("%s names no status.infrastructureName", filepath.Join("manifests", "cluster-infrastructure-02-config.yml"))
	}
	return infra.Status.InfrastructureName, nil
}
