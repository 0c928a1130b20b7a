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

// Adoptions is the record of the servers that carry a cluster's identity
// without a Machine on purpose, which the janitor therefore never counts as
// orphans: a ConfigMap beside the orphan record, one key per server. Two
// kinds of entries:
//
//   - an adoption under way: `machine-api-provider adopt --apply` (pkg/adopt)
//     records the servers it takes over before its first write to the cloud
//     or the cluster, and removes each once it has its Machine. In between,
//     a server tagged for the cluster without its Machine yet (adopt tags a
//     server before it writes its Machine; Terraform's modules tag adoptable
//     servers themselves; a run was interrupted) is on its way to a Machine,
//     not left behind. Such an entry expires (Expires, AdoptionTTL after the
//     run that last recorded it began): a run abandoned does not hide its
//     servers from orphan reporting for good. Each run renews it; once it
//     has expired the janitor removes it, with an event, and the server is
//     an orphan again (with a full grace before any delete).
//   - a server left alone (LeftAlone says why): adopt left it tagged on
//     purpose (`--leave-role`, a misfit, a group it cannot adopt), or
//     `uninstall` / `adopt --undo` released its Machine and kept the server.
//     It is no orphan for good: the entry does not expire. It goes when the
//     server is gone (the janitor, with an event), when adopt gives it a
//     Machine, or when a person removes its key to hand the server back to
//     orphan reporting.
type Adoptions struct {
	Client    client.Client
	Namespace string
	Cloud     string
}

// AdoptionTTL is how long an adoption under way keeps its servers from
// orphan reporting after the run that last recorded them began: long
// enough for a run of many instance pool replacements, and for an admin to
// resume one that stopped the next day.
const AdoptionTTL = 24 * time.Hour

// Adoption is one server an adoption takes over, or left alone.
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
	// Expires is when an adoption under way no longer keeps the server
	// from orphan reporting (AdoptionTTL). An entry without one (written
	// by an earlier release) expires AdoptionTTL after Since.
	Expires time.Time `json:"expires,omitempty"`
	// LeftAlone says why the server is left as it is, tagged, for good:
	// an entry that does not expire.
	LeftAlone string `json:"leftAlone,omitempty"`
	// Eviction is set on an instance pool member adopt replaces, before
	// it drains its Node and evicts it: what a later run needs to delete
	// that Node once the member is gone, after matching it again.
	Eviction *Eviction `json:"eviction,omitempty"`
}

// Eviction is what adopt recorded of a pool member and its Node before it
// evicted the member (pkg/adopt, replace.go): the Node as adopt matched it
// to the member, and the member's addresses then.
type Eviction struct {
	Pool       string   `json:"pool"`
	Node       string   `json:"node"`
	NodeUID    string   `json:"nodeUID"`
	ProviderID string   `json:"providerID,omitempty"`
	Addresses  []string `json:"addresses,omitempty"`
}

// Active says whether the entry keeps its server from orphan reporting at
// now: one left alone always, an adoption under way until it expires.
func (a Adoption) Active(now time.Time) bool {
	return a.LeftAlone != "" || now.Before(a.ExpiresAt())
}

// ExpiresAt is when an adoption under way expires.
func (a Adoption) ExpiresAt() time.Time {
	if !a.Expires.IsZero() {
		return a.Expires
	}
	return a.Since.Add(AdoptionTTL)
}

// AdoptionsConfigMapName is the name of the adoption record of a cloud.
func AdoptionsConfigMapName(cloudName string) string {
	return cloudName + "-machine-api-provider-adoption"
}

func (r *Adoptions) key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: AdoptionsConfigMapName(r.Cloud)}
}

// Get reads the record's ConfigMap; nil without one.
func (r *Adoptions) Get(ctx context.Context) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, r.key(), cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cm, err
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

// Begin records servers as being adopted, or left alone, as each entry
// says (a recorded one keeps its Since, and an eviction recorded for it).
func (r *Adoptions) Begin(ctx context.Context, servers ...Adoption) error {
	if len(servers) == 0 {
		return nil
	}
	return r.update(ctx, func(cm *corev1.ConfigMap) bool {
		changed := false
		for _, a := range servers {
			if p, ok := decodeAdoption(cm, a.ServerID); ok {
				if !p.Since.IsZero() {
					a.Since = p.Since
				}
				if a.Eviction == nil {
					a.Eviction = p.Eviction
				}
			}
			changed = encodeAdoption(cm, a) || changed
		}
		return changed
	})
}

// Evicting records, on a pool member's entry, the eviction adopt is about
// to make.
func (r *Adoptions) Evicting(ctx context.Context, a Adoption, e Eviction) error {
	return r.update(ctx, func(cm *corev1.ConfigMap) bool {
		if p, ok := decodeAdoption(cm, a.ServerID); ok {
			a = p
		}
		a.Eviction = &e
		return encodeAdoption(cm, a)
	})
}

// Done removes servers from the record: their adoption is over (they have
// their Machines, or are gone).
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
	return r.update(ctx, func(cm *corev1.ConfigMap) bool { return deleteKeys(cm, serverIDs) })
}

// Expire removes the adoptions under way that have expired at now, and
// returns them.
func (r *Adoptions) Expire(ctx context.Context, now time.Time) ([]Adoption, error) {
	var gone []Adoption
	err := r.update(ctx, func(cm *corev1.ConfigMap) bool {
		gone = nil
		for k := range cm.Data {
			if a, ok := decodeAdoption(cm, k); ok && !a.Active(now) {
				gone = append(gone, a)
				delete(cm.Data, k)
			}
		}
		return len(gone) > 0
	})
	return gone, err
}

func (r *Adoptions) update(ctx context.Context, change func(*corev1.ConfigMap) bool) error {
	return updateConfigMap(ctx, r.Client, r.key(), "Servers of "+r.Cloud+
		" that carry a cluster's identity without a Machine on purpose: those `machine-api-provider adopt` is taking over (until expires; each run renews them), and those left alone (leftAlone says why), for good. The janitor does not count them as orphans. Remove a key to hand its server back to orphan reporting.",
		change)
}

func decodeAdoption(cm *corev1.ConfigMap, id string) (Adoption, bool) {
	v, ok := cm.Data[Key(id)]
	if !ok {
		return Adoption{}, false
	}
	var a Adoption
	if json.Unmarshal([]byte(v), &a) != nil {
		return Adoption{}, false
	}
	return a, true
}

func encodeAdoption(cm *corev1.ConfigMap, a Adoption) bool {
	b, err := json.Marshal(a)
	if err != nil || cm.Data[Key(a.ServerID)] == string(b) {
		return false
	}
	cm.Data[Key(a.ServerID)] = string(b)
	return true
}
