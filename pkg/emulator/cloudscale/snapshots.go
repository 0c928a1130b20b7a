package cloudscale

type snapshotRequest struct {
	Name         string             `json:"name"`
	SourceVolume string             `json:"source_volume"`
	Tags         *map[string]string `json:"tags"`
}

func (e *Emulator) createSnapshot(c *call) reply {
	var req snapshotRequest
	if r := c.decode(&req); r != nil {
		return *r
	}
	if req.Name == "" {
		return invalid("name", "This field is required.")
	}
	src := e.world.Volumes[req.SourceVolume]
	if src == nil {
		return invalid("source_volume", "Volume %q does not exist.", req.SourceVolume)
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	s := &snapshot{meta: e.newMeta(tagsOrEmpty(req.Tags)), Name: req.Name, SizeGB: src.SizeGB, Zone: src.Zone, SourceVolume: src.UUID, Status: "available"}
	e.world.Snapshots[s.UUID] = s
	return created(e.renderSnapshot(c, s))
}

func (e *Emulator) listSnapshots(c *call) reply {
	return list(c, e.world.Snapshots, func(s *snapshot) string { return s.Name }, e.renderSnapshot)
}

func (e *Emulator) updateSnapshot(c *call) reply {
	s, r := find(c, e.world.Snapshots)
	if r != nil {
		return *r
	}
	var req snapshotRequest
	set, r := c.patch(&req, false)
	if r != nil {
		return *r
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	if set["name"] {
		s.Name = req.Name
	}
	s.setTags(req.Tags)
	return noContent
}

// deleteSnapshot is asynchronous, as on the real cloud: the snapshot shows
// "deleting" for a moment before it is gone.
func (e *Emulator) deleteSnapshot(c *call) reply {
	s, r := find(c, e.world.Snapshots)
	if r != nil {
		return *r
	}
	if e.cfg.ActionTime <= 0 {
		delete(e.world.Snapshots, s.UUID)
		return noContent
	}
	s.Status, s.Pending = "deleting", &pending{To: "", At: c.now.Add(e.cfg.ActionTime)}
	return noContent
}

func (e *Emulator) renderSnapshot(c *call, s *snapshot) map[string]any {
	return map[string]any{
		"href": c.href("volume-snapshots", s.UUID), "uuid": s.UUID, "name": s.Name, "size_gb": s.SizeGB,
		"created_at": s.CreatedAt, "status": s.Status, "zone": map[string]string{"slug": s.Zone}, "tags": s.Tags,
		"source_volume": map[string]string{"href": c.href("volumes", s.SourceVolume), "uuid": s.SourceVolume, "name": e.world.Volumes[s.SourceVolume].nameOr("")},
	}
}

func (v *volume) nameOr(def string) string {
	if v == nil {
		return def
	}
	return v.Name
}
