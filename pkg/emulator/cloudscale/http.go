package cloudscale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// call is one API request being answered, under the world lock.
type call struct {
	r    *http.Request
	now  time.Time
	base string // scheme://host/ of the request, for hrefs
}

// reply is an API answer: a status and a JSON body (nil for none).
type reply struct {
	status int
	body   any
}

func ok(body any) reply      { return reply{http.StatusOK, body} }
func created(body any) reply { return reply{http.StatusCreated, body} }

var noContent = reply{status: http.StatusNoContent}

func notFound() reply { return detail(http.StatusNotFound, "Not found.") }

func detail(status int, msg string) reply {
	return reply{status, map[string]string{"detail": msg}}
}

// invalid is a 400 naming the field at fault, in the flat {"field": "message"}
// shape the SDK decodes.
func invalid(field, format string, args ...any) reply {
	return reply{http.StatusBadRequest, map[string]string{field: fmt.Sprintf(format, args...)}}
}

func (r reply) failed() bool { return r.status >= 300 }

// handler answers one route. Handlers validate everything before they change
// the world, so a refused request changes nothing.
type handler func(c *call) reply

// handle registers a route. Every route goes through auth, settles pending
// status changes first, is audited when it writes and, after a successful
// write, saves the state.
func (e *Emulator) handle(mux *http.ServeMux, pattern string, h handler) {
	write := !strings.HasPrefix(pattern, "GET ")
	e.patterns = append(e.patterns, pattern)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rep, allowed := e.authorize(r, write)
		if !allowed && rep.status == http.StatusUnauthorized {
			// No credentials the account knows: nobody to audit.
			writeReply(w, rep)
			return
		}
		e.mu.Lock()
		now := e.now()
		e.world.settle(now)
		c := &call{r: r, now: now, base: baseURL(r)}
		var audit *harness.AuditWrite
		if write {
			// Every write is audited here, before the handler changes
			// anything: the one place every route passes through.
			audit = e.harness.BeginWrite(e.world, r, harness.WriteOf{
				Route: pattern, Caller: harness.CallerToken(bearer(r)), Target: c.id(), Body: harness.PeekBody(r),
			})
		}
		if allowed {
			rep = h(c)
		}
		if write && !rep.failed() {
			e.saveLocked()
		}
		if audit != nil {
			audit.End(e.world, rep.status)
		}
		e.mu.Unlock()
		writeReply(w, rep)
	})
}

// saveLocked writes the state file, if there is one; e.mu is held.
func (e *Emulator) saveLocked() {
	if e.cfg.StateFile == "" {
		return
	}
	if err := saveState(e.cfg.StateFile, e.world); err != nil {
		log.Printf("cloudscale emulator: saving state: %v", err)
	}
}

// bearer is the request's API token, "" for none.
func bearer(r *http.Request) string {
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found {
		return ""
	}
	return strings.TrimSpace(token)
}

func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/"
}

func writeReply(w http.ResponseWriter, rep reply) {
	if rep.body == nil {
		w.WriteHeader(rep.status)
		return
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(rep.body); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	_, _ = w.Write(buf.Bytes())
}

func (e *Emulator) authorize(r *http.Request, write bool) (reply, bool) {
	token := bearer(r)
	if token == "" {
		return detail(http.StatusUnauthorized, "Authentication credentials were not provided."), false
	}
	tokens := *e.tokens.Load()
	if len(tokens) == 0 {
		return reply{}, true
	}
	access, known := tokens[token]
	if !known {
		return detail(http.StatusUnauthorized, "Invalid token."), false
	}
	if write && access == ReadOnly {
		return detail(http.StatusForbidden, "You do not have permission to perform this action."), false
	}
	return reply{}, true
}

// adminAuthorized guards the admin endpoint and /metrics: with tokens
// configured they take the API's tokens, any of them for reading and a
// read-write one for changes (faults), so whoever may not use the account
// may not break or watch it either. Without tokens they are open, as the
// API is to any token.
func (e *Emulator) adminAuthorized(r *http.Request) bool {
	if len(*e.tokens.Load()) == 0 {
		return true
	}
	_, allowed := e.authorize(r, r.Method != http.MethodGet && r.Method != http.MethodHead)
	return allowed
}

// decode reads the JSON request body into v. Unknown fields are ignored, as
// by the real API.
func (c *call) decode(v any) *reply {
	body, fields, rep := c.fields()
	if rep != nil {
		return rep
	}
	if len(fields) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		r := invalid("non_field_errors", "Invalid data: %v", err)
		if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
			r = invalid(te.Field, "Invalid value: expected %s.", te.Type)
		}
		return &r
	}
	return nil
}

