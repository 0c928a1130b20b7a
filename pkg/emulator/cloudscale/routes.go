package cloudscale

import (
	"fmt"
	"net/http"
)

func (e *Emulator) routes(mux *http.ServeMux) {
	h := func(pattern string, fn handler) { e.handle(mux, pattern, fn) }

	h("GET /v1/regions", e.listRegions)
	h("GET /v1/flavors", e.listFlavors)

	h("GET /v1/servers", e.listServers)
	h("POST /v1/servers", e.createServer)
	h("GET /v1/servers/{uuid}", e.getServer)
	h("PATCH /v1/servers/{uuid}", e.updateServer)
	h("DELETE /v1/servers/{uuid}", e.deleteServer)
	h("POST /v1/servers/{uuid}/start", e.serverAction("start"))
	h("POST /v1/servers/{uuid}/stop", e.serverAction("stop"))
	h("POST /v1/servers/{uuid}/reboot", e.serverAction("reboot"))

	h("GET /v1/server-groups", e.listServerGroups)
	h("POST /v1/server-groups", e.createServerGroup)
	h("GET /v1/server-groups/{uuid}", e.getServerGroup)
	h("PATCH /v1/server-groups/{uuid}", e.updateServerGroup)
	h("DELETE /v1/server-groups/{uuid}", e.deleteServerGroup)

	h("GET /v1/volumes", e.listVolumes)
	h("POST /v1/volumes", e.createVolume)
	h("GET /v1/volumes/{uuid}", e.getVolume)
	h("PATCH /v1/volumes/{uuid}", e.updateVolume)
	h("DELETE /v1/volumes/{uuid}", e.deleteVolume)

	h("GET /v1/volume-snapshots", e.listSnapshots)
	h("POST /v1/volume-snapshots", e.createSnapshot)
	h("GET /v1/volume-snapshots/{uuid}", e.getSnapshot)
	h("PATCH /v1/volume-snapshots/{uuid}", e.updateSnapshot)
	h("DELETE /v1/volume-snapshots/{uuid}", e.deleteSnapshot)

	h("GET /v1/networks", e.listNetworks)
	h("POST /v1/networks", e.createNetwork)
	h("GET /v1/networks/{uuid}", e.getNetwork)
	h("PATCH /v1/networks/{uuid}", e.updateNetwork)
	h("DELETE /v1/networks/{uuid}", e.deleteNetwork)

	h("GET /v1/subnets", e.listSubnets)
	h("POST /v1/subnets", e.createSubnet)
	h("GET /v1/subnets/{uuid}", e.getSubnet)
	h("PATCH /v1/subnets/{uuid}", e.updateSubnet)
	h("DELETE /v1/subnets/{uuid}", e.deleteSubnet)

	h("GET /v1/floating-ips", e.listFloatingIPs)
	h("POST /v1/floating-ips", e.createFloatingIP)
	h("GET /v1/floating-ips/{ip}", e.getFloatingIP)
	h("PATCH /v1/floating-ips/{ip}", e.updateFloatingIP)
	h("DELETE /v1/floating-ips/{ip}", e.deleteFloatingIP)

	h("GET /v1/custom-images", e.listCustomImages)
	h("GET /v1/custom-images/{uuid}", e.getCustomImage)
	h("PATCH /v1/custom-images/{uuid}", e.updateCustomImage)
	h("DELETE /v1/custom-images/{uuid}", e.deleteCustomImage)
	h("GET /v1/custom-images/import", e.listImports)
	h("POST /v1/custom-images/import", e.createImport)
	h("GET /v1/custom-images/import/{uuid}", e.getImport)

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
