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
	// notOwned is set when the server the Machine records carries
	// another identity (recordedServer).
	notOwned error
}

// owner names a Machine as a user of its account.
func owner(m *machinev1.Machine) string { return "machine/" + string(m.UID) }

func (a *Actuator) scope(ctx context.Context, m *machinev1.Machine) (*scope, error) {
	clusterID, err := a.clusterOf(m)
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
		view: acc.View(clusterID), ref: cloud.MachineRef{Name: m.Name, ClusterID: clusterID, AlsoOwns: a.ids.Besides(clusterID)},
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
	clusterID, cerr := a.clusterOf(m)
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

// clusterLabelPath is the Machine's cluster label, for messages.
var clusterLabelPath = field.NewPath("metadata", "labels").Key(ClusterIDLabel)

// clusterOf is the cluster the Machine's servers are tagged with: the
// Machine's label, which must name the cluster the actuator is pinned to
// (Options.ClusterID, the Infrastructure's infrastructureName) or one of
// the legacy IDs an admin declared it also owns (Options.LegacyClusterIDs,
// pkg/clusterid). The label alone never makes an ID the cluster's: a
// Machine copied from another cluster, or labelled by a wrong `adopt
// --cluster-id`, would make that cluster's servers this one's.
func (a *Actuator) clusterOf(m *machinev1.Machine) (string, error) {
	if err := a.checkCluster(m); err != nil {
		return "", err
	}
	return m.Labels[ClusterIDLabel], nil
}

// checkCluster refuses a Machine whose cluster label is missing or names a
// cluster this one does not own.
func (a *Actuator) checkCluster(m *machinev1.Machine) error {
	switch id := m.Labels[ClusterIDLabel]; {
	case id == "":
		return invalidf(clusterLabelPath, "required: the cluster's infrastructure name (%q), which tags the Machine's server", a.o.ClusterID)
	case !a.ids.Owns(id):
		return invalidf(clusterLabelPath, "%s", a.ids.NotOurs(id, "Machine"))
	}
	return nil
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
		srv, err := s.recordedServer(ctx, recorded, true)
		if err != nil {
			return nil, err
		}
		if srv != nil {
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
	srv, err := s.recordedServer(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if srv != nil {
		found = append(found, *srv)
	}
	return found, nil
}

// recordedServer looks up the server the Machine records (its provider ID,
// or the instance ID of its status) that the view does not show as the
// Machine's: nil when it is gone. One that does not carry the Machine's
// identity is left alone and reported (notOwned), for a provider ID is no
// proof of ownership (pkg/cloud, owner.go):
//
//   - a provider ID alone (given, never found to be the Machine's): nil,
//     the Machine has no such server. It goes on with servers that are its
//     own, and without one it has none: the machine controller fails a
//     Machine whose recorded server it cannot find (Exists), and a create
//     is refused (checkRecorded). A Machine copied from another cluster, or
//     created with the provider ID of any server the credentials reach,
//     ends there.
//   - a server the provider recorded in the status (its identity changed
//     since: a person, Terraform): the error, with hold set. Failing the
//     Machine would have its Node remediated; it is held instead, the
//     error saying what to fix. Deleting it (allServers) leaves the server.
func (s *scope) recordedServer(ctx context.Context, id string, hold bool) (*cloud.Server, error) {
	srv, err := s.client.GetServer(ctx, id)
	switch {
	case cloud.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	if err := cloud.CheckOwned(s.ref, srv); err != nil {
		s.notOwned = err
		s.a.notOwned(ctx, s.machine, err)
		if hold && s.a.verifiedID(s.machine) == id {
			return nil, err
		}
		return nil, nil
	}
	return srv, nil
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
