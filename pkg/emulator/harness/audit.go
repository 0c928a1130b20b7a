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

// AuditWrite is a write being answered: BeginWrite took the world as the
// write found it, End records what it did. Both run under the emulator's
// world lock, with the handler between them.
type AuditWrite struct {
	audit  *Audit
	w      Write
	skip   []string
	before map[string]indexed
	counts map[string]int
	// near are the objects the write may change besides its target, each
	// described and serialized as it was (describe): what it names, what
	// those link to and what links to them.
	near map[string]nearObject
}

type nearObject struct {
	obj   Object
	state []byte
}

// indexed is one object of a world.
type indexed struct {
	kind  string
	value reflect.Value
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
// kinds WriteOf.Skip names. Nil, and nothing recorded, with
// Options.NoWriteAudit.
func (h *Harness) BeginWrite(world any, r *http.Request, of WriteOf) *AuditWrite {
	if h.noAudit {
		return nil
	}
	aw := &AuditWrite{audit: &h.audit, skip: of.Skip, near: map[string]nearObject{}}
	aw.w = Write{Time: time.Now(), Method: r.Method, Route: of.Route, Path: r.URL.Path, Caller: of.Caller, Agent: r.UserAgent()}
	aw.before, aw.counts = index(world, of.Skip)
	named := map[string]bool{}
	if _, ok := aw.before[of.Target]; ok && of.Target != "" {
		t := aw.describe(of.Target)
		aw.w.Target = &t
		named[of.Target] = true
	}
	walkStrings(of.Body, func(id string) {
		if _, ok := aw.before[id]; ok && !named[id] {
			aw.w.Used = append(aw.w.Used, aw.describe(id))
			named[id] = true
		}
	})
	// What a write changes besides what it names is linked to that, one
	// way or the other: a server's root volume and floating IPs, the
	// members of a pool, the network that leases an instance an address.
	for id := range named {
		for _, l := range aw.near[id].obj.Links {
			aw.describe(l.ID)
		}
	}
	for id, o := range aw.before {
		if _, done := aw.near[id]; !done && mentions(o.value, named) {
			aw.describe(id)
		}
	}
	return aw
}

// describe is an object of the world before the write as the audit shows
// it, with the objects it links to, noted as near.
func (aw *AuditWrite) describe(id string) Object {
	if n, ok := aw.near[id]; ok {
		return n.obj
	}
	o := aw.before[id]
	state, _ := json.Marshal(o.value.Interface())
	obj := shallow(id, o)
	var links []string
	walkStrings(state, func(s string) {
		if _, ok := aw.before[s]; ok && s != id && !slices.Contains(links, s) {
			links = append(links, s)
		}
	})
	for _, l := range links {
		obj.Links = append(obj.Links, shallow(l, aw.before[l]))
	}
	aw.near[id] = nearObject{obj: obj, state: state}
	return obj
}

// End records the write with the API's answer and what it changed: the
// objects near it whose state differs now, and every object gone.
func (aw *AuditWrite) End(world any, status int) {
	aw.w.Status = status
	after := collections(world, aw.skip)
	there := func(kind, id string) bool {
		m := after[kind]
		return m.IsValid() && m.MapIndex(reflect.ValueOf(id).Convert(m.Type().Key())).IsValid()
	}
	removed := map[string]int{}
	for id, o := range aw.before {
		gone := !there(o.kind, id)
		if gone {
			removed[o.kind]++
		}
		if aw.w.Target != nil && id == aw.w.Target.ID {
			continue
		}
		n, near := aw.near[id]
		switch {
		case gone && near:
			aw.w.Changed = append(aw.w.Changed, n.obj)
		case gone:
			aw.w.Changed = append(aw.w.Changed, shallow(id, o))
		case near:
			now := after[o.kind].MapIndex(reflect.ValueOf(id).Convert(after[o.kind].Type().Key()))
			if state, _ := json.Marshal(now.Interface()); !bytes.Equal(state, n.state) {
				aw.w.Changed = append(aw.w.Changed, n.obj)
			}
		}
	}
	// A kind holds new objects when it has more than were left of it.
	for kind, m := range after {
		if m.Len() == aw.counts[kind]-removed[kind] {
			continue
		}
		iter := m.MapRange()
		for iter.Next() {
			if id := iter.Key().String(); aw.before[id].kind != kind {
				aw.w.Created = append(aw.w.Created, shallow(id, indexed{kind: kind, value: iter.Value()}))
			}
		}
	}
	sortObjects(aw.w.Changed)
	sortObjects(aw.w.Created)
	aw.audit.record(aw.w)
}

func sortObjects(objs []Object) {
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.ID, b.ID) })
}

