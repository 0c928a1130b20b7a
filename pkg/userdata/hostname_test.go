package userdata_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/userdata"
)

// pointer is the installer's worker-user-data pointer Ignition at a spec
// version: it fetches the machine config server's config and sets no
// hostname.
func pointer(version string) string {
	return fmt.Sprintf(`{"ignition":{"config":{"merge":[{"source":"https://api-int.c1.example.com:22623/config/worker"}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,Q0EK"}]}},"version":%q}}`, version)
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// hostnameFiles are the /etc/hostname entries of a config's storage.files.
func hostnameFiles(cfg map[string]any) []map[string]any {
	storage, _ := cfg["storage"].(map[string]any)
	files, _ := storage["files"].([]any)
	var out []map[string]any
	for _, f := range files {
		if m, _ := f.(map[string]any); m["path"] == "/etc/hostname" {
			out = append(out, m)
		}
	}
	return out
}

var wantFile = map[string]any{"path": "/etc/hostname", "mode": float64(420), "overwrite": true, "contents": map[string]any{"source": "data:,worker-a"}}

// Every Ignition 3 spec version's pointer config without a hostname gets
// the Machine's name as /etc/hostname — mode 0644, overwrite (the Exoscale
// image's initramfs wrote one already) — and keeps everything else.
func TestWithHostnameAddsToEveryIgnition3Version(t *testing.T) {
	for _, v := range []string{"3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"} {
		t.Run(v, func(t *testing.T) {
			in := pointer(v)
			out, res, err := userdata.WithHostname([]byte(in), "worker-a")
			if err != nil {
				t.Fatal(err)
			}
			if res.Action != userdata.HostnameAdded || res.Wrapped {
				t.Fatalf("result %+v, want added in place", res)
			}
			got := decode(t, out)
			files := hostnameFiles(got)
			if len(files) != 1 || !reflect.DeepEqual(files[0], wantFile) {
				t.Errorf("/etc/hostname entries %v, want exactly %v", files, wantFile)
			}
			delete(got, "storage")
			if want := decode(t, []byte(in)); !reflect.DeepEqual(got, want) {
				t.Errorf("the rest changed:\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// A pointer as the installer writes it from 4.6 on carries an empty
// replace (no source): nothing replaces it, and the file goes beside the
// merge.
func TestWithHostnameEmptyReplaceIsNoReplace(t *testing.T) {
	in := `{"ignition":{"config":{"merge":[{"source":"https://api-int.c1:22623/config/worker","verification":{}}],"replace":{"verification":{}}},"version":"3.2.0"}}`
	out, res, err := userdata.WithHostname([]byte(in), "worker-a")
	if err != nil || res.Action != userdata.HostnameAdded || res.Wrapped {
		t.Fatalf("%+v, %v: want added in place", res, err)
	}
	if files := hostnameFiles(decode(t, out)); len(files) != 1 || !reflect.DeepEqual(files[0], wantFile) {
		t.Errorf("/etc/hostname entries %v", files)
	}
}

// Files the config writes stay, numbers as written, and the hostname joins
// them.
func TestWithHostnameKeepsOtherFiles(t *testing.T) {
	in := `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","mode":420,"contents":{"source":"data:,hi"}}]},"x":{"big":12345678901234567890}}`
	out, res, err := userdata.WithHostname([]byte(in), "worker-a")
	if err != nil || res.Action != userdata.HostnameAdded {
		t.Fatalf("%+v, %v", res, err)
	}
	if !strings.Contains(string(out), `"big":12345678901234567890`) || !strings.Contains(string(out), `{"contents":{"source":"data:,hi"},"mode":420,"path":"/etc/motd"}`) {
		t.Errorf("output %s lost or changed the config's own content", out)
	}
	if n := len(hostnameFiles(decode(t, out))); n != 1 {
		t.Errorf("%d /etc/hostname entries", n)
	}
}

// A hostname the user data sets is never overridden, wherever it sets it:
// its own files or links, a config it merges or is replaced by from a data
// URL; the value is reported where the user data says it.
func TestWithHostnameKeepsTheUserDataOwn(t *testing.T) {
	gz := func(s string) string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(s))
		_ = w.Close()
		return base64.StdEncoding.EncodeToString(b.Bytes())
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	child := `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,from-child"}}]}}`
	for _, c := range []struct {
		name, in, value string
	}{
		{"a data URL", `{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/hostname","mode":420,"contents":{"source":"data:,abc1"}}]}}`, "abc1"},
		{"the Machine's name", `{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,worker-a"}}]}}`, "worker-a"},
		{"percent-encoded, a newline", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,node%2D1%0A"}}]}}`, "node-1"},
		{"base64", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:text/plain;charset=utf-8;base64,` + b64("# a comment\nb64-name\n") + `"}}]}}`, "b64-name"},
		{"gzip", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"compression":"gzip","source":"data:;base64,` + gz("gz-name") + `"}}]}}`, "gz-name"},
		{"a path not clean", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc//hostname","contents":{"source":"data:,dirty"}}]}}`, "dirty"},
		{"fetched at boot", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"https://example.com/hostname"}}]}}`, ""},
		{"a link", `{"ignition":{"version":"3.4.0"},"storage":{"links":[{"path":"/etc/hostname","target":"/var/hostname"}]}}`, ""},
		{"a merged data config", `{"ignition":{"version":"3.4.0","config":{"merge":[{"source":"https://api-int.c1:22623/config/worker"},{"source":"data:;base64,` + b64(child) + `"}]}}}`, "from-child"},
		{"a replacement from a data URL", `{"ignition":{"version":"3.4.0","config":{"replace":{"source":"data:;base64,` + b64(child) + `"}}}}`, "from-child"},
		{"a merged config overriding", `{"ignition":{"version":"3.4.0","config":{"merge":[{"source":"data:;base64,` + b64(child) + `"}]}},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,own"}}]}}`, "from-child"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, res, err := userdata.WithHostname([]byte(c.in), "worker-a")
			if err != nil {
				t.Fatal(err)
			}
			if res.Action != userdata.HostnameKept || res.Value != c.value {
				t.Errorf("result %+v, want kept with value %q", res, c.value)
			}
			if string(out) != c.in {
				t.Errorf("user data changed:\n%s", out)
			}
		})
	}
}

