package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// RunbooksOnMain is where the alerts' runbook_url point in config/prometheus:
// main's runbooks.
const RunbooksOnMain = "https://github.com/appuio/machine-api-provider/blob/main/docs/runbooks/"

// runbooksMarker opens the block PinRunbooks appends to config/image; the
// block runs to the end of the file.
const runbooksMarker = "# The alerts' runbook_url at the release's tag, not main (make release):"

// PinRunbooks makes every runbook_url of the PrometheusRule in rulesFile
// that points at main's runbooks point at ref (the release's tag) instead,
// by a JSON patch of that PrometheusRule appended to the component file
// (config/image, which every applied kustomization includes and the binary
// does not embed, so that the image built at the tag stays the one the
// release built). An on-call engineer on a release reads that release's
// runbook. Each patch tests the URL it replaces: a rule file changed since
// fails the render rather than pointing elsewhere. A block of an earlier
// pin is replaced.
func PinRunbooks(file, rulesFile, ref string) error {
	if ref == "" || strings.ContainsAny(ref, "/ \t\n\"'") {
		return fmt.Errorf("runbooks ref %q: want a tag such as v1.2.3", ref)
	}
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		return err
	}
	var rule struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert       string            `json:"alert"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		return fmt.Errorf("%s: %w", rulesFile, err)
	}
	if rule.Kind != "PrometheusRule" || rule.Metadata.Name == "" {
		return fmt.Errorf("%s: not a PrometheusRule", rulesFile)
	}
	group, _, _ := strings.Cut(rule.APIVersion, "/")
	var ops strings.Builder
	n := 0
	for i, g := range rule.Spec.Groups {
		for j, r := range g.Rules {
			url := r.Annotations["runbook_url"]
			page, ok := strings.CutPrefix(url, RunbooksOnMain)
			if !ok {
				continue
			}
			path := fmt.Sprintf("/spec/groups/%d/rules/%d/annotations/runbook_url", i, j)
			fmt.Fprintf(&ops, "    - op: test\n      path: %s\n      value: %s\n", path, url)
			fmt.Fprintf(&ops, "    - op: replace\n      path: %s\n      value: %s\n", path, strings.Replace(RunbooksOnMain, "/blob/main/", "/blob/"+ref+"/", 1)+page)
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: no runbook_url points at %s", rulesFile, RunbooksOnMain)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s := string(data)
	if i := strings.Index(s, runbooksMarker); i >= 0 {
		s = s[:i]
	}
	if strings.Contains(s, "\npatches:") {
		return fmt.Errorf("%s has patches of its own: the runbooks' block would be a second list", file)
	}
	block := fmt.Sprintf("%s\npatches:\n- target:\n    group: %s\n    kind: PrometheusRule\n    name: %s\n  patch: |-\n%s",
		runbooksMarker, group, rule.Metadata.Name, strings.TrimSuffix(ops.String(), "\n"))
	return writeFile(file, []byte(strings.TrimRight(s, "\n")+"\n"+block+"\n"))
}
