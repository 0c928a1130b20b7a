package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// foreignFlags are the flags the docs name of tools that are not this
// binary, and which tool: anything else that looks like --flag must be a
// flag of one of this binary's commands.
var foreignFlags = map[string]string{
	"from-literal": "oc create secret/configmap", "from-file": "oc create secret/configmap",
	"server-side": "oc apply", "type": "oc patch", "overwrite": "oc annotate", "replicas": "oc scale",
	"all": "oc scale", "ignore-daemonsets": "oc adm drain", "delete-emptydir-data": "oc adm drain",
	"help": "every command", "version": "the control plane's binaries",
	"field-selector": "oc get", "sort-by": "oc get", "previous": "oc logs",
	"description": "exo iam role create", "policy": "exo iam role create",
	"preserve-digests": "skopeo copy", "format": "skopeo copy", "from-oci-layout": "oras cp",
	"for": "oc wait", "timeout": "oc wait", "cascade": "oc delete", "branch": "git clone",
	"scale-down-unneeded-time": "the cluster-autoscaler, as its operator renders it",
	"cloud-provider":           "the kubelet and a cloud-controller-manager", "node-ip": "the kubelet",
	"ignore-missing": "sha256sum -c, shasum -c", "since": "oc logs",
	"ignore-not-found": "oc delete", "yes": "cosign", "bundle": "cosign sign-blob, verify-blob",
	"certificate-identity": "cosign verify", "certificate-oidc-issuer": "cosign verify", "predicate": "cosign attest",
	"privileged": "docker run, podman run", "no-creds": "skopeo inspect", "rm": "docker run, podman run", "it": "docker run, podman run",
	"user": "unshare", "map-root-user": "unshare",
	"boot-mode": "exo compute instance-template register", "username": "exo compute instance-template register",
	"disable-password": "exo compute instance-template register", "acl": "exo storage upload, aws s3 cp",
	"recursive": "aws s3 cp", "endpoint-url": "aws s3 cp",
	"verb": "oc create role", "resource": "oc create role", "resource-name": "oc create role",
	"role": "oc create rolebinding", "serviceaccount": "oc create rolebinding",
}

// TestDocsMatchTheCode: every flag, annotation and label of ours, event
// reason, metric and ConfigMap key the README and docs/ name exists in the
// code, every object of ours a doc shows as YAML matches what config/
// renders in what it shows, and the manager's settable flags are listed
// in docs/operations.md exactly. The alert rules and the dashboard in
// config/prometheus name only metrics the code exports.
func TestDocsMatchTheCode(t *testing.T) {
	root := repoRoot(t)
	docs := docFiles(t, root)
	code := codeStrings(t, root)

	flags := knownFlags()
	for _, d := range docs {
		for _, m := range regexp.MustCompile(`(?:^|[\s\x60"'(\[=])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(-\*)?`).FindAllStringSubmatch(d.text, -1) {
			name := m[1]
			if _, ok := flags[name]; ok && m[2] == "" {
				continue
			}
			if m[2] != "" && slices.ContainsFunc(slices.Collect(maps.Keys(flags)), func(f string) bool { return strings.HasPrefix(f, name+"-") }) {
				continue // --zap-*: a family of flags
			}
			if _, ok := foreignFlags[name]; ok {
				continue
			}
			t.Errorf("%s names --%s, which no command of this binary has (nor a tool listed in foreignFlags)", d.path, name)
		}
	}

	// Our annotations and labels: machine.appuio.io/…, machine-api-provider.appuio.io/….
	for _, d := range docs {
		for _, key := range regexp.MustCompile(`\b(?:machine|machine-api-provider)\.appuio\.io/[A-Za-z0-9._-]*[A-Za-z0-9]`).FindAllString(d.text, -1) {
			if !code.contains(key) {
				t.Errorf("%s names the annotation or label %s, which the code does not have", d.path, key)
			}
		}
	}

	// Event reasons and condition types: a `CamelCase` name on a line that
	// speaks of an event, a condition or a reason.
	camel := regexp.MustCompile("`([A-Z][a-z]+(?:[A-Z][a-z]*)+)`")
	for _, d := range docs {
		for i, line := range strings.Split(d.text, "\n") {
			lower := strings.ToLower(line)
			if !strings.Contains(lower, "event") && !strings.Contains(lower, "condition") && !strings.Contains(lower, "reason") {
				continue
			}
			for _, m := range camel.FindAllStringSubmatch(line, -1) {
				if !code.literal(m[1]) && !code.contains("alert: "+m[1]+"\n") {
					t.Errorf("%s:%d names %s as an event, condition or reason, which the code never writes", d.path, i+1, m[1])
				}
			}
		}
	}

	// Metrics, in the docs and in the alerts and dashboard.
	metrics := exportedMetrics(t, root)
	promDir := filepath.Join(root, "config", "prometheus")
	entries, err := os.ReadDir(promDir)
	must(t, err)
	sources := slices.Clone(docs)
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(promDir, e.Name()))
		must(t, err)
		sources = append(sources, doc{path: "config/prometheus/" + e.Name(), text: string(raw)})
	}
	for _, d := range sources {
		for _, m := range regexp.MustCompile(`\b(?:machine_api_provider|mapi)(?:_(?:\{[a-z,]+\})?|[a-z*])*[a-z]`).FindAllString(d.text, -1) {
			for _, name := range expand(m) {
				if !metricMatches(metrics, name) {
					t.Errorf("%s names the metric %s, which no code exports", d.path, name)
				}
			}
		}
	}

	// Keys of our ConfigMaps read with jsonpath: oc get configmap
	// machine-api-provider-… -o jsonpath='{.data.KEY}'.
	for _, d := range docs {
		for _, m := range regexp.MustCompile(`configmap [a-z0-9-]*machine-api-provider[a-z0-9-]* -o jsonpath='\{\.data\.([A-Za-z0-9_.\\-]+)\}`).FindAllStringSubmatch(d.text, -1) {
			key := strings.ReplaceAll(m[1], `\.`, ".")
			if !code.literal(key) {
				t.Errorf("%s reads the ConfigMap key %s, which the code never writes", d.path, key)
			}
		}
	}

	checkSettingsTable(t, docs)
	checkYAMLObjects(t, root, docs)
}

