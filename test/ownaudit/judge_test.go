package ownaudit

import (
	"strings"
	"testing"
	"time"

	csv1 "github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	exov1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

const (
	us     = "c-us-x7k2p"
	legacy = "c-legacy-1234"
	them   = "c-them-q9w3e"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func server(id, cluster string) harness.Object {
	o := harness.Object{Kind: "servers", ID: id, Name: id, Identity: map[string]string{}}
	if cluster != "" {
		o.Identity[csv1.TagClusterID] = cluster
		o.Identity[csv1.TagMachineName] = id
	}
	return o
}

func instance(id, cluster string) harness.Object {
	o := harness.Object{Kind: "instances", ID: id, Identity: map[string]string{}}
	if cluster != "" {
		o.Identity[exov1.LabelClusterID] = cluster
	}
	return o
}

func write(method, route string, target *harness.Object, at time.Time, used ...harness.Object) harness.Write {
	return harness.Write{Method: method, Route: route, Path: route, Caller: "token provider", Status: 200, Target: target, Used: used, Time: at}
}

func ptr[T any](v T) *T { return &v }

// The cluster's own writes pass: its servers (also under a legacy ID it
// is declared to own), a root volume without tags of its server, its
// provider-described Exoscale group, a create on the Terraform network,
// and the attach of its instance to the untagged network its spec names.
func TestOwnWritesPass(t *testing.T) {
	volume := harness.Object{Kind: "volumes", ID: "vol", Identity: map[string]string{}, Links: []harness.Object{server("s1", us)}}
	group := harness.Object{Kind: "anti_affinity_groups", ID: "g", Name: us + "-workers-1", Description: "machine-api-provider cluster=" + us + " key=workers created=1"}
	network := harness.Object{Kind: "private_networks", ID: "net", Identity: map[string]string{}}
	writes := []harness.Write{
		write("PATCH", "PATCH /v1/servers/{uuid}", ptr(server("s1", us)), t0),
		write("DELETE", "DELETE /v1/servers/{uuid}", ptr(server("s2", legacy)), t0),
		write("PATCH", "PATCH /v1/volumes/{uuid}", &volume, t0),
		write("DELETE", "DELETE /v2/anti-affinity-group/{id}", &group, t0),
		write("POST", "POST /v1/servers", nil, t0, harness.Object{Kind: "networks", ID: "tf-net", Identity: map[string]string{}}),
		write("PUT", "PUT /v2/private-network/{id}:attach", &network, t0, instance("i1", us)),
	}
	r := Judge(Options{ClusterID: us, AlsoOwns: []string{legacy}}, writes, []string{"net"}, nil, nil)
	if len(r.Foreign) != 0 || r.Writes != len(writes) {
		t.Errorf("own writes: %d judged, foreign %v", r.Writes, r.Foreign)
	}
}

// A foreign write fails, each printed with what it wrote to: another
// cluster's server; an untagged server (not adopt's to take); a server
// group another cluster's server is joined to; an untagged network deleted
// although a spec names it; another cluster's network attached.
func TestForeignWritesFail(t *testing.T) {
	theirNet := harness.Object{Kind: "private_networks", ID: "their-net", Identity: map[string]string{exov1.LabelClusterID: them}}
	tfNet := harness.Object{Kind: "private_networks", ID: "tf-net", Identity: map[string]string{}}
	writes := []harness.Write{
		write("PATCH", "PATCH /v1/servers/{uuid}", ptr(server("theirs", them)), t0),
		write("DELETE", "DELETE /v1/servers/{uuid}", ptr(server("terraform", "")), t0),
		write("POST", "POST /v1/servers", nil, t0, harness.Object{Kind: "server_groups", ID: "their-group", Identity: map[string]string{csv1.TagClusterID: them}}),
		write("DELETE", "DELETE /v2/private-network/{id}", &tfNet, t0),
		write("PUT", "PUT /v2/private-network/{id}:attach", &theirNet, t0, instance("i1", us)),
	}
	r := Judge(Options{ClusterID: us}, writes, []string{"tf-net", "their-net"}, nil, nil)
	if len(r.Foreign) != len(writes) {
		t.Fatalf("%d foreign writes, want %d: %v", len(r.Foreign), len(writes), r.Foreign)
	}
	for i, want := range []string{
		`writes to servers theirs (theirs) {` + csv1.TagClusterID + `=` + them,
		"writes to servers terraform (terraform) {}, of no cluster",
		`uses server_groups their-group {` + csv1.TagClusterID + `=` + them + `}, cluster "` + them + `"'s`,
		"DELETE /v2/private-network/{id} (DELETE /v2/private-network/{id}) -> 200 by token provider: writes to private_networks tf-net {}, of no cluster",
		`writes to private_networks their-net`,
	} {
		if !strings.Contains(r.Foreign[i], want) {
			t.Errorf("foreign write %d: %q, want it to say %q", i, r.Foreign[i], want)
		}
	}
	if !strings.Contains(r.Counts(), "5 foreign writes") {
		t.Errorf("counts: %s", r.Counts())
	}
}

// An exception allows exactly the objects and the caller it names: adopt
// taking the untagged server over; the same write by another caller, or to
// another server, is foreign. Another cluster's writes (Callers) are not
// this cluster's to answer for.
func TestExceptionsAndCallers(t *testing.T) {
	take := write("PATCH", "PATCH /v1/servers/{uuid}", ptr(server("terraform", "")), t0)
	take.Caller = "token adopt"
	same := take
	same.Caller = "token provider"
	other := write("PATCH", "PATCH /v1/servers/{uuid}", ptr(server("other", "")), t0)
	other.Caller = "token adopt"
	b := write("DELETE", "DELETE /v1/servers/{uuid}", ptr(server("b-server", them)), t0)
	b.Caller = "token b"
	o := Options{ClusterID: us, Callers: []string{"token adopt", "token provider"},
		Exceptions: []Exception{{Reason: "adopt takes terraform over", Caller: "token adopt", Objects: []string{"terraform"}}}}
	r := Judge(o, []harness.Write{take, same, other, b}, nil, nil, nil)
	if r.Writes != 3 || r.AllWrites != 4 || len(r.Foreign) != 2 || r.Excepted["adopt takes terraform over"] != 1 {
		t.Errorf("report %+v: want 3 of 4 writes judged, 1 excepted, the provider's and the other server's foreign", r)
	}
}

// Node deletes: each accepted deleter for what it may delete, and a
// foreign delete for everything else.
func TestNodeDeletes(t *testing.T) {
	machines := []Machine{
		{Name: "w1", Cluster: us, NodeRef: "w1", ProviderID: "cloudscale://s1", Deleting: true},
		{Name: "w2", Cluster: us, NodeRef: "w2", ProviderID: "cloudscale://s2"},
		{Name: "b1", Cluster: them, NodeRef: "b1", ProviderID: "cloudscale://b1", Deleting: true},
	}
	deleted := write("DELETE", "DELETE /v1/servers/{uuid}", ptr(server("s3", us)), t0)
	deleted.Caller = "token someone-else"
	evict := write("PUT", "PUT /v2/instance-pool/{id}:evict", &harness.Object{Kind: "instance_pools", ID: "pool"}, t0, instance("member", ""))
	evict.Caller = "key adopt"
	writes := []harness.Write{deleted, evict}
	at := t0.Add(time.Minute)
	ok := []NodeDelete{
		{Node: "w1", ProviderID: "cloudscale://s1", Time: at, Agent: AgentProvider + "/v0.0.0 (linux/amd64) kubernetes/$Format", User: "admin"},
		{Node: "w3", ProviderID: "cloudscale://s3", Time: at, Agent: AgentCCM + "/v0.0.0", User: "admin"},
		{Node: "member", ProviderID: "exoscale://member", Time: at, Agent: AgentAdopt, User: "admin"},
	}
	foreign := []NodeDelete{
		// The machine controller, for a Machine not being deleted, and
		// for another cluster's.
		{Node: "w2", ProviderID: "cloudscale://s2", Time: at, Agent: AgentProvider},
		{Node: "b1", ProviderID: "cloudscale://b1", Time: at, Agent: AgentProvider},
		// The CCM, for a server that was not deleted (or only later).
		{Node: "w2", ProviderID: "cloudscale://s2", Time: at, Agent: AgentCCM},
		{Node: "w3", ProviderID: "cloudscale://s3", Time: t0.Add(-time.Second), Agent: AgentCCM},
		// adopt, for a Node whose server it did not take out of a pool;
		// and with the right one, when its credentials are not declared.
		{Node: "master-0", ProviderID: "exoscale://master-0", Time: at, Agent: AgentAdopt},
		// Someone else; nobody known.
		{Node: "w2", Time: at, Agent: "kubectl/v1.34.4", User: "admin"},
		{Node: "w2", Time: at},
	}
	o := Options{ClusterID: us, AdoptCallers: []string{"key adopt"}}
	if r := Judge(o, writes, nil, ok, machines); len(r.ForeignNodeDeletes) != 0 || r.NodeDeletes != len(ok) {
		t.Errorf("accepted deletes: %d judged, foreign %v", r.NodeDeletes, r.ForeignNodeDeletes)
	}
	r := Judge(o, writes, nil, foreign, machines)
	if len(r.ForeignNodeDeletes) != len(foreign) {
		t.Fatalf("%d foreign Node deletes, want %d: %v", len(r.ForeignNodeDeletes), len(foreign), r.ForeignNodeDeletes)
	}
	for i, want := range []string{
		"no Machine of this cluster that was being deleted ran on it", "no Machine of this cluster",
		"its server was not deleted before", "its server was not deleted before",
		"adopt had not taken its server out of an instance pool before",
		`by "kubectl/v1.34.4" (user admin): no component of the cluster deletes Nodes`,
		"by an unknown deleter: no audit log names who deleted it",
	} {
		if !strings.Contains(r.ForeignNodeDeletes[i], want) {
			t.Errorf("foreign Node delete %d: %q, want it to say %q", i, r.ForeignNodeDeletes[i], want)
		}
	}
	o.AdoptCallers = nil
	if r := Judge(o, writes, nil, ok[2:], machines); len(r.ForeignNodeDeletes) != 1 {
		t.Errorf("adopt's Node delete without its credentials declared: %v, want it foreign", r.ForeignNodeDeletes)
	}
}

// Exoscale templates carry no labels: whose one is, is the provider's mark
// at the start of its description, read with the provider's own reader.
// The boot image controller's writes to the cluster's templates (a copy to
// another zone, which makes one; a delete) pass; the same writes to
// another cluster's template, or to a template nobody marked (a person's,
// with the import's maintainer), are foreign. Before the reader every
// write to a template was foreign: the audit could not judge them.
func TestTemplateWrites(t *testing.T) {
	tpl := func(id, description string) harness.Object {
		return harness.Object{Kind: "templates", ID: id, Name: id, Description: description}
	}
	mark := func(cluster string) string {
		return "machine-api-provider cluster=" + cluster + " boot image: RHCOS 9.6.20260101-0 (rhel-9, amd64) of OpenShift 4.22.1"
	}
	ours, copied := tpl("ours", mark(us)), tpl("ours-copy", mark(us))
	copyW := write("POST", "POST /v2/template/{id}", &ours, t0)
	copyW.Created = []harness.Object{copied}
	own := []harness.Write{copyW, write("DELETE", "DELETE /v2/template/{id}", &ours, t0)}
	if r := Judge(Options{ClusterID: us}, own, nil, nil, nil); len(r.Foreign) != 0 || r.Writes != len(own) {
		t.Errorf("the cluster's template writes: %d judged, foreign %v", r.Writes, r.Foreign)
	}
	foreign := []harness.Write{
		write("DELETE", "DELETE /v2/template/{id}", ptr(tpl("theirs", mark(them))), t0),
		write("DELETE", "DELETE /v2/template/{id}", ptr(tpl("by-hand", "RHCOS for the workers, imported by hand")), t0),
	}
	r := Judge(Options{ClusterID: us}, foreign, nil, nil, nil)
	if len(r.Foreign) != len(foreign) {
		t.Fatalf("%d foreign writes, want %d: %v", len(r.Foreign), len(foreign), r.Foreign)
	}
	for i, want := range []string{`writes to templates theirs (theirs) description "machine-api-provider cluster=` + them, `, cluster "` + them + `"'s`} {
		if !strings.Contains(r.Foreign[0], want) {
			t.Errorf("foreign write %d: %q, want it to say %q", i, r.Foreign[0], want)
		}
	}
	if !strings.Contains(r.Foreign[1], "writes to templates by-hand") || !strings.Contains(r.Foreign[1], "of no cluster") {
		t.Errorf("the write to the unmarked template: %q", r.Foreign[1])
	}
}
