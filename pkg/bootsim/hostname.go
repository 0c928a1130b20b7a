package bootsim

import (
	"bytes"
	"encoding/json"
	"net/url"
	"path"
	"strings"

	"github.com/appuio/machine-api-provider/pkg/userdata"
)

// Where a Node's name came from (the log says).
const (
	fromUserData = "user data"
	fromCloud    = "cloud"
)

// DefaultHostname is the hostname of a server whose user data sets none and
// whose cloud gives none: what RHCOS keeps when neither /etc/hostname, nor
// the platform's metadata, nor DHCP nor reverse DNS name it.
const DefaultHostname = "localhost"

// maxIgnitionDepth bounds how deep the simulation follows merged configs.
const maxIgnitionDepth = 4

// nodeName is the name a server's kubelet registers its Node with: the
// hostname RHCOS boots with, lowercased as the kubelet does. It is what
// the user data's Ignition writes to /etc/hostname, read as Ignition
// renders the config (ignitionHostname); else what the cloud gives
// (Server.CloudHostname), else DefaultHostname. It is never looked up
// from the Machine: what names a Node is its server's boot, so a Machine
// whose user data and cloud give it another name gets a Node of that
// other name, as on a real cluster. unread says that the user data sets
// the hostname from a source the simulation cannot fetch.
func nodeName(srv Server) (name, from string, unread bool) {
	set, value := ignitionHostname(srv.UserData, 0)
	if set && value != "" {
		return strings.ToLower(value), fromUserData, false
	}
	if srv.CloudHostname != "" {
		return strings.ToLower(srv.CloudHostname), fromCloud, set
	}
	return DefaultHostname, fromCloud, set
}

// ignitionHostname says whether user data is an Ignition config (spec 2.x
// or 3.x) that writes /etc/hostname, and the hostname it writes when the
// user data holds it (a data URL). It follows the config as Ignition
// renders it (coreos/ignition, internal/exec/config_fetcher.go): a
// replacement replaces the config; each merged (3.x) or appended (2.x)
// config, in order, wins over what came before. Configs fetched at boot
// are not read: the machine config server's (https, port 22623) writes no
// /etc/hostname, as the machine-config-operator renders none; any other is
// unknown, as is a file fetched at boot.
func ignitionHostname(raw []byte, depth int) (set bool, value string) {
	if depth > maxIgnitionDepth {
		return false, ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var cfg struct {
		Ignition struct {
			Version string `json:"version"`
			Config  struct {
				Merge   []ignitionResource `json:"merge"`
				Append  []ignitionResource `json:"append"`
				Replace *ignitionResource  `json:"replace"`
			} `json:"config"`
		} `json:"ignition"`
		Storage struct {
			Files []struct {
				Filesystem string           `json:"filesystem"`
				Path       string           `json:"path"`
				Contents   ignitionResource `json:"contents"`
			} `json:"files"`
			Links []struct {
				Filesystem string `json:"filesystem"`
				Path       string `json:"path"`
			} `json:"links"`
		} `json:"storage"`
	}
	if err := dec.Decode(&cfg); err != nil || dec.More() {
		return false, ""
	}
	v2 := strings.HasPrefix(cfg.Ignition.Version, "2.")
	if !v2 && !strings.HasPrefix(cfg.Ignition.Version, "3.") {
		return false, ""
	}
	if r := cfg.Ignition.Config.Replace; r != nil && r.Source != "" {
		b, read := r.fetch()
		if !read {
			return false, ""
		}
		return ignitionHostname(b, depth+1)
	}
	// /etc/hostname of the root filesystem: 3.x paths are absolute on it;
	// 2.x paths are on the filesystem named (root, the one RHCOS boots).
	onRoot := func(fs, p string) bool {
		return (!v2 || fs == "root") && p != "" && path.Clean(p) == userdata.HostnamePath
	}
	for _, f := range cfg.Storage.Files {
		if !onRoot(f.Filesystem, f.Path) {
			continue
		}
		set, value = true, ""
		if b, read := f.Contents.fetch(); read {
			value = userdata.HostnameFromFile(b)
		}
	}
	for _, l := range cfg.Storage.Links {
		if onRoot(l.Filesystem, l.Path) {
			set, value = true, ""
		}
	}
	children := cfg.Ignition.Config.Merge
	if v2 {
		children = cfg.Ignition.Config.Append
	}
	for _, c := range children {
		b, read := c.fetch()
		if !read {
			if !machineConfigServer(c.Source) {
				set, value = true, ""
			}
			continue
		}
		if s, v := ignitionHostname(b, depth+1); s {
			set, value = true, v
		}
	}
	return set, value
}

// ignitionResource is a config reference or a file's contents.
type ignitionResource struct {
	Source      string `json:"source"`
	Compression string `json:"compression"`
}

// fetch reads a resource the user data holds (a data URL); read is false
// for one fetched at boot.
func (r ignitionResource) fetch() (b []byte, read bool) {
	b, ok, err := userdata.DecodeDataURL(r.Source, r.Compression)
	return b, ok && err == nil
}

// machineConfigServer says whether a config source is the machine config
// server's (https://<host>:22623/config/<pool>), whose rendered config
// writes no /etc/hostname.
func machineConfigServer(source string) bool {
	u, err := url.Parse(source)
	return err == nil && u.Scheme == "https" && u.Port() == "22623" && strings.HasPrefix(u.Path, "/config/")
}
