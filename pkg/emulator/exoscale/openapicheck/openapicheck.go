// Package openapicheck holds the Exoscale emulator to the vendor's own
// description of API v2: a middleware validates every request the emulator
// accepts and every answer it gives against Exoscale's OpenAPI document, and
// counts what it checked, so a test run can say which operations it covered.
//
// It is for tests. The document is Exoscale's and is not part of this
// repository: DocumentPath says where it is looked for.
package openapicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// EnvDocument names an environment variable that, when set, is the path of
// the document.
const EnvDocument = "EXOSCALE_OPENAPI_DOCUMENT"

// Origin says where the document comes from, for skip messages.
const Origin = "Exoscale's OpenAPI description of API v2 is the generator input of the SDK: " +
	"file v3/generator/source.yaml of github.com/exoscale/egoscale at tag v3.1.43 (Apache License 2.0)"

// DocumentPath is where the document is expected: $EXOSCALE_OPENAPI_DOCUMENT,
// or shared/exoscale/openapi-v2.yaml beside the repository (the directory
// above the one holding go.mod), as CI provides it.
func DocumentPath() string {
	if p := os.Getenv(EnvDocument); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(dir), "shared", "exoscale", "openapi-v2.yaml")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// ErrNoDocument is returned by Load when the document is not there.
var ErrNoDocument = errors.New("the Exoscale OpenAPI document is not there")

// serverURL is the base the document's paths are routed under: requests are
// checked with their zone prefix and host replaced by it.
const serverURL = "http://emulator/v2"

// Checker validates traffic against the document and counts what it did.
type Checker struct {
	// Requests are checked against the document as published (the SDK
	// sends more than it lists, e.g. a zero created-at in a template
	// reference, which the real API ignores), answers against strictDoc.
	doc, strictDoc       *openapi3.T
	router, strictRouter routers.Router
	opts                 *openapi3filter.Options

	mu          sync.Mutex
	ops         map[string]*OperationStats
	errorBodies int
	violations  int
}

// OperationStats is what was checked of one operation of the document.
type OperationStats struct {
	// Requests and Responses validated against the operation's schemas.
	Requests, Responses int
}

// Load reads the document and prepares it for checking (see strict).
func Load(path string) (*Checker, error) {
	if path == "" {
		return nil, ErrNoDocument
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDocument, err)
	}
	nullable, err := nullableRefs(path)
	if err != nil {
		return nil, err
	}
	load := func(patch func(*openapi3.T) error) (*openapi3.T, routers.Router, error) {
		doc, err := openapi3.NewLoader().LoadFromFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("loading %s: %w", path, err)
		}
		if err := honourNullable(doc, nullable); err != nil {
			return nil, nil, err
		}
		if err := patch(doc); err != nil {
			return nil, nil, err
		}
		doc.Servers = openapi3.Servers{{URL: serverURL}}
		router, err := gorillamux.NewRouter(doc)
		if err != nil {
			return nil, nil, fmt.Errorf("routing %s: %w", path, err)
		}
		return doc, router, nil
	}
	doc, router, err := load(forRequests)
	if err != nil {
		return nil, err
	}
	strictDoc, strictRouter, err := load(forAnswers)
	if err != nil {
		return nil, err
	}
	uuid := openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC4122)
	return &Checker{
		doc:          doc,
		strictDoc:    strictDoc,
		router:       router,
		strictRouter: strictRouter,
		opts: &openapi3filter.Options{
			// A 2xx the document does not list is a violation.
			IncludeResponseStatus: true,
			// The SDK refers to things with objects of their answer's schema
			// (an instance with its id and a zero created-at to attach it, a
			// security group by its id), whose fields the document marks
			// readOnly; the real API takes them. readOnly is not checked in
			// requests, everything else is.
			ExcludeReadOnlyValidations: true,
			MultiError:                 true,
			SchemaValidationOptions: []openapi3.SchemaValidationOption{
				openapi3.WithStringFormatValidators(map[string]openapi3.StringFormatValidator{
					"uuid": uuid,
					"ipv4": openapi3.NewIPValidator(true),
					"ipv6": openapi3.NewIPValidator(false),
				}),
			},
		},
		ops: map[string]*OperationStats{},
	}, nil
}

