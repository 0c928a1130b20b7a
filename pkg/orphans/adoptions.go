package orphans

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Adoptions is the record of the servers an adoption (`machine-api-provider
// adopt --apply`, pkg/adopt) is taking over: a ConfigMap beside the orphan
// record, one key per server. adopt writes it before its first write to the
// cloud or the cluster, and removes the servers once the run is done. The
// janitor never counts a server in it as an orphan: while an adoption is
// planned or under way, a server tagged for the cluster without its Machine
// yet (adopt tags a server before it writes its Machine; Terraform's modules
// tag adoptable servers themselves; a run was interrupted) is on its way to
// a Machine, not left behind.
type Adoptions struct {
	Client    client.Client
	Namespace string
	Cloud     string
}

// Adoption is one server an adoption takes over.
type Adoption struct {
	ServerID   string `json:"serverID"`
	ServerName string `json:"serverName,omitempty"`
	// Machine is the Machine adopt gives it ("" for a server it leaves
	// alone this run).
	Machine string `json:"machine,omitempty"`
	// ClusterID is the cluster it becomes the server of; TaggedAs the
	// cluster it carried when adopt surveyed it ("" for none): another
	// ID only when adopt was told to take those over.
	ClusterID string    `json:"clusterID"`
	TaggedAs  string    `json:"taggedAs,omitempty"`
	Since     time.Time `json:"since"`
}

// AdoptionsConfigMapName is the name of the adoption record of a cloud.
func AdoptionsConfigMapName(cloudName string) string {
	return cloudName + "-machine-api-provider-adoption"
}

func (r *Adoptions) key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: AdoptionsConfigMapName(r.Cloud)}
}

// List returns the servers being adopted, by server ID; none without a
// record.
func (r *Adoptions) List(ctx context.Context) (map[string]Adoption, error) {
	if r == nil {
		return nil, nil
	}
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, r.key(), cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the adoption record %s: %w", r.key(), err)
	}
	out := make(map[string]Adoption, len(cm.Data))
	for k, v := range cm.Data {
		var a Adoption
		if json.Unmarshal([]byte(v), &a) == nil {
			out[k] = a
		}
	}
	return out, nil
}

// Begin records servers as being adopted (a recorded one keeps its Since).
func (r *Adoptions) Begin(ctx context.Context, servers ...Adoption) error {
	if len(servers) == 0 {
		return nil
	}
	return updateConfigMap(ctx, r.Client, r.key(), "Servers of "+r.Cloud+
		" that `machine-api-provider adopt` is taking over: the janitor does not count them as orphans meanwhile. adopt removes them when it is done.",
		func(cm *corev1.ConfigMap) bool {
			changed := false
			for _, a := range servers {
				if prev, ok := cm.Data[Key(a.ServerID)]; ok {
					var p Adoption
					if json.Unmarshal([]byte(prev), &p) == nil && !p.Since.IsZero() {
						a.Since = p.Since
					}
				}
				b, err := json.Marshal(a)
				if err != nil || cm.Data[Key(a.ServerID)] == string(b) {
					continue
				}
				cm.Data[Key(a.ServerID)] = string(b)
				changed = true
			}
			return changed
		})
}

// Done removes servers from the record: their adoption is over (they have
// their Machines, or adopt left them alone and said so).
func (r *Adoptions) Done(ctx context.Context, serverIDs ...string) error {
	if len(serverIDs) == 0 {
		return nil
	}
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, r.key(), cm); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	return updateConfigMap(ctx, r.Client, r.key(), "", func(cm *corev1.ConfigMap) bool { return deleteKeys(cm, serverIDs) })
}
