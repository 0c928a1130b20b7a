package v1beta1

// DefaultRootVolumeSizeGB fits an OpenShift worker's container images.
const DefaultRootVolumeSizeGB = 50

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
	if len(s.Interfaces) == 0 {
		s.Interfaces = []Interface{{Type: InterfaceTypePublic}}
	}
}
