package exoscale

import (
	"strings"
)

// The API's paths name actions inside a path segment
// ("/v2/instance/{id}:start"), which a ServeMux wildcard (a whole segment)
// cannot express; this small router can. Its patterns are the vendor's, with
// /v2 in front, and they name the routes for the harness's counters and
// fault rules.

// segment is one path segment of a pattern: a literal, or a parameter with
// an optional literal suffix ("{id}:start").
type segment struct {
	literal string
	param   string
	suffix  string
}

type route struct {
	method  string
	pattern string
	// operation is the route's operationId in the vendor's document
	// ("list-instances"), what IAM policies allow or deny.
	operation string
	segs      []segment
	h         handler
	// public routes need no signature (the zone list); write routes change
	// the world and save it.
	public bool
	write  bool
}

// Name is the route as counters, metrics and fault rules know it.
func (rt *route) Name() string { return rt.method + " " + rt.pattern }

func parsePattern(p string) []segment {
	var segs []segment
	for _, s := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if strings.HasPrefix(s, "{") {
			end := strings.IndexByte(s, '}')
			segs = append(segs, segment{param: s[1:end], suffix: s[end+1:]})
			continue
		}
		segs = append(segs, segment{literal: s})
	}
	return segs
}

type router struct{ routes []*route }

func (rr *router) add(method, pattern, operation string, h handler) *route {
	rt := &route{method: method, pattern: pattern, operation: operation, segs: parsePattern(pattern), h: h, write: method != "GET"}
	rr.routes = append(rr.routes, rt)
	return rt
}

// match finds the route of method and path (the path without its zone
// prefix, starting with /v2/). When the path matches only other methods'
// routes, allowed is true and rt nil.
func (rr *router) match(method, path string) (rt *route, params map[string]string, allowed bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for _, r := range rr.routes {
		p, ok := r.matchPath(parts)
		if !ok {
			continue
		}
		if r.method == method {
			return r, p, true
		}
		allowed = true
	}
	return nil, nil, allowed
}

func (rt *route) matchPath(parts []string) (map[string]string, bool) {
	if len(parts) != len(rt.segs) {
		return nil, false
	}
	var params map[string]string
	for i, s := range rt.segs {
		if s.param == "" {
			if parts[i] != s.literal {
				return nil, false
			}
			continue
		}
		v, ok := strings.CutSuffix(parts[i], s.suffix)
		// Identifiers and names never hold a colon: a segment with one is
		// an action of another route.
		if !ok || v == "" || strings.Contains(v, ":") {
			return nil, false
		}
		if params == nil {
			params = map[string]string{}
		}
		params[s.param] = v
	}
	return params, true
}

// splitZone separates a request path into its zone and the API path:
// "/de-fra-1/v2/instance" is de-fra-1's "/v2/instance", and "/v2/instance"
// the default zone's. ok is false for a path that is neither.
func splitZone(path string) (zone, rest string, ok bool) {
	if path == "/v2" || strings.HasPrefix(path, "/v2/") {
		return defaultZone, path, true
	}
	first, after, found := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !found || !zoneExists(first) {
		return "", "", false
	}
	rest = "/" + after
	if rest != "/v2" && !strings.HasPrefix(rest, "/v2/") {
		return "", "", false
	}
	return first, rest, true
}
