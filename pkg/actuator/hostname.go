package actuator

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/userdata"
)

// maxReportedHostname bounds a hostname quoted in an event: a DNS name is
// at most 253 characters, and user data is someone else's input.
const maxReportedHostname = 253

// withHostname makes the Machine's name the hostname a new server boots
// with (pkg/userdata/hostname.go says why it must be, and why the clouds do
// not make it so by themselves): an Ignition 3 config that sets no
// /etc/hostname gets the Machine's name; one that sets it is kept, and a
// hostname it says that is not the Machine's name is a warning on the
// Machine, as its Node will then never be approved nor linked. Other user
// data (cloud-config, a script, Ignition 2) is left as it is.
func (s *scope) withHostname(userData []byte) ([]byte, error) {
	if len(userData) == 0 {
		return userData, nil
	}
	m := s.machine
	out, res, err := userdata.WithHostname(userData, m.Name)
	if err != nil {
		return nil, fmt.Errorf("adding the hostname to the user data: %w", err)
	}
	switch {
	case res.Action == userdata.HostnameAdded:
		s.a.log.V(1).Info("The user data sets no hostname: added /etc/hostname with the Machine's name", "machine", machineKey(m), "wrapped", res.Wrapped)
	case res.Action == userdata.HostnameKept && res.Value == "":
		s.a.recorder.Eventf(m, corev1.EventTypeNormal, "HostnameFromUserData",
			"The user data sets %s from a source fetched at boot: the Node is named as it says, and is linked to this Machine only if that is %q", userdata.HostnamePath, m.Name)
	case res.Action == userdata.HostnameKept && res.Value != m.Name:
		name := res.Value
		if len(name) > maxReportedHostname {
			name = name[:maxReportedHostname] + "..."
		}
		s.a.recorder.Eventf(m, corev1.EventTypeWarning, "HostnameNotMachineName",
			"The user data sets the hostname %q, not the Machine's name %q: its Node will register as %q, whose certificates cluster-machine-approver does not approve for this Machine; remove %s from the user data, and the provider writes the Machine's name",
			name, m.Name, name, userdata.HostnamePath)
	case res.Action == userdata.HostnameNotIgnition:
		s.a.log.V(1).Info("The user data is no Ignition 3 config: its hostname is left to it and the cloud", "machine", machineKey(m))
	}
	return out, nil
}
