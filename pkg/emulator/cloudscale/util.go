package cloudscale

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strconv"
)

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func remove(list []string, s string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return x == s })
}

func itoa(i int) string { return strconv.Itoa(i) }

// hostKeys makes up SSH host keys and their fingerprints, stable per server.
func hostKeys(seed string) (keys, fingerprints []string) {
	sum := sha256.Sum256([]byte(seed))
	key := base64.StdEncoding.EncodeToString(append([]byte("\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20"), sum[:]...))
	fp := sha256.Sum256([]byte(key))
	return []string{"ssh-ed25519 " + key}, []string{"256 SHA256:" + base64.RawStdEncoding.EncodeToString(fp[:]) + " (ED25519)"}
}
