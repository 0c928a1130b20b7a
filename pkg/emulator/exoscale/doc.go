// Package exoscale emulates the Exoscale API v2 closely enough that the
// unmodified SDK (egoscale v3) cannot tell it from the real cloud: the same
// paths, JSON fields, status codes and error bodies, EXO2-HMAC-SHA256 request
// signatures, zone-local endpoints, and asynchronous operations that clients
// follow with GET /v2/operation/{id} (the SDK's Wait).
//
// Zones are path prefixes of one listener: http://host:port/<zone>/v2 is the
// endpoint of a zone, and http://host:port/v2 that of ch-gva-2, as the SDK's
// default endpoint is. GET /v2/zone answers every zone's endpoint, so a
// client that looks one up (the SDK's GetZoneAPIEndpoint) lands in it.
//
// It is stateful (optionally across restarts, with a state file), holds
// several accounts, and sits on the cloud-neutral harness that injects faults
// and counts every request by the vendor's route ("PUT /v2/instance/{id}:stop").
package exoscale
