// Package adopt brings the nodes of a cluster that Terraform made under the
// provider, without recreating them: `machine-api-provider adopt`.
//
// It finds the cluster's servers in the cloud account (pkg/cloud's Adopter:
// every server, with the provider spec that describes it), matches each to
// its Node (by provider ID, else by hostname and address), and groups them
// by role and zone, as the public Terraform modules make them: one node
// group per role, its nodes alike. Each group becomes a MachineSet whose
// spec is the one its members share, each server a Machine that records
// the server (spec.providerID) and names it in the provider's tags or
// labels; the machine controller then finds the server instead of making
// one, and the nodelink controller links the Node. A server that differs
// from its group's spec in a field a Machine could not have as it is (the
// drift SpecInSync reports, or what the provider would change) is named
// with that field and left alone.
//
// The control-plane servers get Machines too, never a MachineSet: a
// ControlPlaneMachineSet in state Inactive describes them, its template the
// masters' spec exactly as the webhooks default it, and every master
// Machine carries a pre-drain hook so that deleting it never deletes the
// server unless someone removes the hook.
//
// Servers owned by an Exoscale instance pool cannot be adopted in place: a
// pool lets a member go only by destroying it (pkg/emulator/exoscale,
// docs/adopt.md). Their group is replaced, one member at a time: its
// MachineSet grows by one, the new Node is Ready, the old one is drained
// and exactly that member is evicted from the pool.
//
// The Machines carry the cluster's identity, the Infrastructure's
// infrastructureName, which the provider is pinned to, or a legacy cluster
// ID the cluster declares (pkg/clusterid). Servers the modules tagged with
// another cluster ID (their cluster_id) are the cluster's as they are when
// that ID is declared: their Machines and MachineSet carry it, nothing is
// retagged (group.go, clusterOfGroup). Undeclared, they are taken over
// only when adopt is told to (TakeOverClusterID), and then carry the
// infrastructureName.
//
// Every step is idempotent: a second run finds what the first did and
// changes nothing, and counts every Machine it ever made (a MachineSet never
// owns more Machines than its replicas; adopt deletes no Machine). A server
// is named in the provider's identity right before its Machine is written
// (the provider acts on no server whose identity is not the Machine's); the
// adoption record (pkg/orphans, Adoptions) keeps the janitor from taking it
// for an orphan in between, or after an interrupted run.
package adopt
