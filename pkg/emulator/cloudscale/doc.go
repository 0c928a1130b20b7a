// Package cloudscale emulates the cloudscale.ch API (v1) closely enough that
// the unmodified official Go SDK cannot tell it from the real cloud: the same
// routes, JSON fields, status codes and error shapes, bearer-token auth, tag
// filters, and the same asynchronous life cycle (a new server is "changing"
// before it is "running").
//
// It is the default cloud of this project's demo, development and tests, so
// it is stateful (optionally across restarts, with a state file) and it sits
// on a harness that injects faults and counts every request.
package cloudscale
