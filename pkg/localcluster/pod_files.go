package localcluster

// What a container finds in its root and environment: its volumes (the
// Secrets, ConfigMaps and service account tokens they name), the
// in-cluster API server's environment, and its env with valueFrom
// resolved and $(VAR) references expanded, as the kubelet does.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// saDir is where the kubelet mounts a pod's service account token (the
// kube-api-access-* projected volume), and where client-go's in-cluster
// configuration reads it.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// file is one file of a volume.
type file struct {
	data []byte
	mode os.FileMode
}

// volume is a volume's files by their path in it.
type volume map[string]file

// errMissing is an object a volume or env var needs that is not there (yet).
type errMissing struct{ what string }

func (e errMissing) Error() string { return e.what + " not found" }

// volumeFiles reads every volume the containers mount, waiting (as the
// kubelet does, with a line in the log per missing object) until the
// Secrets and ConfigMaps that are not optional exist or ctx ends.
func (p *Pod) volumeFiles(ctx context.Context) (map[string]volume, error) {
	mounted := map[string]bool{}
	for _, c := range p.containers {
		if c.skipped {
			continue
		}
		for _, m := range c.spec.VolumeMounts {
			mounted[m.Name] = true
		}
	}
	out := map[string]volume{}
	for _, v := range p.pod.Spec.Volumes {
		if !mounted[v.Name] {
			continue
		}
		logged := map[string]bool{}
		for {
			files, err := p.volume(ctx, v)
			if err == nil {
				out[v.Name] = files
				break
			}
			var missing errMissing
			if !errors.As(err, &missing) {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if !logged[missing.what] {
				logged[missing.what] = true
				p.o.Log.Info("waiting to mount a volume", "pod", p.Name, "volume", v.Name, "missing", missing.what)
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("volume %s: %w (gave up: %v)", v.Name, err, ctx.Err())
			case <-time.After(time.Second):
			}
		}
	}
	return out, nil
}

func (p *Pod) volume(ctx context.Context, v corev1.Volume) (volume, error) {
	switch {
	case v.Secret != nil:
		return p.secretFiles(ctx, v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode, v.Secret.Optional)
	case v.ConfigMap != nil:
		return p.configMapFiles(ctx, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode, v.ConfigMap.Optional)
	case v.EmptyDir != nil:
		return volume{}, nil
	case v.Projected != nil:
		out := volume{}
		for _, src := range v.Projected.Sources {
			var files volume
			var err error
			switch {
			case src.Secret != nil:
				files, err = p.secretFiles(ctx, src.Secret.Name, src.Secret.Items, v.Projected.DefaultMode, src.Secret.Optional)
			case src.ConfigMap != nil:
				files, err = p.configMapFiles(ctx, src.ConfigMap.Name, src.ConfigMap.Items, v.Projected.DefaultMode, src.ConfigMap.Optional)
			case src.ServiceAccountToken != nil:
				var token string
				token, err = p.token(ctx, src.ServiceAccountToken.Audience, src.ServiceAccountToken.ExpirationSeconds)
				files = volume{src.ServiceAccountToken.Path: {data: []byte(token), mode: modeOf(nil, v.Projected.DefaultMode)}}
			case src.DownwardAPI != nil:
				files = volume{}
				for _, item := range src.DownwardAPI.Items {
					if item.FieldRef == nil {
						return nil, fmt.Errorf("downward API item %s: only fieldRef is supported", item.Path)
					}
					var val string
					if val, err = p.fieldValue(item.FieldRef.FieldPath); err == nil {
						files[item.Path] = file{data: []byte(val), mode: modeOf(item.Mode, v.Projected.DefaultMode)}
					}
				}
			default:
				return nil, fmt.Errorf("projected volume %s: a source of a kind the pod runner does not support", v.Name)
			}
			if err != nil {
				return nil, err
			}
			for k, f := range files {
				out[k] = f
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("volume %s is of a kind the pod runner does not support (only secret, configMap, projected and emptyDir)", v.Name)
}

func modeOf(item, def *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item)
	case def != nil:
		return os.FileMode(*def)
	}
	return 0o644
}

// pick returns data's keys as files, or only items' keys at their paths.
func pick(what string, data map[string][]byte, items []corev1.KeyToPath, def *int32, optional bool) (volume, error) {
	out := volume{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = file{data: v, mode: modeOf(nil, def)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, errMissing{fmt.Sprintf("key %q of %s", it.Key, what)}
		}
		out[it.Path] = file{data: v, mode: modeOf(it.Mode, def)}
	}
	return out, nil
}

func (p *Pod) secretFiles(ctx context.Context, name string, items []corev1.KeyToPath, def *int32, optional *bool) (volume, error) {
	s, err := p.cs.CoreV1().Secrets(p.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && ptr.Deref(optional, false):
		return volume{}, nil
	case apierrors.IsNotFound(err):
		return nil, errMissing{"secret " + name}
	case err != nil:
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return pick("secret "+name, data, items, def, ptr.Deref(optional, false))
}

func (p *Pod) configMapFiles(ctx context.Context, name string, items []corev1.KeyToPath, def *int32, optional *bool) (volume, error) {
	cm, err := p.cs.CoreV1().ConfigMaps(p.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && ptr.Deref(optional, false):
		return volume{}, nil
	case apierrors.IsNotFound(err):
		return nil, errMissing{"configmap " + name}
	case err != nil:
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return pick("configmap "+name, data, items, def, ptr.Deref(optional, false))
}

// token is a token of the pod's service account from the TokenRequest
// API, bound to the Pod when the API server knows it (as the kubelet's
// projected tokens are).
func (p *Pod) token(ctx context.Context, audience string, expiration *int64) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(ptr.Deref(expiration, 3607)),
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	if p.fromAPI {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.pod.UID}
	}
	res, err := p.cs.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, p.pod.Spec.ServiceAccountName, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of service account %s: %w", p.pod.Spec.ServiceAccountName, err)
	}
	return res.Status.Token, nil
}

// serviceAccountVolume is the token, CA and namespace the kubelet mounts
// at saDir when the pod's spec has no such mount (a pod from a template;
// the API server's ServiceAccount admission adds the mount to real ones).
func (p *Pod) serviceAccountVolume(ctx context.Context) (volume, error) {
	token, err := p.token(ctx, "", nil)
	if err != nil {
		return nil, err
	}
	return volume{
		"token":     {data: []byte(token), mode: 0o644},
		"ca.crt":    {data: p.api.ca, mode: 0o644},
		"namespace": {data: []byte(p.Namespace), mode: 0o644},
	}, nil
}

// fieldValue is the downward API's value of a pod field.
func (p *Pod) fieldValue(fieldPath string) (string, error) {
	meta := p.pod.ObjectMeta
	switch fieldPath {
	case "metadata.name":
		return meta.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(meta.UID), nil
	case "spec.nodeName":
		return p.pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return p.IP(), nil
	case "status.hostIP", "status.hostIPs":
		return p.o.HostIP, nil
	case "metadata.labels":
		return formatMap(meta.Labels), nil
	case "metadata.annotations":
		return formatMap(meta.Annotations), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels['": meta.Labels, "metadata.annotations['": meta.Annotations} {
		if key, ok := strings.CutPrefix(fieldPath, prefix); ok && strings.HasSuffix(key, "']") {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("field %q is not supported by the pod runner", fieldPath)
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return b.String()
}

// env is the container's environment, as the kubelet makes it: the API
// server's in-cluster variables, envFrom, then env in order, each value
// with $(VAR) references to the ones before expanded.
func (p *Pod) env(ctx context.Context, c *corev1.Container) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	// what the kubelet and the runtime always set
	set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	set("HOSTNAME", p.Name)
	set("KUBERNETES_SERVICE_HOST", p.api.host)
	set("KUBERNETES_SERVICE_PORT", p.api.port)
	set("KUBERNETES_SERVICE_PORT_HTTPS", p.api.port)
	set("KUBERNETES_PORT", "tcp://"+net.JoinHostPort(p.api.host, p.api.port))
	for _, from := range c.EnvFrom {
		var data map[string][]byte
		var err error
		switch {
		case from.SecretRef != nil:
			var v volume
			v, err = p.secretFiles(ctx, from.SecretRef.Name, nil, nil, from.SecretRef.Optional)
			data = v.bytes()
		case from.ConfigMapRef != nil:
			var v volume
			v, err = p.configMapFiles(ctx, from.ConfigMapRef.Name, nil, nil, from.ConfigMapRef.Optional)
			data = v.bytes()
		}
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, string(v))
		}
	}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, lookup))
			continue
		}
		v, ok, err := p.valueFrom(ctx, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

func (v volume) bytes() map[string][]byte {
	out := map[string][]byte{}
	for k, f := range v {
		out[k] = f.data
	}
	return out
}

// valueFrom resolves an env var's source; false: an optional one that is
// not there (the variable is left out).
func (p *Pod) valueFrom(ctx context.Context, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := p.fieldValue(src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		files, err := p.secretFiles(ctx, ref.Name, []corev1.KeyToPath{{Key: ref.Key, Path: ref.Key}}, nil, ref.Optional)
		if err != nil {
			return "", false, err
		}
		f, ok := files[ref.Key]
		return string(f.data), ok, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		files, err := p.configMapFiles(ctx, ref.Name, []corev1.KeyToPath{{Key: ref.Key, Path: ref.Key}}, nil, ref.Optional)
		if err != nil {
			return "", false, err
		}
		f, ok := files[ref.Key]
		return string(f.data), ok, nil
	}
	return "", false, fmt.Errorf("a source the pod runner does not support (resourceFieldRef, fileKeyRef)")
}

// expand replaces $(VAR) by the value of VAR when it is defined and leaves
// it as it is otherwise; $$ is a literal $ (the kubelet's expansion).
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// writeVolume writes v's files under dir (the mount's path in the root);
// subPath mounts one file or directory of it.
func writeVolume(dir string, v volume, subPath string) error {
	if subPath != "" {
		prefix := path.Clean(subPath)
		if f, ok := v[prefix]; ok {
			if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dir, f.data, f.mode)
		}
		sub := volume{}
		for k, f := range v {
			if rest, ok := strings.CutPrefix(k, prefix+"/"); ok {
				sub[rest] = f
			}
		}
		v = sub
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, f := range v {
		target := filepath.Join(dir, filepath.FromSlash(path.Clean("/"+name)))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(target, f.mode); err != nil {
			return err
		}
	}
	return nil
}
