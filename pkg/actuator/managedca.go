package actuator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strings"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// The machine-config-operator keeps, per MachineConfigPool, the Secret
// <pool>-user-data-managed in openshift-machine-api: the pool's pointer
// Ignition with the machine config server's current CA bundle
// (openshift/machine-config-operator, pkg/operator/sync.go and
// manifests/userdata_secret.yaml, release-4.16 to main). Since 4.19 it also
// rotates that CA, labels the managed Secrets with ManagedUserDataLabel, and
// rewrites the CA of every other JSON user data secret of the namespace
// (pkg/controller/certrotation); a Jsonnet template it cannot parse keeps
// whatever CA it was given, and a node booting with a stale one never
// fetches its Ignition.
const (
	// ManagedUserDataSuffix ends the name of a pool's managed Secret.
	ManagedUserDataSuffix = "-user-data-managed"
	// ManagedUserDataLabel is the label of the managed Secrets (4.19+).
	ManagedUserDataLabel = "machineconfiguration.openshift.io/managed-ca-bundle-derived-from-configmap"
	// machineConfigServerPort serves the pools' Ignition at /config/<pool>.
	machineConfigServerPort = "22623"
)

// followManagedCA makes the machine config server CA of rendered user data
// the one of the pool's managed Secret, so that every new server trusts the
// CA the machine-config-operator has now, whatever user data made it: an
// Ignition config whose config source is the machine config server
// (https://<host>:22623/config/<pool>) and that names one CA gets, when
// <pool>-user-data-managed exists in the Machine's namespace, that Secret's
// CA instead, as the operator's own rotation rewrites the JSON user data
// secrets (one CA only; more are left alone, as it leaves them). Anything
// else (not Ignition, another source, no managed Secret: an older cluster)
// passes unchanged. The change is an event on the Machine.
func (a *Actuator) followManagedCA(ctx context.Context, m *machinev1.Machine, userData []byte) ([]byte, error) {
	ign, pool, ok := pointerIgnition(userData)
	if !ok {
		return userData, nil
	}
	name := pool + ManagedUserDataSuffix
	var managed corev1.Secret
	err := a.secrets.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: name}, &managed)
	if apierrors.IsNotFound(err) {
		return userData, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the machine-config-operator's secret %s/%s for the current CA: %w", m.Namespace, name, err)
	}
	current, ok := managedCA(managed.Data[UserDataKey])
	if !ok {
		a.log.Info("The machine-config-operator's user data secret names no single CA; the user data keeps its own", "secret", name, "machine", m.Name)
		return userData, nil
	}
	cas := caList(ign)
	if reflect.DeepEqual(cas[0], current) {
		return userData, nil
	}
	cas[0] = current
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ign); err != nil {
		return nil, fmt.Errorf("encoding the user data with the current CA: %w", err)
	}
	a.recorder.Eventf(m, corev1.EventTypeNormal, "UserDataCAUpdated",
		"The user data's machine config server CA is the current one of secret %s, which the machine-config-operator keeps", name)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// pointerIgnition decodes user data that is an Ignition config fetching its
// config from the machine config server and naming exactly one CA, and
// returns it with the pool it fetches.
func pointerIgnition(userData []byte) (map[string]any, string, bool) {
	dec := json.NewDecoder(bytes.NewReader(userData))
	// Numbers stay as they are written.
	dec.UseNumber()
	var ign map[string]any
	if err := dec.Decode(&ign); err != nil || dec.More() {
		return nil, "", false
	}
	ignition, _ := ign["ignition"].(map[string]any)
	if ignition == nil {
		return nil, "", false
	}
	config, _ := ignition["config"].(map[string]any)
	var sources []any
	if merge, ok := config["merge"].([]any); ok {
		sources = append(sources, merge...)
	}
	if replace, ok := config["replace"]; ok {
		sources = append(sources, replace)
	}
	pool := ""
	for _, s := range sources {
		r, _ := s.(map[string]any)
		src, _ := r["source"].(string)
		p, ok := configPool(src)
		if !ok {
			continue
		}
		if pool != "" && p != pool {
			return nil, "", false
		}
		pool = p
	}
	if pool == "" || len(caList(ign)) != 1 {
		return nil, "", false
	}
	return ign, pool, true
}

// configPool is the pool of a machine config server URL.
func configPool(source string) (string, bool) {
	u, err := url.Parse(source)
	if err != nil || u.Scheme != "https" {
		return "", false
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port != machineConfigServerPort {
		return "", false
	}
	pool, ok := strings.CutPrefix(u.Path, "/config/")
	if !ok || pool == "" || strings.Contains(pool, "/") {
		return "", false
	}
	return pool, true
}

// caList is ignition.security.tls.certificateAuthorities (nil if absent).
func caList(ign map[string]any) []any {
	ignition, _ := ign["ignition"].(map[string]any)
	security, _ := ignition["security"].(map[string]any)
	tls, _ := security["tls"].(map[string]any)
	cas, _ := tls["certificateAuthorities"].([]any)
	return cas
}

// managedCA is the one CA of a managed Secret's Ignition.
func managedCA(userData []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(userData))
	dec.UseNumber()
	var ign map[string]any
	if err := dec.Decode(&ign); err != nil {
		return nil, false
	}
	cas := caList(ign)
	if len(cas) != 1 {
		return nil, false
	}
	return cas[0], true
}
