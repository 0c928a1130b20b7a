package cloudscale

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// maxServersPerGroup is cloudscale.ch's limit for an anti-affinity group.
const maxServersPerGroup = 4

// groupLockKey names the groups of one antiAffinityKey. The Client is per
// token, so together with it the lock is per (token, cluster, key, zone).
type groupLockKey struct {
	clusterID, key, zone string
}

// lockGroups serialises, within this process, choosing or creating a group
// and creating the server in it, so that concurrent creates fill a group
// before opening the next one and no group is deleted while a server is on
// its way into it. A channel rather than a mutex, so that a caller whose
// context ends stops waiting.
func (c *Client) lockGroups(ctx context.Context, k groupLockKey) (unlock func(), err error) {
	c.locksMu.Lock()
	ch := c.locks[k]
	if ch == nil {
		ch = make(chan struct{}, 1)
		c.locks[k] = ch
	}
	c.locksMu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("cloudscale: waiting for the anti-affinity groups of %q: %w", k.key, ctx.Err())
	}
}

func (c *Client) createWithAntiAffinity(ctx context.Context, m cloud.MachineRef, p *v1beta1.CloudscaleMachineProviderSpec, req *sdk.ServerRequest) (*sdk.Server, error) {
	k := groupLockKey{clusterID: m.ClusterID, key: p.AntiAffinityKey, zone: p.Zone}
	unlock, err := c.lockGroups(ctx, k)
	if err != nil {
		return nil, err
	}
	defer unlock()
	group, err := c.placementGroup(ctx, k)
	if err != nil {
		return nil, err
	}
	req.ServerGroups = append(req.ServerGroups, group)
	return c.createServer(ctx, req, reclassifying(func(err error) error {
		// Another process (an old leader, a second cluster's provider
		// with the same token) may have filled or deleted the group since
		// it was listed: placing the server again will do. A refusal
		// naming one of the user's serverGroups is their business.
		var invalid *cloud.InvalidConfigError
		if !errors.As(err, &invalid) || invalid.Field != "serverGroups" || (namesAny(invalid.Message, p.ServerGroups) && !strings.Contains(invalid.Message, group)) {
			return err
		}
		return &cloud.RetryableError{Err: fmt.Errorf("cloudscale.ch server.create: anti-affinity group %s for %q refused the server, it is placed again: %s", group, p.AntiAffinityKey, invalid.Message)}
	}))
}

func namesAny(msg string, ids []string) bool {
	for _, id := range ids {
		if strings.Contains(msg, id) {
			return true
		}
	}
	return false
}

// placementGroup returns the oldest group of the key in the zone with room
// left, creating a new one when all are full. Callers hold lockGroups.
func (c *Client) placementGroup(ctx context.Context, k groupLockKey) (string, error) {
	groups, err := c.listGroups(ctx, map[string]string{v1beta1.TagClusterID: k.clusterID, v1beta1.TagAntiAffinityKey: k.key})
	if err != nil {
		return "", err
	}
	names := map[string]bool{}
	inZone := 0
	for _, g := range groups {
		names[g.Name] = true
		if g.Zone.Slug != k.zone {
			continue
		}
		inZone++
		// The API lists in creation order: the first with room is the oldest.
		if len(g.Servers) < maxServersPerGroup {
			return g.UUID, nil
		}
	}
	// Numbered after the groups in the zone; names need not be unique on
	// cloudscale.ch, but unique names are easier on humans.
	n := inZone + 1
	for names[groupName(k, n)] {
		n++
	}
	req := &sdk.ServerGroupRequest{Name: groupName(k, n), Type: "anti-affinity"}
	req.Zone = k.zone
	req.Tags = &sdk.TagMap{v1beta1.TagClusterID: k.clusterID, v1beta1.TagAntiAffinityKey: k.key}
	var g *sdk.ServerGroup
	err = c.call(ctx, "servergroup.create", func(ctx context.Context) (err error) {
		g, err = c.sdk.ServerGroups.Create(ctx, req)
		return err
	})
	if err != nil {
		return "", err
	}
	logf.FromContext(ctx).Info("Created anti-affinity server group", "group", g.Name, "uuid", g.UUID, "zone", k.zone)
	return g.UUID, nil
}

