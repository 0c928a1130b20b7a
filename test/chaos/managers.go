package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/appuio/machine-api-provider/test/fixture"
)

// replica is one manager replica, as a Deployment's pod would be: the
// shipped binary, restarted whenever it ends, whether killed or not.
type replica struct {
	name        string
	metricsPort int
	args, env   []string
	logPath     string
	events      *eventLog

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	killed  bool // the current process was killed by the run
	kills   int  // SIGKILLs sent by the run
	exits   int  // processes that ended by themselves (e.g. lost leadership)
	starts  int
	stopped bool
	done    chan struct{} // closed when the supervisor has stopped
}

// replicas supervises the manager replicas.
type replicas struct {
	list []*replica
}

// startReplicas starts n replicas of the manager binary, each restarted
// restartDelay() after it ends until stop.
func startReplicas(bin string, n int, dir string, args, env []string, events *eventLog, restartDelay func() time.Duration) (*replicas, error) {
	rs := &replicas{}
	for i := 0; i < n; i++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("manager-%c", 'a'+i)
		r := &replica{
			name: name, metricsPort: port, events: events,
			args: append(append([]string{"manager"}, args...),
				"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", port), "--health-probe-bind-address", "0"),
			env:     env,
			logPath: filepath.Join(dir, name+".log"),
			done:    make(chan struct{}),
		}
		if err := r.start(bin); err != nil {
			return nil, err
		}
		go r.supervise(bin, restartDelay)
		rs.list = append(rs.list, r)
	}
	return rs, nil
}

func (r *replica) start(bin string) error {
	log, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	fmt.Fprintf(log, "=== chaos: start %d of %s at %s\n", r.starts, r.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, r.args...)
	cmd.Env = append(os.Environ(), r.env...)
	cmd.Stdout, cmd.Stderr = log, log
	// Should the run itself die, the kernel kills its replicas.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(log, "=== chaos: %s (pid %d) ended at %s: %v\n", r.name, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), err)
		log.Close()
		close(exited)
	}()
	r.cmd, r.exited, r.killed = cmd, exited, false
	r.events.add("%s started (pid %d)", r.name, cmd.Process.Pid)
	return nil
}

// supervise restarts the replica whenever its process ends.
func (r *replica) supervise(bin string, restartDelay func() time.Duration) {
	defer close(r.done)
	for {
		r.mu.Lock()
		exited := r.exited
		r.mu.Unlock()
		<-exited
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		if !r.killed {
			r.exits++
			r.events.add("%s (pid %d) ended by itself: %v", r.name, r.cmd.Process.Pid, r.cmd.ProcessState)
		}
		r.mu.Unlock()
		time.Sleep(restartDelay())
		for {
			r.mu.Lock()
			stopped := r.stopped
			r.mu.Unlock()
			if stopped {
				return
			}
			if err := r.start(bin); err == nil {
				break
			} else {
				r.events.add("%s: restart failed: %v", r.name, err)
			}
			time.Sleep(time.Second)
		}
	}
}

// kill sends SIGKILL to the replica's current process.
func (r *replica) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.exited:
		return // between processes
	default:
	}
	r.killed = true
	r.kills++
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	r.events.add("SIGKILL %s (pid %d)", r.name, r.cmd.Process.Pid)
}

// stop ends the replica for good: SIGTERM, SIGKILL after grace.
func (r *replica) stop(grace time.Duration) {
	r.mu.Lock()
	r.stopped = true
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	<-r.done
}

func (r *replica) counts() (kills, exits int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kills, r.exits
}

// leading says whether the replica's current process holds the lease.
func (r *replica) leading(ctx context.Context, lease string) bool {
	return fixture.Leading(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", r.metricsPort), lease)
}

func (rs *replicas) counts() (kills, exits int) {
	for _, r := range rs.list {
		k, e := r.counts()
		kills += k
		exits += e
	}
	return kills, exits
}

func (rs *replicas) stop() {
	var wg sync.WaitGroup
	for _, r := range rs.list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.stop(15 * time.Second)
		}()
	}
	wg.Wait()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// eventLog is the run's timeline: phases, kills, restarts, faults switched
// on, for the logs of a failed run.
type eventLog struct {
	mu    sync.Mutex
	start time.Time
	w     io.Writer
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%8.3fs %s\n", time.Since(l.start).Seconds(), fmt.Sprintf(format, args...))
}
