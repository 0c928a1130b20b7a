package exoscale

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// maxBody bounds what a request may carry: user data is at most 32 KiB of
// base64, everything else is smaller.
const maxBody = 1 << 20

// call is one API request being answered, under the world lock.
type call struct {
	e      *Emulator
	r      *http.Request
	now    time.Time
	zone   string
	acct   *account
	conf   *Account
	params map[string]string
	body   []byte
	// base is scheme://host of the request: endpoints and links point back
	// at the emulator as the client reached it.
	base string
}

// reply is an API answer: a status and a JSON body.
type reply struct {
	status int
	body   any
}

func ok(body any) reply { return reply{http.StatusOK, body} }

func (r reply) failed() bool { return r.status >= 300 }

// message is the error body of the real API: {"message": "..."}.
func message(status int, format string, args ...any) reply {
	return reply{status, map[string]string{"message": fmt.Sprintf(format, args...)}}
}

func notFound(kind, id string) reply {
	return message(http.StatusNotFound, "%s %s not found", kind, id)
}

func badRequest(format string, args ...any) reply {
	return message(http.StatusBadRequest, format, args...)
}

func conflict(format string, args ...any) reply {
	return message(http.StatusConflict, format, args...)
}

// invalid is the real API's 400 for a field: "Invalid value in disk-size
// (description: `Instance disk size in GiB`) - should be an Integer between
// 10 51200". The description is the field's in the vendor's document.
func invalid(field, description, should string) reply {
	return badRequest("Invalid value in %s (description: `%s`) - should be %s", field, description, should)
}

// handler answers one route. Handlers validate everything before they change
// the world, so a refused request changes nothing.
type handler func(c *call) reply

// serveAPI answers every API request: zone, route, signature, then the
// route's handler under the world lock.
func (e *Emulator) serveAPI(w http.ResponseWriter, r *http.Request) {
	zone, path, found := splitZone(r.URL.Path)
	if !found {
		writeReply(w, message(http.StatusNotFound, "Not found: %s", r.URL.Path))
		return
	}
	rt, params, allowed := e.router.match(r.Method, path)
	if rt == nil {
		if allowed {
			writeReply(w, message(http.StatusMethodNotAllowed, "Method %s not allowed on %s", r.Method, path))
			return
		}
		writeReply(w, message(http.StatusNotFound, "Not found: %s", path))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeReply(w, badRequest("Could not read the request body"))
		return
	}
	if len(body) > maxBody {
		writeReply(w, message(http.StatusRequestEntityTooLarge, "Request body larger than %d bytes", maxBody))
		return
	}
	c := &call{e: e, r: r, zone: zone, params: params, body: body, base: baseURL(r)}
	// A public route (the zone list) needs no signature; one that is
	// signed is authenticated and held to the key's role all the same, as
	// the real API does.
	if !rt.public || r.Header.Get("Authorization") != "" {
		conf, rep := e.authenticate(r, body)
		if rep != nil {
			writeReply(w, *rep)
			return
		}
		c.conf = conf
	}

	e.mu.Lock()
	// Every write is audited here, before the handler looks at anything:
	// the one place every route passes through.
	audit := func() *harness.AuditWrite {
		if !rt.write || c.conf == nil {
			return nil
		}
		return e.harness.BeginWrite(e.world.Accounts[c.conf.Name], r, harness.WriteOf{
			Route: rt.Name(), Caller: harness.CallerKey(c.conf.Key), Target: pathObject(params), Body: body, Skip: auditSkip,
		})
	}
	if c.conf != nil && c.conf.Policy != nil && !c.conf.Policy.allows(rt.operation) {
		// The role is checked before anything is looked at.
		e.refused(c.conf.Key, rt.operation)
		if a := audit(); a != nil {
			a.End(e.world.Accounts[c.conf.Name], http.StatusForbidden)
		}
		e.mu.Unlock()
		writeReply(w, forbidden())
		return
	}
	c.now = e.now()
	e.settle(c.now)
	if c.conf != nil {
		c.acct = e.world.Accounts[c.conf.Name]
	}
	a := audit()
	rep := rt.h(c)
	if rt.write && !rep.failed() {
		e.saveLocked()
	}
	if a != nil {
		a.End(c.acct, rep.status)
	}
	e.mu.Unlock()
	writeReply(w, rep)
}

