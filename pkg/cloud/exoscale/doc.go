// Package exoscale implements the provider-neutral cloud.Cloud for Exoscale
// with the official SDK (egoscale v3).
//
// A Machine's instance is found by two labels (cluster ID and Machine name)
// with one labels-filtered list per zone, never by its name, so lost
// responses and restarts cannot make a Machine lose or double its instance.
// Instances live in zones, and each zone has its own API endpoint, looked up
// once from the zone list: the client routes every call to the zone of what
// it acts on (zones.go).
//
// The SDK's own HTTP client retries POSTs after a 5xx, a 429 or a reset
// connection, so that one lost answer could become two instances. This
// package hands the SDK an HTTP client that never retries: a write is sent
// once, and what follows a failure is decided by the caller that knows
// whether the write may have happened (cloud.NotPerformed, the actuator's
// create intent). Reads are retried by the reconciles and the shared view,
// behind the account's gate.
//
// Anti-affinity is done with anti-affinity groups the provider creates and
// deletes itself. Exoscale's groups carry no labels: the provider's are
// known by their name (<cluster>-<key>-<n>) together with a description the
// provider writes (antiaffinity.go); groups without both, such as those the
// user lists in antiAffinityGroups, are never touched.
//
// Every API call goes through Client.call, which records metrics and turns
// SDK errors into the errors of package cloud. The API key, the API secret
// and the user data never appear in an error or a log line.
package exoscale
