package cloudscale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// apiError is an answer of the API that is neither success nor one of the
// errors of package cloud by itself; RetryableError wraps it for the
// transient ones.
type apiError struct {
	op     string
	status int
	// messages are the API's, keyed by the API's field names.
	messages map[string]string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("cloudscale.ch %s: HTTP %d: %s", e.op, e.status, joinMessages(e.messages, nil))
}

// authError is the API refusing the token. It is not an
// InvalidConfigError: fixing the secret fixes the Machine, without a new spec.
type authError struct {
	op     string
	status int
	// source says where the token came from, never what it is.
	source string
	detail string
}

func (e *authError) Error() string {
	what := "was refused"
	if e.status == http.StatusForbidden {
		what = "may not do this (is it a read-only token?)"
	}
	msg := fmt.Sprintf("cloudscale.ch %s: HTTP %d: the API token from %s %s", e.op, e.status, e.source, what)
	if e.detail != "" {
		msg += ": " + e.detail
	}
	return msg
}

func (c *Client) tokenSource() string {
	if c.defaultToken {
		return EnvAPIToken + " (the manager's default token)"
	}
	return "the Machine's tokenSecret"
}

// withSecretName names the secret in an auth error, for the calls that know
// the spec.
func withSecretName(err error, secret string) error {
	var ae *authError
	if secret != "" && errors.As(err, &ae) {
		ae.source = fmt.Sprintf("secret %q (key \"token\") of the Machine's tokenSecret", secret)
	}
	return err
}

// classify turns an SDK error into the errors of package cloud. It is the
// only place that interprets failures, so every call agrees on them.
func (c *Client) classify(ctx context.Context, op string, ex *exchange, err error, redact []string) error {
	status, retryAfter, body := ex.get()
	var er *sdk.ErrorResponse
	if errors.As(err, &er) {
		status = er.StatusCode
	}
	if status >= 400 {
		msgs := errorMessages(body)
		if len(msgs) == 0 && er != nil {
			msgs = er.Message
		}
		msgs = c.scrub(msgs, redact)
		return classifyStatus(op, status, retryAfter, msgs, c.tokenSource())
	}
	if ctx.Err() != nil {
		// The caller gave up; that is its own business, not the cloud's.
		return fmt.Errorf("cloudscale.ch %s: %w", op, err)
	}
	// No error answer: the request or its answer got lost on the way (a
	// timeout, a dropped connection, a truncated body after a 2xx). Whether
	// the change was made is unknown, which every caller handles by looking
	// again, so it is retryable.
	var ue *url.Error
	if errors.As(err, &ue) || status >= 200 || isLostResponse(err) {
		return &cloud.RetryableError{Err: fmt.Errorf("cloudscale.ch %s: %w", op, err)}
	}
	return fmt.Errorf("cloudscale.ch %s: %w", op, err)
}

func classifyStatus(op string, status int, retryAfter time.Duration, msgs map[string]string, tokenSource string) error {
	switch {
	case status == http.StatusNotFound:
		return fmt.Errorf("cloudscale.ch %s: HTTP 404 (%s): %w", op, joinMessages(msgs, nil), cloud.ErrNotFound)
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		return invalidConfig(op, msgs)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &authError{op: op, status: status, source: tokenSource, detail: joinMessages(msgs, nil)}
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return &cloud.RetryableError{RetryAfter: retryAfter, Err: &apiError{op: op, status: status, messages: msgs}}
	default:
		return &apiError{op: op, status: status, messages: msgs}
	}
}

// specFields maps the API's field names to the provider spec's; "" is a
// field the spec does not have.
var specFields = map[string]string{
	"flavor":           "flavor",
	"image":            "image",
	"zone":             "zone",
	"volume_size_gb":   "rootVolumeSizeGB",
	"interfaces":       "interfaces",
	"server_groups":    "serverGroups",
	"ssh_keys":         "sshKeys",
	"tags":             "tags",
	"name":             "",
	"detail":           "",
	"non_field_errors": "",
}

func specField(op, apiField string) string {
	if apiField == "tags" && strings.HasPrefix(op, "volume.") {
		return "rootVolumeTags"
	}
	if f, known := specFields[apiField]; known {
		return f
	}
	return apiField
}

// invalidConfig is a 400: the request, made from the spec, was refused.
func invalidConfig(op string, msgs map[string]string) *cloud.InvalidConfigError {
	keys := sortedKeys(msgs)
	if len(keys) == 1 {
		k := keys[0]
		msg := msgs[k]
		if k == "name" && op == "server.create" {
			// The name is the Machine's (with baseDomain); the spec has no
			// field for it.
			msg = "the server name, the Machine's name (with baseDomain when set), was refused: " + msg
		} else if k == "name" {
			msg = "name: " + msg
		}
		return &cloud.InvalidConfigError{Field: specField(op, k), Message: msg}
	}
	if len(keys) == 0 {
		return &cloud.InvalidConfigError{Message: fmt.Sprintf("cloudscale.ch %s: the request was refused without a reason", op)}
	}
	// Several fields at fault: name each in the message.
	return &cloud.InvalidConfigError{Message: joinMessages(msgs, func(k string) string { return specField(op, k) })}
}

// joinMessages renders API messages as "field: message; ...", a lone
// "detail" as its message only. rename maps the field names, nil keeps them.
func joinMessages(msgs map[string]string, rename func(string) string) string {
	keys := sortedKeys(msgs)
	if len(keys) == 0 {
		return "no message"
	}
	if len(keys) == 1 && (keys[0] == "detail" || keys[0] == "non_field_errors") {
		return msgs[keys[0]]
	}
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := k
		if rename != nil {
			name = rename(k)
		}
		if name == "" {
			parts = append(parts, msgs[k])
			continue
		}
		parts = append(parts, name+": "+msgs[k])
	}
	return strings.Join(parts, "; ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// errorMessages decodes an error body more leniently than the SDK: the
// values may be strings, lists or objects (nested errors of interfaces, for
// instance), which the SDK's map[string]string cannot hold.
func errorMessages(body []byte) map[string]string {
	var raw map[string]any
	if len(body) == 0 || json.Unmarshal(body, &raw) != nil {
		return nil
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		out[k] = flatten(v)
	}
	return out
}

func flatten(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			if s := flatten(e); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, "; ")
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			if s := flatten(v[k]); s != "" {
				parts = append(parts, k+": "+s)
			}
		}
		return strings.Join(parts, "; ")
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// minRedactLen keeps scrubbing from mangling messages: a secret shorter than
// this (a test token such as "t") would match ordinary words, and no real
// token or user data is that short.
const minRedactLen = 8

// scrub removes the token and the other secrets from API messages: the API
// is not known to echo them, but an error ends up in Machine status, events
// and logs, where neither may ever appear.
func (c *Client) scrub(msgs map[string]string, redact []string) map[string]string {
	secrets := append([]string{c.token}, redact...)
	out := make(map[string]string, len(msgs))
	for k, v := range msgs {
		for _, s := range secrets {
			if len(s) >= minRedactLen {
				v = strings.ReplaceAll(v, s, "[redacted]")
			}
		}
		out[k] = v
	}
	return out
}

// isLostResponse reports errors of a response that broke off.
func isLostResponse(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
