package v1beta1

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// specWith is a valid spec with the members of extra added or replaced.
func specWith(t *testing.T, extra map[string]any) string {
	t.Helper()
	m := map[string]any{"zone": "rma1", "flavor": "flex-8-4", "image": "debian-12", "interfaces": []any{map[string]any{"type": "Public"}}}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func manyTags(n int) map[string]string {
	tags := map[string]string{}
	for i := range n {
		tags[fmt.Sprintf("k%d", i)] = "v"
	}
	return tags
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

const uuid = "2db69ba3-1864-4608-853a-0771b6885a3a"

func TestEveryFieldIsBounded(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := map[string]struct {
		extra map[string]any
		want  string
	}{
		"zone":                 {map[string]any{"zone": long(16) + "1"}, "spec.providerSpec.value.zone: Too long"},
		"flavor":               {map[string]any{"flavor": long(65)}, "spec.providerSpec.value.flavor: Too long"},
		"flavor line break":    {map[string]any{"flavor": "flex-8-4\nX-Injected: 1"}, "spec.providerSpec.value.flavor: Invalid"},
		"image":                {map[string]any{"image": long(256)}, "spec.providerSpec.value.image: Too long"},
		"image control":        {map[string]any{"image": "debian-12\x00"}, "spec.providerSpec.value.image: Invalid"},
		"apiVersion":           {map[string]any{"apiVersion": long(254)}, "spec.providerSpec.value.apiVersion: Too long"},
		"root volume":          {map[string]any{"rootVolumeSizeGB": MaxRootVolumeSizeGB + 1}, "spec.providerSpec.value.rootVolumeSizeGB: Invalid value: 10001: must be at most 10000"},
		"root volume overflow": {map[string]any{"rootVolumeSizeGB": int64(1) << 40}, "spec.providerSpec.value.rootVolumeSizeGB"},
		"tags":                 {map[string]any{"tags": manyTags(65)}, "spec.providerSpec.value.tags: Too many"},
		"root volume tags":     {map[string]any{"rootVolumeTags": manyTags(65)}, "spec.providerSpec.value.rootVolumeTags: Too many"},
		"tag key newline":      {map[string]any{"tags": map[string]string{"a\nb": "v"}}, "tag keys must not hold control characters"},
		"tag value escape":     {map[string]any{"tags": map[string]string{"team": "a\x1b[31mred"}}, "spec.providerSpec.value.tags[team]: Invalid"},
		"tag value tab":        {map[string]any{"rootVolumeTags": map[string]string{"team": "a\tb"}}, "tag values must not hold control characters"},
		"tag value separator":  {map[string]any{"tags": map[string]string{"team": "a\u2028b"}}, "tag values must not hold control characters"},
		"tag value":            {map[string]any{"tags": map[string]string{"team": long(256)}}, "spec.providerSpec.value.tags[team]: Too long"},
		"ssh keys":             {map[string]any{"sshKeys": repeat("ssh-ed25519 AAAA", 101)}, "spec.providerSpec.value.sshKeys: Too many"},
		"ssh key":              {map[string]any{"sshKeys": []string{"ssh-rsa " + long(16<<10)}}, "spec.providerSpec.value.sshKeys[0]: Too long"},
		"ssh key two lines":    {map[string]any{"sshKeys": []string{"ssh-ed25519 AAAA a\nssh-ed25519 BBBB intruder"}}, "spec.providerSpec.value.sshKeys[0]: Invalid"},
		"interfaces":           {map[string]any{"interfaces": repeat(map[string]string{"type": "Public"}, 17)}, "spec.providerSpec.value.interfaces: Too many"},
		"addresses":            {map[string]any{"interfaces": []any{map[string]any{"type": "Private", "addresses": repeat(map[string]string{"subnetUUID": uuid}, 17)}}}, "spec.providerSpec.value.interfaces[0].addresses: Too many"},
		"server groups":        {map[string]any{"serverGroups": repeat(uuid, 17)}, "spec.providerSpec.value.serverGroups: Too many"},
		"base domain":          {map[string]any{"baseDomain": strings.Repeat("abcdefghi.", 25) + "abcd"}, "spec.providerSpec.value.baseDomain"},
		"user data secret":     {map[string]any{"userDataSecret": map[string]string{"name": "Worker_User_Data"}}, "spec.providerSpec.value.userDataSecret.name: Invalid"},
		"token secret":         {map[string]any{"tokenSecret": map[string]string{"name": long(254)}}, "spec.providerSpec.value.tokenSecret.name: Invalid"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			spec, errs := parse(t, specWith(t, c.extra))
			if spec != nil {
				t.Fatalf("accepted")
			}
			if !strings.Contains(errs, c.want) {
				t.Errorf("error %q does not contain %q", errs, c.want)
			}
			// However long the value, the error stays short: it ends up in
			// the Machine's status and events.
			if len(errs) > 1000 {
				t.Errorf("error is %d bytes long", len(errs))
			}
		})
	}
}

func TestSpecAtTheBoundsIsAccepted(t *testing.T) {
	tags := manyTags(62)
	tags["team"] = strings.Repeat("v", 255)
	tags[strings.Repeat("k", 64)] = "ümlaut and spaces are fine"
	spec, errs := parse(t, specWith(t, map[string]any{
		"zone": "rma1", "flavor": strings.Repeat("f", 64), "image": "custom:" + strings.Repeat("i", 248),
		"rootVolumeSizeGB": MaxRootVolumeSizeGB, "tags": tags, "rootVolumeTags": tags,
		"sshKeys":        repeat("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g user@host", 100),
		"interfaces":     append([]any{map[string]string{"type": "Public"}}, repeat[any](map[string]any{"type": "Private", "networkUUID": uuid, "addresses": repeat(map[string]string{"subnetUUID": uuid}, 16)}, 15)...),
		"serverGroups":   repeat(uuid, 16),
		"baseDomain":     strings.Repeat("abcdefghi.", 24) + "example.ch",
		"userDataSecret": map[string]string{"name": strings.Repeat("u", 253)},
	}))
	if spec == nil {
		t.Fatal(errs)
	}
}

func TestHostname(t *testing.T) {
	label63 := strings.Repeat("w", 63)
	domain := func(n int) string { // a valid domain of n characters
		s := strings.Repeat("abcdefghi.", n/10)
		return s + strings.Repeat("x", n-len(s))
	}
	for _, c := range []struct {
		name, baseDomain string
		ok, fqdn         bool
	}{
		{"worker-a1b2c", "", true, false},
		{"worker-a1b2c", "c1.example.com", true, false},
		{label63, "", true, false},
		{label63 + "w", "", false, false},
		{"worker.a1b2c", "", false, false},
		{"Worker", "", false, false},
		{"-worker", "", false, false},
		{"", "", false, false},
		{label63, domain(253 - 64), true, false},
		{label63, domain(253 - 63), false, true},
		{"w", domain(251), true, false},
		{"w", domain(252), false, true},
	} {
		err := ValidateHostname(c.name, c.baseDomain)
		if (err == nil) != c.ok {
			t.Errorf("%q + %d-character domain: got %v, want ok=%v", c.name, len(c.baseDomain), err, c.ok)
			continue
		}
		if err != nil {
			he, isHE := err.(*HostnameError)
			if !isHE || he.FQDNTooLong != c.fqdn {
				t.Errorf("%q: got %#v, want a HostnameError with FQDNTooLong=%v", c.name, err, c.fqdn)
			}
			if len(err.Error()) > 400 {
				t.Errorf("message of %d bytes", len(err.Error()))
			}
		}
	}
}

func TestUserDataSize(t *testing.T) {
	if err := ValidateUserDataSize(make([]byte, MaxUserDataBytes)); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	err := ValidateUserDataSize(make([]byte, MaxUserDataBytes+1))
	if err == nil || !strings.Contains(err.Error(), "49150 bytes") {
		t.Errorf("over the limit: %v", err)
	}
}
