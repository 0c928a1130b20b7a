package adopt

import "testing"

func TestMachineSetRole(t *testing.T) {
	for name, want := range map[string]string{
		"c-green-1234-worker-rma1-x7k2p":      "worker",
		"c-green-1234-infra-rma1-b2c4d":       "infra",
		"c-green-1234-worker-gva2-pool-q5z2m": "worker",
		"c-green-1234-gpu-worker-rma1-abcde":  "gpu-worker",
		"worker-0a1b":                         "",
		"c-green-1234-worker-lpg1-x7k2p":      "",
		"other-worker-rma1-x7k2p":             "",
	} {
		zone := "rma1"
		if name == "c-green-1234-worker-gva2-pool-q5z2m" {
			zone = "gva2"
		}
		if got := machineSetRole(name, "c-green-1234", zone); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
