package ownaudit

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	csv1 "github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	exov1 "github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// Options say whose the cluster is and what it may do besides.
type Options struct {
	// ClusterID is the cluster's identity, its infrastructureName.
	ClusterID string
	// AlsoOwns are cluster IDs the cluster is declared to own as well (a
	// fleet cluster's legacy IDs: the Terraform cluster_id its Machines
	// and servers carry).
	AlsoOwns []string
	// Callers are the cloud credentials whose writes are this cluster's
	// (harness.CallerToken, harness.CallerKey); empty: every write of the
	// account is. Set it when several clusters share the account.
	Callers []string
	// AdoptCallers are adopt's credentials: a Node adopt deletes is
	// accepted only for a server these credentials took out of its
	// instance pool first. Empty: adopt deletes no Node.
	AdoptCallers []string
	// Exceptions are writes the test declares on purpose, each with why.
	Exceptions []Exception
}

// Exception allows writes to objects that are not the cluster's.
type Exception struct {
	// Reason says why, for the report.
	Reason string
	// Caller makes only this caller's writes the exception ("" for any).
	Caller string
	// Objects are the IDs the exception covers.
	Objects []string
}

// NodeDelete is a Node deleted while the audit ran.
type NodeDelete struct {
	Node string
	// ProviderID is the Node's as last seen ("" when it had none).
	ProviderID string
	Time       time.Time
	// Agent is the deleter's user agent and User its user, as the API
	// server's audit log names them; both "" without an audit log.
	Agent, User string
}

// Machine is a Machine of the cluster as last seen while the audit ran.
type Machine struct {
	Namespace, Name string
	// Cluster is its cluster label.
	Cluster    string
	NodeRef    string
	ProviderID string
	// Deleting: it had a deletion timestamp.
	Deleting bool
}

// The deleters a Node delete is accepted from, by their user agent's
// program name (before the first "/"): what a client-go client of the
// program sends. The local control plane gives each its own: the CCM runs
// as its program (pkg/localcluster/ccm), the provider's manager is the
// binary or, in process, is given its name (pkg/demo), adopt's client in
// the tests is given AgentAdopt.
const (
	// AgentProvider is the provider's manager: the machine-api-operator's
	// machine controller in it deletes the Node of a Machine it deletes,
	// after the drain and the server.
	AgentProvider = "machine-api-provider"
	// AgentCCM is the cloud-controller-manager: its node-lifecycle
	// controller deletes a Node whose server the cloud says is gone.
	AgentCCM = "cloud-controller-manager"
	// AgentAdopt is adopt's client: a rolling replacement of an instance
	// pool deletes the Node of each member it evicted.
	AgentAdopt = "machine-api-provider-adopt"
)

// Report is what the audit found.
type Report struct {
	// Writes were judged (the cluster's), of AllWrites in the account.
	Writes, AllWrites int
	// Foreign are the writes to what was not the cluster's, one line each.
	Foreign []string
	// Excepted counts the writes an Exception allowed, by its reason.
	Excepted map[string]int
	// NodeDeletes were judged; ForeignNodeDeletes are those no rule
	// accepts, one line each; AcceptedBy counts the others by deleter.
	NodeDeletes        int
	ForeignNodeDeletes []string
	AcceptedBy         map[string]int
}

// Counts is the report's figures in one line.
func (r Report) Counts() string {
	s := fmt.Sprintf("%d writes audited (of %d in the account), %d foreign writes; %d Node deletes audited, %d foreign Node deletes",
		r.Writes, r.AllWrites, len(r.Foreign), r.NodeDeletes, len(r.ForeignNodeDeletes))
	if len(r.AcceptedBy) > 0 {
		by := slices.Sorted(maps.Keys(r.AcceptedBy))
		parts := make([]string, 0, len(by))
		for _, d := range by {
			parts = append(parts, fmt.Sprintf("%d by %s", r.AcceptedBy[d], d))
		}
		s += " (accepted: " + strings.Join(parts, ", ") + ")"
	}
	if len(r.Excepted) > 0 {
		reasons := slices.Sorted(maps.Keys(r.Excepted))
		parts := make([]string, 0, len(reasons))
		for _, why := range reasons {
			parts = append(parts, fmt.Sprintf("%d: %s", r.Excepted[why], why))
		}
		s += "; excepted writes: " + strings.Join(parts, "; ")
	}
	return s
}

