package actuator

import (
	"context"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// specPath is where a Machine's provider spec is; errors name fields below it.
var specPath = field.NewPath("spec", "providerSpec", "value")

// scope is one Machine with what acting on it takes: its parsed spec and a
// cloud client with the right token.
type scope struct {
	a       *Actuator
	machine *machinev1.Machine
	spec    cloud.Spec
	client  cloud.Client
	ref     cloud.MachineRef
}

func (a *Actuator) scope(ctx context.Context, m *machinev1.Machine) (*scope, error) {
	clusterID := m.Labels[ClusterIDLabel]
	if clusterID == "" {
		return nil, invalidf(field.NewPath("metadata", "labels").Key(ClusterIDLabel), "required: the cluster's infrastructure name, which tags the Machine's server")
	}
	spec, errs := a.cloud.ParseSpec(m.Spec.ProviderSpec, specPath)
	if len(errs) > 0 {
		return nil, &invalidError{errs: errs}
	}
	token, err := a.token(ctx, m.Namespace, spec.TokenSecretName())
	if err != nil {
		return nil, err
	}
	c, err := a.cloud.Client(token)
	if err != nil {
		return nil, err
	}
	return &scope{a: a, machine: m, spec: spec, client: c, ref: cloud.MachineRef{Name: m.Name, ClusterID: clusterID}}, nil
}

// fallbackScope is a scope with the default token and no spec, to find and
// delete the servers of a Machine whose spec became invalid.
func (a *Actuator) fallbackScope(_ context.Context, m *machinev1.Machine) (*scope, error) {
	clusterID := m.Labels[ClusterIDLabel]
	if clusterID == "" {
		return nil, fmt.Errorf("the Machine has no %s label", ClusterIDLabel)
	}
	c, err := a.cloud.Client("")
	if err != nil {
		return nil, err
	}
	return &scope{a: a, machine: m, client: c, ref: cloud.MachineRef{Name: m.Name, ClusterID: clusterID}}, nil
}

// server finds the Machine's server: by the ID recorded on the Machine, else
// by its tags. nil without error means there is none.
func (s *scope) server(ctx context.Context) (*cloud.Server, error) {
	if id := s.a.recordedID(s.machine); id != "" {
		srv, err := s.client.GetServer(ctx, id)
		if cloud.IsNotFound(err) {
			return nil, nil
		}
		return srv, err
	}
	found, err := s.client.FindServers(ctx, s.ref)
	switch {
	case err != nil:
		return nil, err
	case len(found) == 0:
		return nil, nil
	case len(found) > 1:
		return nil, duplicates(found)
	}
	return &found[0], nil
}

// allServers is every server of the Machine: the recorded one and those
// carrying its tags.
func (s *scope) allServers(ctx context.Context) ([]cloud.Server, error) {
	found, err := s.client.FindServers(ctx, s.ref)
	if err != nil {
		return nil, err
	}
	id := s.a.recordedID(s.machine)
	for _, f := range found {
		if f.ID == id {
			return found, nil
		}
	}
	if id != "" {
		srv, err := s.client.GetServer(ctx, id)
		switch {
		case cloud.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			found = append(found, *srv)
		}
	}
	return found, nil
}
