package v1beta1

// DefaultRootVolumeSizeGB is Red Hat's minimum disk for an OpenShift node
// (100 GB; "Minimum resource requirements" of the installation docs).
const DefaultRootVolumeSizeGB = 100

// Default fills in what the user may leave out. It is idempotent.
func (s *CloudscaleMachineProviderSpec) Default() {
	if s.APIVersion == "" {
		s.APIVersion = APIVersion
	}
	if s.Kind == "" {
		s.Kind = SpecKind
	}
	if s.RootVolumeSizeGB == 0 {
		s.RootVolumeSizeGB = DefaultRootVolumeSizeGB
	}
	if s.UseIPV6 == nil {
		yes := true
		s.UseIPV6 = &yes
	}
	// No default interface: the API's own default is a public interface
	// only, and cloudscale.ch has no security groups, so kubelet and every
	// NodePort would face the internet, and a private api-int would be out
	// of reach. Validate refuses a spec without interfaces instead.
}
