package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// The ownership audit: every write an emulated API answers, with the
// identity (tags, labels) each object it touched had at that moment, so
// that a test can show afterwards that a cluster wrote to nothing that was
// not its own (test/ownaudit), whatever route the write took. An emulator
// records in the one place every route of its API passes through, under its
// world's lock: a route added later is audited without anything more, and
// what a write found is what it acted on.

// Object is one object of an emulated account as a write found it.
type Object struct {
	// Kind is the collection the object is in, named by the world's JSON
	// field ("servers", "volumes", "instances", "anti_affinity_groups").
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Identity is the object's tags (cloudscale.ch) or labels (Exoscale);
	// nil for a kind that has neither.
	Identity map[string]string `json:"identity,omitempty"`
	// Description is the object's description, for kinds without labels
	// that say whose they are there (Exoscale's anti-affinity groups).
	Description string `json:"description,omitempty"`
	// Links are the other objects this one names in its own fields (a
	// volume its servers, an instance its groups and networks), with their
	// identity at the same moment; one level deep.
	Links []Object `json:"links,omitempty"`
}

// Write is one request that may change something (not GET), as the
// emulated API answered it.
type Write struct {
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	// Route is the harness's name of the route ("PATCH /v1/servers/{uuid}").
	Route string `json:"route"`
	Path  string `json:"path"`
	// Caller names the credentials that made the request (Caller*), ""
	// when there were none; Agent is its User-Agent.
	Caller string `json:"caller,omitempty"`
	Agent  string `json:"agent,omitempty"`
	// Status is the API's answer: a refused write changed nothing, but it
	// was sent.
	Status int `json:"status"`
	// Target is the object the path names, as it was before the write;
	// nil for a write to a collection (a create) or to an ID the account
	// does not hold.
	Target *Object `json:"target,omitempty"`
	// Used are the other objects the request's body names (a create's
	// groups and networks, an attach's instance), as they were.
	Used []Object `json:"used,omitempty"`
	// Changed are the other objects the write changed or removed (a root
	// volume deleted with its server, a lease given back), as they were
	// before; Created those it made, as they are after.
	Changed []Object `json:"changed,omitempty"`
	Created []Object `json:"created,omitempty"`
}

// Objects are every object the write names: its target, then what it
// used, changed and created.
func (w Write) Objects() []Object {
	var out []Object
	if w.Target != nil {
		out = append(out, *w.Target)
	}
	out = append(out, w.Used...)
	out = append(out, w.Changed...)
	return append(out, w.Created...)
}

// Audit is the record of every write, in the order the emulator answered
// them.
type Audit struct {
	mu     sync.Mutex
	seq    int64
	writes []Write
}

// Writes returns the writes recorded so far.
func (a *Audit) Writes() []Write {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.writes)
}

// Since returns the writes recorded after the first n (Len at a mark).
func (a *Audit) Since(n int) []Write {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > len(a.writes) {
		n = len(a.writes)
	}
	return slices.Clone(a.writes[n:])
}

// Len is how many writes were recorded so far: a mark for Since.
func (a *Audit) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.writes)
}

func (a *Audit) record(w Write) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	w.Seq = a.seq
	a.writes = append(a.writes, w)
}

// CallerToken names a bearer token in the audit: a digest, never the
// secret itself.
func CallerToken(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return "token sha256:" + hex.EncodeToString(sum[:6])
}

// CallerKey names an API key (its public part) in the audit.
func CallerKey(key string) string {
	if key == "" {
		return ""
	}
	return "key " + key
}

// AuditWrite is a write being answered: Begin took the world as the write
// found it, End records what it did. Both run under the emulator's world
// lock, with the handler between them.
type AuditWrite struct {
	audit  *Audit
	w      Write
	skip   []string
	before map[string]indexed
}

// indexed is one object of a world, and its state for telling changes.
type indexed struct {
	kind  string
	value reflect.Value
	state []byte
}

// WriteOf says what a write is, for BeginWrite.
type WriteOf struct {
	// Route is the harness's name of the request's route.
	Route string
	// Caller names the request's credentials (CallerToken, CallerKey).
	Caller string
	// Target is the ID of the object the path names ("" for none).
	Target string
	// Body is the request's body (PeekBody).
	Body []byte
	// Skip are kinds of the world left out: bookkeeping (operations), not
	// objects anyone owns.
	Skip []string
}

