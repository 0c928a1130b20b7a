package userdata

// The hostname of a new server. A Machine's name is its server's name and
// must be its Node's name: cluster-machine-approver approves a Node's
// client certificate only for a Machine whose InternalDNS address is the
// Node's name, and the cloudscale.ch cloud-controller-manager finds a Node's
// server by the Node's name. The Node's name is the hostname RHCOS boots
// with, and what gives it that hostname differs per cloud
// (docs/cloudscale.md, docs/exoscale.md):
//
//   - on Exoscale (ignition.platform.id=exoscale) afterburn-hostname.service
//     writes /etc/hostname in the initramfs from the metadata's
//     local-hostname, the instance's name, before Ignition's files stage
//     (coreos/afterburn, dracut/30afterburn/afterburn-hostname.service);
//   - on cloudscale.ch, whose RHCOS image is the openstack one, nothing does:
//     afterburn sets no hostname on openstack, and the
//     machine-config-operator renders its OpenStack afterburn-hostname unit
//     only on platform OpenStack (templates/common/openstack), never on
//     None or External. What NetworkManager gets from DHCP or reverse DNS,
//     if anything, is the hostname.
//
// So the provider makes it certain: an Ignition 3 config that sets no
// /etc/hostname gets one with the Machine's name, as the Terraform
// modules, appuio's provider template and adopt's template write it.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// HostnamePath is the file systemd reads the static hostname from.
const HostnamePath = "/etc/hostname"

// HostnameAction says what WithHostname did.
type HostnameAction int

const (
	// HostnameAdded: the Ignition config set no hostname and got the
	// Machine's.
	HostnameAdded HostnameAction = iota + 1
	// HostnameKept: the config sets /etc/hostname itself: left as it is.
	HostnameKept
	// HostnameNotIgnition: not an Ignition 3 config (cloud-config, a
	// script, a template's text, Ignition 2): left as it is.
	HostnameNotIgnition
)

// HostnameResult is what WithHostname found and did.
type HostnameResult struct {
	Action HostnameAction
	// Value is the hostname a kept config sets, when it says so in the
	// user data (a data URL, possibly in a config it merges); "" when it
	// comes from elsewhere (a source fetched at boot).
	Value string
	// Wrapped: the config replaces itself at boot
	// (ignition.config.replace), which would drop a file added beside it;
	// it became the one config merged by a new one of the same version that
	// writes the hostname, the replacement's own files winning.
	Wrapped bool
}

// maxConfigDepth bounds how deep WithHostname follows configs merged from
// data URLs.
const maxConfigDepth = 4

// WithHostname returns user data whose Ignition config sets /etc/hostname:
// the config as it is when it sets it itself (in its storage.files or
// storage.links, or in a config it merges or is replaced by from a data
// URL), else with a file of name added (mode 0644, overwrite, as the
// Exoscale image's initramfs wrote one before Ignition runs). Configs
// merged from a URL fetched at boot (the machine config server's) win over
// the added file, as Ignition merges a fetched config over the one that
// fetched it, so a hostname they set is never overridden. Anything but an
// Ignition 3.x config (ignition.version 3.y.z) is returned unchanged.
func WithHostname(userData []byte, name string) ([]byte, HostnameResult, error) {
	cfg, version, ok := ignition3(userData)
	if !ok {
		return userData, HostnameResult{Action: HostnameNotIgnition}, nil
	}
	if set, value := setsHostname(cfg, 0); set {
		return userData, HostnameResult{Action: HostnameKept, Value: value}, nil
	}
	file := map[string]any{
		"path": HostnamePath, "mode": 0o644, "overwrite": true,
		"contents": map[string]any{"source": "data:," + escapeData(name)},
	}
	if replace, _ := configSection(cfg)["replace"].(map[string]any); replace != nil && replace["source"] != nil {
		wrapped := map[string]any{
			"ignition": map[string]any{"version": version, "config": map[string]any{"merge": []any{
				map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString(userData)},
			}}},
			"storage": map[string]any{"files": []any{file}},
		}
		out, err := encode(wrapped)
		return out, HostnameResult{Action: HostnameAdded, Wrapped: true}, err
	}
	storage, _ := cfg["storage"].(map[string]any)
	if storage == nil {
		storage = map[string]any{}
		cfg["storage"] = storage
	}
	files, _ := storage["files"].([]any)
	storage["files"] = append(files, file)
	out, err := encode(cfg)
	return out, HostnameResult{Action: HostnameAdded}, err
}

