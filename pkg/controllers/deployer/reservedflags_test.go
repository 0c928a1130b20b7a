package deployer

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestOwnFlagKeysAreRefused: a ConfigMap key naming any of the deployer's
// own options (the API endpoints, the boot image mirror) is refused, the
// message naming the key and quoting no value; the manager's check is not
// even asked. Fails before the mirror was reserved: boot-images-mirror was
// a knob, and its value went to the manager.
func TestOwnFlagKeysAreRefused(t *testing.T) {
	const hostile = "http://attacker-5b1c.example/rhcos"
	for _, f := range OwnFlags {
		cm := &corev1.ConfigMap{Data: map[string]string{f.Name: hostile, "cloud-api-qps": "20"}}
		asked := false
		c, err := parseManagerConfig(cm, nil, func([]string) error { asked = true; return nil })
		switch {
		case err == nil:
			t.Errorf("key %s taken: %v", f.Name, c)
		case !strings.Contains(err.Error(), `key "`+f.Name+`": the deployer sets --`+f.Name+" itself"):
			t.Errorf("key %s: %v, want the key named", f.Name, err)
		case strings.Contains(err.Error(), "attacker"):
			t.Errorf("key %s: the message quotes the value: %v", f.Name, err)
		}
		if asked {
			t.Errorf("key %s: the manager's check was asked", f.Name)
		}
		if note := ownNote(cm, nil); !strings.Contains(note, f.without) || strings.Contains(note, "attacker") {
			t.Errorf("key %s: the note %q, want %q", f.Name, note, f.without)
		}
	}
}

// TestReservedArgsComeFromTheTable: each of the deployer's own options
// set is rendered as the manager's flag, once, after the flags every
// release rendered before; none unset is.
func TestReservedArgsComeFromTheTable(t *testing.T) {
	s := Spec{Namespace: "ns", TokenSecret: "tok", Cloud: "exoscale", ClusterID: "c1-x7k2p",
		Own: map[string]string{"boot-images-mirror": "https://mirror.example/rhcos"}}
	got := strings.Join(reservedArgs(s), " ")
	want := "--namespace=ns --leader-elect=true --metrics-bind-address=" + machineMetricsAddr +
		" --health-probe-bind-address=:9440 --default-credentials-secret=tok --cloud=exoscale --cluster-id=c1-x7k2p" +
		" --boot-images-mirror=https://mirror.example/rhcos"
	if got != want {
		t.Errorf("reserved args\n got %s\nwant %s", got, want)
	}
}
