// Package ownaudit is the ownership audit of the tests: run at the end of
// test/e2e, the chaos run, the adopt and switch tests and the two-cluster
// test, it fails on any cloud write to an object that was not the
// cluster's and on any Node deleted that no Machine of the cluster owned,
// whatever path the write or the delete took. A new write path is then
// covered without a test of its own.
//
// What it reads: the emulators audit every write they answer, in the one
// place all their routes pass through (harness.Audit: route, caller, the
// object the path names, the objects the body names, the objects the write
// changed, made or removed, each with its tags or labels as they were at
// that moment); a watch of the cluster's Nodes and Machines from Begin on;
// and, where the control plane writes one (pkg/demo), the API server's
// audit log, which names who deleted each Node.
//
// The rules, for the writes of the cluster's credentials (Options.Callers;
// every write of the account when unset):
//
//   - The object a write's path names must be the cluster's at that
//     moment: its tags or labels carry the cluster's ID or one it is
//     declared to own (Options.AlsoOwns, a fleet cluster's legacy IDs); an
//     Exoscale anti-affinity group (no labels) is the cluster's when the
//     provider's description names it (exoscale.GroupClusterID), any other
//     Exoscale object without labels (a template the boot image controller
//     registered) when the provider's mark at the start of its
//     description does (exoscale.DescribedClusterID, the reader the
//     provider judges it with); an
//     object without any identity that one of the cluster's servers names
//     (a root volume) is that server's.
//   - An object without any identity that a provider spec of the cluster's
//     Machines or MachineSets names (its Terraform network, a security
//     group) may be joined to or left by one of the cluster's servers
//     (attach, detach: the write's body names the server), nothing else.
//   - The objects a write's body names, the objects it changed or removed
//     besides, and those it made, must not carry another cluster's
//     identity. Untagged ones are allowed here: a server is created on the
//     Terraform network the spec names, a template nobody labels.
//   - Options.Exceptions allow what a test does on purpose, by object and
//     caller, each with its reason: adopt's explicit take-over of what its
//     plan names, the switch's hand-over of appuio's group.
//
// A Node deleted while the audit ran is accepted only from these deleters,
// told apart by the user agent the audit log records (Agent*):
//
//   - the provider's manager (the machine-api-operator's machine
//     controller in it), for the Node a Machine of the cluster that was
//     being deleted ran on (its nodeRef or its providerID): deleting its
//     own Machine's Node after the drain is its job;
//   - the cloud-controller-manager, for a Node whose server was deleted in
//     the cloud before (a successful DELETE of it in the cloud's audit):
//     its node-lifecycle controller removes Nodes whose instance is gone,
//     which is the cloud's word, not the cluster's choice;
//   - adopt, for the Node of a server its own credentials
//     (Options.AdoptCallers) acted on before: the rolling replacement of
//     an instance pool evicts the member, then deletes its Node.
//
// Any other deleter, or a delete no audit log attributes, is foreign.
package ownaudit
