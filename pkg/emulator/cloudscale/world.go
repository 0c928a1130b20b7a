package cloudscale

import (
	"sort"
	"time"
)

// world is everything the emulated account holds. It is what the state file
// stores, so every field is exported to encoding/json through its tag.
type world struct {
	Seq          int64                         `json:"seq"`
	Servers      map[string]*server            `json:"servers"`
	ServerGroups map[string]*serverGroup       `json:"server_groups"`
	Volumes      map[string]*volume            `json:"volumes"`
	Snapshots    map[string]*snapshot          `json:"snapshots"`
	Networks     map[string]*network           `json:"networks"`
	Subnets      map[string]*subnet            `json:"subnets"`
	FloatingIPs  map[string]*floatingIP        `json:"floating_ips"`
	CustomImages map[string]*customImage       `json:"custom_images"`
	Imports      map[string]*customImageImport `json:"custom_image_imports"`
	// Importing are the custom images of imports under way: the API lists
	// an image only once its import succeeded.
	Importing map[string]*customImage `json:"importing_custom_images"`
	// NextPublic numbers public addresses handed out, never reused.
	NextPublic int `json:"next_public"`
}

func newWorld() *world {
	return &world{
		Servers:      map[string]*server{},
		ServerGroups: map[string]*serverGroup{},
		Volumes:      map[string]*volume{},
		Snapshots:    map[string]*snapshot{},
		Networks:     map[string]*network{},
		Subnets:      map[string]*subnet{},
		FloatingIPs:  map[string]*floatingIP{},
		CustomImages: map[string]*customImage{},
		Imports:      map[string]*customImageImport{},
		Importing:    map[string]*customImage{},
	}
}

// meta is what every resource has.
type meta struct {
	UUID      string            `json:"uuid"`
	Seq       int64             `json:"seq"`
	Tags      map[string]string `json:"tags"`
	CreatedAt time.Time         `json:"created_at"`
}

func (m *meta) base() *meta { return m }

type resource interface{ base() *meta }

// pending is a status change under way: the resource shows its interim
// status until At, then To.
type pending struct {
	To string    `json:"to"`
	At time.Time `json:"at"`
}

type server struct {
	meta
	Name         string   `json:"name"`
	Zone         string   `json:"zone"`
	Flavor       string   `json:"flavor"`
	Image        string   `json:"image"`
	Status       string   `json:"status"`
	Pending      *pending `json:"pending,omitempty"`
	Volumes      []string `json:"volumes"`
	Interfaces   []iface  `json:"interfaces"`
	SSHKeys      []string `json:"ssh_keys"`
	ServerGroups []string `json:"server_groups"`
	UserData     string   `json:"user_data,omitempty"`
	HostKeys     []string `json:"host_keys"`
	Fingerprints []string `json:"fingerprints"`
}

type iface struct {
	Type      string    `json:"type"`
	Network   string    `json:"network,omitempty"`
	Addresses []address `json:"addresses"`
}

type address struct {
	Version      int    `json:"version"`
	Address      string `json:"address"`
	PrefixLength int    `json:"prefix_length"`
	Gateway      string `json:"gateway"`
	Subnet       string `json:"subnet,omitempty"`
}

type serverGroup struct {
	meta
	Name string `json:"name"`
	Type string `json:"type"`
	Zone string `json:"zone"`
}

type volume struct {
	meta
	Name    string   `json:"name"`
	SizeGB  int      `json:"size_gb"`
	Type    string   `json:"type"`
	Zone    string   `json:"zone"`
	Servers []string `json:"servers"`
	Root    bool     `json:"root,omitempty"`
}

type snapshot struct {
	meta
	Name         string   `json:"name"`
	SizeGB       int      `json:"size_gb"`
	Zone         string   `json:"zone"`
	SourceVolume string   `json:"source_volume"`
	Status       string   `json:"status"`
	Pending      *pending `json:"pending,omitempty"`
}

type network struct {
	meta
	Name string `json:"name"`
	Zone string `json:"zone"`
	MTU  int    `json:"mtu"`
}

type subnet struct {
	meta
	Network    string   `json:"network"`
	CIDR       string   `json:"cidr"`
	Gateway    string   `json:"gateway"`
	DNSServers []string `json:"dns_servers"`
}

type floatingIP struct {
	meta
	Network      string `json:"network"`
	IPVersion    int    `json:"ip_version"`
	Region       string `json:"region,omitempty"`
	Type         string `json:"type"`
	Server       string `json:"server,omitempty"`
	ReversePtr   string `json:"reverse_ptr,omitempty"`
	LoadBalancer string `json:"load_balancer,omitempty"`
}

type customImage struct {
	meta
	Name             string            `json:"name"`
	Slug             string            `json:"slug"`
	SizeGB           int               `json:"size_gb"`
	UserDataHandling string            `json:"user_data_handling"`
	FirmwareType     string            `json:"firmware_type"`
	Zones            []string          `json:"zones"`
	Checksums        map[string]string `json:"checksums"`
}

type customImageImport struct {
	meta
	URL          string   `json:"url"`
	SourceFormat string   `json:"source_format"`
	CustomImage  string   `json:"custom_image"`
	Status       string   `json:"status"`
	ErrorMessage string   `json:"error_message"`
	Pending      *pending `json:"pending,omitempty"`
	// Fetched is set when the download ended; FetchError says why it
	// failed ("" when it did not).
	Fetched    bool   `json:"fetched,omitempty"`
	FetchError string `json:"fetch_error,omitempty"`
}

// sorted returns the values of m in creation order, as the real API lists them.
func sorted[T resource](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].base().Seq < out[j].base().Seq })
	return out
}

// settle completes every status change whose time has come.
func (w *world) settle(now time.Time) {
	for id, s := range w.Servers {
		if s.Pending != nil && !now.Before(s.Pending.At) {
			if s.deleting() {
				delete(w.Servers, id)
				continue
			}
			s.Status, s.Pending = s.Pending.To, nil
		}
	}
	for id, s := range w.Snapshots {
		if s.Pending != nil && !now.Before(s.Pending.At) {
			if s.Pending.To == "" {
				delete(w.Snapshots, id)
				continue
			}
			s.Status, s.Pending = s.Pending.To, nil
		}
	}
	for _, imp := range w.Imports {
		// An import ends when its download has and its processing time
		// has passed: the image appears, or the import fails and no image
		// is left.
		if imp.Pending == nil || now.Before(imp.Pending.At) || !imp.Fetched {
			continue
		}
		imp.Pending = nil
		img := w.Importing[imp.CustomImage]
		delete(w.Importing, imp.CustomImage)
		if imp.FetchError != "" || img == nil {
			imp.Status, imp.ErrorMessage = "failed", imp.FetchError
			if imp.ErrorMessage == "" {
				imp.ErrorMessage = "The custom image was deleted while it was imported."
			}
			continue
		}
		imp.Status = "success"
		w.CustomImages[img.UUID] = img
	}
}
