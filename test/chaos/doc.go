// Package chaos tries the provider's promise, no duplicated or orphaned
// servers ever, from the outside: two replicas of the shipped manager
// binary with leader election against a cloud's emulator that fails a
// fifth of the requests, while the replicas (mostly the leader) are killed
// with SIGKILL at random moments and the kube-apiserver is restarted, over
// several cycles of 0 -> N -> 0 Machines. After each phase it compares the
// cloud with the cluster and prints a table; it fails on any duplicate,
// orphan, leaked anti-affinity group or stuck Machine. `make chaos` runs it
// (CHAOS=1); plain `go test ./...` skips it.
//
// The seed (CHAOS_SEED) replays the same fault dice and the same schedule of
// kills, slow creates and API server restarts; the processes still
// interleave as they will, so a failure found once may take a few runs of
// its seed to show again. README.md says how to run the long one.
package chaos
