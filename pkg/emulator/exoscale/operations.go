package exoscale

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Every change is an operation: the request is answered with one ("pending"
// while the change is under way) whose reference names the resource, its
// ID known from the start; GET /v2/operation/{id} follows it to "success" or
// "failure".

// failableCommands are the commands OperationFailure can make fail: those
// whose change the emulator knows how to undo, as the real cloud does when
// it cannot complete them.
var failableCommands = []string{
	"create-instance", "start-instance", "stop-instance", "reboot-instance", "delete-instance",
	"register-template", "copy-template",
}

// operationReasons are the reasons the vendor's document allows.
var operationReasons = []string{"incorrect", "unknown", "unavailable", "forbidden", "busy", "fault", "partial", "not-found", "interrupted", "unsupported", "conflict"}

// Validate reports the first thing wrong with f.
func (f *OperationFailure) Validate() error {
	if f.Command != "*" && !slices.Contains(failableCommands, f.Command) {
		return fmt.Errorf("command %q: must be \"*\" or one of %s", f.Command, strings.Join(failableCommands, ", "))
	}
	if f.Rate <= 0 || f.Rate > 1 {
		return fmt.Errorf("rate must be more than 0 and at most 1, got %v", f.Rate)
	}
	if f.Reason != "" && !slices.Contains(operationReasons, f.Reason) {
		return fmt.Errorf("reason %q: must be one of %s", f.Reason, strings.Join(operationReasons, ", "))
	}
	if f.Times < 0 {
		return fmt.Errorf("times must not be negative")
	}
	return nil
}

// ParseOperationFailure reads an operation failure rule from its
// command-line form, comma-separated key=value pairs:
//
//	command=create-instance,rate=1,times=1,reason=unavailable
func ParseOperationFailure(s string) (OperationFailure, error) {
	fields := map[string]any{}
	for _, kv := range strings.Split(s, ",") {
		k, v, found := strings.Cut(kv, "=")
		if !found {
			return OperationFailure{}, fmt.Errorf("operation failure %q: %q is not key=value", s, kv)
		}
		switch k = strings.TrimSpace(k); k {
		case "command", "reason", "message":
			fields[k] = v
		default:
			fields[k] = json.RawMessage(v)
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return OperationFailure{}, err
	}
	var f OperationFailure
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return OperationFailure{}, fmt.Errorf("operation failure %q: %w", s, err)
	}
	return f, f.Validate()
}

// SetOperationFailures replaces the operation failure rules.
func (e *Emulator) SetOperationFailures(fs []OperationFailure) error {
	rules := make([]*OperationFailure, 0, len(fs))
	for i := range fs {
		f := fs[i]
		if err := f.Validate(); err != nil {
			return fmt.Errorf("operation failure %d: %w", i, err)
		}
		rules = append(rules, &f)
	}
	e.mu.Lock()
	e.failures = rules
	e.mu.Unlock()
	return nil
}

// AddOperationFailure appends one operation failure rule.
func (e *Emulator) AddOperationFailure(f OperationFailure) error {
	if err := f.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	e.failures = append(e.failures, &f)
	e.mu.Unlock()
	return nil
}

// OperationFailures returns the rules in force, with their Fired counts.
func (e *Emulator) OperationFailures() []OperationFailure {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]OperationFailure, len(e.failures))
	for i, f := range e.failures {
		out[i] = *f
	}
	return out
}

// rollFailure decides, when an operation is asked for, whether it will fail.
func (e *Emulator) rollFailure(command string) *opFailure {
	if !slices.Contains(failableCommands, command) {
		return nil
	}
	for _, f := range e.failures {
		if (f.Command != "*" && f.Command != command) || (f.Times > 0 && f.Fired >= f.Times) {
			continue
		}
		if e.rng.Float64() >= f.Rate {
			continue
		}
		f.Fired++
		of := &opFailure{Reason: f.Reason, Message: f.Message}
		if of.Reason == "" {
			of.Reason = "unavailable"
		}
		if of.Message == "" {
			of.Message = fmt.Sprintf("%s could not be completed (failure injected by the emulator)", command)
		}
		return of
	}
	return nil
}