// A config that replaces itself at boot drops whatever is beside the
// replace: it becomes the one config a new one merges, of the same version,
// which writes the hostname; the replacement's own files win in the merge.
func TestWithHostnameWrapsAReplace(t *testing.T) {
	in := `{"ignition":{"version":"3.2.0","config":{"replace":{"source":"https://api-int.c1:22623/config/worker"}},"security":{"tls":{"certificateAuthorities":[{"source":"data:,CA"}]}}}}`
	out, res, err := userdata.WithHostname([]byte(in), "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != userdata.HostnameAdded || !res.Wrapped {
		t.Fatalf("result %+v, want added, wrapped", res)
	}
	got := decode(t, out)
	ign, _ := got["ignition"].(map[string]any)
	cfg, _ := ign["config"].(map[string]any)
	merge, _ := cfg["merge"].([]any)
	if ign["version"] != "3.2.0" || len(merge) != 1 || cfg["replace"] != nil {
		t.Fatalf("outer config %s: want version 3.2.0 merging one config", out)
	}
	src, _ := merge[0].(map[string]any)["source"].(string)
	inner, ok, err := userdata.DecodeDataURL(src, "")
	if !ok || err != nil || string(inner) != in {
		t.Errorf("merged config %q (%v), want the user data byte for byte", inner, err)
	}
	if files := hostnameFiles(got); len(files) != 1 || !reflect.DeepEqual(files[0], wantFile) {
		t.Errorf("/etc/hostname entries %v, want %v", files, wantFile)
	}
}

// What is not an Ignition 3 config is left as it is: cloud-config, a
// script, other JSON, Ignition 2 (which RHCOS 4.6 and later cannot boot).
func TestWithHostnameLeavesTheRest(t *testing.T) {
	for _, in := range []string{
		"#cloud-config\nhostname: x\n",
		"#!/bin/sh\necho hi\n",
		`{"a":1}`,
		`{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/motd"}]}}`,
		`{"ignition":{"version":3}}`,
		`{"ignition":{"version":"3.4.0"}} {"second":1}`,
		`[1,2]`,
	} {
		out, res, err := userdata.WithHostname([]byte(in), "worker-a")
		if err != nil || res.Action != userdata.HostnameNotIgnition || string(out) != in {
			t.Errorf("%q: %+v, %v, out %q; want it unchanged", in, res, err, out)
		}
	}
}

func TestDecodeDataURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"data:,a%20b", "a b"},
		{"data:text/plain;charset=utf-8;base64,aGk=", "hi"},
		{"data:;base64,aGk%3D", "hi"},
	} {
		got, ok, err := userdata.DecodeDataURL(c.in, "")
		if !ok || err != nil || string(got) != c.want {
			t.Errorf("%s: %q, %t, %v; want %q", c.in, got, ok, err, c.want)
		}
	}
	if _, ok, _ := userdata.DecodeDataURL("https://x/y", ""); ok {
		t.Error("an https source read as a data URL")
	}
	for _, bad := range []string{"data:nocomma", "data:;base64,!!", "data:,%zz"} {
		if _, ok, err := userdata.DecodeDataURL(bad, ""); !ok || err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, _, err := userdata.DecodeDataURL("data:,x", "bzip2"); err == nil {
		t.Error("an unknown compression gave no error")
	}
}
