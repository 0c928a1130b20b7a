package cloudscale

import (
	"fmt"
	"net/http"
)

func (e *Emulator) routes(mux *http.ServeMux) {
	h := func(pattern string, fn handler) { e.handle(mux, pattern, fn) }

	h("GET /v1/regions", e.listRegions)
	h("GET /v1/flavors", e.listFlavors)

	// The collections; nil handlers are routes the real API does not have.
	for _, r := range []struct {
		path, id                    string
		list, create, get, upd, del handler
	}{
		{"servers", "uuid", e.listServers, e.createServer, getter(e, func(w *world) map[string]*server { return w.Servers }, e.renderServer), e.updateServer, e.deleteServer},
		{"server-groups", "uuid", e.listServerGroups, e.createServerGroup, getter(e, func(w *world) map[string]*serverGroup { return w.ServerGroups }, e.renderServerGroup), e.updateServerGroup, e.deleteServerGroup},
		{"volumes", "uuid", e.listVolumes, e.createVolume, getter(e, func(w *world) map[string]*volume { return w.Volumes }, e.renderVolume), e.updateVolume, e.deleteVolume},
		{"volume-snapshots", "uuid", e.listSnapshots, e.createSnapshot, getter(e, func(w *world) map[string]*snapshot { return w.Snapshots }, e.renderSnapshot), e.updateSnapshot, e.deleteSnapshot},
		{"networks", "uuid", e.listNetworks, e.createNetwork, getter(e, func(w *world) map[string]*network { return w.Networks }, e.renderNetwork), e.updateNetwork, e.deleteNetwork},
		{"subnets", "uuid", e.listSubnets, e.createSubnet, getter(e, func(w *world) map[string]*subnet { return w.Subnets }, e.renderSubnet), e.updateSubnet, e.deleteSubnet},
		{"floating-ips", "ip", e.listFloatingIPs, e.createFloatingIP, getter(e, func(w *world) map[string]*floatingIP { return w.FloatingIPs }, e.renderFloatingIP), e.updateFloatingIP, e.deleteFloatingIP},
		{"custom-images", "uuid", e.listCustomImages, nil, getter(e, func(w *world) map[string]*customImage { return w.CustomImages }, e.renderCustomImage), e.updateCustomImage, e.deleteCustomImage},
		{"custom-images/import", "uuid", e.listImports, e.createImport, getter(e, func(w *world) map[string]*customImageImport { return w.Imports }, e.renderImport), nil, nil},
	} {
		item := "/v1/" + r.path + "/{" + r.id + "}"
		for pattern, fn := range map[string]handler{
			"GET /v1/" + r.path: r.list, "POST /v1/" + r.path: r.create,
			"GET " + item: r.get, "PATCH " + item: r.upd, "DELETE " + item: r.del,
		} {
			if fn != nil {
				h(pattern, fn)
			}
		}
	}
	for _, action := range []string{"start", "stop", "reboot"} {
		h("POST /v1/servers/{uuid}/"+action, e.serverAction(action))
	}

	// Not emulated beyond an empty account, so that clients which list
	// everything (the SDK's test suite does) see the real answer.
	for _, kind := range []string{"objects-users", "load-balancers", "load-balancers/pools", "load-balancers/listeners", "load-balancers/health-monitors"} {
		h("GET /v1/"+kind, func(*call) reply { return ok([]any{}) })
	}
	// Anything else gets the real API's JSON answer, not net/http's text.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := mux.Handler(probe); p != "/" && m != r.Method {
				writeReply(w, detail(http.StatusMethodNotAllowed, fmt.Sprintf("Method %q not allowed.", r.Method)))
				return
			}
		}
		writeReply(w, notFound())
	})
}

// getter answers GET of one resource of the collection that of picks out
// of the world at request time.
func getter[T resource, R any](e *Emulator, of func(*world) map[string]T, render func(*call, T) R) handler {
	return func(c *call) reply { return get(c, of(e.world), render) }
}

func (e *Emulator) listRegions(*call) reply {
	out := []any{}
	for _, r := range regions {
		zones := []map[string]string{}
		for _, z := range r.Zones {
			zones = append(zones, map[string]string{"slug": z})
		}
		out = append(out, map[string]any{"slug": r.Slug, "zones": zones})
	}
	return ok(out)
}

func (e *Emulator) listFlavors(*call) reply {
	out := []any{}
	for _, f := range flavors {
		out = append(out, renderFlavor(&f, true))
	}
	return ok(out)
}

func renderFlavor(f *flavor, withZones bool) map[string]any {
	m := map[string]any{"slug": f.Slug, "name": f.Name, "vcpu_count": f.VCPUCount, "memory_gb": f.MemoryGB, "gpu": f.GPU}
	if withZones {
		m["zones"] = zoneStubs(f.Zones)
	}
	return m
}

func zoneStubs(zones []string) []map[string]string {
	out := []map[string]string{}
	for _, z := range zones {
		out = append(out, map[string]string{"slug": z})
	}
	return out
}
