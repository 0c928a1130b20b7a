package exoscale

// GroupClusterID says whose anti-affinity group a group of the account
// is, read as the provider reads it before it joins or deletes one (its
// description and name, see groupMarker): the cluster it was made for, and
// false for a group the provider did not make. Exoscale's groups carry no
// labels; the ownership audit of the tests (test/ownaudit) reads them with
// this.
func GroupClusterID(name, description string) (string, bool) {
	k, _, ok := parseGroup(name, description)
	return k.ClusterID, ok
}
