package uninstall

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/installmanifests"
)

// ProviderObjects are what uninstall deletes of the provider itself: every
// object of config/overlays/<cloud> (the install, rendered from the
// binary's own copy of config/, as install-manifests renders it), then
// what the deployer made (the controllers' Deployment, its status and
// trusted CA ConfigMaps). The credentials and user data secrets and the
// settings ConfigMap stay for a later install; the namespace is
// OpenShift's. The webhook configurations go first: without their
// Deployment, failing closed, they would refuse every Machine and
// MachineSet write of the cluster.
func ProviderObjects(namespace, cloud string) ([]client.Object, error) {
	rendered, err := installmanifests.Overlay(cloud, "example.com/machine-api-provider:uninstall")
	if err != nil {
		return nil, err
	}
	var out []client.Object
	for _, o := range rendered {
		out = append(out, o)
	}
	first := func(o client.Object) int {
		switch o.GetObjectKind().GroupVersionKind().Kind {
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			return 0
		case "Deployment":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(out, func(a, b client.Object) int { return first(a) - first(b) })
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: namespace, Name: name} }
	controllers := &appsv1.Deployment{ObjectMeta: meta(ControllersName(cloud))}
	controllers.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	status := &corev1.ConfigMap{ObjectMeta: meta(deployer.StatusConfigMap)}
	ca := &corev1.ConfigMap{ObjectMeta: meta(deployer.TrustedCAConfigMap)}
	for _, cm := range []*corev1.ConfigMap{status, ca} {
		cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	}
	return append(out, controllers, status, ca), nil
}
