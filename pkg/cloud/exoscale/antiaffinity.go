package exoscale

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// maxInstancesPerGroup is Exoscale's limit for an anti-affinity group.
const maxInstancesPerGroup = 8

// Exoscale's anti-affinity groups have a name and a description but no
// labels, and they belong to the account, not to a zone. The provider's
// groups are named <cluster>-<key>-<n> (cloud.GroupName) and described as
//
//	machine-api-provider cluster=<cluster> key=<key> created=<unix seconds>
//
// A group is the provider's only when its description says so and its name
// is the one the description implies: a group someone named like one of the
// provider's, or described like one under another name, is never touched.
// The creation time is in the description because the API does not say,
// and a group must be some time old before it may be deleted for being
// empty (another process may have just made it for an instance on its
// way).
const groupMarker = "machine-api-provider"

func groupDescription(k cloud.GroupKey, created time.Time) string {
	return fmt.Sprintf("%s cluster=%s key=%s created=%d", groupMarker, k.ClusterID, k.Key, created.Unix())
}

// parseGroup reads the provider's description of a group; ok is false for
// any group the provider did not make.
func parseGroup(name, description string) (k cloud.GroupKey, created time.Time, ok bool) {
	f := strings.Fields(description)
	cluster := DescribedClusterID(description) // whose: the one reader (resources.go)
	if len(f) != 4 || cluster == "" {
		return k, created, false
	}
	key, ok2 := strings.CutPrefix(f[2], "key=")
	at, ok3 := strings.CutPrefix(f[3], "created=")
	sec, err := strconv.ParseInt(at, 10, 64)
	if !ok2 || !ok3 || err != nil || key == "" {
		return k, created, false
	}
	k = cloud.GroupKey{ClusterID: cluster, Key: key}
	n, err := strconv.Atoi(strings.TrimPrefix(name, cluster+"-"+key+"-"))
	if !strings.HasPrefix(name, cluster+"-"+key+"-") || err != nil || n < 1 || cloud.GroupName(k, n) != name {
		return k, created, false
	}
	return k, time.Unix(sec, 0), true
}

// groupKey of a spec's antiAffinityKey: groups are the account's, not a
// zone's, so the zone is no part of it.
func groupKey(clusterID, key string) cloud.GroupKey {
	return cloud.GroupKey{ClusterID: clusterID, Key: key}
}

// placementGroup returns the group the next instance of the key goes into,
// creating it when all are full (isNew). Callers hold the key's lock.
func (c *Client) placementGroup(ctx context.Context, k cloud.GroupKey) (v3.UUID, bool, error) {
	groups, err := c.groups(ctx, k.ClusterID)
	if err != nil {
		return "", false, err
	}
	pl := cloud.Place(groups, k, maxInstancesPerGroup)
	if pl.ID != "" {
		return v3.UUID(pl.ID), false, nil
	}
	req := v3.CreateAntiAffinityGroupRequest{Name: pl.NewName, Description: groupDescription(k, c.now())}
	var op *v3.Operation
	err = c.call(ctx, "antiaffinitygroup.create", func(ctx context.Context) (err error) {
		op, err = c.base.CreateAntiAffinityGroup(ctx, req)
		return err
	}, func(err error) error {
		// A group of that name exists: another process made it since the
		// list. The next attempt finds it.
		var invalid *cloud.InvalidConfigError
		if errors.As(err, &invalid) {
			return &cloud.RetryableError{NotPerformed: true, Err: fmt.Errorf("%s antiaffinitygroup.create %s: %s", displayName, pl.NewName, invalid.Message)}
		}
		return err
	})
	if err != nil {
		return "", false, err
	}
	if err := c.operationFailed(ctx, op, "antiaffinitygroup.create"); err != nil {
		return "", false, err
	}
	if op.Reference == nil || op.Reference.ID == "" {
		return "", false, &cloud.RetryableError{Err: fmt.Errorf("%s antiaffinitygroup.create: the operation %s names no group", displayName, op.ID)}
	}
	logf.FromContext(ctx).Info("Created anti-affinity group", "group", pl.NewName, "id", op.Reference.ID)
	return op.Reference.ID, true, nil
}

// listGroups lists the account's anti-affinity groups.
func (c *Client) listGroups(ctx context.Context) (out []v3.AntiAffinityGroup, err error) {
	err = c.call(ctx, "antiaffinitygroup.list", func(ctx context.Context) error {
		resp, err := c.base.ListAntiAffinityGroups(ctx)
		if err == nil {
			out = resp.AntiAffinityGroups
		}
		return err
	})
	return out, err
}

func (c *Client) getGroup(ctx context.Context, id string) (g *v3.AntiAffinityGroup, err error) {
	err = c.call(ctx, "antiaffinitygroup.get", func(ctx context.Context) (err error) {
		g, err = c.base.GetAntiAffinityGroup(ctx, v3.UUID(id))
		return err
	})
	return g, err
}

