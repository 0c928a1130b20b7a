// Package harness wraps an emulated cloud API with what the real cloud has but
// a plain handler does not: unreliable networks and servers. It injects
// errors, rate limiting, latency and lost responses per route, counts every
// request by route so tests can assert how many cloud calls were made, and
// serves both over an admin endpoint and as Prometheus metrics.
//
// It is cloud-neutral: the cloudscale.ch and Exoscale emulators both mount
// their API on a harness and only supply how their errors look on the wire.
package harness
