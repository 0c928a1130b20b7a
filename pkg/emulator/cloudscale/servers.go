package cloudscale

import (
	"net/http"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

const maxServersPerGroup = 4

type serverRequest struct {
	Name              string             `json:"name"`
	Flavor            string             `json:"flavor"`
	Image             string             `json:"image"`
	Zone              string             `json:"zone"`
	VolumeSizeGB      int                `json:"volume_size_gb"`
	Volumes           *[]volumeSpec      `json:"volumes"`
	BulkVolumeSizeGB  int                `json:"bulk_volume_size_gb"`
	Interfaces        *[]ifaceRequest    `json:"interfaces"`
	SSHKeys           []string           `json:"ssh_keys"`
	Password          string             `json:"password"`
	UsePublicNetwork  *bool              `json:"use_public_network"`
	UsePrivateNetwork *bool              `json:"use_private_network"`
	UseIPV6           *bool              `json:"use_ipv6"`
	ServerGroups      []string           `json:"server_groups"`
	UserData          string             `json:"user_data"`
	Tags              *map[string]string `json:"tags"`
}

type volumeSpec struct {
	SizeGB int    `json:"size_gb"`
	Type   string `json:"type"`
}

func (e *Emulator) createServer(c *call) reply {
	var req serverRequest
	if r := c.decode(&req); r != nil {
		return *r
	}
	w := e.world
	if strings.TrimSpace(req.Name) == "" {
		return invalid("name", "This field is required.")
	}
	if req.Zone == "" {
		req.Zone = defaultZone
	}
	if !zoneExists(req.Zone) {
		return invalid("zone", "Zone %q does not exist; valid zones are rma1 and lpg1.", req.Zone)
	}
	if req.Flavor == "" {
		return invalid("flavor", "This field is required.")
	}
	if r := checkFlavor(req.Flavor, req.Zone); r != nil {
		return *r
	}
	if img := w.CustomImages[req.Image]; img != nil {
		req.Image = "custom:" + img.Slug
	}
	minGB, r := e.checkImage(req.Image, req.Zone)
	if r != nil {
		return *r
	}
	if req.VolumeSizeGB == 0 {
		req.VolumeSizeGB = max(10, minGB)
	}
	if req.VolumeSizeGB < minGB {
		return invalid("volume_size_gb", "The image %s needs a root volume of at least %d GB.", req.Image, minGB)
	}
	extra := []volumeSpec{}
	if req.Volumes != nil {
		extra = append(extra, *req.Volumes...)
	}
	if req.BulkVolumeSizeGB > 0 {
		extra = append(extra, volumeSpec{SizeGB: req.BulkVolumeSizeGB, Type: "bulk"})
	}
	for i := range extra {
		if r := checkVolumeSize(&extra[i], "volumes"); r != nil {
			return *r
		}
	}
	for _, id := range req.ServerGroups {
		g := w.ServerGroups[id]
		if g == nil {
			return invalid("server_groups", "Server group %q does not exist.", id)
		}
		if g.Zone != req.Zone {
			return invalid("server_groups", "Server group %q is in zone %s, not %s.", id, g.Zone, req.Zone)
		}
		if n := len(w.groupMembers(id)); n >= maxServersPerGroup {
			return invalid("server_groups", "Server group %q already has %d servers; an anti-affinity group holds at most %d.", id, n, maxServersPerGroup)
		}
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	if r := validSSHKeys(req.SSHKeys); r != nil {
		return *r
	}
	if req.UsePrivateNetwork != nil && *req.UsePrivateNetwork {
		return invalid("use_private_network", "Deprecated; attach private networks with \"interfaces\".")
	}
	if req.Interfaces == nil {
		reqs := []ifaceRequest{}
		if req.UsePublicNetwork == nil || *req.UsePublicNetwork {
			reqs = append(reqs, ifaceRequest{Network: "public"})
		}
		req.Interfaces = &reqs
	}
	useIPv6 := req.UseIPV6 == nil || *req.UseIPV6
	ifaces, r := w.planInterfaces(*req.Interfaces, req.Zone, "", useIPv6)
	if r != nil {
		return *r
	}

	// Everything is valid: commit.
	s := &server{
		meta:         e.newMeta(tagsOrEmpty(req.Tags)),
		Name:         req.Name,
		Zone:         req.Zone,
		Flavor:       req.Flavor,
		Image:        req.Image,
		Status:       "running",
		Interfaces:   ifaces,
		SSHKeys:      req.SSHKeys,
		ServerGroups: req.ServerGroups,
		UserData:     req.UserData,
	}
	s.HostKeys, s.Fingerprints = hostKeys(s.UUID)
	if s.ServerGroups == nil {
		s.ServerGroups = []string{}
	}
	e.transition(s, "running", e.cfg.BootTime, c.now)
	w.Servers[s.UUID] = s
	root := &volume{meta: e.newMeta(nil), Name: s.Name + "-root", SizeGB: req.VolumeSizeGB, Type: "ssd", Zone: s.Zone, Servers: []string{s.UUID}, Root: true}
	w.Volumes[root.UUID] = root
	for i, v := range extra {
		vol := &volume{meta: e.newMeta(nil), Name: s.Name + "-volume-" + itoa(i+1), SizeGB: v.SizeGB, Type: v.Type, Zone: s.Zone, Servers: []string{s.UUID}}
		w.Volumes[vol.UUID] = vol
	}
	w.commitPublicAddresses(s)
	return created(e.renderServer(c, s))
}

// transition starts a status change of s to the given status, taking d.
func (e *Emulator) transition(s *server, to string, d time.Duration, now time.Time) {
	if d <= 0 {
		s.Status, s.Pending = to, nil
		return
	}
	s.Status, s.Pending = "changing", &pending{To: to, At: now.Add(d)}
}

func checkFlavor(slug, zone string) *reply {
	f := findFlavor(slug)
	if f == nil {
		r := invalid("flavor", "Flavor %q does not exist.", slug)
		return &r
	}
	for _, z := range f.Zones {
		if z == zone {
			return nil
		}
	}
	r := invalid("flavor", "Flavor %q is not available in zone %s.", slug, zone)
	return &r
}

// checkImage resolves a public image slug or "custom:<slug>" and returns the
// smallest root volume it needs.
func (e *Emulator) checkImage(slug, zone string) (int, *reply) {
	if slug == "" {
		r := invalid("image", "This field is required.")
		return 0, &r
	}
	if custom, isCustom := strings.CutPrefix(slug, "custom:"); isCustom {
		img := e.world.customImageBySlug(custom)
		if img == nil {
			r := invalid("image", "Custom image %q does not exist.", custom)
			return 0, &r
		}
		if !contains(img.Zones, zone) {
			r := invalid("image", "Custom image %q is not available in zone %s.", custom, zone)
			return 0, &r
		}
		return max(10, img.SizeGB), nil
	}
	img := findImage(slug)
	if img == nil {
		r := invalid("image", "Image %q does not exist; custom images are given as \"custom:<slug>\".", slug)
		return 0, &r
	}
	return img.MinVolumeGB, nil
}

func (e *Emulator) listServers(c *call) reply {
	return list(c, e.world.Servers, func(s *server) string { return s.Name }, e.renderServer)
}

type serverUpdate struct {
	Name       string             `json:"name"`
	Flavor     string             `json:"flavor"`
	Interfaces *[]ifaceRequest    `json:"interfaces"`
	Tags       *map[string]string `json:"tags"`
}

func (e *Emulator) updateServer(c *call) reply {
	w := e.world
	s, r := find(c, w.Servers)
	if r != nil {
		return *r
	}
	var req serverUpdate
	set, r := c.patch(&req, true)
	if r != nil {
		return *r
	}
	if r := validTags(req.Tags); r != nil {
		return *r
	}
	switch {
	case set["name"]:
		if strings.TrimSpace(req.Name) == "" {
			return invalid("name", "This field may not be blank.")
		}
		s.Name = req.Name
	case set["flavor"]:
		if r := checkFlavor(req.Flavor, s.Zone); r != nil {
			return *r
		}
		if s.Status != "stopped" {
			return invalid("flavor", "The server must be stopped to change its flavor; it is %s.", s.Status)
		}
		s.Flavor = req.Flavor
	case set["interfaces"]:
		if req.Interfaces == nil {
			return invalid("interfaces", "This field may not be null.")
		}
		ifaces, r := w.planInterfaces(*req.Interfaces, s.Zone, s.UUID, s.hasIPv6())
		if r != nil {
			return *r
		}
		s.Interfaces = ifaces
		w.commitPublicAddresses(s)
	case set["status"]:
		return invalid("status", "Change the status with the start, stop and reboot actions.")
	}
	s.setTags(req.Tags)
	return noContent
}

func (e *Emulator) deleteServer(c *call) reply {
	w := e.world
	s, r := find(c, w.Servers)
	if r != nil {
		return *r
	}
	if s.deleting() {
		// Already on its way: nothing more to do.
		return noContent
	}
	// The root volume goes with the server; other volumes are detached and
	// floating IPs unassigned, as on the real cloud.
	for id, v := range w.Volumes {
		if !contains(v.Servers, s.UUID) {
			continue
		}
		if v.Root {
			delete(w.Volumes, id)
			continue
		}
		v.Servers = remove(v.Servers, s.UUID)
	}
	for _, f := range w.FloatingIPs {
		if f.Server == s.UUID {
			f.Server = ""
		}
	}
	if e.cfg.DeleteTime <= 0 {
		delete(w.Servers, s.UUID)
		return noContent
	}
	// Shown a while longer, changing, with nothing attached (settle takes
	// it away).
	s.Interfaces = []iface{}
	s.Status, s.Pending = "changing", &pending{To: "", At: c.now.Add(e.cfg.DeleteTime)}
	return noContent
}

// deleting reports a server whose DELETE was answered, still shown until
// it is gone.
func (s *server) deleting() bool { return s.Pending != nil && s.Pending.To == "" }

func (e *Emulator) serverAction(action string) handler {
	return func(c *call) reply {
		s, r := find(c, e.world.Servers)
		if r != nil {
			return *r
		}
		if s.Status == "changing" {
			return detail(http.StatusBadRequest, "The server is changing its status; try again when it is done.")
		}
		switch {
		case action == "start" && s.Status == "stopped":
			e.transition(s, "running", e.cfg.BootTime, c.now)
		case action == "stop" && s.Status == "running":
			e.transition(s, "stopped", e.cfg.ActionTime, c.now)
		case action == "reboot" && s.Status == "running":
			e.transition(s, "running", e.cfg.ActionTime, c.now)
		case action == "reboot":
			return detail(http.StatusBadRequest, "Only a running server can be rebooted.")
		}
		return noContent
	}
}

func (s *server) hasIPv6() bool {
	for _, i := range s.Interfaces {
		for _, a := range i.Addresses {
			if a.Version == 6 {
				return true
			}
		}
	}
	return len(s.Interfaces) == 0
}

// groupMembers lists the servers in a server group, in creation order.
func (w *world) groupMembers(groupID string) []*server {
	out := []*server{}
	for _, s := range sorted(w.Servers) {
		if contains(s.ServerGroups, groupID) {
			out = append(out, s)
		}
	}
	return out
}

// serverVolumes lists the volumes attached to a server, root volume first.
func (w *world) serverVolumes(serverID string) []*volume {
	out := []*volume{}
	for _, v := range sorted(w.Volumes) {
		if contains(v.Servers, serverID) {
			if v.Root {
				out = append([]*volume{v}, out...)
			} else {
				out = append(out, v)
			}
		}
	}
	return out
}

func (e *Emulator) renderServer(c *call, s *server) map[string]any {
	w := e.world
	f := findFlavor(s.Flavor)
	volumes := []any{}
	for _, v := range w.serverVolumes(s.UUID) {
		volumes = append(volumes, map[string]any{"type": v.Type, "device_path": "", "size_gb": v.SizeGB, "uuid": v.UUID})
	}
	groups := []any{}
	for _, id := range s.ServerGroups {
		if g := w.ServerGroups[id]; g != nil {
			groups = append(groups, map[string]any{"href": c.href("server-groups", id), "uuid": id, "name": g.Name})
		}
	}
	antiAffinity := []any{}
	return map[string]any{
		"href":               c.href("servers", s.UUID),
		"uuid":               s.UUID,
		"name":               s.Name,
		"status":             s.Status,
		"zone":               map[string]string{"slug": s.Zone},
		"flavor":             renderFlavor(f, false),
		"image":              e.renderServerImage(s.Image),
		"volumes":            volumes,
		"interfaces":         w.renderInterfaces(c, s.Interfaces, s.Name),
		"ssh_fingerprints":   s.Fingerprints,
		"ssh_host_keys":      s.HostKeys,
		"anti_affinity_with": antiAffinity,
		"server_groups":      groups,
		"created_at":         s.CreatedAt,
		"tags":               s.Tags,
	}
}

func (e *Emulator) renderServerImage(slug string) map[string]string {
	if custom, isCustom := strings.CutPrefix(slug, "custom:"); isCustom {
		name := custom
		if img := e.world.customImageBySlug(custom); img != nil {
			name = img.Name
		}
		return map[string]string{"slug": slug, "name": name, "operating_system": "", "default_username": ""}
	}
	img := findImage(slug)
	return map[string]string{"slug": img.Slug, "name": img.Name, "operating_system": img.OperatingSystem, "default_username": img.DefaultUsername}
}

// validSSHKeys refuses what is not an OpenSSH public key, as the API does:
// a server is never made with a key its sshd would not take.
func validSSHKeys(keys []string) *reply {
	for i, k := range keys {
		key, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(k))
		if err != nil || key == nil || len(options) > 0 || len(rest) > 0 {
			r := invalid("ssh_keys", "SSH key %d is not a valid OpenSSH public key.", i+1)
			return &r
		}
	}
	return nil
}
