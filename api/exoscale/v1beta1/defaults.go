package v1beta1

// DefaultDiskSize fits an OpenShift worker's container images and logs; the
// RHCOS template itself needs 16 GiB.
const DefaultDiskSize = 100

// Default fills in what the user may leave out. It is idempotent.
func (s *ExoscaleMachineProviderSpec) Default() {
	if s.APIVersion == "" {
		s.APIVersion = APIVersion
	}
	if s.Kind == "" {
		s.Kind = SpecKind
	}
	if s.DiskSize == 0 {
		s.DiskSize = DefaultDiskSize
	}
	if s.PublicIPAssignment == "" {
		s.PublicIPAssignment = PublicIPInet4
	}
	if s.Template.Name != "" && s.Template.Visibility == "" {
		s.Template.Visibility = TemplateVisibilityPrivate
	}
}
