package harness

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A world as the emulators keep theirs: collections of objects by ID, and
// one field that is no collection.
type auditWorld struct {
	Seq     int64                   `json:"seq"`
	Parents map[string]*auditParent `json:"parents"`
	Kids    map[string]*auditKid    `json:"kids"`
	Ops     map[string]*auditKid    `json:"ops"`
}

type auditParent struct {
	Name string            `json:"name"`
	Tags map[string]string `json:"tags"`
}

type auditKid struct {
	Parent string            `json:"parent"`
	Labels map[string]string `json:"labels"`
	Blob   string            `json:"blob"`
}

// The audit finds what a write names and what it changed besides, as it
// was before: deleting a parent takes its kid along (which names it), the
// kid's labels as they were even though the handler changed them first;
// an object that names neither stays out; what the write made is there;
// a skipped kind is not looked at.
func TestAuditFindsWhatAWriteChanged(t *testing.T) {
	w := &auditWorld{
		Parents: map[string]*auditParent{"p1": {Name: "one", Tags: map[string]string{"owner": "a"}}, "p2": {Name: "two"}},
		Kids: map[string]*auditKid{"k1": {Parent: "p1", Labels: map[string]string{"owner": "a"}, Blob: strings.Repeat("x", 1000)},
			"k2": {Parent: "p2"}},
		Ops: map[string]*auditKid{"o1": {Parent: "p1"}},
	}
	h, err := New(http.NewServeMux(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodDelete, "/parents/p1", strings.NewReader(`{"also":["k2"]}`))
	r.Header.Set("User-Agent", "tester")
	aw := h.BeginWrite(w, r, WriteOf{Route: "DELETE /parents/{id}", Caller: CallerKey("k"), Target: "p1", Body: PeekBody(r), Skip: []string{"ops"}})
	w.Kids["k1"].Labels["owner"] = "changed"
	delete(w.Kids, "k1")
	delete(w.Parents, "p1")
	delete(w.Ops, "o1")
	w.Kids["k3"] = &auditKid{Parent: "p2", Labels: map[string]string{"owner": "b"}}
	aw.End(w, http.StatusNoContent)

	got := h.Audit().Writes()
	if len(got) != 1 {
		t.Fatalf("audited %d writes", len(got))
	}
	a := got[0]
	b, _ := json.Marshal(a)
	if a.Target == nil || a.Target.Kind != "parents" || a.Target.Name != "one" || a.Target.Identity["owner"] != "a" || a.Agent != "tester" || a.Caller != "key k" || a.Status != http.StatusNoContent {
		t.Errorf("write %s: want the parent p1 with its tags as target", b)
	}
	if len(a.Used) != 1 || a.Used[0].ID != "k2" || len(a.Used[0].Links) != 1 || a.Used[0].Links[0].ID != "p2" {
		t.Errorf("used %+v, want k2, linked to its parent p2", a.Used)
	}
	if len(a.Changed) != 1 || a.Changed[0].ID != "k1" || a.Changed[0].Identity["owner"] != "a" {
		t.Errorf("changed %+v, want k1 alone, with its labels as they were (owner a)", a.Changed)
	}
	if len(a.Created) != 1 || a.Created[0].ID != "k3" || a.Created[0].Identity["owner"] != "b" {
		t.Errorf("created %+v, want k3 as made", a.Created)
	}
	if strings.Contains(string(b), "o1") || strings.Contains(string(b), strings.Repeat("x", 100)) {
		t.Errorf("the audit shows a skipped kind or an object's data: %s", b)
	}
}

// The admin endpoint shows the audit.
func TestAdminShowsTheAudit(t *testing.T) {
	h, err := New(http.NewServeMux(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := &auditWorld{Parents: map[string]*auditParent{"p1": {Tags: map[string]string{"owner": "a"}}}}
	r := httptest.NewRequest(http.MethodPatch, "/parents/p1", nil)
	h.BeginWrite(w, r, WriteOf{Route: "PATCH /parents/{id}", Target: "p1"}).End(w, http.StatusOK)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, AdminPrefix+"writes", nil))
	var body struct{ Writes []Write }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK || len(body.Writes) != 1 || body.Writes[0].Target.Identity["owner"] != "a" {
		t.Errorf("GET %swrites: %d %s (%v)", AdminPrefix, rec.Code, rec.Body.String(), err)
	}
}

// With NoWriteAudit a write is not looked at, nor recorded: the benchmarks'
// emulators, whose accounts the audit's index of every write would slow.
func TestNoWriteAuditRecordsNothing(t *testing.T) {
	w := &auditWorld{Parents: map[string]*auditParent{"p1": {Name: "one"}}}
	h, err := New(http.NewServeMux(), Options{NoWriteAudit: true})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodDelete, "/parents/p1", nil)
	if aw := h.BeginWrite(w, r, WriteOf{Route: "DELETE /parents/{id}", Target: "p1"}); aw != nil {
		t.Errorf("BeginWrite began an audit: %+v", aw)
	}
	if n := h.Audit().Len(); n != 0 {
		t.Errorf("audited %d writes, want none", n)
	}
}
