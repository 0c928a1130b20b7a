package cloudscale

import (
	"context"
	"fmt"
	"maps"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// What the switch from appuio's cloudscale.ch provider (pkg/appuioswitch)
// needs of the cloud: its anti-affinity server groups. It tags them with
// the antiAffinityKey tag only (v0.4.0, pkg/machine/actuator.go,
// ensureAntiAffinityServerGroupForKey: name and tag the key, at most four
// servers); this provider finds its groups by the key and the cluster's
// tag, so the switch hands appuio's groups of the cluster over by adding
// the cluster's tag. appuio's provider finds them by the key alone, before
// and after.

// AntiAffinityGroup is an anti-affinity server group with the
// antiAffinityKey tag.
type AntiAffinityGroup struct {
	ID, Name, Zone, Key string
	// ClusterID is the cluster's tag, "" on a group of appuio's.
	ClusterID string
	// Members are the UUIDs of its servers.
	Members []string
}

// AntiAffinityGroups lists the account's server groups that carry the
// antiAffinityKey tag, appuio's and this provider's.
func (c *Client) AntiAffinityGroups(ctx context.Context) ([]AntiAffinityGroup, error) {
	groups, err := c.listGroups(ctx, map[string]string{v1beta1.TagAntiAffinityKey: ""})
	if err != nil {
		return nil, err
	}
	out := make([]AntiAffinityGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, antiAffinityGroup(&g))
	}
	return out, nil
}

func antiAffinityGroup(g *sdk.ServerGroup) AntiAffinityGroup {
	members := make([]string, 0, len(g.Servers))
	for _, s := range g.Servers {
		members = append(members, s.UUID)
	}
	return AntiAffinityGroup{ID: g.UUID, Name: g.Name, Zone: g.Zone.Slug, Key: g.Tags[v1beta1.TagAntiAffinityKey],
		ClusterID: g.Tags[v1beta1.TagClusterID], Members: members}
}

// GroupNotTheClusters says why a group cannot be handed over to a
// cluster, "" when it can: it holds servers, every one of them the
// cluster's (servers, by UUID, carry its tag), and carries no other
// cluster's tag.
func GroupNotTheClusters(g AntiAffinityGroup, clusterID string, servers map[string]bool) string {
	switch {
	case g.ClusterID != "" && g.ClusterID != clusterID:
		return "it is cluster " + g.ClusterID + "'s"
	case len(g.Members) == 0:
		return "it holds no server, so whose it is cannot be told"
	}
	for _, id := range g.Members {
		if !servers[id] {
			return "it holds server " + id + ", which is not tagged as the cluster's"
		}
	}
	return ""
}

// HandOverGroup adds the cluster's tag to one of appuio's groups, keeping
// its other tags, after reading it again and checking that it still is the
// cluster's (GroupNotTheClusters against servers, the UUIDs of the
// cluster's servers). It returns why not when it is not; a group handed
// over already is no change.
func (c *Client) HandOverGroup(ctx context.Context, id, clusterID string, servers map[string]bool) (changed bool, whyNot string, err error) {
	var g *sdk.ServerGroup
	err = c.call(ctx, "servergroup.get", func(ctx context.Context) (err error) {
		g, err = c.sdk.ServerGroups.Get(ctx, id)
		return err
	})
	if err != nil {
		return false, "", err
	}
	found := antiAffinityGroup(g)
	if found.Key == "" {
		return false, "it has no " + v1beta1.TagAntiAffinityKey + " tag", nil
	}
	if why := GroupNotTheClusters(found, clusterID, servers); why != "" {
		return false, why, nil
	}
	if found.ClusterID == clusterID {
		return false, "", nil
	}
	tags := sdk.TagMap{}
	maps.Copy(tags, g.Tags)
	tags[v1beta1.TagClusterID] = clusterID
	req := &sdk.ServerGroupRequest{}
	req.Tags = &tags
	err = c.call(ctx, "servergroup.update", func(ctx context.Context) error {
		return c.sdk.ServerGroups.Update(ctx, id, req)
	})
	if err != nil {
		return false, "", fmt.Errorf("tagging server group %s (%s) as cluster %s's: %w", g.Name, id, clusterID, err)
	}
	logf.FromContext(ctx).Info("Handed an anti-affinity server group of appuio's provider over", "group", g.Name, "uuid", id, "cluster", clusterID)
	return true, "", nil
}

// ClusterServerIDs are the UUIDs of the servers tagged as the cluster's.
func ClusterServerIDs(servers []cloud.Server) map[string]bool {
	out := make(map[string]bool, len(servers))
	for _, s := range servers {
		out[s.ID] = true
	}
	return out
}