// forRequests leaves the document as published. Requests are checked without
// readOnly (see Load).
func forRequests(*openapi3.T) error { return nil }

func property(doc *openapi3.T, schema, name string) (*openapi3.Schema, error) {
	s := doc.Components.Schemas[schema]
	if s == nil || s.Value == nil || s.Value.Properties[name] == nil || s.Value.Properties[name].Value == nil {
		return nil, fmt.Errorf("the document has no %s.%s: is it Exoscale's API v2 description?", schema, name)
	}
	return s.Value.Properties[name].Value, nil
}

// forAnswers tightens the document for checking answers, and adapts it where
// it contradicts the real API:
//
//   - An object schema that lists its properties and says nothing of others
//     accepts only those: an answer with a field the document does not have
//     is a violation, as the emulator must not invent fields.
//   - security-group.rules is writeOnly, yet the real API answers a group's
//     rules (the SDK's SecurityGroup has them, the CLI shows them).
func forAnswers(doc *openapi3.T) error {
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil &&
			len(s.AllOf)+len(s.OneOf)+len(s.AnyOf) == 0 {
			no := false
			s.AdditionalProperties.Has = &no
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		for _, l := range [][]*openapi3.SchemaRef{s.AllOf, s.OneOf, s.AnyOf} {
			for _, x := range l {
				walk(x)
			}
		}
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for _, mt := range op.RequestBody.Value.Content {
					walk(mt.Schema)
				}
			}
			for _, p := range op.Parameters {
				if p.Value != nil {
					walk(p.Value.Schema)
				}
			}
			for _, resp := range op.Responses.Map() {
				if resp.Value != nil {
					for _, mt := range resp.Value.Content {
						walk(mt.Schema)
					}
				}
			}
		}
	}
	rules, err := property(doc, "security-group", "rules")
	if err != nil {
		return err
	}
	rules.WriteOnly = false
	return nil
}

// zonePrefix is the emulator's zone path prefix ("/de-fra-1").
var zonePrefix = regexp.MustCompile(`^/[a-z]{2}-[a-z]{3}-[0-9]+(/v2(/|$))`)

// Wrap returns h with its traffic checked; report receives each violation.
// Admin and metrics requests pass unchecked.
func (c *Checker) Wrap(h http.Handler, report func(violation string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := zonePrefix.ReplaceAllString(r.URL.Path, "$1")
		if !strings.HasPrefix(path, "/v2/") {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			report(fmt.Sprintf("%s %s: reading the request body: %v", r.Method, r.URL.Path, err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		// A lost response (the harness drops the connection) is answered
		// to nobody: nothing to check.
		h.ServeHTTP(rec, r)
		c.check(r, path, body, rec, report)
	})
}

// recorder passes the answer through and keeps a copy.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (c *Checker) check(r *http.Request, path string, body []byte, rec *recorder, report func(string)) {
	fail := func(format string, args ...any) {
		c.mu.Lock()
		c.violations++
		c.mu.Unlock()
		report(fmt.Sprintf("%s %s: ", r.Method, r.URL.Path) + fmt.Sprintf(format, args...))
	}
	if rec.status >= 400 {
		c.checkError(rec, fail)
		return
	}
	req := httptest.NewRequest(r.Method, "http://emulator"+path, bytes.NewReader(body))
	req.URL.RawQuery = r.URL.RawQuery
	req.Header = r.Header.Clone()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		fail("answered %d, but the document has no such operation (%v)", rec.status, err)
		return
	}
	ctx := context.Background()
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: c.opts}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		fail("accepted a request the document refuses:\n%v", err)
		return
	}
	strictRoute, strictParams, err := c.strictRouter.FindRoute(req)
	if err != nil {
		fail("the strict document has no such operation (%v)", err)
		return
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: strictParams, Route: strictRoute, Options: c.opts},
		Status:                 rec.status,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		Options:                c.opts,
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		fail("answered what the document does not allow:\n%v\nbody: %.2000s", err, rec.body.String())
		return
	}
	// An operation's reference names the command that started it: the
	// document's operationId of the route (a GET of an operation names
	// the command it follows).
	var answer struct {
		Reference *struct {
			Command string `json:"command"`
		} `json:"reference"`
	}
	if route.Path != "/operation/{id}" && json.Unmarshal(rec.body.Bytes(), &answer) == nil && answer.Reference != nil &&
		answer.Reference.Command != route.Operation.OperationID {
		fail("answered an operation whose reference.command is %q, but the document calls this operation %q", answer.Reference.Command, route.Operation.OperationID)
		return
	}
	key := r.Method + " " + route.Path
	c.mu.Lock()
	st := c.ops[key]
	if st == nil {
		st = &OperationStats{}
		c.ops[key] = st
	}
	st.Requests++
	st.Responses++
	c.mu.Unlock()
}

