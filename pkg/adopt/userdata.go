package adopt

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UserData is the user data a group's MachineSet names.
type UserData struct {
	// Secret is its name (in the Machine API's namespace).
	Secret string
	// Exists: the secret is there already; adopt never changes it.
	Exists bool
	// Create is the secret adopt writes when it is not there.
	Create *corev1.Secret
	// Source says where its content comes from.
	Source string
}

// Keys of the secrets adopt makes: the Ignition the group's nodes share,
// and the template (pkg/userdata: Jsonnet, sandboxed) that adds the
// Machine's name as the hostname, as the Terraform modules wrote it into
// each node's own user data.
const (
	baseIgnitionKey = "baseIgnition"
	userDataKey     = "userData"
)

// hostnameTemplate renders a Machine's user data from the group's Ignition.
const hostnameTemplate = `// Made by machine-api-provider adopt: the node group's Ignition (key
// baseIgnition) with the Machine's name as the hostname, as the Terraform
// module wrote it into the user data of each node it made.
local ctx = std.extVar('context');
local base = std.parseJson(ctx.data.baseIgnition);
base + {
  storage+: {
    files+: [{
      path: '/etc/hostname',
      mode: 420,
      overwrite: true,
      contents: { source: 'data:,' + ctx.machine.metadata.name },
    }],
  },
}
`

// cloudscaleHostKeysUnit is the systemd unit appuio's cloudscale.ch module
// adds to every node: it prints the SSH host keys to the serial console.
const cloudscaleHostKeysUnit = "[Unit]\nDescription=Print SSH Public Keys to tty\nAfter=sshd-keygen.target\n\n[Install]\nWantedBy=multi-user.target\n\n[Service]\nType=oneshot\nStandardOutput=tty\nTTYPath=/dev/ttyS0\nExecStart=/bin/sh -c \"echo '-----BEGIN SSH HOST KEY KEYS-----'; cat /etc/ssh/ssh_host_*key.pub; echo '-----END SSH HOST KEY KEYS-----'\""

func (a *Adopter) planUserData(ctx context.Context, g *Group) error {
	ud := &g.UserData
	ud.Secret = a.o.UserDataSecret
	if ud.Secret == "" {
		ud.Secret = g.Name + "-user-data"
		if g.Master {
			ud.Secret = a.o.ClusterID + "-master-user-data"
		}
	}
	var s corev1.Secret
	err := a.kube.Get(ctx, client.ObjectKey{Namespace: a.o.Namespace, Name: ud.Secret}, &s)
	switch {
	case err == nil:
		ud.Exists, ud.Source = true, "exists"
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the user data secret %s: %w", ud.Secret, err)
	case a.o.UserDataSecret != "":
		g.Blocked = fmt.Sprintf("the user data secret %s/%s does not exist", a.o.Namespace, ud.Secret)
	}
	return nil
}

// userDataContent makes the secret a group's MachineSet names, when it
// does not exist, from what its nodes booted with.
func (a *Adopter) userDataContent(ctx context.Context, g *Group) {
	ud := &g.UserData
	base, source, problem := a.baseIgnition(ctx, g)
	if problem != "" {
		g.Blocked = "no user data for its MachineSet: " + problem
		for _, m := range g.Members {
			if m.Action == ActAdopt || m.Action == ActReplace {
				m.Action, m.Machine = ActMisfit, nil
				m.Misfits = append(m.Misfits, "the group: "+g.Blocked)
			}
		}
		g.MachineSet, g.CPMS = nil, nil
		return
	}
	ud.Source = source
	ud.Create = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: ud.Secret, Namespace: a.o.Namespace,
			Labels: map[string]string{clusterLabel: a.o.ClusterID},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{baseIgnitionKey: base, userDataKey: []byte(hostnameTemplate)},
	}
}

