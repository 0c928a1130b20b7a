package exoscale_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/emulator/exoscale/openapicheck"
)

func skipWithoutDocument(t *testing.T) {
	t.Helper()
	if apiCheck == nil {
		t.Skipf("no OpenAPI document at %q (set %s to its path). %s. Nothing is checked against it in this run.",
			openapicheck.DocumentPath(), openapicheck.EnvDocument, openapicheck.Origin)
	}
}

// Every route the emulator serves is one of the document's operations.
func TestOpenAPIDocumentHasEveryRoute(t *testing.T) {
	t.Parallel()
	skipWithoutDocument(t)
	routes := mustEmulator().Routes()
	if missing := apiCheck.Missing(routes); len(missing) > 0 {
		t.Fatalf("routes the document does not describe: %v", missing)
	}
	if ids := apiCheck.OperationIDs(routes); len(ids) != len(routes) {
		t.Fatalf("%d routes, %d operationIds", len(routes), len(ids))
	}
	// The operationId each route declares (what IAM policies name) is
	// the document's.
	for route, op := range mustEmulator().RouteOperations() {
		if want := apiCheck.OperationIDs([]string{route}); len(want) != 1 || want[0] != op {
			t.Errorf("route %s declares operation %q, the document %v", route, op, want)
		}
	}
	t.Logf("%d routes, all in the document", len(routes))
}

// The checker finds what it is there to find: a check that cannot fail
// proves nothing.
func TestOpenAPICheckerCatchesViolations(t *testing.T) {
	t.Parallel()
	skipWithoutDocument(t)
	checker, err := openapicheck.Load(openapicheck.DocumentPath())
	if err != nil {
		t.Fatal(err)
	}
	const id = "6f8e2c7a-1234-4abc-8def-0123456789ab"
	validOp := `{"id":"` + id + `","state":"pending","reference":{"id":"` + id + `","link":"x","command":"%s"}}`
	createBody := `{"disk-size":%d,"instance-type":{"id":"` + id + `"},"template":{"id":"` + id + `"}}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		answer                   string
		violation                string // "" for none
	}{
		{"valid create", "POST", "/v2/instance", strings.Replace(createBody, "%d", "10", 1), 200, strings.Replace(validOp, "%s", "create-instance", 1), ""},
		{"disk-size 5 accepted", "POST", "/v2/instance", strings.Replace(createBody, "%d", "5", 1), 200, strings.Replace(validOp, "%s", "create-instance", 1), "disk-size"},
		{"state outside the enum", "GET", "/de-fra-1/v2/instance/" + id, "", 200, `{"id":"` + id + `","state":"exploding"}`, "exploding"},
		{"field the document lacks", "GET", "/v2/instance/" + id, "", 200, `{"id":"` + id + `","colour":"red"}`, "colour"},
		{"id not a UUID", "GET", "/v2/instance/" + id, "", 200, `{"id":"i-123"}`, "uuid"},
		{"error body of another shape", "GET", "/v2/instance/" + id, "", 404, `{"detail":"Not found."}`, `want {"message"`},
		{"route the document lacks", "GET", "/v2/floppy-disk", "", 200, `{}`, "no such operation"},
		{"wrong command", "PUT", "/v2/instance/" + id + ":stop", "", 200, strings.Replace(validOp, "%s", "start-instance", 1), `document calls this operation "stop-instance"`},
		{"labels null in an update", "PUT", "/v2/instance/" + id, `{"labels":null,"name":"x"}`, 200, strings.Replace(validOp, "%s", "update-instance", 1), ""},
		{"undocumented status", "GET", "/v2/zone", "", 201, `{"zones":[]}`, "status"},
	} {
		var got []string
		h := checker.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, tc.answer)
		}), func(v string) { got = append(got, v) })
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		switch {
		case tc.violation == "" && len(got) > 0:
			t.Errorf("%s: violations %v, want none", tc.name, got)
		case tc.violation != "" && (len(got) != 1 || !strings.Contains(got[0], tc.violation)):
			t.Errorf("%s: violations %v, want one about %q", tc.name, got, tc.violation)
		}
	}
	s := checker.Summary()
	if s.Violations != 8 || s.ErrorBodies != 0 || len(s.Operations) != 2 {
		t.Fatalf("summary %+v", s)
	}
}