// checkError holds error answers to the shape the document leaves out but
// the real API and the SDK share: a JSON object with a "message" string.
func (c *Checker) checkError(rec *recorder, fail func(string, ...any)) {
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		fail("answered %d with Content-Type %q, want application/json", rec.status, ct)
		return
	}
	var m map[string]any
	if err := json.Unmarshal(rec.body.Bytes(), &m); err != nil {
		fail("answered %d with a body that is not a JSON object: %.200s", rec.status, rec.body.String())
		return
	}
	msg, isString := m["message"].(string)
	if len(m) != 1 || !isString || msg == "" {
		fail("answered %d with %.200s, want {\"message\": \"...\"}", rec.status, rec.body.String())
		return
	}
	c.mu.Lock()
	c.errorBodies++
	c.mu.Unlock()
}

// Summary is what a run checked.
type Summary struct {
	// Operations exercised, "METHOD /path" as in the document, and what
	// was validated of each.
	Operations map[string]OperationStats
	// DocumentOperations is how many operations the document describes.
	DocumentOperations int
	// Requests and Responses validated; ErrorBodies checked against the
	// error shape; Violations found.
	Requests, Responses, ErrorBodies, Violations int
}

// Summary returns what was checked so far.
func (c *Checker) Summary() Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Summary{Operations: map[string]OperationStats{}, ErrorBodies: c.errorBodies, Violations: c.violations}
	for k, v := range c.ops {
		s.Operations[k] = *v
		s.Requests += v.Requests
		s.Responses += v.Responses
	}
	for _, item := range c.doc.Paths.Map() {
		s.DocumentOperations += len(item.Operations())
	}
	return s
}

// String renders the summary in one paragraph.
func (s Summary) String() string {
	return fmt.Sprintf("OpenAPI check: %d operations of the document's %d exercised; %d requests and %d responses validated against it, %d error bodies checked, %d violations",
		len(s.Operations), s.DocumentOperations, s.Requests, s.Responses, s.ErrorBodies, s.Violations)
}

// docRoute turns an emulator route ("GET /v2/instance/{id}") into the
// document's ("GET /instance/{id}").
func docRoute(route string) (method, path string) {
	method, path, _ = strings.Cut(route, " ")
	return method, strings.TrimPrefix(path, "/v2")
}

// Missing returns the routes, as the emulator names them, that the document
// does not describe.
func (c *Checker) Missing(routes []string) []string {
	var out []string
	for _, rt := range routes {
		method, path := docRoute(rt)
		item := c.doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			out = append(out, rt)
		}
	}
	return out
}

// Uncovered returns the routes, as the emulator names them, of which no
// request and answer were checked.
func (c *Checker) Uncovered(routes []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, rt := range routes {
		method, path := docRoute(rt)
		if c.ops[method+" "+path] == nil {
			out = append(out, rt)
		}
	}
	sort.Strings(out)
	return out
}

// OperationIDs returns the operationIds of the given routes, as the
// document names them ("create-instance").
func (c *Checker) OperationIDs(routes []string) []string {
	var out []string
	for _, rt := range routes {
		method, path := docRoute(rt)
		if item := c.doc.Paths.Value(path); item != nil {
			if op := item.GetOperation(method); op != nil {
				out = append(out, op.OperationID)
			}
		}
	}
	return slices.Compact(out)
}
