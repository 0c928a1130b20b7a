package adopt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/orphans"
)

// Options say what to adopt and how.
type Options struct {
	// Namespace of the Machine API (openshift-machine-api).
	Namespace string
	// ClusterID is the cluster's identity, its infrastructure name: the
	// Machines' machine.openshift.io/cluster-api-cluster label, which the
	// provider tags servers with and is pinned to (the manager's
	// --cluster-id). It is the Infrastructure's infrastructureName: given
	// where the cluster has one, it must be that one (New). Only where
	// there is none (not OpenShift) is it required.
	ClusterID string
	// TakeOverClusterID is a cluster ID servers may be tagged with that is
	// not the cluster's identity: the Terraform modules tag servers with
	// their own cluster_id, which the installer's infrastructureName
	// (<cluster name>-<5 random characters>) is not. Such servers are
	// adopted only when it names that ID, explicitly: their Machines carry
	// the cluster's identity, and so, retagged, do they. An ID the cluster
	// declares as its own legacy ID (pkg/clusterid) needs no take-over,
	// and is refused here: its servers are adopted as they are tagged.
	TakeOverClusterID string
	// LegacyClusterIDs are the legacy cluster IDs the cluster owns besides
	// ClusterID (pkg/clusterid), read from the Infrastructure by New: its
	// servers tagged with one are adopted as they are, their Machines and
	// MachineSets labelled with it, nothing retagged.
	LegacyClusterIDs []string
	// Zones to look in; every zone of the account when empty.
	Zones []string
	// LeaveRoles are roles whose groups stay Terraform's, left alone
	// (terraform.go): e.g. the infra nodes the load balancers' router
	// backends are.
	LeaveRoles []string
	// CredentialsSecret is the secret (of Namespace) with the cloud
	// credentials the Machines name, and adopt uses; "" for the
	// manager's default credentials (adopt uses its own environment's).
	CredentialsSecret string
	// UserDataSecret, when set, is the user data every adopted MachineSet
	// names (it must exist). Unset, each node group gets its own,
	// <MachineSet>-user-data, made from what its nodes booted with.
	UserDataSecret string
	// IgnitionCA is the CA of the machine config server for cloudscale.ch
	// user data; default: read from the cluster.
	IgnitionCA []byte
	// Wait bounds how long Apply waits for each step the cluster carries
	// out (Machines Running, a replacement's Node Ready, a drain).
	Wait time.Duration
	// Poll is how often Apply looks; default 2 s.
	Poll time.Duration
	// Out receives the plan and the report.
	Out io.Writer
	Log logr.Logger
}

// Adopter adopts the servers of one cluster on one cloud.
type Adopter struct {
	kube  client.Client
	cloud cloud.Cloud
	c     cloud.Client
	a     cloud.Adopter
	o     Options
	// record tells the provider's janitor which servers are being adopted
	// (pkg/orphans, Adoptions).
	record *orphans.Adoptions
}

// ids is the cluster's identity: ClusterID and LegacyClusterIDs.
func (a *Adopter) ids() clusterid.IDs {
	return clusterid.IDs{Own: a.o.ClusterID, Legacy: a.o.LegacyClusterIDs}
}

// New returns an Adopter acting with the cloud credentials Options name.
func New(ctx context.Context, kube client.Client, c cloud.Cloud, o Options) (*Adopter, error) {
	if o.Namespace == "" {
		o.Namespace = "openshift-machine-api"
	}
	if o.Wait <= 0 {
		o.Wait = 15 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	ids, err := clusterIdentity(ctx, kube, o.ClusterID, o.TakeOverClusterID)
	if err != nil {
		return nil, err
	}
	o.ClusterID, o.LegacyClusterIDs = ids.Own, ids.Legacy
	if o.TakeOverClusterID == o.ClusterID {
		o.TakeOverClusterID = ""
	}
	if ids.IsLegacy(o.TakeOverClusterID) {
		return nil, fmt.Errorf("--take-over-cluster-id %s: %q is declared as this cluster's legacy ID (annotation %s of the Infrastructure %s): its servers are this cluster's already and are adopted as they are tagged, their Machines carrying it; leave --take-over-cluster-id out",
			o.TakeOverClusterID, o.TakeOverClusterID, clusterid.LegacyAnnotation, clusterid.InfrastructureName)
	}
	field := "--credentials-secret"
	creds, err := cloud.ReadCredentials(ctx, kube, c, o.Namespace, o.CredentialsSecret, field)
	if err != nil {
		return nil, err
	}
	cl, err := c.NewClient(creds, cloud.NewGate(c.Name(), c.DefaultRateLimit()))
	if err != nil {
		return nil, err
	}
	a, ok := cl.(cloud.Adopter)
	if !ok {
		return nil, fmt.Errorf("the %s client cannot adopt servers", c.Name())
	}
	return &Adopter{kube: kube, cloud: c, c: cl, a: a, o: o, record: &orphans.Adoptions{Client: kube, Namespace: o.Namespace, Cloud: c.Name()}}, nil
}

// clusterIdentity is the identity adopt gives the Machines: the one the
// provider is pinned to, the Infrastructure's infrastructureName. A given
// --cluster-id must be that one: Machines labelled with another would be
// refused by the webhooks and failed by the provider, and before the
// provider was pinned they enrolled that cluster's servers in its janitor.
// Servers tagged with another ID are taken over with takeOver instead.
func clusterIdentity(ctx context.Context, kube client.Client, given, takeOver string) (clusterid.IDs, error) {
	var infra configv1.Infrastructure
	err := kube.Get(ctx, client.ObjectKey{Name: clusterid.InfrastructureName}, &infra)
	name := infra.Status.InfrastructureName
	switch {
	case err != nil && !isNoKind(err):
		return clusterid.IDs{}, fmt.Errorf("reading the cluster's identity, the Infrastructure's infrastructureName: %w", err)
	case err == nil && name == "" && given == "":
		return clusterid.IDs{}, errors.New("the Infrastructure names no infrastructureName: give --cluster-id")
	}
	if err != nil {
		// No Infrastructure: the given ID, no legacy ones.
		if given == "" {
			return clusterid.IDs{}, errors.New("this cluster has no Infrastructure to read its identity from: give --cluster-id")
		}
		return clusterid.IDs{Own: given}, nil
	}
	if name == "" {
		return clusterid.IDs{Own: given}, nil
	}
	ids, err := clusterid.FromInfrastructure(&infra)
	if err != nil {
		return clusterid.IDs{}, err
	}
	if given != "" && given != name {
		hint := fmt.Sprintf("to adopt servers tagged with %q, declare it as this cluster's legacy ID (%s: they are adopted as they are tagged, their Machines carry it), or give --take-over-cluster-id %s (they are retagged with %q); and no --cluster-id", given, ids.DeclareCommand(given), given, name)
		switch {
		case ids.IsLegacy(given):
			hint = fmt.Sprintf("leave --cluster-id out: %q is declared as this cluster's legacy ID, and servers tagged with it are adopted as they are", given)
		case takeOver != "":
			hint = "leave --cluster-id out"
		}
		return clusterid.IDs{}, fmt.Errorf("--cluster-id %q is not this cluster's identity %q (the Infrastructure's infrastructureName), which the Machines must carry and the provider is pinned to: %s", given, name, hint)
	}
	return ids, nil
}

// Scheme holds every kind adopt reads and writes.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, machinev1beta1.Install, machinev1.Install, configv1.Install} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ClusterID is the cluster the Adopter acts for.
func (a *Adopter) ClusterID() string { return a.o.ClusterID }