// Audit is the record of the writes the emulated API answered.
func (h *Harness) Audit() *Audit { return &h.audit }

// collections are the map fields of world by kind (their JSON name):
// every field that maps string IDs to pointers to structs, except the
// kinds in skip.
func collections(world any, skip []string) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	v := reflect.ValueOf(world)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return out
	}
	v = v.Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Type.Kind() != reflect.Map || f.Type.Key().Kind() != reflect.String || f.Type.Elem().Kind() != reflect.Pointer ||
			f.Type.Elem().Elem().Kind() != reflect.Struct {
			continue
		}
		kind, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if kind == "" {
			kind = f.Name
		}
		if !slices.Contains(skip, kind) {
			out[kind] = v.Field(i)
		}
	}
	return out
}

// index lists every object of world's collections by ID, and counts each
// kind's.
func index(world any, skip []string) (map[string]indexed, map[string]int) {
	out, counts := map[string]indexed{}, map[string]int{}
	for kind, m := range collections(world, skip) {
		counts[kind] = m.Len()
		iter := m.MapRange()
		for iter.Next() {
			out[iter.Key().String()] = indexed{kind: kind, value: iter.Value()}
		}
	}
	return out, counts
}

// maxIDLen bounds the strings mentions compares: identifiers and names
// are short, user data is not.
const maxIDLen = 256

// mentions says whether v holds one of ids in a string, a slice, a map's
// keys or values, at any depth.
func mentions(v reflect.Value, ids map[string]bool) bool {
	// Tags and labels without reflection's map iteration.
	if v.Type() == stringMap && v.CanInterface() {
		for k, val := range v.Interface().(map[string]string) {
			if ids[k] || len(val) <= maxIDLen && ids[val] {
				return true
			}
		}
		return false
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && mentions(v.Elem(), ids)
	case reflect.String:
		s := v.String()
		return len(s) <= maxIDLen && ids[s]
	case reflect.Struct:
		for _, i := range stringFields(v.Type()) {
			if mentions(v.Field(i), ids) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if !holdsStrings(v.Type().Elem()) {
			return false
		}
		for i := range v.Len() {
			if mentions(v.Index(i), ids) {
				return true
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if mentions(iter.Key(), ids) || mentions(iter.Value(), ids) {
				return true
			}
		}
	}
	return false
}

var stringMap = reflect.TypeFor[map[string]string]()

// stringFieldsOf caches stringFields, by struct type.
var stringFieldsOf sync.Map

// stringFields are the fields of a struct type that may hold a string;
// time.Time's hold none that name an object.
func stringFields(t reflect.Type) []int {
	if f, ok := stringFieldsOf.Load(t); ok {
		return f.([]int)
	}
	var out []int
	if t != reflect.TypeFor[time.Time]() {
		for i := range t.NumField() {
			if holdsStrings(t.Field(i).Type) {
				out = append(out, i)
			}
		}
	}
	stringFieldsOf.Store(t, out)
	return out
}

// holdsStrings says whether a value of t may hold a string.
func holdsStrings(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Interface, reflect.Map:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return t.Elem().Kind() != reflect.Uint8 && holdsStrings(t.Elem())
	case reflect.Struct:
		return len(stringFields(t)) > 0
	}
	return false
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
