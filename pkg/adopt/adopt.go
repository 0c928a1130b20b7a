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
)

// Options say what to adopt and how.
type Options struct {
	// Namespace of the Machine API (openshift-machine-api).
	Namespace string
	// ClusterID is the cluster's infrastructure name, the Machines'
	// machine.openshift.io/cluster-api-cluster label, which the provider
	// tags servers with. Default: the Infrastructure's infrastructureName.
	ClusterID string
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
	if o.ClusterID == "" {
		var infra configv1.Infrastructure
		if err := kube.Get(ctx, client.ObjectKey{Name: "cluster"}, &infra); err != nil {
			return nil, fmt.Errorf("reading the cluster's infrastructure name (or give --cluster-id): %w", err)
		}
		o.ClusterID = infra.Status.InfrastructureName
		if o.ClusterID == "" {
			return nil, errors.New("the Infrastructure object names no infrastructureName: give --cluster-id")
		}
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
	return &Adopter{kube: kube, cloud: c, c: cl, a: a, o: o}, nil
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
