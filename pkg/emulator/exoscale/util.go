package exoscale

import (
	"crypto/rand"
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// newUUID returns a random (version 4) UUID, as the real API hands out.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Public addresses come from ranges reserved for documentation and
// benchmarks, never real hosts: IPv4 from 198.19.128.0/17, the upper half of
// 198.18.0.0/15 (the cloudscale.ch emulator counts up from its lower end),
// IPv6 from 2001:db8:e0::/48. Neither is ever handed out twice.
var (
	publicV4Base = netip.MustParseAddr("198.19.128.0")
	publicV6Base = netip.MustParseAddr("2001:db8:e0::")
)

func addTo(base netip.Addr, n int) netip.Addr {
	b := base.AsSlice()
	carry := n
	for i := len(b) - 1; i >= 0 && carry > 0; i-- {
		sum := int(b[i]) + carry
		b[i] = byte(sum)
		carry = sum >> 8
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// allocatePublic hands out the next public addresses: IPv4 unless the
// assignment is "none", and IPv6 too for "dual".
func (w *world) allocatePublic(inst *instance) {
	inst.PublicIPv4, inst.PublicIPv6 = "", ""
	if inst.PublicIPAssignment == "none" {
		return
	}
	w.NextPublic++
	// .1 to .254 of each /24 in turn: hosts never have .0 or .255.
	k := w.NextPublic - 1
	inst.PublicIPv4 = addTo(publicV4Base, k/254*256+k%254+1).String()
	if inst.PublicIPAssignment == "dual" {
		inst.PublicIPv6 = addTo(publicV6Base, w.NextPublic).String()
	}
}

// newMAC returns the next MAC address, locally administered (06:...) as the
// real cloud's are.
func (w *world) newMAC() string {
	w.NextMAC++
	n := w.NextMAC
	return fmt.Sprintf("06:%02x:%02x:%02x:%02x:%02x", byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func cloneLabels(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

func remove(list []string, s string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return x == s })
}
