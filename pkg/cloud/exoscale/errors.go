package exoscale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// classify turns an SDK error into the errors of package cloud. It is the
// only place that interprets Exoscale's failures, so every call agrees on
// them; the classes themselves are cloud.Classify's, the same for every
// cloud. The status and Retry-After come from the exchange: v3.APIError
// keeps neither, and its Error() says only the status text, so the
// server's message is read from its fields (or the body).
func (c *Client) classify(ctx context.Context, op string, ex *cloud.Exchange, err error, redact []string) error {
	status, retryAfter, body := ex.Get()
	if status < 400 {
		return cloud.ClassifyTransport(ctx, displayName, op, err)
	}
	// What the message says (the field, quota, busy) is read from it as
	// the API wrote it; what is shown of it is scrubbed. A message that
	// quoted part of a secret is withheld, and replaced by what the
	// provider knows: the status and the field.
	raw := apiMessage(err, body)
	msg := c.scrub(raw, redact)
	a := cloud.Answer{Cloud: displayName, Op: op, Status: status, RetryAfter: retryAfter, Message: msg, CredentialsSource: c.source,
		IdentityRefused: identityRefused(raw)}
	a.Permission, a.Grant = permission(op)
	switch {
	case status == http.StatusForbidden && quotaOrAuthorization(raw):
		// The credentials are fine: the account may not have (more of)
		// this. Retrying cannot help until someone raises the quota.
		field := ""
		if strings.Contains(strings.ToLower(raw), "gpu") || strings.Contains(strings.ToLower(raw), "instance type") {
			field = "instanceType"
		}
		return &cloud.InvalidConfigError{Field: field, Message: fmt.Sprintf("Exoscale %s: %s", op, msg)}
	case status == http.StatusConflict && busy(raw):
		// Another operation on the resource is under way: this one was
		// turned away and goes through once that one is done.
		return &cloud.RetryableError{NotPerformed: true, Err: &cloud.APIError{Cloud: displayName, Op: op, Status: status, Message: msg}}
	case status == http.StatusBadRequest || status == http.StatusConflict || status == http.StatusUnprocessableEntity:
		a.Field, a.Message = invalidField(op, raw, msg)
	}
	return cloud.Classify(a)
}

// apiMessage is the server's explanation: the fields of *v3.APIError
// (message, RFC 9457 title, detail and errors), else the body's "message".
func apiMessage(err error, body []byte) string {
	var parts []string
	var ae *v3.APIError
	if errors.As(err, &ae) {
		for _, s := range []string{ae.Message, ae.Title, ae.Detail} {
			if s = strings.TrimSpace(s); s != "" && !contains(parts, s) {
				parts = append(parts, s)
			}
		}
		for _, e := range ae.Errors {
			s := strings.TrimSpace(e.Detail)
			if e.Location != "" {
				s = e.Location + ": " + s
			}
			if s != "" && !contains(parts, s) {
				parts = append(parts, s)
			}
		}
	}
	if len(parts) == 0 && len(body) > 0 {
		var m struct {
			Message string `json:"message"`
			Error   string `json:"error"`
		}
		if json.Unmarshal(body, &m) == nil {
			for _, s := range []string{m.Message, m.Error} {
				if s = strings.TrimSpace(s); s != "" {
					parts = append(parts, s)
				}
			}
		}
	}
	return cloud.Truncate(strings.Join(parts, "; "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var (
	quotaPattern = regexp.MustCompile(`(?i)quota|requires an authorization|not authorized to (use|run)`)
	busyPattern  = regexp.MustCompile(`(?i)\bretry\b|operation in progress|\bbusy\b`)
	// "Invalid value in disk-size (description: ...) - should be ..." and
	// "Invalid value in template: Template ... not found" name the API's
	// field.
	fieldPattern = regexp.MustCompile(`(?i)invalid value in ([a-z0-9-]+)`)
)

func quotaOrAuthorization(msg string) bool { return quotaPattern.MatchString(msg) }

func busy(msg string) bool { return busyPattern.MatchString(msg) }

// specFields maps the API's field names to the provider spec's; "" is a
// field the spec does not have.
var specFields = map[string]string{
	"instance-type":        "instanceType",
	"template":             "template",
	"disk-size":            "diskSize",
	"user-data":            "userDataSecret",
	"security-groups":      "securityGroups",
	"security-group":       "securityGroups",
	"anti-affinity-groups": "antiAffinityGroups",
	"ssh-key":              "sshKeys",
	"ssh-keys":             "sshKeys",
	"public-ip-assignment": "publicIPAssignment",
	"labels":               "labels",
	"deploy-target":        "deployTarget",
	"private-network":      "privateNetworks",
	"ip":                   "privateNetworks",
	"name":                 "",
}

// invalidField names the spec field an API's 400 is about, from the
// message as the API wrote it (raw), and words the message for the Machine
// from its scrubbed form (msg). Only field names the provider knows come
// from raw: nothing else of it is repeated.
func invalidField(op, raw, msg string) (string, string) {
	m := fieldPattern.FindStringSubmatch(raw)
	if m == nil {
		return "", msg
	}
	api := strings.ToLower(m[1])
	if api == "name" && op == "instance.create" {
		return "", "the instance name, the Machine's name, was refused: " + msg
	}
	if strings.HasPrefix(op, "privatenetwork.") && (api == "instance" || api == "ip") {
		return "privateNetworks", msg
	}
	f, known := specFields[api]
	if !known {
		return "", msg
	}
	return f, msg
}

// scrub removes the API key and secret and the other secrets from an API
// message (see cloud.Scrub).
func (c *Client) scrub(msg string, redact []string) string {
	return cloud.Scrub(msg, append([]string{c.key, c.secret}, redact...)...)
}