// expand turns a{b,c}d into abd and acd.
func expand(s string) []string {
	open, end := strings.Index(s, "{"), strings.Index(s, "}")
	if open < 0 || end < open {
		return []string{s}
	}
	var out []string
	for _, alt := range strings.Split(s[open+1:end], ",") {
		out = append(out, expand(s[:open]+alt+s[end+1:])...)
	}
	return out
}

// metricMatches: name is an exported metric, a histogram's series of one,
// or a pattern with * that matches one.
func metricMatches(metrics map[string]bool, name string) bool {
	if strings.Contains(name, "*") {
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(name), `\*`, "[a-z_]+") + "$")
		return slices.ContainsFunc(slices.Collect(maps.Keys(metrics)), re.MatchString)
	}
	if metrics[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if trimmed, ok := strings.CutSuffix(name, suffix); ok && metrics[trimmed] {
			return true
		}
	}
	return false
}

// checkSettingsTable: docs/operations.md lists the keys of the ConfigMap
// machine-api-provider-config, in the table under "## Settings on a
// cluster": exactly the manager's flags that are not reserved.
func checkSettingsTable(t *testing.T, docs []doc) {
	t.Helper()
	i := slices.IndexFunc(docs, func(d doc) bool { return d.path == "docs/operations.md" })
	if i < 0 {
		t.Error("no docs/operations.md")
		return
	}
	text := docs[i].text
	start := strings.Index(text, "\n## Settings on a cluster\n")
	if start < 0 {
		t.Error(`docs/operations.md has no section "## Settings on a cluster"`)
		return
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || cells[0] != "" {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(cells[1], -1) {
			listed[m[1]] = true
		}
	}
	settable := map[string]bool{}
	managerCommand().Flags().VisitAll(func(f *pflag.Flag) {
		if _, reserved := deployer.ReservedManagerFlags[f.Name]; !reserved {
			settable[f.Name] = true
		}
	})
	for k := range listed {
		if !settable[k] {
			t.Errorf("docs/operations.md lists the key %s, which is no settable flag of the manager", k)
		}
	}
	for k := range settable {
		if !listed[k] {
			t.Errorf("docs/operations.md does not list the key %s (the manager's --%s)", k, k)
		}
	}
}

// checkYAMLObjects: a YAML block in the docs showing an object config/
// ships (same kind and name, in config/overlays/cloudscale or the
// Deployment its deployer applies) shows it as it is: every field the doc
// shows has the rendered value.
func checkYAMLObjects(t *testing.T, root string, docs []doc) {
	t.Helper()
	rendered := map[string]map[string]any{}
	for _, u := range kustomizeBuild(t, root, "config/overlays/cloudscale") {
		rendered[u.GetKind()+"/"+u.GetName()] = u.Object
	}
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	checked := 0
	for _, d := range docs {
		for _, m := range block.FindAllStringSubmatch(d.text, -1) {
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(m[1])), 4096)
			for {
				var obj map[string]any
				if err := dec.Decode(&obj); err != nil {
					break
				}
				kind, _ := obj["kind"].(string)
				name, _, _ := unstructured.NestedString(obj, "metadata", "name")
				want, ok := rendered[kind+"/"+name]
				if !ok {
					continue
				}
				checked++
				for _, diff := range subsetDiff("", obj, want) {
					t.Errorf("%s shows %s %s with %s", d.path, kind, name, diff)
				}
			}
		}
	}
	t.Logf("%d YAML objects of the docs checked against config/", checked)
	if checked == 0 {
		// a renamed object or a changed overlay would leave this check
		// with nothing to compare, passing for ever
		t.Error("no YAML block of the docs shows an object config/overlays/cloudscale renders: the check compared nothing")
	}
}

