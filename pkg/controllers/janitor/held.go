package janitor

import (
	"encoding/json"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/metrics"
)

// HeldServer is a server a held Machine records: the Machine's label names
// a cluster this one does not own, and its status the server a provider
// made for it (appuio's provider on a fleet cluster before the switch, an
// earlier release of this one, a label changed since). No provider acts on
// it: the actuator neither syncs nor deletes it (pkg/actuator, held.go),
// and it is not swept, for it may be another cluster's.
type HeldServer struct {
	// Machine is namespace/name.
	Machine   string
	ClusterID string
	ServerID  string
}

// heldServer is the server ID a Machine's provider status records, ""
// for none: a provider wrote it (the provider ID alone may be anyone's).
func heldServer(m machinev1.Machine) string {
	if m.Status.ProviderStatus == nil || len(m.Status.ProviderStatus.Raw) == 0 {
		return ""
	}
	var st struct {
		InstanceID string `json:"instanceId"`
	}
	if json.Unmarshal(m.Status.ProviderStatus.Raw, &st) != nil {
		return ""
	}
	return st.InstanceID
}

// reportHeld reports the servers held Machines record: the gauge
// machine_api_provider_held_servers, and per Machine a log line and a
// Warning event on it when its server is first seen (or changes), saying
// how to release it. It reads nothing of the cloud: the servers may be
// another cluster's.
func (j *Janitor) reportHeld(machines []machinev1.Machine) []HeldServer {
	var out []HeldServer
	seen := map[string]bool{}
	for i := range machines {
		m := &machines[i]
		h := HeldServer{Machine: m.Namespace + "/" + m.Name, ClusterID: m.Labels[ClusterIDLabel], ServerID: heldServer(*m)}
		out = append(out, h)
		seen[h.Machine] = true
		if j.held[h.Machine] == h.ServerID {
			continue
		}
		j.held[h.Machine] = h.ServerID
		how := fmt.Sprintf("If %q is this cluster's legacy ID, declare it: %s", h.ClusterID, j.ids.DeclareCommand(h.ClusterID))
		if h.ClusterID == "" {
			how = "Label it with the cluster ID its server carries, and declare that ID if it is not the infrastructureName"
		}
		msg := fmt.Sprintf("%s server %s, which this Machine records, is held: the Machine's label %s names cluster %q, and this cluster is %s, so no provider acts on the server, and deleting the Machine waits for it. %s",
			j.accounts.Cloud().Name(), h.ServerID, ClusterIDLabel, h.ClusterID, j.ids.Describe(), how)
		j.o.Log.Info("held Machine: its server is acted on by no provider", "machine", h.Machine, "server", h.ServerID, "cluster", h.ClusterID)
		if j.orphans != nil && j.orphans.Recorder != nil {
			j.orphans.Recorder.Event(m, corev1.EventTypeWarning, "HeldServer", msg)
		}
	}
	for k := range j.held {
		if !seen[k] {
			delete(j.held, k)
		}
	}
	metrics.SetHeld(j.accounts.Cloud().Name(), len(out))
	return out
}
