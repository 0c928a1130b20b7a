package exoscale

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The EXO2-HMAC-SHA256 scheme. A request is signed with the secret over five
// lines joined by "\n":
//
//	METHOD PATH          the escaped path, as sent (with /v2 and any prefix)
//	BODY                 the raw body, "" without one
//	QUERY VALUES         the values of the single-valued query parameters,
//	                     concatenated in the order of their sorted names
//	HEADERS              none yet: ""
//	EXPIRES              a Unix time
//
// and sent as
//
//	Authorization: EXO2-HMAC-SHA256 credential=KEY[,signed-query-args=a;b],expires=T,signature=BASE64
const authScheme = "EXO2-HMAC-SHA256"

// signature is the base64 HMAC-SHA256 of a request's signed message.
func signature(secret, method, escapedPath string, body []byte, queryValues string, expires int64) string {
	msg := strings.Join([]string{
		method + " " + escapedPath,
		string(body),
		queryValues,
		"",
		strconv.FormatInt(expires, 10),
	}, "\n")
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// signedQuery returns the names of the single-valued query parameters,
// sorted, and their values concatenated in that order: the parameters a
// client signs. Repeated parameters are not signed (empty ones are).
func signedQuery(q url.Values) ([]string, string) {
	var names []string
	for name, values := range q {
		if len(values) == 1 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var values strings.Builder
	for _, name := range names {
		values.WriteString(q.Get(name))
	}
	return names, values.String()
}

// SignRequest signs req for the account of key and secret, valid until
// expires, as egoscale v3 signs its requests: for tools and tests that speak
// to the emulator (or the real API) without the SDK. It reads and restores
// req.Body.
func SignRequest(req *http.Request, key, secret string, expires time.Time) error {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return err
		}
		if err := req.Body.Close(); err != nil {
			return err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	names, values := signedQuery(req.URL.Query())
	parts := []string{authScheme + " credential=" + key}
	if len(names) > 0 {
		parts = append(parts, "signed-query-args="+strings.Join(names, ";"))
	}
	exp := expires.Unix()
	parts = append(parts, "expires="+strconv.FormatInt(exp, 10),
		"signature="+signature(secret, req.Method, req.URL.EscapedPath(), body, values, exp))
	req.Header.Set("Authorization", strings.Join(parts, ","))
	return nil
}

// authorization is a parsed Authorization header.
type authorization struct {
	Key        string
	SignedArgs []string
	Expires    int64
	Signature  string
}

var errMalformedAuth = errors.New("malformed Authorization header")

func parseAuthorization(h string) (authorization, error) {
	rest, ok := strings.CutPrefix(h, authScheme+" ")
	if !ok {
		return authorization{}, errMalformedAuth
	}
	var a authorization
	seenExpires := false
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return authorization{}, errMalformedAuth
		}
		switch k {
		case "credential":
			a.Key = v
		case "signed-query-args":
			if v != "" {
				a.SignedArgs = strings.Split(v, ";")
			}
		case "expires":
			exp, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return authorization{}, fmt.Errorf("%w: expires is not a Unix time", errMalformedAuth)
			}
			a.Expires, seenExpires = exp, true
		case "signature":
			a.Signature = v
		}
	}
	if a.Key == "" || a.Signature == "" || !seenExpires {
		return authorization{}, errMalformedAuth
	}
	return a, nil
}

// verify checks a request's signature with the secret of its key: over the
// query parameters the header says were signed, in its order, and refusing
// single-valued parameters it leaves out (they could have been added on the
// way). It answers what is wrong, in words safe to answer, or "".
func (a authorization) verify(secret, method, escapedPath string, body []byte, q url.Values, now time.Time) string {
	signed := map[string]bool{}
	var values strings.Builder
	for _, name := range a.SignedArgs {
		if len(q[name]) != 1 {
			return msgBadSignature
		}
		signed[name] = true
		values.WriteString(q.Get(name))
	}
	for name, v := range q {
		if len(v) == 1 && !signed[name] {
			return msgBadSignature
		}
	}
	want := signature(secret, method, escapedPath, body, values.String(), a.Expires)
	if !hmac.Equal([]byte(want), []byte(a.Signature)) {
		return msgBadSignature
	}
	if now.Unix() > a.Expires {
		return msgExpired
	}
	return ""
}

const (
	msgBadSignature = "Invalid request signature"
	msgExpired      = "Request has expired"
)
