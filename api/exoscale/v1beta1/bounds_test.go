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
	m := map[string]any{"zone": "ch-gva-2", "instanceType": "standard.large", "template": map[string]string{"name": "rhcos-4.19"}}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func manyLabels(n int) map[string]string {
	l := map[string]string{}
	for i := range n {
		l[fmt.Sprintf("k%d", i)] = "v"
	}
	return l
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
	p := "spec.providerSpec.value."
	cases := map[string]struct {
		extra map[string]any
		want  string
	}{
		"zone":             {map[string]any{"zone": "ch-" + long(30) + "-1"}, p + "zone: Too long"},
		"type":             {map[string]any{"instanceType": "standard." + long(60)}, p + "instanceType: Too long"},
		"type line break":  {map[string]any{"instanceType": "standard.large\nX: 1"}, p + "instanceType: Invalid"},
		"template name":    {map[string]any{"template": map[string]string{"name": long(256)}}, p + "template.name: Too long"},
		"template control": {map[string]any{"template": map[string]string{"name": "rhcos\x00"}}, p + "template.name: Invalid"},
		"template spaces":  {map[string]any{"template": map[string]string{"name": " rhcos"}}, p + "template.name: Invalid"},
		"apiVersion":       {map[string]any{"apiVersion": long(254)}, p + "apiVersion: Too long"},
		"disk overflow":    {map[string]any{"diskSize": int64(1) << 40}, p + "diskSize"},
		"ssh keys":         {map[string]any{"sshKeys": repeat("k", 17)}, p + "sshKeys: Too many"},
		"ssh key":          {map[string]any{"sshKeys": []string{long(256)}}, p + "sshKeys[0]: Too long"},
		"ssh key newline":  {map[string]any{"sshKeys": []string{"a\nb"}}, p + "sshKeys[0]: Invalid"},
		"security groups":  {map[string]any{"securityGroups": repeat(map[string]string{"id": uuid}, 17)}, p + "securityGroups: Too many"},
		"group name":       {map[string]any{"securityGroups": []any{map[string]string{"name": long(256)}}}, p + "securityGroups[0].name: Too long"},
		"aa groups":        {map[string]any{"antiAffinityGroups": repeat(map[string]string{"id": uuid}, 9)}, p + "antiAffinityGroups: Too many"},
		"aa key":           {map[string]any{"antiAffinityKey": long(64)}, p + "antiAffinityKey"},
		"networks":         {map[string]any{"privateNetworks": repeat(map[string]string{"id": uuid}, 9)}, p + "privateNetworks: Too many"},
		"network ip":       {map[string]any{"privateNetworks": []any{map[string]string{"id": uuid, "ip": long(70)}}}, p + "privateNetworks[0].ip: Invalid"},
		"deploy target":    {map[string]any{"deployTarget": map[string]string{"name": "a\tb"}}, p + "deployTarget.name: Invalid"},
		"labels":           {map[string]any{"labels": manyLabels(65)}, p + "labels: Too many"},
		"label key":        {map[string]any{"labels": map[string]string{long(256): "v"}}, "label keys must be 1 to 255 characters"},
		"label key space":  {map[string]any{"labels": map[string]string{"a b": "v"}}, "label keys must not hold control characters, spaces"},
		"label key nl":     {map[string]any{"labels": map[string]string{"a\nb": "v"}}, "label keys must not hold control characters"},
		"label value":      {map[string]any{"labels": map[string]string{"team": long(256)}}, p + "labels[team]: Too long"},
		"label escape":     {map[string]any{"labels": map[string]string{"team": "a\x1b[31mred"}}, p + "labels[team]: Invalid"},
		"label separator":  {map[string]any{"labels": map[string]string{"team": "a\u2028b"}}, "label values must not hold control characters"},
		"user data secret": {map[string]any{"userDataSecret": map[string]string{"name": "Worker_User_Data"}}, p + "userDataSecret.name: Invalid"},
		"credentials":      {map[string]any{"credentialsSecret": map[string]string{"name": long(254)}}, p + "credentialsSecret.name: Invalid"},
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
	labels := manyLabels(62)
	labels["team"] = strings.Repeat("v", 255)
	labels[strings.Repeat("k", 255)] = "ümlaut and spaces are fine"
	spec, errs := parse(t, specWith(t, map[string]any{
		"zone": "ch-gva-2", "instanceType": "standard." + strings.Repeat("s", 55),
		"template": map[string]string{"name": strings.Repeat("t", 255), "visibility": "public"},
		"diskSize": MaxDiskSize, "labels": labels,
		"sshKeys":            repeat(strings.Repeat("k", 255), 16),
		"securityGroups":     repeat(map[string]string{"name": strings.Repeat("g", 255)}, 16),
		"antiAffinityGroups": repeat(map[string]string{"id": uuid}, 8),
		"antiAffinityKey":    strings.Repeat("w", 63),
		"privateNetworks":    repeat(map[string]string{"id": uuid, "ip": "10.0.0.255"}, 8),
		"publicIPAssignment": "none",
		"userDataSecret":     map[string]string{"name": strings.Repeat("u", 253)},
	}))
	if spec == nil {
		t.Fatal(errs)
	}
	if spec, errs := parse(t, specWith(t, map[string]any{"diskSize": MinDiskSize})); spec == nil {
		t.Fatal(errs)
	}
}

func TestUserDataSize(t *testing.T) {
	if MaxUserDataBytes != 24576 {
		t.Fatalf("MaxUserDataBytes = %d", MaxUserDataBytes)
	}
	if err := ValidateUserDataSize(make([]byte, MaxUserDataBytes)); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	err := ValidateUserDataSize(make([]byte, MaxUserDataBytes+1))
	if err == nil || !strings.Contains(err.Error(), "24577 bytes") {
		t.Errorf("over the limit: %v", err)
	}
}