// subsetDiff lists where got (a doc's) has a field that want (rendered)
// has not, or with another value. Lists are compared element by element.
func subsetDiff(path string, got, want any) []string {
	switch g := got.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: a map where config/ has %v", path, want)}
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if k == "namespace" && path == ".metadata" {
				continue
			}
			wv, ok := w[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s, which config/ does not have", path, k))
				continue
			}
			out = append(out, subsetDiff(path+"."+k, g[k], wv)...)
		}
		return out
	case []any:
		w, ok := want.([]any)
		if !ok || len(w) < len(g) {
			return []string{fmt.Sprintf("%s: %v where config/ has %v", path, got, want)}
		}
		var out []string
		for i := range g {
			out = append(out, subsetDiff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
		return out
	default:
		if fmt.Sprint(got) != fmt.Sprint(want) && !reflect.DeepEqual(got, want) {
			return []string{fmt.Sprintf("%s: %v where config/ has %v", path, got, want)}
		}
		return nil
	}
}

type doc struct{ path, text string }

// docFiles are README.md and every Markdown file under docs/ and config/.
func docFiles(t *testing.T, root string) []doc {
	t.Helper()
	var out []doc
	add := func(p string) {
		raw, err := os.ReadFile(filepath.Join(root, p))
		must(t, err)
		out = append(out, doc{path: p, text: string(raw)})
	}
	add("README.md")
	for _, dir := range []string{"docs", "config"} {
		must(t, filepath.WalkDir(filepath.Join(root, dir), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".md") {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			add(rel)
			return nil
		}))
	}
	return out
}

// knownFlags are the flags of every command of this binary, and of the
// machine-api-operator's controllers as the deployer runs them.
func knownFlags() map[string]bool {
	flags := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, c := range subcommands() {
		walk(c)
	}
	for _, r := range deployer.Releases {
		d := deployer.Deployment(deployer.Spec{Namespace: "ns", Release: r, TokenSecret: "s"})
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, a := range c.Args {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				flags[name] = true
			}
		}
	}
	return flags
}

// sourceStrings are the string literals of the repository's Go code
// (tests left out) and its YAML under config/.
type sourceStrings struct {
	literals map[string]bool
	all      string
}

func (s sourceStrings) literal(v string) bool  { return s.literals[v] }
func (s sourceStrings) contains(v string) bool { return strings.Contains(s.all, v) }

func codeStrings(t *testing.T, root string) sourceStrings {
	t.Helper()
	s := sourceStrings{literals: map[string]bool{}}
	var all strings.Builder
	fset := token.NewFileSet()
	for _, dir := range []string{"api", "cmd", "pkg"} {
		must(t, filepath.WalkDir(filepath.Join(root, dir), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						s.literals[v] = true
						all.WriteString(v)
						all.WriteByte('\n')
					}
				}
				return true
			})
			return nil
		}))
	}
	must(t, filepath.WalkDir(filepath.Join(root, "config"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		raw, err := os.ReadFile(p)
		all.Write(raw)
		return err
	}))
	s.all = all.String()
	return s
}

// exportedMetrics are the names of the metrics this repository's code
// registers, and the machine-api-operator's (its pkg/metrics, which the
// machine controller in the manager serves).
func exportedMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	name := regexp.MustCompile(`(?:Name:\s*|NewDesc\(\s*)"((?:machine_api_provider|mapi)_[a-z_]+)"`)
	scan := func(dir string) {
		must(t, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			raw, err := os.ReadFile(p)
			for _, m := range name.FindAllStringSubmatch(string(raw), -1) {
				out[m[1]] = true
			}
			return err
		}))
	}
	scan(filepath.Join(root, "pkg"))
	mao, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/machine-api-operator").Output()
	must(t, err)
	scan(filepath.Join(strings.TrimSpace(string(mao)), "pkg", "metrics"))
	if len(out) < 10 {
		t.Fatalf("found only %d metrics in the code: %v", len(out), out)
	}
	return out
}

// kustomizeBuild renders a kustomization with the pinned kustomize.
func kustomizeBuild(t *testing.T, root, dir string) []*unstructured.Unstructured {
	t.Helper()
	bin, err := testenv.AssetsDir()
	must(t, err)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, dir))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build %s: %v (run `make kustomize`)\n%s", dir, err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	for _, part := range strings.Split(stdout.String(), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(part), &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	must(t, err)
	return root
}
