package cloudscale

import "net/http"

type volumeRequest struct {
	Name               string             `json:"name"`
	SizeGB             int                `json:"size_gb"`
	Type               string             `json:"type"`
	Zone               string             `json:"zone"`
	ServerUUIDs        *[]string          `json:"server_uuids"`
	VolumeSnapshotUUID string             `json:"volume_snapshot_uuid"`
	Tags               *map[string]string `json:"tags"`
}

// checkVolumeSize applies the real size rules: SSD in whole GB, bulk in
// steps of 100 GB.
func checkVolumeSize(v *volumeSpec, field string) *reply {
	if v.Type == "" {
		v.Type = "ssd"
	}
	var r reply
	switch {
	case v.Type != "ssd" && v.Type != "bulk":
		r = invalid(field, "Volume type must be \"ssd\" or \"bulk\", not %q.", v.Type)
	case v.SizeGB < 1:
		r = invalid(field, "Volume size must be at least 1 GB.")
	case v.Type == "bulk" && v.SizeGB%100 != 0:
		r = invalid(field, "Bulk volumes come in steps of 100 GB; %d is not one.", v.SizeGB)
	default:
		return nil
	}
	return &r
}

func (e *Emulator) createVolume(c *call) reply {
	w := e.world
	var req volumeRequest
	if r := c.decode(&req); r != nil {
		return *r
	}
	if req.Name == "" {
		return invalid("name", "This field is required.")
	}
	if req.VolumeSnapshotUUID != "" {
		snap := w.Snapshots[req.VolumeSnapshotUUID]
		if snap == nil || snap.Status == "deleting" {
			return invalid("volume_snapshot_uuid", "Volume snapshot %q does not exist.", req.VolumeSnapshotUUID)
		}
		if req.SizeGB == 0 {
			req.SizeGB = snap.SizeGB
		}
		if req.Zone == "" {
			req.Zone = snap.Zone
		}
		if req.Type == "" {
			req.Type = w.Volumes[snap.SourceVolume].typeOr("ssd")
		}
	}
	if req.Zone == "" {
		req.Zone = defaultZone
	}
	if !zoneExists(req.Zone) {
		return invalid("zone", "Zone %q does not exist.", req.Zone)
	}
	spec := volumeSpec{SizeGB: req.SizeGB, Type: req.Type}
	if r := checkVolumeSize(&spec, "size_gb"); r != nil {
		return *r
	}
	servers := []string{}
	if req.ServerUUIDs != nil {
		if r := e.checkAttach(*req.ServerUUIDs, req.Zone); r != nil {
			return *r
		}
		servers = append(servers, *req.ServerUUIDs...)
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	v := &volume{meta: e.newMeta(tagsOrEmpty(req.Tags)), Name: req.Name, SizeGB: spec.SizeGB, Type: spec.Type, Zone: req.Zone, Servers: servers}
	w.Volumes[v.UUID] = v
	return created(e.renderVolume(c, v))
}

func (v *volume) typeOr(def string) string {
	if v == nil {
		return def
	}
	return v.Type
}

func (e *Emulator) checkAttach(serverIDs []string, zone string) *reply {
	var r reply
	switch {
	case len(serverIDs) > 1:
		r = invalid("server_uuids", "A volume can be attached to one server at most.")
	case len(serverIDs) == 1 && e.world.Servers[serverIDs[0]] == nil:
		r = invalid("server_uuids", "Server %q does not exist.", serverIDs[0])
	case len(serverIDs) == 1 && e.world.Servers[serverIDs[0]].Zone != zone:
		r = invalid("server_uuids", "Server %q is not in zone %s.", serverIDs[0], zone)
	default:
		return nil
	}
	return &r
}

func (e *Emulator) listVolumes(c *call) reply {
	return list(c, e.world.Volumes, func(v *volume) string { return v.Name }, e.renderVolume)
}

func (e *Emulator) updateVolume(c *call) reply {
	v, r := find(c, e.world.Volumes)
	if r != nil {
		return *r
	}
	var req volumeRequest
	set, r := c.patch(&req, true)
	if r != nil {
		return *r
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	switch {
	case set["name"]:
		if req.Name == "" {
			return invalid("name", "This field may not be blank.")
		}
		v.Name = req.Name
	case set["size_gb"]:
		spec := volumeSpec{SizeGB: req.SizeGB, Type: v.Type}
		if r := checkVolumeSize(&spec, "size_gb"); r != nil {
			return *r
		}
		if req.SizeGB < v.SizeGB {
			return invalid("size_gb", "Volumes can grow but not shrink: %d GB is less than %d GB.", req.SizeGB, v.SizeGB)
		}
		v.SizeGB = req.SizeGB
	case set["type"]:
		if req.Type != v.Type {
			return invalid("type", "The type of a volume cannot be changed.")
		}
	case set["server_uuids"]:
		ids := []string{}
		if req.ServerUUIDs != nil {
			ids = *req.ServerUUIDs
		}
		if v.Root {
			return invalid("server_uuids", "A root volume stays with its server.")
		}
		if r := e.checkAttach(ids, v.Zone); r != nil {
			return *r
		}
		v.Servers = append([]string{}, ids...)
	}
	v.setTags(req.Tags)
	return noContent
}

func (e *Emulator) deleteVolume(c *call) reply {
	v, r := find(c, e.world.Volumes)
	if r != nil {
		return *r
	}
	if v.Root && len(v.Servers) > 0 {
		return detail(http.StatusBadRequest, "A root volume is deleted with its server.")
	}
	for _, s := range e.world.Snapshots {
		if s.SourceVolume == v.UUID {
			return detail(http.StatusBadRequest, "The volume has snapshots; delete them first.")
		}
	}
	delete(e.world.Volumes, v.UUID)
	return noContent
}

func (e *Emulator) renderVolume(c *call, v *volume) map[string]any {
	return map[string]any{
		"href": c.href("volumes", v.UUID), "uuid": v.UUID, "name": v.Name, "size_gb": v.SizeGB, "type": v.Type,
		"zone": map[string]string{"slug": v.Zone}, "server_uuids": v.Servers, "created_at": v.CreatedAt, "tags": v.Tags,
	}
}
