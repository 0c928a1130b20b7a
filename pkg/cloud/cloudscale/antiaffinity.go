package cloudscale

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// maxServersPerGroup is cloudscale.ch's limit for an anti-affinity group.
const maxServersPerGroup = 4

// tagGroupCreated holds, on the provider's server groups, when they were
// made (Unix seconds): the API does not say, and a group must be some time
// old before it may be deleted for being empty, since another process may
// have just made it for a server on its way.
const tagGroupCreated = "machine-api-provider-cloudscale_appuio_io_created"

func namesAny(msg string, ids []string) bool {
	for _, id := range ids {
		if strings.Contains(msg, id) {
			return true
		}
	}
	return false
}

// placementGroup returns the group the next server of the key goes into,
// creating it when all are full (isNew). Callers hold the key's lock.
func (c *Client) placementGroup(ctx context.Context, k cloud.GroupKey) (id string, isNew bool, err error) {
	groups, err := c.listGroups(ctx, map[string]string{v1beta1.TagClusterID: k.ClusterID, v1beta1.TagAntiAffinityKey: ""})
	if err != nil {
		return "", false, err
	}
	pl := cloud.Place(toGroups(groups), k, maxServersPerGroup)
	if pl.ID != "" {
		return pl.ID, false, nil
	}
	req := &sdk.ServerGroupRequest{Name: pl.NewName, Type: "anti-affinity"}
	req.Zone = k.Zone
	req.Tags = &sdk.TagMap{
		v1beta1.TagClusterID:       k.ClusterID,
		v1beta1.TagAntiAffinityKey: k.Key,
		tagGroupCreated:            strconv.FormatInt(c.now().Unix(), 10),
	}
	var g *sdk.ServerGroup
	err = c.call(ctx, "servergroup.create", func(ctx context.Context) (err error) {
		g, err = c.sdk.ServerGroups.Create(ctx, req)
		return err
	})
	if err != nil {
		return "", false, err
	}
	logf.FromContext(ctx).Info("Created anti-affinity server group", "group", g.Name, "uuid", g.UUID, "zone", k.Zone)
	return g.UUID, true, nil
}

// toGroups converts server groups for packing. The API lists them in
// creation order; groups without the creation tag (made by an older
// version) count as old, in that order.
func toGroups(list []sdk.ServerGroup) []cloud.Group {
	out := make([]cloud.Group, 0, len(list))
	for i, g := range list {
		created := time.Unix(0, int64(i))
		if sec, err := strconv.ParseInt(g.Tags[tagGroupCreated], 10, 64); err == nil {
			created = time.Unix(sec, int64(i))
		}
		members := make([]string, 0, len(g.Servers))
		for _, s := range g.Servers {
			members = append(members, s.UUID)
		}
		out = append(out, cloud.Group{
			ID: g.UUID, Name: g.Name, Zone: g.Zone.Slug,
			Key: g.Tags[v1beta1.TagAntiAffinityKey], ClusterID: g.Tags[v1beta1.TagClusterID],
			Members: members, CreatedAt: created,
		})
	}
	return out
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
	for _, g := range toGroups(groups) {
		if !was[g.ID] || g.Key == "" || members(g.Members, deleted.UUID) > 0 {
			continue
		}
		if _, err := c.deleteGroupIfEmpty(ctx, cloud.GroupKey{ClusterID: m.ClusterID, Key: g.Key, Zone: g.Zone}, g.ID, deleted.UUID); err != nil {
			return err
		}
	}
	return nil
}

// CleanupGroups deletes the cluster's empty anti-affinity groups of the
// provider older than minAge: those a failed delete left behind, whatever
// failed. Groups without the antiAffinityKey tag (the user's) are never
// candidates.
func (c *Client) CleanupGroups(ctx context.Context, clusterID string, minAge time.Duration) ([]string, error) {
	if clusterID == "" {
		return nil, errors.New("cloudscale: cleaning up groups needs the cluster ID")
	}
	groups, err := c.listGroups(ctx, map[string]string{v1beta1.TagClusterID: clusterID, v1beta1.TagAntiAffinityKey: ""})
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, g := range cloud.EmptyGroups(toGroups(groups), clusterID, minAge, c.now()) {
		ok, err := c.deleteGroupIfEmpty(ctx, cloud.GroupKey{ClusterID: clusterID, Key: g.Key, Zone: g.Zone}, g.ID, "")
		if err != nil {
			return deleted, err
		}
		if ok {
			deleted = append(deleted, g.Name)
		}
	}
	return deleted, nil
}

// members counts a group's servers other than one just deleted, should the
// API still list it.
func members(ids []string, deleted string) int {
	n := 0
	for _, id := range ids {
		if id != deleted {
			n++
		}
	}
	return n
}

// deleteGroupIfEmpty looks at the group again under the key's lock: a create
// of this process may have put a server into it since it was listed.
func (c *Client) deleteGroupIfEmpty(ctx context.Context, k cloud.GroupKey, id, deleted string) (bool, error) {
	return c.groupLocks.DeleteUnlessGone(ctx, k, id, func() (bool, error) {
		return c.deleteGroupIfEmptyLocked(ctx, id, deleted)
	})
}

// deleteGroupIfEmptyLocked deletes the group if it holds no server (but
// deleted). Callers hold the key's lock.
func (c *Client) deleteGroupIfEmptyLocked(ctx context.Context, id, deleted string) (bool, error) {
	var g *sdk.ServerGroup
	err := c.call(ctx, "servergroup.get", func(ctx context.Context) (err error) {
		g, err = c.sdk.ServerGroups.Get(ctx, id)
		return err
	})
	if cloud.IsNotFound(err) {
		c.groupLocks.Gone(id)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ids := make([]string, 0, len(g.Servers))
	for _, s := range g.Servers {
		ids = append(ids, s.UUID)
	}
	if members(ids, deleted) > 0 {
		return false, nil
	}
	err = c.call(ctx, "servergroup.delete", func(ctx context.Context) error {
		return c.sdk.ServerGroups.Delete(ctx, id)
	})
	var invalid *cloud.InvalidConfigError
	if err == nil || cloud.IsNotFound(err) {
		c.groupLocks.Gone(id)
	}
	switch {
	case err == nil:
		logf.FromContext(ctx).Info("Deleted empty anti-affinity server group", "group", g.Name, "uuid", id)
		return true, nil
	case cloud.IsNotFound(err):
		return false, nil
	case errors.As(err, &invalid):
		// Another process put a server into it after all; the group stays
		// until that one goes.
		logf.FromContext(ctx).Info("Anti-affinity server group not deleted, it is in use again", "group", g.Name, "uuid", id)
		return false, nil
	default:
		return false, err
	}
}
