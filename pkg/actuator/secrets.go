package actuator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// UserDataKey is the key of the user data in a userDataSecret.
const UserDataKey = "userData"

// secretKey reads one key of a secret, and returns all its keys too. A
// missing secret may yet be created and is retried; a secret without the key
// is a spec error. Secrets are read through the actuator's secret reader
// (uncached in the manager): only the secrets Machines name.
func (a *Actuator) secretKey(ctx context.Context, namespace, name, key, specField string) ([]byte, map[string][]byte, error) {
	var secret corev1.Secret
	if err := a.secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &secret); err != nil {
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