// The identity keys of the provider's objects, one per cloud.
var clusterKeys = []string{csv1.TagClusterID, exov1.LabelClusterID}

// serverKinds are the kinds whose identity the provider proves before it
// acts; an object without an identity of its own that one of them names
// (a root volume) is that server's.
var serverKinds = []string{"servers", "instances"}

// ClusterOf is the cluster an object's own identity names: its tags' or
// labels' cluster ID, or for an Exoscale object without labels (a
// template the boot image controller registered, a security group an
// admin marked) the provider's mark in its description, read by the
// provider's own reader (exoscale.DescribedClusterID); an anti-affinity
// group is the cluster's only when the provider made it so (name and
// description, exoscale.GroupClusterID). ok is false when it names none.
func ClusterOf(o harness.Object) (cluster string, ok bool) {
	for _, k := range clusterKeys {
		if v := o.Identity[k]; v != "" {
			return v, true
		}
	}
	if o.Kind == "anti_affinity_groups" {
		return exocloud.GroupClusterID(o.Name, o.Description)
	}
	if c := exocloud.DescribedClusterID(o.Description); c != "" {
		return c, true
	}
	return "", false
}

// Judge holds the writes and Node deletes to the rules (see the package
// documentation). specNamed are the IDs and names the cluster's Machines
// and MachineSets name in their provider specs.
func Judge(o Options, writes []harness.Write, specNamed []string, deletes []NodeDelete, machines []Machine) Report {
	ids := append([]string{o.ClusterID}, o.AlsoOwns...)
	ours := func(obj harness.Object) bool {
		if c, ok := ClusterOf(obj); ok {
			return slices.Contains(ids, c)
		}
		if slices.Contains(serverKinds, obj.Kind) {
			return false
		}
		return slices.ContainsFunc(obj.Links, func(l harness.Object) bool {
			c, ok := ClusterOf(l)
			return ok && slices.Contains(ids, c) && slices.Contains(serverKinds, l.Kind)
		})
	}
	others := func(obj harness.Object) bool {
		c, ok := ClusterOf(obj)
		return ok && !slices.Contains(ids, c)
	}
	r := Report{AllWrites: len(writes), Excepted: map[string]int{}, AcceptedBy: map[string]int{}}
	for _, w := range writes {
		if len(o.Callers) > 0 && !slices.Contains(o.Callers, w.Caller) {
			continue
		}
		r.Writes++
		var why []string
		excepted := ""
		judge := func(obj harness.Object, role string, bad bool) {
			if !bad {
				return
			}
			for _, e := range o.Exceptions {
				if (e.Caller == "" || e.Caller == w.Caller) && slices.Contains(e.Objects, obj.ID) {
					excepted = e.Reason
					return
				}
			}
			why = append(why, role+" "+describe(obj))
		}
		if t := w.Target; t != nil {
			// An untagged object a spec of the cluster names (its
			// Terraform network, a security group) may be joined to or
			// left by one of the cluster's servers, nothing else.
			joins := !others(*t) && (slices.Contains(specNamed, t.ID) || t.Name != "" && slices.Contains(specNamed, t.Name)) &&
				slices.ContainsFunc(w.Used, func(u harness.Object) bool { return slices.Contains(serverKinds, u.Kind) && ours(u) })
			judge(*t, "writes to", !ours(*t) && !joins)
		}
		for _, u := range w.Used {
			judge(u, "uses", others(u))
		}
		for _, c := range w.Changed {
			judge(c, "changes", others(c))
		}
		for _, c := range w.Created {
			judge(c, "makes", others(c))
		}
		switch {
		case len(why) > 0:
			r.Foreign = append(r.Foreign, fmt.Sprintf("%s: %s", describeWrite(w), strings.Join(why, "; ")))
		case excepted != "":
			r.Excepted[excepted]++
		}
	}
	for _, d := range deletes {
		r.NodeDeletes++
		why := judgeNodeDelete(o, ids, d, writes, machines)
		if why == "" {
			r.AcceptedBy[program(d.Agent)]++
			continue
		}
		r.ForeignNodeDeletes = append(r.ForeignNodeDeletes, fmt.Sprintf("Node %s (providerID %q) deleted at %s by %s: %s",
			d.Node, d.ProviderID, d.Time.Format("15:04:05.000"), deleter(d), why))
	}
	return r
}