// operation records an operation of the call's account on a resource
// (kind "instance", ref its ID). done is when its change is done: c.now for
// a change already made. It is pending until then, and at least
// Config.OperationTime.
func (c *call) operation(command, kind, ref string, done time.Time) *operation {
	e := c.e
	op := &operation{meta: e.newMeta(), Zone: c.zone, Command: command, Kind: kind, Ref: ref, State: "pending"}
	op.DoneAt = c.now.Add(e.cfg.OperationTime)
	if done.After(op.DoneAt) {
		op.DoneAt = done
	}
	op.Failure = e.rollFailure(command)
	c.acct.Operations[op.ID] = op
	return op
}

// transition starts a state change of inst to the state to, taking d, with
// the interim state interim, followed by op. A doomed operation holds the
// instance in its interim state until the operation ends, then undoes.
func (c *call) transition(inst *instance, interim, to string, d time.Duration, command string) *operation {
	from := inst.State
	if inst.Pending != nil {
		from = inst.Pending.From
	}
	at := c.now.Add(d)
	op := c.operation(command, "instance", inst.ID, at)
	if op.Failure != nil {
		at = op.DoneAt
	}
	inst.State = interim
	inst.Pending = &transition{To: to, From: from, At: at, Op: op.ID}
	return op
}

// opReply settles what is due (a change taking no time is done at once) and
// answers the operation.
func (c *call) opReply(op *operation) reply {
	c.e.settle(c.now)
	return ok(c.renderOp(op))
}

func (c *call) renderOp(op *operation) map[string]any {
	ref := map[string]any{"command": op.Command}
	if op.Kind == "ssh-key" {
		// SSH keys are known by name, and a reference ID is a UUID.
		ref["link"] = c.endpoint(op.Zone) + "/ssh-key/" + op.Ref
	} else {
		zone := op.Zone
		if op.RefZone != "" {
			zone = op.RefZone
		}
		ref["id"] = op.Ref
		ref["link"] = c.endpoint(zone) + "/" + op.Kind + "/" + op.Ref
	}
	m := map[string]any{"id": op.ID, "state": op.State, "reference": ref}
	if op.Reason != "" {
		m["reason"] = op.Reason
	}
	if op.Message != "" {
		m["message"] = op.Message
	}
	return m
}

func (e *Emulator) getOperation(c *call) reply {
	op := c.acct.Operations[c.params["id"]]
	// Operations are zone-local, as the endpoint that started them.
	if op == nil || op.Zone != c.zone {
		return notFound("Operation", c.params["id"])
	}
	return ok(c.renderOp(op))
}

// operationRetention is how long an ended operation can still be fetched:
// long enough for any client to see how it ended, not forever.
const operationRetention = 24 * time.Hour

// settle completes every change whose time has come, in every account.
func (e *Emulator) settle(now time.Time) {
	for _, a := range e.world.Accounts {
		e.settleAccount(a, now)
	}
}

func (e *Emulator) settleAccount(a *account, now time.Time) {
	defer e.settlePools(a, now)
	for _, inst := range sorted(a.Instances) {
		p := inst.Pending
		if p == nil || now.Before(p.At) {
			continue
		}
		op := a.Operations[p.Op]
		if op != nil && op.Failure != nil {
			if now.Before(op.DoneAt) {
				continue
			}
			// The change could not be made: undo it.
			if op.Command == "create-instance" {
				e.removeInstance(a, inst)
				continue
			}
			inst.State, inst.Pending = p.From, nil
			continue
		}
		if p.To == "" {
			e.removeInstance(a, inst)
			continue
		}
		inst.State, inst.Pending = p.To, nil
	}
	for id, op := range a.Operations {
		if op.State != "pending" && now.Sub(op.DoneAt) > operationRetention {
			delete(a.Operations, id)
			continue
		}
		if op.State != "pending" || now.Before(op.DoneAt) || op.Fetching {
			continue
		}
		if op.Failure == nil {
			op.State = "success"
			continue
		}
		op.State, op.Reason, op.Message = "failure", op.Failure.Reason, op.Failure.Message
		if op.Kind == "template" {
			delete(a.Templates, op.Ref)
		}
	}
}

// busy is the 409 of a change asked for while another is under way.
func busy(kind, id, state string) reply {
	return message(http.StatusConflict, "%s %s is %s: retry when the operation in progress is done", kind, id, state)
}
