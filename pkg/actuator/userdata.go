package actuator

import (
	"context"
	"errors"

	"github.com/appuio/machine-api-provider/pkg/userdata"
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
	return renderUserData(ctx, s.a.userData, raw, s.machine, secretData)
}

// renderUserData passes JSON (an Ignition config) through untouched and
// evaluates anything else as a Jsonnet template in a sandbox, as the
// cloudscale.ch provider already in use does, so existing user-data secrets
// keep working (pkg/userdata says what the template sees and may do). A
// template at fault (its evaluation failed) fails the Machine naming the
// user data secret; the message never quotes the template or the secret. A
// sandbox that ended without an answer (*userdata.SandboxError: a timeout,
// memory, a signal) is returned as it is, and retried (fail).
func renderUserData(ctx context.Context, r *userdata.Renderer, raw []byte, machine any, secretData map[string][]byte) ([]byte, error) {
	out, err := r.Render(ctx, raw, machine, secretData)
	var tmplErr *userdata.Error
	if errors.As(err, &tmplErr) {
		return nil, invalidf(specPath.Child("userDataSecret"), "the %q key: %s", UserDataKey, tmplErr.Error())
	}
	return out, err
}
