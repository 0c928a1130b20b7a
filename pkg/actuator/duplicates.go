package actuator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/metrics"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

// resolveDuplicates settles a Machine with several servers, which the
// provider itself never makes but an operator's mistake or a cloud's fault
// can: the Machine keeps the server it records, else the oldest; each other
// one is deleted when no Node runs on it, and kept (and reported) when one
// does, since deleting a server a Node runs on would kill its workloads.
// Either way the Machine goes on with the one it keeps, never stuck.
func (s *scope) resolveDuplicates(ctx context.Context, servers []cloud.Server, recorded string) (*cloud.Server, error) {
	a, m := s.a, s.machine
	keep := 0 // servers are oldest first
	for i := range servers {
		if servers[i].ID == recorded {
			keep = i
		}
	}
	kept := servers[keep]
	// Any Node vetoes, the Machine's own too: it runs on the server the
	// Machine keeps, not on these.
	veto, err := a.veto(ctx, m, false)
	if err != nil {
		return nil, fmt.Errorf("resolving duplicate servers: %w", err)
	}
	var deleted, running []string
	for i := range servers {
		if i == keep {
			continue
		}
		extra := servers[i]
		err := s.client.DeleteServer(ctx, s.ref, &extra, veto)
		var vetoed *nodes.VetoedError
		if errors.As(err, &vetoed) {
			metrics.Duplicate(a.cloud.Name(), "kept_node_running")
			running = append(running, fmt.Sprintf("%s (%s)", extra.ID, nodes.Describe(vetoed.Nodes)))
			continue
		}
		if err != nil {
			metrics.Duplicate(a.cloud.Name(), "delete_failed")
			a.recorder.Eventf(m, corev1.EventTypeWarning, "DuplicateServer", "Could not delete %s server %s, a duplicate of this Machine's server %s: %s", a.cloud.Name(), extra.ID, kept.ID, cloud.Truncate(err.Error()))
			continue
		}
		s.view.Deleted(extra.ID)
		metrics.Duplicate(a.cloud.Name(), "deleted")
		deleted = append(deleted, extra.ID)
	}
	if len(deleted) > 0 {
		a.recorder.Eventf(m, corev1.EventTypeWarning, "DuplicateServerDeleted",
			"Deleted %s server(s) %s carrying this Machine's identity beside its server %s; no Node ran on them", a.cloud.Name(), strings.Join(deleted, ", "), kept.ID)
		a.log.Info("deleted duplicate servers", "machine", machineKey(m), "kept", kept.ID, "deleted", deleted)
	}
	if len(running) > 0 {
		a.recorder.Eventf(m, corev1.EventTypeWarning, "DuplicateServer",
			"%s server(s) %s carry this Machine's identity beside its server %s, and a Node runs on them: the provider keeps %s and leaves them; drain and delete them by hand",
			a.cloud.Name(), strings.Join(running, ", "), kept.ID, kept.ID)
		a.log.Info("duplicate servers with Nodes left alone", "machine", machineKey(m), "kept", kept.ID, "running", running)
	}
	return &kept, nil
}