// groups are the account's anti-affinity groups for packing: the
// provider's groups of the cluster with their members, every other group
// with its name only (names are unique in an account). A group of the
// provider that the list shows without members is read, in case the list
// leaves the members out.
func (c *Client) groups(ctx context.Context, clusterID string) ([]cloud.Group, error) {
	list, err := c.listGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]cloud.Group, 0, len(list))
	for _, g := range list {
		cg := cloud.Group{ID: string(g.ID), Name: g.Name}
		k, created, ours := parseGroup(g.Name, g.Description)
		if ours && k.ClusterID == clusterID {
			instances := g.Instances
			if len(instances) == 0 {
				full, err := c.getGroup(ctx, string(g.ID))
				if cloud.IsNotFound(err) {
					continue
				}
				if err != nil {
					return nil, err
				}
				instances = full.Instances
			}
			cg.Key, cg.ClusterID, cg.CreatedAt = k.Key, k.ClusterID, created
			for _, inst := range instances {
				cg.Members = append(cg.Members, string(inst.ID))
			}
		}
		out = append(out, cg)
	}
	return out, nil
}

// deleteEmptyGroups deletes the provider's anti-affinity groups the deleted
// instance was in that are empty now. A group that still lists the
// instance (Exoscale destroys instances asynchronously) is left to
// CleanupGroups, which the actuator and the janitor call.
func (c *Client) deleteEmptyGroups(ctx context.Context, m cloud.MachineRef, deleted *instance) error {
	for _, ref := range deleted.AntiAffinityGroups {
		g, err := c.getGroup(ctx, string(ref.ID))
		if cloud.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		k, _, ours := parseGroup(g.Name, g.Description)
		if !ours || k.ClusterID != m.ClusterID || len(g.Instances) > 0 {
			continue
		}
		if _, err := c.deleteGroupIfEmpty(ctx, k, string(g.ID)); err != nil {
			return err
		}
	}
	return nil
}

// CleanupGroups deletes the cluster's empty anti-affinity groups of the
// provider older than minAge: those a delete left behind, whatever the
// reason. Groups without the provider's description and name are never
// candidates.
func (c *Client) CleanupGroups(ctx context.Context, clusterID string, minAge time.Duration) ([]string, error) {
	if clusterID == "" {
		return nil, errors.New("exoscale: cleaning up groups needs the cluster ID")
	}
	groups, err := c.groups(ctx, clusterID)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, g := range cloud.EmptyGroups(groups, clusterID, minAge, c.now()) {
		ok, err := c.deleteGroupIfEmpty(ctx, groupKey(clusterID, g.Key), g.ID)
		if err != nil {
			return deleted, err
		}
		if ok {
			deleted = append(deleted, g.Name)
		}
	}
	return deleted, nil
}

// deleteGroupIfEmpty looks at the group again under the key's lock: a create
// of this process may have put an instance into it since it was listed.
func (c *Client) deleteGroupIfEmpty(ctx context.Context, k cloud.GroupKey, id string) (bool, error) {
	return c.groupLocks.DeleteUnlessGone(ctx, k, id, func() (bool, error) {
		return c.deleteGroupIfEmptyLocked(ctx, id)
	})
}

// deleteGroupIfEmptyLocked deletes the provider's group if it holds no
// instance. Callers hold the key's lock.
func (c *Client) deleteGroupIfEmptyLocked(ctx context.Context, id string) (bool, error) {
	g, err := c.getGroup(ctx, id)
	if cloud.IsNotFound(err) {
		c.groupLocks.Gone(id)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, _, ours := parseGroup(g.Name, g.Description); !ours || len(g.Instances) > 0 {
		return false, nil
	}
	err = c.call(ctx, "antiaffinitygroup.delete", func(ctx context.Context) error {
		_, err := c.base.DeleteAntiAffinityGroup(ctx, v3.UUID(id))
		return err
	})
	var invalid *cloud.InvalidConfigError
	var retry *cloud.RetryableError
	if err == nil || cloud.IsNotFound(err) {
		c.groupLocks.Gone(id)
	}
	switch {
	case err == nil:
		logf.FromContext(ctx).Info("Deleted empty anti-affinity group", "group", g.Name, "id", id)
		return true, nil
	case cloud.IsNotFound(err):
		return false, nil
	case errors.As(err, &invalid), errors.As(err, &retry) && retry.NotPerformed:
		// Another process put an instance into it after all, or one is
		// still being destroyed; the group stays until the next cleanup.
		logf.FromContext(ctx).Info("Anti-affinity group not deleted, it is in use", "group", g.Name, "id", id)
		return false, nil
	default:
		return false, err
	}
}
