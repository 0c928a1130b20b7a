package actuator

import (
	"context"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// specPath is where a Machine's provider spec is; errors name fields below it.
var specPath = field.NewPath("spec", "providerSpec", "value")

// scope is one Machine with what acting on it takes: its parsed spec, the
// account its credentials reach, and that account's view of the cluster.
type scope struct {
	a       *Actuator
	machine *machinev1.Machine
	// spec is nil in a deleteScope of a Machine whose spec became invalid;
	// invalid then says what is wrong with it.
	spec    cloud.Spec
	invalid error
	account *cloud.Account
	client  cloud.Client
	view    *cloud.View
	ref     cloud.MachineRef
}

// owner names a Machine as a user of its account.
func owner(m *machinev1.Machine) string { return "machine/" + string(m.UID) }

func (a *Actuator) scope(ctx context.Context, m *machinev1.Machine) (*scope, error) {
	clusterID, err := clusterOf(m)
	if err != nil {
		return nil, err
	}
	spec, errs := a.cloud.ParseSpec(m.Spec.ProviderSpec, specPath)
	if len(errs) > 0 {
		return nil, &invalidError{errs: errs}
	}
	if err := checkHostname(m.Name, spec.ServerName(m.Name)); err != nil {
		return nil, err
	}
	creds, err := cloud.ReadCredentials(ctx, a.secrets, a.cloud, m.Namespace, spec.CredentialsSecretName(), specPath.Child(spec.CredentialsSecretField()).String())
	if err != nil {
		return nil, err
	}
	return a.scopeWith(m, spec, creds, clusterID)
}

func (a *Actuator) scopeWith(m *machinev1.Machine, spec cloud.Spec, creds cloud.Credentials, clusterID string) (*scope, error) {
	acc, err := a.accounts.Get(owner(m), creds)
	if err != nil {
		return nil, err
	}
	return &scope{
		a: a, machine: m, spec: spec, account: acc, client: acc.Client,
		view: acc.View(clusterID), ref: cloud.MachineRef{Name: m.Name, ClusterID: clusterID},
	}, nil
}

// deleteScope is a scope for deleting: a spec that became invalid after the
// server was made must not leak the server, so its servers are looked for
// with the credentials the spec names (never with others).
func (a *Actuator) deleteScope(ctx context.Context, m *machinev1.Machine) (*scope, error) {
	s, err := a.scope(ctx, m)
	if err == nil || !isInvalid(err) {
		return s, err
	}
	clusterID, cerr := clusterOf(m)
	if cerr != nil {
		return nil, cerr
	}
	name, ok := a.cloud.CredentialsSecretOf(m.Spec.ProviderSpec)
	if !ok {
		return nil, &cloud.CredentialsError{Field: specPath.String(), Problem: fmt.Sprintf(
			"the provider spec is not even JSON, so which %s credentials reach its server is unknown: %v", a.cloud.Name(), err)}
	}
	creds, cerr := cloud.ReadCredentials(ctx, a.secrets, a.cloud, m.Namespace, name, specPath.String()+" (credentials secret)")
	if cerr != nil {
		return nil, cerr
	}
	inv, ierr := a.scopeWith(m, nil, creds, clusterID)
	if inv != nil {
		inv.invalid = err
	}
	return inv, ierr
}

func clusterOf(m *machinev1.Machine) (string, error) {
	id := m.Labels[ClusterIDLabel]
	if id == "" {
		return "", invalidf(field.NewPath("metadata", "labels").Key(ClusterIDLabel), "required: the cluster's infrastructure name, which tags the Machine's server")
	}
	return id, nil
}

// checkHostname refuses Machine names a server and a Node cannot have: the
// Machine's name is the server's hostname, one DNS label; with a domain the
// whole name must still be a DNS name.
func checkHostname(machine, serverName string) error {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(machine) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), machine, "the Machine's name is its server's hostname: "+msg))
	}
	if serverName != machine {
		for _, msg := range validation.IsDNS1123Subdomain(serverName) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), serverName, "the server's name (the Machine's name with the spec's domain) must be a DNS name: "+msg))
		}
	}
	if len(errs) > 0 {
		return &invalidError{errs: errs}
	}
	return nil
}

// server finds the Machine's server in the account's view: the one the
// Machine records, else the one carrying its identity. nil without error
// means there is none. A recorded server the view does not show is looked
// up directly before it is taken to be gone, unless the provider deleted it
// itself (the existence check after a Delete). Several servers are resolved
// (duplicates.go): the Machine keeps one.
func (s *scope) server(ctx context.Context) (*cloud.Server, error) {
	servers, err := s.view.MachineIn(ctx, s.ref.Name, s.zone())
	if err != nil {
		return nil, err
	}
	recorded := s.a.recordedID(s.machine)
	if recorded != "" && !has(servers, recorded) && !s.view.WasDeleted(recorded) {
		srv, err := s.client.GetServer(ctx, recorded)
		switch {
		case cloud.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			s.view.Created(*srv)
			servers = append(servers, *srv)
		}
	}
	switch len(servers) {
	case 0:
		return nil, nil
	case 1:
		return &servers[0], nil
	}
	return s.resolveDuplicates(ctx, servers, recorded)
}

// allServers is every server of the Machine as it is now: the ones
// carrying its identity, from a list of the cluster that began after the
// call (shared with the Machines deleted at the same time), and the
// recorded one, looked up directly unless the list shows it or the
// provider deleted it itself.
func (s *scope) allServers(ctx context.Context) ([]cloud.Server, error) {
	found, err := s.view.MachineNowIn(ctx, s.ref.Name, s.zone())
	if err != nil {
		return nil, err
	}
	id := s.a.recordedID(s.machine)
	if id == "" || has(found, id) || s.view.WasDeleted(id) {
		return found, nil
	}
	srv, err := s.client.GetServer(ctx, id)
	switch {
	case cloud.IsNotFound(err):
	case err != nil:
		return nil, err
	default:
		found = append(found, *srv)
	}
	return found, nil
}

// zone is the zone of the Machine's servers, as its spec says; "" when
// its spec is not valid (deleteScope): lookups then need every zone.
func (s *scope) zone() string {
	if s.spec == nil {
		return ""
	}
	return s.spec.Zone()
}

func has(servers []cloud.Server, id string) bool {
	for _, s := range servers {
		if s.ID == id {
			return true
		}
	}
	return false
}