// BeginWrite starts auditing a write to world, a pointer to the struct
// whose map fields (string IDs to objects) are the account's collections:
// every such field is audited, a collection added later too, except the
// kinds WriteOf.Skip names.
func (h *Harness) BeginWrite(world any, r *http.Request, of WriteOf) *AuditWrite {
	aw := &AuditWrite{audit: &h.audit, skip: of.Skip}
	aw.w = Write{Time: time.Now(), Method: r.Method, Route: of.Route, Path: r.URL.Path, Caller: of.Caller, Agent: r.UserAgent()}
	aw.before = index(world, of.Skip)
	if o, ok := aw.before[of.Target]; ok && of.Target != "" {
		t := describe(of.Target, o, aw.before)
		aw.w.Target = &t
	}
	walkStrings(of.Body, func(id string) {
		if o, ok := aw.before[id]; ok && id != of.Target && !slices.ContainsFunc(aw.w.Used, func(u Object) bool { return u.ID == id }) {
			aw.w.Used = append(aw.w.Used, describe(id, o, aw.before))
		}
	})
	return aw
}

// End records the write with the API's answer and what it changed.
func (aw *AuditWrite) End(world any, status int) {
	aw.w.Status = status
	after := index(world, aw.skip)
	for _, id := range sortedIDs(aw.before) {
		o := aw.before[id]
		if aw.w.Target != nil && id == aw.w.Target.ID {
			continue
		}
		now, there := after[id]
		if !there || !bytes.Equal(now.state, o.state) {
			aw.w.Changed = append(aw.w.Changed, describe(id, o, aw.before))
		}
	}
	for _, id := range sortedIDs(after) {
		if _, was := aw.before[id]; !was {
			aw.w.Created = append(aw.w.Created, describe(id, after[id], after))
		}
	}
	aw.audit.record(aw.w)
}

// Audit is the record of the writes the emulated API answered.
func (h *Harness) Audit() *Audit { return &h.audit }

// index lists every object of world's collections by ID, with its state
// (its JSON, as the state file holds it).
func index(world any, skip []string) map[string]indexed {
	out := map[string]indexed{}
	v := reflect.ValueOf(world)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return out
	}
	v = v.Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		fv := v.Field(i)
		if !f.IsExported() || fv.Kind() != reflect.Map || f.Type.Key().Kind() != reflect.String || f.Type.Elem().Kind() != reflect.Pointer ||
			f.Type.Elem().Elem().Kind() != reflect.Struct {
			continue
		}
		kind, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if kind == "" {
			kind = f.Name
		}
		if slices.Contains(skip, kind) {
			continue
		}
		iter := fv.MapRange()
		for iter.Next() {
			state, _ := json.Marshal(iter.Value().Interface())
			out[iter.Key().String()] = indexed{kind: kind, value: iter.Value(), state: state}
		}
	}
	return out
}

// describe is an object of the index as the audit shows it, with the
// objects it links to.
func describe(id string, o indexed, ix map[string]indexed) Object {
	obj := shallow(id, o)
	var links []string
	walkStrings(o.state, func(s string) {
		if _, ok := ix[s]; ok && s != id && !slices.Contains(links, s) {
			links = append(links, s)
		}
	})
	for _, l := range links {
		obj.Links = append(obj.Links, shallow(l, ix[l]))
	}
	return obj
}

// shallow is an object without its links: its kind, name and identity,
// read from the fields every kind that has them names alike (Name; Tags
// or Labels; Description).
func shallow(id string, o indexed) Object {
	obj := Object{Kind: o.kind, ID: id}
	s := o.value.Elem()
	if f := s.FieldByName("Name"); f.IsValid() && f.Kind() == reflect.String {
		obj.Name = f.String()
	}
	if f := s.FieldByName("Description"); f.IsValid() && f.Kind() == reflect.String {
		obj.Description = f.String()
	}
	for _, name := range []string{"Tags", "Labels"} {
		f := s.FieldByName(name)
		if !f.IsValid() || f.Type() != reflect.TypeFor[map[string]string]() {
			continue
		}
		obj.Identity = map[string]string{}
		for k, v := range f.Interface().(map[string]string) {
			obj.Identity[k] = v
		}
	}
	return obj
}

// PeekBody reads a request's body and leaves it to be read again.
func PeekBody(r *http.Request) []byte {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// walkStrings calls f with every string in a JSON document, keys of
// objects included (a lease map is keyed by instance ID).
func walkStrings(doc []byte, f func(string)) {
	var v any
	if len(doc) == 0 || json.Unmarshal(doc, &v) != nil {
		return
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			f(v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				f(k)
				walk(v[k])
			}
		}
	}
	walk(v)
}

func sortedIDs(m map[string]indexed) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