// ignition3 decodes user data that is one Ignition 3.x config.
func ignition3(userData []byte) (map[string]any, string, bool) {
	cfg, ok := decodeConfig(userData)
	if !ok {
		return nil, "", false
	}
	ign, _ := cfg["ignition"].(map[string]any)
	version, _ := ign["version"].(string)
	if major, _, _ := strings.Cut(version, "."); major != "3" {
		return nil, "", false
	}
	return cfg, version, true
}

// decodeConfig decodes one JSON object, numbers as they are written.
func decodeConfig(b []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil || cfg == nil || dec.More() {
		return nil, false
	}
	return cfg, true
}

func configSection(cfg map[string]any) map[string]any {
	ign, _ := cfg["ignition"].(map[string]any)
	c, _ := ign["config"].(map[string]any)
	return c
}

// setsHostname says whether a config sets /etc/hostname, as Ignition
// renders it: a replacement replaces it; merged configs, in order, win
// over it and each other. Only configs in data URLs are read; the value is
// the last one known.
func setsHostname(cfg map[string]any, depth int) (bool, string) {
	section := configSection(cfg)
	if replace, _ := section["replace"].(map[string]any); replace != nil && replace["source"] != nil {
		if child, ok := dataConfig(replace, depth); ok {
			return setsHostname(child, depth+1)
		}
		return false, ""
	}
	set, value := ownHostname(cfg)
	merge, _ := section["merge"].([]any)
	for _, m := range merge {
		ref, _ := m.(map[string]any)
		if child, ok := dataConfig(ref, depth); ok {
			if s, v := setsHostname(child, depth+1); s {
				set, value = true, v
			}
		}
	}
	return set, value
}

// dataConfig decodes a config reference's data URL source.
func dataConfig(ref map[string]any, depth int) (map[string]any, bool) {
	src, _ := ref["source"].(string)
	if depth >= maxConfigDepth {
		return nil, false
	}
	comp, _ := ref["compression"].(string)
	b, ok, err := DecodeDataURL(src, comp)
	if !ok || err != nil {
		return nil, false
	}
	return decodeConfig(b)
}

// ownHostname is the /etc/hostname of a config's own storage: a file (its
// value when a data URL says it) or a link.
func ownHostname(cfg map[string]any) (bool, string) {
	storage, _ := cfg["storage"].(map[string]any)
	set, value := false, ""
	files, _ := storage["files"].([]any)
	for _, f := range files {
		file, _ := f.(map[string]any)
		if !isHostnamePath(file["path"]) {
			continue
		}
		set, value = true, ""
		contents, _ := file["contents"].(map[string]any)
		src, _ := contents["source"].(string)
		comp, _ := contents["compression"].(string)
		if b, ok, err := DecodeDataURL(src, comp); ok && err == nil {
			value = HostnameFromFile(b)
		}
	}
	links, _ := storage["links"].([]any)
	for _, l := range links {
		link, _ := l.(map[string]any)
		if isHostnamePath(link["path"]) {
			set, value = true, ""
		}
	}
	return set, value
}

func isHostnamePath(p any) bool {
	s, _ := p.(string)
	return s != "" && path.Clean(s) == HostnamePath
}

// HostnameFromFile is the hostname an /etc/hostname holds, as systemd reads
// it: the first line that is neither empty nor a comment, without white
// space.
func HostnameFromFile(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return line
		}
	}
	return ""
}

// escapeData percent-encodes what a data URL's data may not hold as it is.
// A Machine's name (a DNS label) needs none of it.
func escapeData(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// encode writes a config compact, without escaping HTML characters
// (Ignition's own output does not).
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
