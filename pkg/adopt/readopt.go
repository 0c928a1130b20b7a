package adopt

import "regexp"

// Adopting again. After `machine-api-provider uninstall` (or adopt --undo)
// the servers keep the provider's identity, and the ones a MachineSet made
// are named as its Machines were: <cluster>-<role>-<zone>-<5 characters>
// (the MachineSet's name as adopt and install-manifests give it, and the
// API server's generateName suffix). Their role is the one of their
// MachineSet, so that they join their former group again.

// machineSetRole is the role a Machine name of a MachineSet of the cluster
// tells ("" for any other name).
func machineSetRole(name, clusterID, zone string) string {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(clusterID) + `-([a-z0-9]([-a-z0-9]*[a-z0-9])?)-` + regexp.QuoteMeta(zone) + `(-pool)?-[a-z0-9]{5}$`)
	if sub := re.FindStringSubmatch(name); sub != nil && dnsLabel.MatchString(sub[1]) {
		return sub[1]
	}
	return ""
}
