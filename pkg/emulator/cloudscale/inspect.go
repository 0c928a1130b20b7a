package cloudscale

// ServerInfo is what in-process observers (tests, benchmarks, the demo's
// boot simulation) see of a server, without an API call to count.
type ServerInfo struct {
	UUID   string
	Name   string
	Status string
	Zone   string
	Flavor string
	Tags   map[string]string
	// What the flavor and the root volume give the server.
	VCPUs, MemoryGB, GPUs, RootVolumeGB int
	// PrivateIPs and PublicIPs of its interfaces.
	PrivateIPs, PublicIPs []string
	// UserData as the client sent it.
	UserData string
	// Image is what it booted: a public image's slug or custom:<slug>.
	Image string
}

// Servers returns the servers of the account, oldest first.
func (e *Emulator) Servers() []ServerInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.world.settle(e.now())
	out := []ServerInfo{}
	for _, s := range sorted(e.world.Servers) {
		tags := make(map[string]string, len(s.Tags))
		for k, v := range s.Tags {
			tags[k] = v
		}
		info := ServerInfo{UUID: s.UUID, Name: s.Name, Status: s.Status, Zone: s.Zone, Flavor: s.Flavor, Tags: tags, UserData: s.UserData, Image: s.Image}
		if f := findFlavor(s.Flavor); f != nil {
			info.VCPUs, info.MemoryGB = f.VCPUCount, f.MemoryGB
			if f.GPU != nil {
				info.GPUs = f.GPU.Count
			}
		}
		if vols := e.world.serverVolumes(s.UUID); len(vols) > 0 {
			info.RootVolumeGB = vols[0].SizeGB
		}
		for _, i := range s.Interfaces {
			for _, a := range i.Addresses {
				if i.Type == "public" {
					info.PublicIPs = append(info.PublicIPs, a.Address)
				} else {
					info.PrivateIPs = append(info.PrivateIPs, a.Address)
				}
			}
		}
		out = append(out, info)
	}
	return out
}

// CustomImageSlugs are the slugs of the account's custom images (imported
// ones, not those being imported), oldest first.
func (e *Emulator) CustomImageSlugs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.world.settle(e.now())
	out := []string{}
	for _, img := range sorted(e.world.CustomImages) {
		out = append(out, img.Slug)
	}
	return out
}
