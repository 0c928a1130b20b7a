package cloudscale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// classify turns an SDK error into the errors of package cloud. It is the
// only place that interprets cloudscale.ch's failures, so every call agrees
// on them; the classes themselves are cloud.Classify's, the same for every
// cloud.
func (c *Client) classify(ctx context.Context, op string, ex *cloud.Exchange, err error, redact []string) error {
	status, retryAfter, body := ex.Get()
	var er *sdk.ErrorResponse
	if errors.As(err, &er) {
		status = er.StatusCode
	}
	if status < 400 {
		return cloud.ClassifyTransport(ctx, displayName, op, err)
	}
	msgs := errorMessages(body)
	if len(msgs) == 0 && er != nil {
		msgs = er.Message
	}
	msgs = c.scrub(msgs, redact)
	a := cloud.Answer{Cloud: displayName, Op: op, Status: status, RetryAfter: retryAfter, CredentialsSource: c.source}
	// The API says so when it does not know the token (401 "Invalid
	// token."): whatever the status, those words refuse the token itself.
	a.IdentityRefused = identityRefused(msgs)
	if status == http.StatusForbidden {
		// A token is read-only or read/write: a 403 refuses this (write)
		// operation to a read-only one, unless the API says the token
		// itself is no good.
		a.Permission, a.Grant = TokenScope, tokenScopeGrant
	}
	switch status {
	case http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity:
		inv := invalidConfig(op, msgs)
		a.Field, a.Message = inv.Field, inv.Message
	default:
		a.Message = joinMessages(msgs, nil)
		if len(msgs) == 0 {
			a.Message = ""
		}
	}
	return cloud.Classify(a)
}

// TokenScope is the scope a cloudscale.ch API token needs: tokens are
// read-only (GET only) or read/write, and the provider writes.
const (
	TokenScope      = "read/write"
	tokenScopeGrant = "read/write access (this token is read-only: create a read/write API token in the cloud control panel and put it in the secret)"
)

// identityPattern is what the API says of a token it does not accept.
var identityPattern = regexp.MustCompile(`(?i)invalid token|credentials were not provided|not authenticated`)

func identityRefused(msgs map[string]string) bool {
	for _, m := range msgs {
		if identityPattern.MatchString(m) {
			return true
		}
	}
	return false
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
	"user_data":        "userDataSecret",
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

// scrub removes the token and the other secrets from API messages (see
// cloud.Scrub). A message that quoted part of one is withheld (its field
// stays the key), and a field name the provider does not know that quotes
// one is dropped.
func (c *Client) scrub(msgs map[string]string, redact []string) map[string]string {
	secrets := append([]string{c.token}, redact...)
	out := make(map[string]string, len(msgs))
	for k, v := range msgs {
		if _, known := specFields[k]; !known && cloud.Quotes(k, secrets...) {
			k = "non_field_errors"
		}
		v = cloud.Scrub(v, secrets...)
		if prev, dup := out[k]; dup {
			v = prev + "; " + v
		}
		out[k] = v
	}
	return out
}
