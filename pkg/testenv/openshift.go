package testenv

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OpenShiftNamespaces are the namespaces every OpenShift cluster has that
// the install manifests put objects into and no install creates. A test
// cluster shaped like OpenShift has all of them, so that a manifest
// needing any other fails its apply there as it would on OpenShift (the
// release test and the matrix each missed one when the boot images' Role
// came).
var OpenShiftNamespaces = []string{
	"openshift-machine-api",             // the Machine API's: the provider's
	"openshift-config-managed",          // where the console reads dashboards
	"openshift-machine-config-operator", // the release's boot images (a Role of the provider's)
}

// CreateOpenShiftNamespaces creates OpenShiftNamespaces (those that exist
// stay).
func CreateOpenShiftNamespaces(ctx context.Context, c client.Client) error {
	for _, n := range OpenShiftNamespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
