package exoscale

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// IAM: an API key acts with the policy of its IAM role, which the API
// checks before anything else; what the role does not allow is refused with
// 403 {"message": "Forbidden by role policy for <service>"}, whatever the
// key could otherwise do. The emulator checks an account's Policy the same
// way (Exoscale's "Write IAM Policies" guide):
//
//   - a service the policy names is decided by its type: "allow", "deny",
//     or "rules", evaluated in order, the first rule whose expression holds
//     deciding with its action; a request no rule decides is refused,
//     whatever the default;
//   - a service the policy does not name is decided by
//     default-service-strategy.
//
// Expressions are CEL. The emulator understands what decides by operation:
// true, false, operation == '…', operation != '…', operation in ['…', …],
// combined with &&, || and !, in parentheses. A rule with anything else (a
// resource or a parameter) is skipped, as the real API skips a rule whose
// expression is invalid. Every emulated operation is of service "compute",
// the zone list and the operation lookup included.

// Policy is an IAM role's policy, in the API's JSON (iam-policy).
type Policy struct {
	DefaultServiceStrategy string                   `json:"default-service-strategy"`
	Services               map[string]ServicePolicy `json:"services"`
}

// ServicePolicy is one service's part of a policy (iam-service-policy).
type ServicePolicy struct {
	Type  string       `json:"type"`
	Rules []PolicyRule `json:"rules,omitempty"`
}

// PolicyRule is one rule of a "rules" service policy.
type PolicyRule struct {
	Action     string `json:"action"`
	Expression string `json:"expression"`
}

// ParsePolicy reads a policy in the API's JSON and checks its shape.
func ParsePolicy(b []byte) (*Policy, error) {
	var p Policy
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("IAM policy: %w", err)
	}
	if p.DefaultServiceStrategy != "allow" && p.DefaultServiceStrategy != "deny" {
		return nil, fmt.Errorf("IAM policy: default-service-strategy must be allow or deny, got %q", p.DefaultServiceStrategy)
	}
	for name, sp := range p.Services {
		switch sp.Type {
		case "allow", "deny":
		case "rules":
			for i, r := range sp.Rules {
				if r.Action != "allow" && r.Action != "deny" {
					return nil, fmt.Errorf("IAM policy: services.%s.rules[%d].action must be allow or deny, got %q", name, i, r.Action)
				}
			}
		default:
			return nil, fmt.Errorf("IAM policy: services.%s.type must be allow, deny or rules, got %q", name, sp.Type)
		}
	}
	return &p, nil
}

// SetPolicy gives the keys of account a role with policy (nil: allow
// everything), from their next request on, as an organization admin changes
// a role's policy.
func (e *Emulator) SetPolicy(account string, policy *Policy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, conf := range e.keys {
		if conf.Name == account {
			conf.Policy = policy
			return nil
		}
	}
	return fmt.Errorf("no account %q", account)
}

// AddKey gives account another API key with its own IAM role (policy nil:
// allow everything), as an organization has a key per tool, each with the
// role it needs: requests signed with it act on the account's resources,
// held to its own policy.
func (e *Emulator) AddKey(account, key, secret string, policy *Policy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if key == "" || secret == "" || e.keys[key] != nil {
		return fmt.Errorf("key %q: a new key and a secret are required", key)
	}
	for _, conf := range e.keys {
		if conf.Name == account {
			k := *conf
			k.Key, k.Secret, k.Policy = key, secret, policy
			e.keys[key] = &k
			return nil
		}
	}
	return fmt.Errorf("no account %q", account)
}

// SetKeyPolicy gives one key of an account a role with policy (nil: allow
// everything), from its next request on.
func (e *Emulator) SetKeyPolicy(key string, policy *Policy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	conf := e.keys[key]
	if conf == nil {
		return fmt.Errorf("no key %q", key)
	}
	conf.Policy = policy
	return nil
}

// refused counts a request the key's role refused; e.mu is held.
func (e *Emulator) refused(key, operation string) {
	if e.refusals == nil {
		e.refusals = map[string]map[string]int64{}
	}
	if e.refusals[key] == nil {
		e.refusals[key] = map[string]int64{}
	}
	e.refusals[key][operation]++
}

