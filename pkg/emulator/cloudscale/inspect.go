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
		out = append(out, ServerInfo{UUID: s.UUID, Name: s.Name, Status: s.Status, Zone: s.Zone, Flavor: s.Flavor, Tags: tags})
	}
	return out
}
