package exoscale

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Requests as egoscale v3.1.43 signs them with key EXO0123456789abcdef01234567
// and secret "vector-secret", captured from the SDK's own client: the
// emulator's signer must produce, and its verifier accept, exactly these.
var sdkVectors = []struct {
	method, path, query, body, auth string
}{
	{"GET", "/v2/instance", "labels=cluster%3Dc1+role%3Dworker&manager-type=instance-pool", "",
		"EXO2-HMAC-SHA256 credential=EXO0123456789abcdef01234567,signed-query-args=labels;manager-type,expires=1795442759,signature=KK2fcU2hFkHk80mt1MLpTPFfi4IMUz6uYZurlI//HRY="},
	{"POST", "/v2/instance", "", `{"disk-size":20,"instance-type":{"id":"b6e9d1e8-89fc-4db3-aaa4-9b4c5b1d0844"},"name":"w1","template":{"created-at":"0001-01-01T00:00:00Z","id":"188e6dc9-7b29-4db4-a8af-fc6368660738"}}`,
		"EXO2-HMAC-SHA256 credential=EXO0123456789abcdef01234567,expires=1795442759,signature=js+FuGMyz1mB5dnAUzwoWWGcBlosuWbwwazizvEHceA="},
	{"PUT", "/de-fra-1/v2/instance/6f8e2c7a-1234-4abc-8def-0123456789ab:stop", "", "",
		"EXO2-HMAC-SHA256 credential=EXO0123456789abcdef01234567,expires=1795442759,signature=Ud5CzFDnWhPFdttHKl/oBwV4nOLRDrpBB9qAeN5niKk="},
	{"GET", "/v2/ssh-key/my%20key.pub", "", "",
		"EXO2-HMAC-SHA256 credential=EXO0123456789abcdef01234567,expires=1795442759,signature=24yKvct0XWh6T0JPd4gmiC8LkYIUB1CUjtxCMGTSLiQ="},
	// A repeated parameter (x) is not signed, an empty one is.
	{"GET", "/v2/template", "empty=&visibility=private&x=1&x=2", "",
		"EXO2-HMAC-SHA256 credential=EXO0123456789abcdef01234567,signed-query-args=empty;visibility,expires=1795442759,signature=dkiEdbzHLiKP3WFcQE1c6CQuM9bEQql+SPzmodsz1bA="},
}

const (
	vectorKey     = "EXO0123456789abcdef01234567"
	vectorSecret  = "vector-secret"
	vectorExpires = 1795442759
)

func vectorRequest(t *testing.T, method, path, query, body string) *http.Request {
	t.Helper()
	u := "http://127.0.0.1:8383" + path
	if query != "" {
		u += "?" + query
	}
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequest(method, u, rd)
	} else {
		req, err = http.NewRequest(method, u, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestSignRequestMatchesSDK(t *testing.T) {
	t.Parallel()
	for _, v := range sdkVectors {
		req := vectorRequest(t, v.method, v.path, v.query, v.body)
		if err := SignRequest(req, vectorKey, vectorSecret, time.Unix(vectorExpires, 0)); err != nil {
			t.Fatal(err)
		}
		if got := req.Header.Get("Authorization"); got != v.auth {
			t.Errorf("%s %s?%s:\n got %s\nwant %s", v.method, v.path, v.query, got, v.auth)
		}
	}
}

func TestVerifyAcceptsSDKSignatures(t *testing.T) {
	t.Parallel()
	before := time.Unix(vectorExpires-1, 0)
	for _, v := range sdkVectors {
		req := vectorRequest(t, v.method, v.path, v.query, v.body)
		a, err := parseAuthorization(v.auth)
		if err != nil {
			t.Fatalf("%s: %v", v.auth, err)
		}
		if a.Key != vectorKey || a.Expires != vectorExpires {
			t.Fatalf("parsed %+v", a)
		}
		body := []byte(v.body)
		q := req.URL.Query()
		path := req.URL.EscapedPath()
		if msg := a.verify(vectorSecret, v.method, path, body, q, before); msg != "" {
			t.Errorf("%s %s: %s", v.method, v.path, msg)
		}
		// Anything changed on the way, or a later arrival, is refused.
		for name, tc := range map[string]struct {
			secret, method, path, body string
			now                        time.Time
			want                       string
		}{
			"secret":  {"other-secret", v.method, path, v.body, before, msgBadSignature},
			"method":  {vectorSecret, "PATCH", path, v.body, before, msgBadSignature},
			"path":    {vectorSecret, v.method, path + "x", v.body, before, msgBadSignature},
			"body":    {vectorSecret, v.method, path, v.body + " ", before, msgBadSignature},
			"expired": {vectorSecret, v.method, path, v.body, time.Unix(vectorExpires+1, 0), msgExpired},
		} {
			if got := a.verify(tc.secret, tc.method, tc.path, []byte(tc.body), q, tc.now); got != tc.want {
				t.Errorf("%s %s with another %s: %q, want %q", v.method, v.path, name, got, tc.want)
			}
		}
	}
}

func TestVerifyRefusesChangedQuery(t *testing.T) {
	t.Parallel()
	v := sdkVectors[0]
	a, err := parseAuthorization(v.auth)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Unix(vectorExpires-1, 0)
	for _, query := range []string{
		"labels=cluster%3Dc2+role%3Dworker&manager-type=instance-pool",                    // a value changed
		"labels=cluster%3Dc1+role%3Dworker",                                               // a signed one removed
		"labels=cluster%3Dc1+role%3Dworker&manager-type=instance-pool&ip-address=1.2.3.4", // an unsigned one added
		"labels=a&labels=b&manager-type=instance-pool",                                    // a signed one repeated
	} {
		req := vectorRequest(t, v.method, v.path, query, "")
		if got := a.verify(vectorSecret, v.method, v.path, nil, req.URL.Query(), before); got != msgBadSignature {
			t.Errorf("query %s: %q, want %q", query, got, msgBadSignature)
		}
	}
	// Repeating an unsigned parameter is what the SDK itself does: accepted.
	req := vectorRequest(t, v.method, v.path, v.query+"&x=1&x=2", "")
	if got := a.verify(vectorSecret, v.method, v.path, nil, req.URL.Query(), before); got != "" {
		t.Errorf("repeated unsigned parameter: %q", got)
	}
}

func TestParseAuthorizationRefusesMalformed(t *testing.T) {
	t.Parallel()
	for _, h := range []string{
		"",
		"Bearer abc",
		"EXO2-HMAC-SHA256 ",
		"EXO2-HMAC-SHA256 credential=EXO1,signature=abc",                // no expires
		"EXO2-HMAC-SHA256 credential=EXO1,expires=soon,signature=abc",   // expires not a time
		"EXO2-HMAC-SHA256 expires=1,signature=abc",                      // no key
		"EXO2-HMAC-SHA256 credential=EXO1,expires=1",                    // no signature
		"EXO2-HMAC-SHA256 credential=EXO1,expires=1,signature=abc,junk", // not key=value
	} {
		if a, err := parseAuthorization(h); err == nil {
			t.Errorf("parseAuthorization(%q) = %+v, want an error", h, a)
		}
	}
	a, err := parseAuthorization("EXO2-HMAC-SHA256 credential=EXO1,expires=" + strconv.Itoa(vectorExpires) + ",signature=a=b=")
	if err != nil || a.Signature != "a=b=" {
		t.Fatalf("base64 padding in the signature: %+v, %v", a, err)
	}
}
