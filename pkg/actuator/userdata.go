package actuator

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/google/go-jsonnet"
)

// userData reads the user data the spec refers to and renders it.
func (s *scope) userData(ctx context.Context) ([]byte, error) {
	name := s.spec.UserDataSecretName()
	if name == "" {
		return nil, nil
	}
	raw, secretData, err := s.a.secretKey(ctx, s.machine.Namespace, name, UserDataKey, "userDataSecret")
	if err != nil {
		return nil, err
	}
	return renderUserData(raw, s.machine, secretData)
}

// renderUserData passes JSON (an Ignition config) through untouched and
// evaluates anything else as a Jsonnet template, as the cloudscale.ch
// provider already in use does, so existing user-data secrets keep working.
// The template sees std.extVar('context') with
//
//	machine: the Machine object
//	data:    every key of the user-data secret, as strings
//
// A template yielding a string gives that string (cloud-config, a script);
// anything else gives its JSON.
func renderUserData(raw []byte, machine any, secretData map[string][]byte) ([]byte, error) {
	if json.Valid(raw) {
		return raw, nil
	}
	data := map[string]string{}
	for k, v := range secretData {
		data[k] = string(v)
	}
	ctxJSON, err := json.Marshal(map[string]any{"machine": machine, "data": data})
	if err != nil {
		return nil, fmt.Errorf("preparing the user data template's context: %w", err)
	}
	vm := jsonnet.MakeVM()
	vm.ExtCode("context", string(ctxJSON))
	out, err := vm.EvaluateAnonymousSnippet("userData", string(raw))
	if err != nil {
		return nil, invalidf(specPath.Child("userDataSecret"), "the %q key is neither JSON nor a valid Jsonnet template: %s", UserDataKey, redactJsonnetError(err))
	}
	var s string
	if json.Unmarshal([]byte(out), &s) == nil {
		return []byte(s), nil
	}
	var compact json.RawMessage
	if err := json.Unmarshal([]byte(out), &compact); err != nil {
		return nil, err
	}
	b, err := json.Marshal(compact)
	return b, err
}

var jsonnetPosition = regexp.MustCompile(`userData:(\d+:\d+(-\d+)?)`)

// redactJsonnetError keeps where a template failed and drops what Jsonnet
// quotes of it, which may be secret.
func redactJsonnetError(err error) string {
	if m := jsonnetPosition.FindStringSubmatch(err.Error()); m != nil {
		return "error at line:column " + m[1] + " (details are withheld: they may contain secrets)"
	}
	return "evaluation failed (details are withheld: they may contain secrets)"
}