// fields reads the request body as a JSON object and returns which keys it
// set, because PATCH distinguishes an absent field from a null one.
func (c *call) fields() ([]byte, map[string]json.RawMessage, *reply) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(c.r.Body); err != nil {
		r := detail(http.StatusBadRequest, "Could not read the request body.")
		return nil, nil, &r
	}
	if len(bytes.TrimSpace(buf.Bytes())) == 0 {
		return nil, map[string]json.RawMessage{}, nil
	}
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(buf.Bytes(), &fields); err != nil {
		r := detail(http.StatusBadRequest, "JSON parse error - "+err.Error())
		return nil, nil, &r
	}
	return buf.Bytes(), fields, nil
}

// patch decodes a PATCH body into v and returns the names of the fields set,
// tags aside. The real API changes one attribute per request (tags may come
// along), and says so when asked for more.
func (c *call) patch(v any, oneAtATime bool) (map[string]bool, *reply) {
	body, fields, rep := c.fields()
	if rep != nil {
		return nil, rep
	}
	set := map[string]bool{}
	for k := range fields {
		if k != "tags" {
			set[k] = true
		}
	}
	if oneAtATime && len(set) > 1 {
		r := invalid("non_field_errors", "Only one attribute can be updated at a time (tags aside).")
		return nil, &r
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, v); err != nil {
			r := invalid("non_field_errors", "Invalid data: %v", err)
			return nil, &r
		}
	}
	return set, nil
}

// matchesQuery applies the list filters of the real API: tag:<key>=<value>
// (value equal), tag:<key>= (key present) and name=<name>.
func (c *call) matchesQuery(m *meta, name string) bool {
	for key, values := range c.r.URL.Query() {
		if tag, isTag := strings.CutPrefix(key, "tag:"); isTag {
			have, present := m.Tags[tag]
			for _, want := range values {
				if !present || (want != "" && have != want) {
					return false
				}
			}
			continue
		}
		if key == "name" {
			for _, want := range values {
				if want != name {
					return false
				}
			}
		}
	}
	return true
}

// list renders the resources of m that pass the query's filters.
func list[T resource, R any](c *call, m map[string]T, name func(T) string, render func(*call, T) R) reply {
	out := []any{}
	for _, v := range sorted(m) {
		if c.matchesQuery(v.base(), name(v)) {
			out = append(out, render(c, v))
		}
	}
	return ok(out)
}

// id is the resource the request's path names: {uuid}, or {ip} for
// floating IPs.
func (c *call) id() string {
	if id := c.r.PathValue("uuid"); id != "" {
		return id
	}
	return c.r.PathValue("ip")
}

// find looks up the resource the path names; the reply is the real API's 404
// when there is none.
func find[T resource](c *call, m map[string]T) (T, *reply) {
	v, found := m[c.id()]
	if !found {
		r := notFound()
		return v, &r
	}
	return v, nil
}

// get answers GET of one resource.
func get[T resource, R any](c *call, m map[string]T, render func(*call, T) R) reply {
	v, r := find(c, m)
	if r != nil {
		return *r
	}
	return ok(render(c, v))
}

// setTags replaces the tags when the request gave some: PATCH of tags
// replaces the whole map, as on the real API.
func (m *meta) setTags(t *map[string]string) {
	if t != nil {
		m.Tags = tagsOrEmpty(t)
	}
}

func (c *call) href(kind, id string) string { return c.base + "v1/" + kind + "/" + id }

func tagsOrEmpty(t *map[string]string) map[string]string {
	if t == nil || *t == nil {
		return map[string]string{}
	}
	out := make(map[string]string, len(*t))
	for k, v := range *t {
		out[k] = v
	}
	return out
}

func validTags(t *map[string]string) *reply {
	if t == nil {
		return nil
	}
	for k, v := range *t {
		if k == "" || len(k) > 64 || len(v) > 255 {
			r := invalid("tags", "Tag keys must be 1 to 64 characters and values at most 255 characters; %q is not.", k)
			return &r
		}
	}
	return nil
}

// SetTokens replaces the API tokens and what each may do, from the next
// request on (nil or empty: any token, with write access), as an account
// owner makes and revokes tokens in the control panel.
func (e *Emulator) SetTokens(tokens map[string]Access) {
	t := maps.Clone(tokens)
	e.tokens.Store(&t)
}
