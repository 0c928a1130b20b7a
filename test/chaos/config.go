package chaos

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is one chaos run. The environment variables of `make chaos` set it
// (configFromEnv); the zero value of a field takes its default.
type Config struct {
	// Clouds to run, one after the other.
	Clouds []string
	// Seed drives the emulator's fault dice and the schedule of kills,
	// slow creates and API server restarts. The same seed replays the same
	// schedule; processes and goroutines still interleave as they will.
	Seed int64
	// Cycles of 0 -> Machines -> 0.
	Cycles   int
	Machines int

	// FaultRate is the share of cloud API requests that fail: 5xx, 429
	// with Retry-After, connection resets and lost responses (the request
	// was carried out, its answer never arrives), in equal parts.
	FaultRate float64
	// SlowCreate is the latency of slow creates, which are carried out
	// even when the client has given up or died. Longer than
	// CloudAPITimeout, shorter than CreateGrace.
	SlowCreate      time.Duration
	CloudAPITimeout time.Duration
	CreateGrace     time.Duration

	// KillEvery is the mean time between SIGKILLs of a manager replica.
	KillEvery time.Duration
	// LeaderShare is the share of kills aimed at the leader.
	LeaderShare float64
	// Replicas of the manager, with leader election.
	Replicas int
	// ChaosWindow bounds how long into a phase kills, slow creates and the
	// API server restart go on; they stop earlier once the phase has
	// settled. SettleBound is how long after the window the phase may take
	// to settle before its Machines count as stuck.
	ChaosWindow time.Duration
	SettleBound time.Duration
	// Stable is how long the settled state must hold: longer than a slow
	// create, which may land late.
	Stable time.Duration

	// Manager timings: short, so that a run takes minutes.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	JanitorInterval, ServerViewRefresh        time.Duration

	// KeepLogs keeps the logs of a passing run too.
	KeepLogs bool
	// SkipLeaderChange skips the leader-change run after the cycles
	// (leaderchange.go).
	SkipLeaderChange bool
}

// groupMinAge is the provider's (pkg/actuator, pkg/controllers/janitor):
// younger empty groups are left alone, another process may be about to use
// them. Not a flag of the manager.
const groupMinAge = time.Minute

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if len(c.Clouds) == 0 {
		c.Clouds = []string{"cloudscale", "exoscale"}
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano() % 1_000_000_000
	}
	if c.Cycles <= 0 {
		c.Cycles = 2
	}
	if c.Machines <= 0 {
		c.Machines = 8
	}
	if c.FaultRate <= 0 {
		c.FaultRate = 0.2
	}
	def(&c.CloudAPITimeout, 3*time.Second)
	def(&c.SlowCreate, 8*time.Second)
	def(&c.CreateGrace, 20*time.Second)
	def(&c.KillEvery, 6*time.Second)
	if c.LeaderShare <= 0 {
		c.LeaderShare = 0.7
	}
	if c.Replicas <= 0 {
		c.Replicas = 2
	}
	def(&c.ChaosWindow, 2*time.Minute)
	def(&c.SettleBound, 4*time.Minute)
	def(&c.Stable, c.SlowCreate+5*time.Second)
	def(&c.LeaseDuration, 4*time.Second)
	def(&c.RenewDeadline, 3*time.Second)
	def(&c.RetryPeriod, 500*time.Millisecond)
	def(&c.JanitorInterval, 5*time.Second)
	def(&c.ServerViewRefresh, 2*time.Second)
}

// leakAge is how old an empty group of the cluster may get before it counts
// as leaked: the provider leaves it a minute, then the janitor's next sweeps
// delete it.
func (c *Config) leakAge() time.Duration {
	return groupMinAge + 3*c.JanitorInterval + 10*time.Second
}

// configFromEnv reads CLOUD (a cloud, a comma-separated list, or "all"),
// CHAOS_SEED, CHAOS_CYCLES, CHAOS_MACHINES, CHAOS_FAULT_RATE,
// CHAOS_KILL_EVERY, CHAOS_SLOW_CREATE, CHAOS_CLOUD_API_TIMEOUT,
// CHAOS_CREATE_GRACE, CHAOS_CHAOS_WINDOW, CHAOS_SETTLE_BOUND,
// CHAOS_KEEP_LOGS and CHAOS_SKIP_LEADER_CHANGE.
func configFromEnv() (Config, error) {
	var c Config
	var errs []string
	intVar := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Sprintf("%s=%q: not a number", name, v))
			}
			*dst = n
		}
	}
	durVar := func(name string, dst *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: not a duration such as 20s", name, v))
			}
			*dst = d
		}
	}
	switch v := strings.TrimSpace(os.Getenv("CLOUD")); v {
	case "", "all":
	default:
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if _, ok := clouds()[name]; !ok {
				errs = append(errs, fmt.Sprintf("CLOUD=%q: the clouds are cloudscale and exoscale (or all)", v))
			}
			c.Clouds = append(c.Clouds, name)
		}
	}
	if v := os.Getenv("CHAOS_SEED"); v != "" && v != "random" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Sprintf("CHAOS_SEED=%q: not a number (or random)", v))
		}
		c.Seed = n
	}
	intVar("CHAOS_CYCLES", &c.Cycles)
	intVar("CHAOS_MACHINES", &c.Machines)
	if v := os.Getenv("CHAOS_FAULT_RATE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f >= 1 {
			errs = append(errs, fmt.Sprintf("CHAOS_FAULT_RATE=%q: a share such as 0.2", v))
		}
		c.FaultRate = f
	}
	durVar("CHAOS_KILL_EVERY", &c.KillEvery)
	durVar("CHAOS_SLOW_CREATE", &c.SlowCreate)
	durVar("CHAOS_CLOUD_API_TIMEOUT", &c.CloudAPITimeout)
	durVar("CHAOS_CREATE_GRACE", &c.CreateGrace)
	durVar("CHAOS_CHAOS_WINDOW", &c.ChaosWindow)
	durVar("CHAOS_SETTLE_BOUND", &c.SettleBound)
	c.KeepLogs = os.Getenv("CHAOS_KEEP_LOGS") != ""
	c.SkipLeaderChange = os.Getenv("CHAOS_SKIP_LEADER_CHANGE") != ""
	if len(errs) > 0 {
		return c, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	c.defaults()
	return c, nil
}
