package cloudscale

import (
	"context"
	"maps"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
)

// setVolumeTags replaces a volume's tags.
func (c *Client) setVolumeTags(ctx context.Context, id string, tags sdk.TagMap) error {
	req := &sdk.VolumeUpdateRequest{}
	req.Tags = &tags
	return c.call(ctx, "volume.update", func(ctx context.Context) error {
		return c.sdk.Volumes.Update(ctx, id, req)
	})
}

// syncVolumeTags reads a volume and replaces its tags if they differ,
// once owned says its server is still the Machine's.
func (c *Client) syncVolumeTags(ctx context.Context, id string, tags sdk.TagMap, owned func() error) error {
	var v *sdk.Volume
	err := c.call(ctx, "volume.get", func(ctx context.Context) (err error) {
		v, err = c.sdk.Volumes.Get(ctx, id)
		return err
	})
	if err != nil {
		return err
	}
	if maps.Equal(v.Tags, tags) {
		return nil
	}
	if err := owned(); err != nil {
		return err
	}
	return c.setVolumeTags(ctx, id, tags)
}

func (c *Client) rememberRootTags(serverID string, tags sdk.TagMap) {
	c.rootTagsMu.Lock()
	c.rootTags[serverID] = tagsHash(tags)
	c.rootTagsMu.Unlock()
}

// rootTagsCurrent reports whether this process last left the server's root
// volume with these tags.
func (c *Client) rootTagsCurrent(serverID string, tags sdk.TagMap) bool {
	c.rootTagsMu.Lock()
	defer c.rootTagsMu.Unlock()
	h, ok := c.rootTags[serverID]
	return ok && h == tagsHash(tags)
}

func (c *Client) forgetRootTags(serverID string) {
	c.rootTagsMu.Lock()
	delete(c.rootTags, serverID)
	delete(c.untagged, serverID)
	c.rootTagsMu.Unlock()
}

// isUntagged reports whether this process created the server and has not
// tagged its root volume yet.
func (c *Client) isUntagged(serverID string) bool {
	c.rootTagsMu.Lock()
	defer c.rootTagsMu.Unlock()
	return c.untagged[serverID]
}

// takeUntagged reports whether this process created the server and has not
// tagged its root volume yet; the answer is given once.
func (c *Client) takeUntagged(serverID string) bool {
	c.rootTagsMu.Lock()
	defer c.rootTagsMu.Unlock()
	if !c.untagged[serverID] {
		return false
	}
	delete(c.untagged, serverID)
	return true
}
