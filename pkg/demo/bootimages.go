package demo

import (
	"context"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
)

// The local OpenShift's boot images: the machine-config-operator's
// namespace with the release's ConfigMap coreos-bootimages (PublishRelease
// writes it, for a fake release whose small images the test serves), and
// MachineConfiguration cluster, whose CRD comes from the openshift/api
// module (crds.go), for the boot-image skew record.

// bootImageObjects makes the machine-config-operator's namespace and
// MachineConfiguration cluster, with no skew record.
func (e *Env) bootImageObjects(ctx context.Context) error {
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bootimages.Namespace}}); err != nil {
		return err
	}
	return e.Client.Create(ctx, bootimages.NewMachineConfiguration())
}

// PublishRelease writes r's ConfigMap coreos-bootimages, as an upgrade to r
// would, and returns the files a mirror must serve (by path).
func (e *Env) PublishRelease(ctx context.Context, r bootimages.FakeRelease) (map[string][]byte, error) {
	cm, files, err := r.Build("https://rhcos.example/art")
	if err != nil {
		return nil, err
	}
	have := &corev1.ConfigMap{}
	switch err := e.Client.Get(ctx, client.ObjectKeyFromObject(cm), have); {
	case apierrors.IsNotFound(err):
		return files, e.Client.Create(ctx, cm)
	case err != nil:
		return nil, err
	}
	have.Data = cm.Data
	return files, e.Client.Update(ctx, have)
}

// NamedMachineSet is a worker MachineSet of the name in zone ("": the
// worker MachineSet's), with no replicas.
func (e *Env) NamedMachineSet(name, zone string) *machinev1.MachineSet {
	if zone == "" {
		zone = e.cloud.zone
	}
	return e.machineSet(name, zone, "")
}

// ServerImage is the image a server booted (custom:<slug> on
// cloudscale.ch, the template's name on Exoscale), by provider ID.
func (e *Env) ServerImage(providerID string) (string, error) {
	switch {
	case e.Cloudscale != nil:
		for _, s := range e.Cloudscale.Servers() {
			if "cloudscale://"+s.UUID == providerID {
				return s.Image, nil
			}
		}
	case e.Exoscale != nil:
		for _, i := range e.Exoscale.Instances() {
			if "exoscale://"+i.ID == providerID {
				return i.TemplateName, nil
			}
		}
	}
	return "", fmt.Errorf("no server %s", providerID)
}
