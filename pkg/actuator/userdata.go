package actuator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/userdata"
)

// maxSelectedSecrets bounds how many secrets a userDataSecretSelector may
// pick: a template needs a few, and each may hold a megabyte.
const maxSelectedSecrets = 32

// userData reads the user data the spec refers to and renders it, with the
// secrets the spec's selector picks, then makes its machine config server
// CA the current one (managedca.go) and the Machine's name its hostname
// (hostname.go).
func (s *scope) userData(ctx context.Context) ([]byte, error) {
	name := s.spec.UserDataSecretName()
	if name == "" {
		return nil, nil
	}
	raw, secretData, err := s.a.secretKey(ctx, s.machine.Namespace, name, UserDataKey, "userDataSecret")
	if err != nil {
		return nil, err
	}
	selected, err := s.selectedSecrets(ctx)
	if err != nil {
		return nil, err
	}
	out, err := renderUserData(ctx, s.a.userData, raw, userdata.Context{Machine: s.machine, Data: secretData, Secrets: selected})
	if err != nil {
		return nil, err
	}
	if out, err = s.a.followManagedCA(ctx, s.machine, out); err != nil {
		return nil, err
	}
	return s.withHostname(out)
}

// selectedSecrets lists the secrets the spec's userDataSecretSelector picks
// in the Machine's namespace (nil without a selector), as the template sees
// them. A selection holding credentials is refused: the user data reaches
// the server (and the cloud, which keeps it), so the cloud's credentials,
// or a service account token, a TLS key or a registry password must never
// be in it, whatever the template does with them.
func (s *scope) selectedSecrets(ctx context.Context) ([]any, error) {
	sel := s.spec.UserDataSecretSelector()
	if sel == nil {
		return nil, nil
	}
	path := specPath.Child("userDataSecretSelector")
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, invalidf(path, "%v", err)
	}
	var list corev1.SecretList
	if err := s.a.secrets.List(ctx, &list, client.InNamespace(s.machine.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("listing the secrets of %s: %w", path, err)
	}
	if len(list.Items) > maxSelectedSecrets {
		return nil, invalidf(path, "picks %d secrets, more than the %d a template may see: narrow it", len(list.Items), maxSelectedSecrets)
	}
	def := s.a.cloud.DefaultCredentialsSecret()
	out := make([]any, 0, len(list.Items))
	for i := range list.Items {
		sec := &list.Items[i]
		switch {
		case sec.Name == s.spec.CredentialsSecretName() || sec.Namespace == def.Namespace && sec.Name == def.Name:
			return nil, credentialsSelected(sec.Name, "the cloud's credentials")
		case sec.Type != "" && sec.Type != corev1.SecretTypeOpaque:
			return nil, credentialsSelected(sec.Name, fmt.Sprintf("credentials (type %s)", sec.Type))
		case slices.ContainsFunc(s.a.cloud.CredentialKeys(), func(k string) bool { _, ok := sec.Data[k]; return ok }):
			return nil, credentialsSelected(sec.Name, fmt.Sprintf("a key of %s credentials (%v)", s.a.cloud.Name(), s.a.cloud.CredentialKeys()))
		}
		// As the API has it, without the server's bookkeeping.
		sec.ManagedFields = nil
		out = append(out, sec)
	}
	return out, nil
}

func credentialsSelected(name, what string) error {
	return invalidf(specPath.Child("userDataSecretSelector"),
		"picks secret %s, which holds %s: user data reaches the server and the cloud, so a selector may pick no credentials; narrow it (the machine-config-operator's user data secrets carry the label %s)",
		name, what, ManagedUserDataLabel)
}

// renderUserData passes JSON (an Ignition config) through untouched and
// evaluates anything else as a Jsonnet template in a sandbox, as the
// cloudscale.ch provider already in use does, so existing user-data secrets
// keep working (pkg/userdata says what the template sees and may do). A
// template at fault (its evaluation failed) fails the Machine naming the
// user data secret; the message never quotes the template or the secret. A
// sandbox that ended without an answer (*userdata.SandboxError: a timeout,
// memory, a signal) is returned as it is, and retried (fail).
func renderUserData(ctx context.Context, r *userdata.Renderer, raw []byte, c userdata.Context) ([]byte, error) {
	out, err := r.RenderContext(ctx, raw, c)
	var tmplErr *userdata.Error
	if errors.As(err, &tmplErr) {
		return nil, invalidf(specPath.Child("userDataSecret"), "the %q key: %s", UserDataKey, tmplErr.Error())
	}
	return out, err
}