// baseIgnition is the Ignition a group's nodes share, without the hostname
// each got: from a member's user data where the cloud tells it, else as
// appuio's cloudscale.ch module writes it.
func (a *Adopter) baseIgnition(ctx context.Context, g *Group) ([]byte, string, string) {
	var newest *Member
	for _, m := range g.Members {
		if m.Action == ActMisfit {
			continue
		}
		if m.Found.UserData != nil && (newest == nil || m.Found.CreatedAt.After(newest.Found.CreatedAt)) {
			newest = m
		}
	}
	if newest != nil {
		b, err := withoutHostname(newest.Found.UserData)
		if err != nil {
			return nil, "", fmt.Sprintf("the user data of %s is no Ignition config: %v", newest.Found.Name, err)
		}
		return b, "the user data of " + newest.Found.Name + ", without its hostname", ""
	}
	if len(g.Members) == 0 {
		return nil, "", "the group has no member"
	}
	_, domain, ok := cutDomain(g.Members[0].Found.Name)
	if !ok {
		return nil, "", fmt.Sprintf("the server name %s has no domain to find the machine config server by (give --user-data-secret)", g.Members[0].Found.Name)
	}
	ca, where, err := a.ignitionCA(ctx)
	if err != nil {
		return nil, "", err.Error()
	}
	config := "worker"
	if g.Master {
		config = "master"
	}
	source := fmt.Sprintf("https://api-int.%s:22623/config/%s", domain, config)
	ign := map[string]any{
		"ignition": map[string]any{
			"version": "3.1.0",
			"config":  map[string]any{"merge": []any{map[string]any{"source": source}}},
			"security": map[string]any{"tls": map[string]any{"certificateAuthorities": []any{
				map[string]any{"source": "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString(ca)},
			}}},
		},
		"systemd": map[string]any{"units": []any{map[string]any{
			"name": "cloudscale-hostkeys.service", "enabled": true, "contents": cloudscaleHostKeysUnit,
		}}},
	}
	b, err := json.Marshal(ign)
	if err != nil {
		return nil, "", err.Error()
	}
	return b, fmt.Sprintf("Ignition of %s with the CA of %s, as the Terraform module writes it", source, where), ""
}

func cutDomain(name string) (string, string, bool) {
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			return name[:i], name[i+1:], i+1 < len(name)
		}
	}
	return name, "", false
}

// ignitionCA is the CA the machine config server's certificate chains to:
// given, or the cluster's.
func (a *Adopter) ignitionCA(ctx context.Context) ([]byte, string, error) {
	if len(a.o.IgnitionCA) > 0 {
		return a.o.IgnitionCA, "--ignition-ca", nil
	}
	for _, src := range []struct{ ns, name, key string }{
		{"openshift-machine-config-operator", "machine-config-server-ca", "ca-bundle.crt"},
		{"kube-system", "root-ca", "ca.crt"},
	} {
		var cm corev1.ConfigMap
		err := a.kube.Get(ctx, client.ObjectKey{Namespace: src.ns, Name: src.name}, &cm)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("reading the machine config server's CA from %s/%s: %w", src.ns, src.name, err)
		}
		if v := cm.Data[src.key]; v != "" {
			return []byte(v), fmt.Sprintf("configmap %s/%s", src.ns, src.name), nil
		}
	}
	return nil, "", fmt.Errorf("the machine config server's CA is in neither openshift-machine-config-operator/machine-config-server-ca nor kube-system/root-ca (give --ignition-ca or --user-data-secret)")
}

// withoutHostname removes the /etc/hostname file from an Ignition config:
// the template adds the Machine's.
func withoutHostname(userData []byte) ([]byte, error) {
	var ign map[string]any
	if err := json.Unmarshal(userData, &ign); err != nil {
		return nil, err
	}
	if _, ok := ign["ignition"]; !ok {
		return nil, fmt.Errorf("no \"ignition\" member")
	}
	if storage, ok := ign["storage"].(map[string]any); ok {
		if files, ok := storage["files"].([]any); ok {
			files = slices.DeleteFunc(files, func(f any) bool {
				m, _ := f.(map[string]any)
				return m["path"] == "/etc/hostname"
			})
			storage["files"] = files
		}
	}
	return json.Marshal(ign)
}
