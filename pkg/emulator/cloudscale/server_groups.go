package cloudscale

import "net/http"

type serverGroupRequest struct {
	Name string             `json:"name"`
	Type string             `json:"type"`
	Zone string             `json:"zone"`
	Tags *map[string]string `json:"tags"`
}

func (e *Emulator) createServerGroup(c *call) reply {
	var req serverGroupRequest
	if r := c.decode(&req); r != nil {
		return *r
	}
	if req.Name == "" {
		return invalid("name", "This field is required.")
	}
	if req.Type == "" {
		req.Type = "anti-affinity"
	}
	if req.Type != "anti-affinity" {
		return invalid("type", "%q is not a valid choice; the only type is \"anti-affinity\".", req.Type)
	}
	if req.Zone == "" {
		req.Zone = defaultZone
	}
	if !zoneExists(req.Zone) {
		return invalid("zone", "Zone %q does not exist.", req.Zone)
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	g := &serverGroup{meta: e.newMeta(tagsOrEmpty(req.Tags)), Name: req.Name, Type: req.Type, Zone: req.Zone}
	e.world.ServerGroups[g.UUID] = g
	return created(e.renderServerGroup(c, g))
}

func (e *Emulator) listServerGroups(c *call) reply {
	return list(c, e.world.ServerGroups, func(g *serverGroup) string { return g.Name }, e.renderServerGroup)
}

func (e *Emulator) updateServerGroup(c *call) reply {
	g, r := find(c, e.world.ServerGroups)
	if r != nil {
		return *r
	}
	var req serverGroupRequest
	set, r := c.patch(&req, false)
	if r != nil {
		return *r
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	if set["name"] {
		if req.Name == "" {
			return invalid("name", "This field may not be blank.")
		}
		g.Name = req.Name
	}
	g.setTags(req.Tags)
	return noContent
}

func (e *Emulator) deleteServerGroup(c *call) reply {
	g, r := find(c, e.world.ServerGroups)
	if r != nil {
		return *r
	}
	if members := e.world.groupMembers(g.UUID); len(members) > 0 {
		return detail(http.StatusBadRequest, "The server group still has servers; delete them first.")
	}
	delete(e.world.ServerGroups, g.UUID)
	return noContent
}

func (e *Emulator) renderServerGroup(c *call, g *serverGroup) map[string]any {
	servers := []any{}
	for _, s := range e.world.groupMembers(g.UUID) {
		servers = append(servers, map[string]string{"href": c.href("servers", s.UUID), "uuid": s.UUID})
	}
	return map[string]any{
		"href": c.href("server-groups", g.UUID), "uuid": g.UUID, "name": g.Name, "type": g.Type,
		"zone": map[string]string{"slug": g.Zone}, "servers": servers, "tags": g.Tags,
	}
}