func groupName(k groupLockKey, n int) string {
	return fmt.Sprintf("%s-%s-%d", k.clusterID, k.key, n)
}

// listGroups lists the server groups with the tags; an empty value asks for
// the key's presence. The result is filtered again, as for servers.
func (c *Client) listGroups(ctx context.Context, tags map[string]string) ([]sdk.ServerGroup, error) {
	var list []sdk.ServerGroup
	err := c.call(ctx, "servergroup.list", func(ctx context.Context) (err error) {
		list, err = c.sdk.ServerGroups.List(ctx, sdk.WithTagFilter(tags))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, g := range list {
		if matchesFilter(g.Tags, tags) {
			out = append(out, g)
		}
	}
	return out, nil
}

// matchesFilter applies a tag filter as the API does: an empty value asks
// for the key only.
func matchesFilter(have, filter map[string]string) bool {
	for k, v := range filter {
		hv, ok := have[k]
		if !ok || v != "" && hv != v {
			return false
		}
	}
	return true
}

// deleteEmptyGroups deletes the provider's anti-affinity groups that the
// deleted server was in and that are empty now. The user's serverGroups have
// no antiAffinityKey tag and are never candidates.
func (c *Client) deleteEmptyGroups(ctx context.Context, m cloud.MachineRef, deleted *sdk.Server) error {
	if len(deleted.ServerGroups) == 0 {
		return nil
	}
	was := map[string]bool{}
	for _, g := range deleted.ServerGroups {
		was[g.UUID] = true
	}
	groups, err := c.listGroups(ctx, map[string]string{v1beta1.TagClusterID: m.ClusterID, v1beta1.TagAntiAffinityKey: ""})
	if err != nil {
		return err
	}
	for _, g := range groups {
		key := g.Tags[v1beta1.TagAntiAffinityKey]
		if !was[g.UUID] || key == "" || members(&g, deleted.UUID) > 0 {
			continue
		}
		if err := c.deleteGroupIfEmpty(ctx, groupLockKey{clusterID: m.ClusterID, key: key, zone: g.Zone.Slug}, g.UUID, deleted.UUID); err != nil {
			return err
		}
	}
	return nil
}

// members counts a group's servers other than one just deleted, should the
// API still list it.
func members(g *sdk.ServerGroup, deleted string) int {
	n := 0
	for _, s := range g.Servers {
		if s.UUID != deleted {
			n++
		}
	}
	return n
}

// deleteGroupIfEmpty looks at the group again under the lock: a create of
// this process may have put a server into it since it was listed.
func (c *Client) deleteGroupIfEmpty(ctx context.Context, k groupLockKey, id, deleted string) error {
	unlock, err := c.lockGroups(ctx, k)
	if err != nil {
		return err
	}
	defer unlock()
	var g *sdk.ServerGroup
	err = c.call(ctx, "servergroup.get", func(ctx context.Context) (err error) {
		g, err = c.sdk.ServerGroups.Get(ctx, id)
		return err
	})
	if cloud.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if members(g, deleted) > 0 {
		return nil
	}
	err = c.call(ctx, "servergroup.delete", func(ctx context.Context) error {
		return c.sdk.ServerGroups.Delete(ctx, id)
	})
	var invalid *cloud.InvalidConfigError
	switch {
	case err == nil:
		logf.FromContext(ctx).Info("Deleted empty anti-affinity server group", "group", g.Name, "uuid", id)
		return nil
	case cloud.IsNotFound(err):
		return nil
	case errors.As(err, &invalid):
		// Another process put a server into it after all; the group stays
		// until that one goes.
		logf.FromContext(ctx).Info("Anti-affinity server group not deleted, it is in use again", "group", g.Name, "uuid", id)
		return nil
	default:
		return err
	}
}