// RoleRefusals are the requests signed with key that its role refused, by
// IAM operation, since the start.
func (e *Emulator) RoleRefusals(key string) map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int64{}
	for op, n := range e.refusals[key] {
		out[op] = n
	}
	return out
}

// iamService is the service of every emulated operation.
const iamService = "compute"

// allows decides a request for operation.
func (p *Policy) allows(operation string) bool {
	sp, named := p.Services[iamService]
	if !named {
		return p.DefaultServiceStrategy == "allow"
	}
	switch sp.Type {
	case "allow":
		return true
	case "deny":
		return false
	}
	for _, r := range sp.Rules {
		holds, valid := evalExpr(r.Expression, operation)
		if valid && holds {
			return r.Action == "allow"
		}
	}
	return false
}

// forbidden is the real API's answer to what the role does not allow.
func forbidden() reply {
	return message(http.StatusForbidden, "Forbidden by role policy for %s", iamService)
}

// The expression subset: a tokenizer and a recursive-descent evaluator.
var tokenPattern = regexp.MustCompile(`\s*(\|\||&&|==|!=|!|\(|\)|\[|\]|,|'[^']*'|"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*)`)

type exprParser struct {
	toks      []string
	pos       int
	operation string
	bad       bool
}

// evalExpr evaluates expr for a request of operation; valid is false for
// an expression outside the subset.
func evalExpr(expr, operation string) (holds, valid bool) {
	var toks []string
	rest := expr
	for strings.TrimSpace(rest) != "" {
		loc := tokenPattern.FindStringSubmatchIndex(rest)
		if loc == nil || loc[0] != 0 {
			return false, false
		}
		toks = append(toks, rest[loc[2]:loc[3]])
		rest = rest[loc[1]:]
	}
	p := &exprParser{toks: toks, operation: operation}
	v := p.or()
	if p.bad || p.pos != len(p.toks) {
		return false, false
	}
	return v, true
}

func (p *exprParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *exprParser) next() string {
	t := p.peek()
	if t == "" {
		p.bad = true
	}
	p.pos++
	return t
}

func (p *exprParser) or() bool {
	v := p.and()
	for p.peek() == "||" {
		p.pos++
		w := p.and()
		v = v || w
	}
	return v
}

func (p *exprParser) and() bool {
	v := p.unary()
	for p.peek() == "&&" {
		p.pos++
		w := p.unary()
		v = v && w
	}
	return v
}

func (p *exprParser) unary() bool {
	switch p.peek() {
	case "!":
		p.pos++
		return !p.unary()
	case "(":
		p.pos++
		v := p.or()
		if p.next() != ")" {
			p.bad = true
		}
		return v
	case "true":
		p.pos++
		return true
	case "false":
		p.pos++
		return false
	case "operation":
		p.pos++
		switch p.next() {
		case "==":
			s, ok := literal(p.next())
			p.bad = p.bad || !ok
			return p.operation == s
		case "!=":
			s, ok := literal(p.next())
			p.bad = p.bad || !ok
			return p.operation != s
		case "in":
			return p.list()
		}
	}
	p.bad = true
	return false
}

// list reads ['a', 'b'] and says whether the operation is in it.
func (p *exprParser) list() bool {
	if p.next() != "[" {
		p.bad = true
		return false
	}
	in := false
	for !p.bad {
		if p.peek() == "]" {
			p.pos++
			return in
		}
		s, ok := literal(p.next())
		if !ok {
			p.bad = true
			return false
		}
		in = in || s == p.operation
		switch p.peek() {
		case ",":
			p.pos++
		case "]":
		default:
			p.bad = true
		}
	}
	return false
}

func literal(tok string) (string, bool) {
	if len(tok) >= 2 && (tok[0] == '\'' || tok[0] == '"') && tok[len(tok)-1] == tok[0] {
		return tok[1 : len(tok)-1], true
	}
	return "", false
}
