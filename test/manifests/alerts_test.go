package manifests_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// runbookURL is where every alert's runbook_url points, followed by
// <alert>.md: docs/runbooks of this repository.
const runbookURL = "https://github.com/appuio/machine-api-provider/blob/main/docs/runbooks/"

// promRule is a PrometheusRule's spec, as promtool reads a rule file.
type promRule struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// promtoolTests is what TestAlertRules reads of testdata/alerts_test.yaml.
type promtoolTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestAlertRules: each OpenShift overlay ships the same PrometheusRule;
// every alert has a severity, a summary, a description and a runbook_url
// into docs/runbooks/<alert>.md, which exists and says what the alert
// means and what to do; promtool accepts the rules, and its unit tests
// (testdata/alerts_test.yaml) make every alert fire and stay quiet and
// pass.
func TestAlertRules(t *testing.T) {
	var spec map[string]any
	var rules promRule
	for _, k := range kustomizations {
		if k == "default" {
			continue
		}
		var found []map[string]any
		for _, u := range render(t, k) {
			if u.GetKind() == "PrometheusRule" {
				s, _, _ := unstructured.NestedMap(u.Object, "spec")
				found = append(found, s)
			}
		}
		if len(found) != 1 {
			t.Fatalf("config/%s renders %d PrometheusRules, want 1", k, len(found))
		}
		if spec == nil {
			spec = found[0]
		} else if !reflect.DeepEqual(spec, found[0]) {
			t.Errorf("config/%s's PrometheusRule differs from the other overlay's", k)
		}
	}
	raw, err := json.Marshal(spec)
	must(t, err)
	must(t, json.Unmarshal(raw, &rules))

	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is no alert (%s): the runbooks and tests cover alerts", g.Name, r.Expr)
				continue
			}
			alerts[r.Alert] = true
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			if want := runbookURL + r.Alert + ".md"; r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %s", r.Alert, r.Annotations["runbook_url"], want)
			}
			checkRunbook(t, r.Alert)
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alerts")
	}

	// Every alert fires in a test and stays quiet in another.
	testFile := filepath.Join("testdata", "alerts_test.yaml")
	raw, err = os.ReadFile(testFile)
	must(t, err)
	var tests promtoolTests
	must(t, yaml.Unmarshal(raw, &tests))
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if !alerts[a.Alertname] {
				t.Errorf("%s: test %q: no such alert", testFile, a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for a := range alerts {
		if !fires[a] {
			t.Errorf("%s: no test makes %s fire", testFile, a)
		}
		if !quiet[a] {
			t.Errorf("%s: no test has %s stay quiet", testFile, a)
		}
	}
	if !slices.Equal(tests.RuleFiles, []string{"rules.yaml"}) {
		t.Fatalf("%s: rule_files %v, want [rules.yaml] (the rules extracted here)", testFile, tests.RuleFiles)
	}

	dir := t.TempDir()
	out, err := yaml.Marshal(spec)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), out, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), raw, 0o644))
	promtool(t, dir, "check", "rules", "rules.yaml")
	promtool(t, dir, "test", "rules", "alerts_test.yaml")
}

// checkRunbook: docs/runbooks/<alert>.md is titled after the alert and
// says what it means and what to do.
func checkRunbook(t *testing.T, alert string) {
	t.Helper()
	path := filepath.Join(repoRoot(t), "docs", "runbooks", alert+".md")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: no runbook: %v", alert, err)
		return
	}
	text := string(raw)
	if !strings.HasPrefix(text, "# "+alert+"\n") {
		t.Errorf("%s: the runbook's title is not the alert's name", path)
	}
	for _, h := range []string{"\n## Meaning\n", "\n## What to do\n"} {
		if !strings.Contains(text, h) {
			t.Errorf("%s: no section %q", path, strings.TrimSpace(h))
		}
	}
}

// promtool runs bin/promtool in dir and fails the test with its output.
func promtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	bin, err := testenv.AssetsDir()
	must(t, err)
	path := filepath.Join(bin, "promtool")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s not found (%v): run `make promtool` (or `make tools`)", path, err)
	}
	var outb bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &outb, &outb
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, outb.String())
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), outb.String())
}

// TestDashboard: the console dashboard is a ConfigMap of
// openshift-config-managed labelled for the console, its JSON is valid,
// every query parses (promtool checks them as recording rules) and the
// panels the issue asks for are there. That it names only metrics the code
// exports is checked with the docs (cmd/machine-api-provider, docs_test.go).
func TestDashboard(t *testing.T) {
	for _, k := range kustomizations {
		if k == "default" {
			continue
		}
		t.Run(strings.ReplaceAll(k, "/", "-"), func(t *testing.T) {
			var dash *unstructured.Unstructured
			for _, u := range render(t, k) {
				if u.GetKind() == "ConfigMap" && u.GetName() == "machine-api-provider-dashboard" {
					dash = u
				}
			}
			if dash == nil {
				t.Fatal("no ConfigMap machine-api-provider-dashboard")
			}
			if dash.GetNamespace() != "openshift-config-managed" || dash.GetLabels()["console.openshift.io/dashboard"] != "true" {
				t.Errorf("dashboard in %q with labels %v: the console reads openshift-config-managed, label console.openshift.io/dashboard=true",
					dash.GetNamespace(), dash.GetLabels())
			}
			data, _, _ := unstructured.NestedStringMap(dash.Object, "data")
			if len(data) != 1 {
				t.Fatalf("dashboard data keys %d, want 1", len(data))
			}
			var board struct {
				Title  string `json:"title"`
				Panels []struct {
					Title   string `json:"title"`
					Targets []struct {
						Expr string `json:"expr"`
					} `json:"targets"`
				} `json:"panels"`
			}
			for _, v := range data {
				must(t, json.Unmarshal([]byte(v), &board))
			}
			var exprs []string
			for _, p := range board.Panels {
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
				for _, tg := range p.Targets {
					exprs = append(exprs, tg.Expr)
				}
			}
			for _, want := range []string{"machine_api_provider_machines", "mapi_machine_phase_transition_seconds_bucket",
				"machine_api_provider_cloud_requests_total", "machine_api_provider_cloud_gate_closures_total"} {
				if !slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, want) }) {
					t.Errorf("no panel shows %s", want)
				}
			}
			// promtool parses every query as a recording rule
			var rules strings.Builder
			rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
			for i, e := range exprs {
				q, _ := json.Marshal(e)
				fmt.Fprintf(&rules, "  - record: dashboard:query%d\n    expr: %s\n", i, q)
			}
			dir := t.TempDir()
			must(t, os.WriteFile(filepath.Join(dir, "dashboard.yaml"), []byte(rules.String()), 0o644))
			promtool(t, dir, "check", "rules", "dashboard.yaml")
		})
	}
}
