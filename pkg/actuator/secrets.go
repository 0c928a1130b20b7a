package actuator

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// Keys of the secrets a provider spec refers to.
const (
	TokenKey    = "token"
	UserDataKey = "userData"
)

// token reads the API token from the named secret; "" (the cloud's default
// token) when the spec names none.
func (a *Actuator) token(ctx context.Context, namespace, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	data, _, err := a.secretKey(ctx, namespace, name, TokenKey, "tokenSecret")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// secretKey reads one key of a secret, and returns all its keys too. A
// missing secret may yet be created and is retried; a secret without the key
// is a spec error.
func (a *Actuator) secretKey(ctx context.Context, namespace, name, key, specField string) ([]byte, map[string][]byte, error) {
	var secret corev1.Secret
	if err := a.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, &secretMissingError{namespace: namespace, name: name, specField: specField}
		}
		return nil, nil, fmt.Errorf("reading secret %s/%s: %w", namespace, name, err)
	}
	data, ok := secret.Data[key]
	if !ok || len(data) == 0 {
		return nil, nil, invalidf(specPath.Child(specField), "secret %s/%s has no key %q", namespace, name, key)
	}
	return data, secret.Data, nil
}

type secretMissingError struct{ namespace, name, specField string }

func (e *secretMissingError) Error() string {
	return fmt.Sprintf("secret %s/%s (%s) does not exist; retrying until it does", e.namespace, e.name, specPath.Child(e.specField))
}
