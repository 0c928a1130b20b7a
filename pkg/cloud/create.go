package cloud

import "context"

// CreateSteps are what one cloud does to create a Machine's server; Create
// runs them in the one order that never makes a second server.
type CreateSteps struct {
	// Look returns the Machine's servers, looked up directly (never from
	// a cache), oldest first.
	Look func(ctx context.Context) ([]Server, error)
	// Place returns the anti-affinity group the server goes into, made for
	// it when all were full (isNew). Only with an anti-affinity key.
	Place func(ctx context.Context) (group string, isNew bool, err error)
	// Send sends the create, into group ("" without an anti-affinity key).
	Send func(ctx context.Context, group string) (*Server, error)
	// Unplace deletes a group Place made, after the cloud refused the
	// create it was made for. Only with an anti-affinity key.
	Unplace func(ctx context.Context, group string)
}

// BeforeCreate is what the caller of Client.CreateServer must do right
// before the create may be sent, after every lock and wait of the create's
// own: take one of its create slots (waiting for it) and record durably
// that a create is about to be sent (the actuator's create intent). A create
// is sent only once it returned without error; done gives the slot back,
// once the cloud has answered, and says whether the create was sent at
// all: a look or a placement that failed before it sent nothing that could
// still make a server, and the intent need not be waited out.
type BeforeCreate func(ctx context.Context) (done func(sent bool), err error)

type beforeCreateKey struct{}

// WithBeforeCreate makes Client.CreateServer call before right before it
// looks for the Machine's servers and sends the create.
func WithBeforeCreate(ctx context.Context, before BeforeCreate) context.Context {
	return context.WithValue(ctx, beforeCreateKey{}, before)
}

// Create creates a Machine's server unless it has one (created false):
//
//   - with an anti-affinity key, under the key's lock, so that concurrent
//     creates fill a group before opening the next and no group is deleted
//     while a server is on its way into it;
//   - with the rate limit paid at once for every call up to the create
//     (Gate.Prepay), and the Machine's servers looked up after the lock and
//     the wait: no wait comes between the look and the create;
//   - with the caller's BeforeCreate (WithBeforeCreate) after those waits,
//     so that the caller's create slot is not held while the create waits
//     for a lock, and its record that a create may be under way is written
//     only when one is about to be sent (a restart before then costs the
//     Machine nothing);
//   - leaving nothing behind when the cloud refuses the create: a group made
//     for it is deleted again.
//
// Both clouds' CreateServer are this with their own steps.
func Create(ctx context.Context, gate *Gate, locks *GroupLocks, key *GroupKey, steps CreateSteps) (*Server, bool, error) {
	calls := 2 // look, create
	if key != nil {
		unlock, err := locks.Lock(ctx, *key)
		if err != nil {
			return nil, false, err
		}
		defer unlock()
		calls = 4 // look, group list, group create, create
	}
	ctx, err := gate.Prepay(ctx, calls)
	if err != nil {
		return nil, false, err
	}
	sent := false
	if before, ok := ctx.Value(beforeCreateKey{}).(BeforeCreate); ok && before != nil {
		done, err := before(ctx)
		if err != nil {
			return nil, false, err
		}
		defer func() { done(sent) }()
	}
	found, err := steps.Look(ctx)
	if err != nil {
		return nil, false, err
	}
	if len(found) > 0 {
		return &found[0], false, nil
	}
	group, isNew := "", false
	if key != nil {
		if group, isNew, err = steps.Place(ctx); err != nil {
			return nil, false, err
		}
	}
	sent = true
	s, err := steps.Send(ctx, group)
	if err != nil {
		if isNew && NotPerformed(err) {
			steps.Unplace(ctx, group)
		}
		return nil, false, err
	}
	return s, true, nil
}