// saveLocked writes the state file, if there is one; e.mu is held.
func (e *Emulator) saveLocked() {
	if e.cfg.StateFile == "" {
		return
	}
	if err := saveState(e.cfg.StateFile, e.world); err != nil {
		log.Printf("exoscale emulator: saving state: %v", err)
	}
}

// auditSkip are the account's collections the audit leaves out: the
// operations are the API's bookkeeping of writes, not objects anyone owns.
var auditSkip = []string{"operations"}

// pathObject is the object a route's path names: its ID, or the name of
// an SSH key (keyed by name).
func pathObject(params map[string]string) string {
	if id := params["id"]; id != "" {
		return id
	}
	return params["name"]
}

// authenticate finds the account whose key signed the request and checks
// the signature; the reply is the real API's 403 when that fails.
func (e *Emulator) authenticate(r *http.Request, body []byte) (*Account, *reply) {
	refuse := func(msg string) (*Account, *reply) {
		rep := message(http.StatusForbidden, "%s", msg)
		return nil, &rep
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return refuse("Missing Authorization header: requests must be signed (" + authScheme + ")")
	}
	a, err := parseAuthorization(h)
	if err != nil {
		return refuse("Malformed Authorization header: expected " + authScheme + " credential=...,expires=...,signature=...")
	}
	conf := e.keys[a.Key]
	if conf == nil {
		return refuse("Invalid API key")
	}
	if msg := a.verify(conf.Secret, r.Method, r.URL.EscapedPath(), body, r.URL.Query(), time.Now()); msg != "" {
		return refuse(msg)
	}
	return conf, nil
}

// adminAuthorized lets the admin endpoint (fault rules, counters) and
// /metrics answer only requests with an account's credentials, as the API
// itself: signed as API calls are, or with HTTP basic authentication of an
// account's key and secret (curl -u KEY:SECRET).
func (e *Emulator) adminAuthorized(r *http.Request) bool {
	if key, secret, ok := r.BasicAuth(); ok {
		conf := e.keys[key]
		return conf != nil && subtle.ConstantTimeCompare([]byte(conf.Secret), []byte(secret)) == 1
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	_, rep := e.authenticate(r, body)
	return rep == nil
}

func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func writeReply(w http.ResponseWriter, rep reply) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(rep.body); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	_, _ = w.Write(buf.Bytes())
}

// endpoint is the API endpoint of a zone as the client reached the
// emulator; the default zone's is the bare /v2, as on the real cloud the
// SDK's default endpoint is ch-gva-2's.
func (c *call) endpoint(zone string) string {
	if zone == defaultZone {
		return c.base + "/v2"
	}
	return c.base + "/" + zone + "/v2"
}

// fieldDoc describes a request field for the real API's 400: its
// description in the vendor's document and what it should be.
type fieldDoc struct{ description, should string }

func (f fieldDoc) invalid(field string) reply { return invalid(field, f.description, f.should) }

// decode reads the JSON body into v. Unknown fields are ignored, as by the
// real API; a field of the wrong type is refused with its fieldDoc.
func (c *call) decode(v any, docs map[string]fieldDoc) *reply {
	if len(bytes.TrimSpace(c.body)) == 0 {
		r := badRequest("Missing request body: a JSON object is required")
		return &r
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			// encoding/json names a field of an embedded struct with the
			// struct's Go name in front; the API knows only its own names.
			path := strings.TrimPrefix(te.Field, "memberRequest.")
			field := path
			if i := strings.IndexByte(field, '.'); i >= 0 {
				field = field[:i]
			}
			if d, known := docs[field]; known {
				r := d.invalid(field)
				return &r
			}
			r := badRequest("Invalid value in %s - should be %s", path, jsonKind(te.Type.Kind().String()))
			return &r
		}
		r := badRequest("Malformed JSON body: %v", err)
		return &r
	}
	return nil
}

// fields returns which top-level fields the body sets, because some
// updates tell an absent field from a null one.
func (c *call) fields() map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(c.body, &m)
	return m
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an Integer"
	case goKind == "string":
		return "a String"
	case goKind == "bool":
		return "a Boolean"
	case goKind == "slice":
		return "an Array"
	case goKind == "map", goKind == "struct", goKind == "ptr":
		return "an Object"
	}
	return "of another type"
}
