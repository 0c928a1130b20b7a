// Package orphans keeps the durable record of orphan servers: servers that
// carry a cluster's identity but belong to no Machine. Some are found by the
// janitor's scans of the cloud (pkg/controllers/janitor); others are handed
// over when a person lets a Machine go without deleting its server (the
// abandon annotation, because its credentials are unusable). Either way the
// record lives in a ConfigMap beside the Machines, one key per server, with
// events on it, so that no such server is ever forgotten: it stays listed
// until it is deleted or a person removes its entry.
package orphans

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Orphan is one server of a cluster that belongs to no Machine.
type Orphan struct {
	// Cloud is the cloud's name; ServerID and ServerName the server's.
	Cloud      string `json:"cloud"`
	ServerID   string `json:"serverID"`
	ServerName string `json:"serverName,omitempty"`
	// Machine is the Machine name the server is tagged with.
	Machine   string `json:"machine,omitempty"`
	ClusterID string `json:"clusterID"`
	// Account says which credentials reach the server: a secret
	// ("namespace/name") or "default" for the manager's own.
	Account string `json:"account"`
	// Reason says how it became an orphan.
	Reason string `json:"reason"`
	// Since is when the provider first saw it orphaned.
	Since time.Time `json:"since"`
	// Verified is false when the provider cannot look at the server (its
	// credentials are unusable): it may be gone already.
	Verified bool `json:"verified"`
}

// ConfigMapName is the name of the record for a cloud.
func ConfigMapName(cloudName string) string { return cloudName + "-machine-api-provider-orphans" }

// Registry reads and writes the record of one cloud in one namespace.
//
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update
type Registry struct {
	Client    client.Client
	Recorder  record.EventRecorder
	Namespace string
	Cloud     string
}

// Key is the ConfigMap key of a server: IDs of both clouds are valid keys.
func Key(serverID string) string { return serverID }

// List returns the recorded orphans, oldest first.
func (r *Registry) List(ctx context.Context) ([]Orphan, error) {
	cm, err := r.get(ctx)
	if err != nil || cm == nil {
		return nil, err
	}
	out := make([]Orphan, 0, len(cm.Data))
	for _, v := range cm.Data {
		var o Orphan
		if json.Unmarshal([]byte(v), &o) == nil {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out, nil
}

// Record adds orphans that are not recorded yet (a recorded one keeps its
// Since) and emits an event for each new one. It returns the new ones.
func (r *Registry) Record(ctx context.Context, orphans ...Orphan) ([]Orphan, error) {
	var added []Orphan
	err := r.update(ctx, func(cm *corev1.ConfigMap) bool {
		changed := false
		for _, o := range orphans {
			if _, ok := cm.Data[Key(o.ServerID)]; ok {
				continue
			}
			b, err := json.Marshal(o)
			if err != nil {
				continue
			}
			cm.Data[Key(o.ServerID)] = string(b)
			added = append(added, o)
			changed = true
		}
		return changed
	})
	if err != nil {
		return nil, err
	}
	for _, o := range added {
		r.event(ctx, corev1.EventTypeWarning, "OrphanServer", fmt.Sprintf("%s server %s (%s) of cluster %s belongs to no Machine: %s", o.Cloud, o.ServerID, o.ServerName, o.ClusterID, o.Reason))
	}
	return added, nil
}

// Forget removes servers from the record (deleted, or no longer orphaned).
func (r *Registry) Forget(ctx context.Context, serverIDs ...string) error {
	if len(serverIDs) == 0 {
		return nil
	}
	return r.update(ctx, func(cm *corev1.ConfigMap) bool { return deleteKeys(cm, serverIDs) })
}

// deleteKeys removes the servers' keys from a record, and says whether
// there were any.
func deleteKeys(cm *corev1.ConfigMap, serverIDs []string) bool {
	changed := false
	for _, id := range serverIDs {
		if _, ok := cm.Data[Key(id)]; ok {
			delete(cm.Data, Key(id))
			changed = true
		}
	}
	return changed
}

func (r *Registry) name() string { return ConfigMapName(r.Cloud) }

func (r *Registry) get(ctx context.Context) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.name()}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cm, err
}

// update applies change to the ConfigMap (created when missing), retrying
// on conflicts.
func (r *Registry) update(ctx context.Context, change func(*corev1.ConfigMap) bool) error {
	return updateConfigMap(ctx, r.Client, types.NamespacedName{Namespace: r.Namespace, Name: r.name()},
		"Servers of "+r.Cloud+" that carry a cluster's identity but belong to no Machine. Delete a server, then its key here.", change)
}

// updateConfigMap applies change to a record's ConfigMap (created, with the
// description, when missing), retrying on conflicts.
func updateConfigMap(ctx context.Context, c client.Client, key types.NamespacedName, description string, change func(*corev1.ConfigMap) bool) error {
	for attempt := 0; ; attempt++ {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, key, cm)
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return err
		}
		if create {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: key.Name, Namespace: key.Namespace,
				Labels:      map[string]string{"app.kubernetes.io/managed-by": "machine-api-provider"},
				Annotations: map[string]string{"machine.appuio.io/description": description},
			}}
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if !change(cm) {
			return nil
		}
		if create {
			err = c.Create(ctx, cm)
		} else {
			err = c.Update(ctx, cm)
		}
		if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 5 {
			continue
		}
		return err
	}
}

func (r *Registry) event(ctx context.Context, typ, reason, msg string) {
	if r.Recorder == nil {
		return
	}
	cm, err := r.get(ctx)
	if err != nil || cm == nil {
		return
	}
	r.Recorder.Event(cm, typ, reason, msg)
}

// Event emits an event on the record.
func (r *Registry) Event(ctx context.Context, typ, reason, msg string) {
	r.event(ctx, typ, reason, msg)
}

// EventOn emits an event on another record (the adoption record).
func (r *Registry) EventOn(cm *corev1.ConfigMap, typ, reason, msg string) {
	if r.Recorder != nil && cm != nil {
		r.Recorder.Event(cm, typ, reason, msg)
	}
}