// judgeNodeDelete says why a Node delete is not accepted ("" when it is).
func judgeNodeDelete(o Options, ids []string, d NodeDelete, writes []harness.Write, machines []Machine) string {
	_, server, found := strings.Cut(d.ProviderID, "://")
	if !found {
		server = ""
	}
	// deleted: a DELETE of the server before the Node's, by anyone.
	deleted := func(w harness.Write) bool {
		return server != "" && w.Status < 300 && w.Time.Before(d.Time) && w.Method == "DELETE" && w.Target != nil && w.Target.ID == server
	}
	// actedOn: a write of callers before the Node's delete that named the
	// server (its eviction from a pool, its pool's deletion).
	actedOn := func(callers []string, w harness.Write) bool {
		return server != "" && w.Status < 300 && w.Time.Before(d.Time) && slices.Contains(callers, w.Caller) &&
			slices.ContainsFunc(w.Objects(), func(obj harness.Object) bool { return obj.ID == server })
	}
	switch program(d.Agent) {
	case AgentProvider:
		if slices.ContainsFunc(machines, func(m Machine) bool {
			return slices.Contains(ids, m.Cluster) && m.Deleting && (m.NodeRef == d.Node || d.ProviderID != "" && m.ProviderID == d.ProviderID)
		}) {
			return ""
		}
		return "no Machine of this cluster that was being deleted ran on it"
	case AgentCCM:
		if slices.ContainsFunc(writes, deleted) {
			return ""
		}
		return "its server was not deleted before"
	case AgentAdopt:
		if slices.ContainsFunc(writes, func(w harness.Write) bool { return actedOn(o.AdoptCallers, w) }) {
			return ""
		}
		return "adopt had not taken its server out of an instance pool before"
	case "":
		return "no audit log names who deleted it"
	}
	return "no component of the cluster deletes Nodes as that deleter"
}

// program is a user agent's program name: what is before the first "/".
func program(agent string) string {
	p, _, _ := strings.Cut(agent, "/")
	return p
}

func deleter(d NodeDelete) string {
	if d.Agent == "" && d.User == "" {
		return "an unknown deleter"
	}
	return fmt.Sprintf("%q (user %s)", d.Agent, d.User)
}

func describeWrite(w harness.Write) string {
	s := fmt.Sprintf("%s (%s) -> %d by %s", w.Route, w.Path, w.Status, orNone(w.Caller))
	if w.Agent != "" {
		s += fmt.Sprintf(" [%s]", w.Agent)
	}
	return s
}

func describe(o harness.Object) string {
	s := o.Kind + " " + o.ID
	if o.Name != "" {
		s += fmt.Sprintf(" (%s)", o.Name)
	}
	if o.Identity != nil {
		s += " " + identity(o.Identity)
	}
	if o.Description != "" {
		s += fmt.Sprintf(" description %q", o.Description)
	}
	c, ok := ClusterOf(o)
	switch {
	case ok:
		s += fmt.Sprintf(", cluster %q's", c)
	default:
		s += ", of no cluster"
	}
	return s
}

func identity(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func orNone(s string) string {
	if s == "" {
		return "no credentials"
	}
	return s
}
