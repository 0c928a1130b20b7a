package adopt

import "strings"

// Storage nodes: appuio's modules make dedicated nodes for a storage
// cluster (Rook/Ceph, OpenShift Data Foundation) whose disks hold its OSDs
// (terraform-openshift4-exoscale's storage.tf: role "storage", a partition
// of storage_cluster_disk_size zeroed at first boot). adopt gives them a
// MachineSet like any other group, and a MachineSet's scale-down, a
// MachineAutoscaler or a MachineHealthCheck's remediation deletes the
// server, its OSD disks with it. The plan says so before anything is done.

// storageLabels mark a Node of a storage cluster: OpenShift Data
// Foundation's node label, and a storage node role.
var storageLabels = []string{"cluster.ocs.openshift.io/openshift-storage", nodeRolePrefix + "storage"}

// warnStorage adds the storage warning to a group of storage nodes.
func warnStorage(g *Group) {
	storage := strings.Contains(g.Role, "storage")
	for _, m := range g.Members {
		for _, l := range storageLabels {
			if _, ok := m.Node.Labels[l]; ok {
				storage = true
			}
		}
	}
	if !storage || g.Master {
		return
	}
	g.Warnings = append(g.Warnings, "storage nodes: their disks hold the storage cluster's data (Ceph OSDs). "+
		"Deleting a Machine deletes its server with them: a scale-down of the MachineSet, a MachineAutoscaler or a MachineHealthCheck's remediation destroys OSDs, "+
		"and more at once than the cluster replicates loses data. Keep its replicas as they are, give it no MachineAutoscaler, "+
		"keep it out of every MachineHealthCheck, and replace a node only as the storage cluster's runbook says (docs/adopt.md#storage-nodes)")
}
